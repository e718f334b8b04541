use crate::helpers::*;

#[test]
fn json_lines_carry_the_schema_and_measured_figures() {
    let o = run(&[
        "bench",
        "-a",
        "aes-128-gcm,des-ede3-cbc",
        "--size",
        "16,1k",
        "--seconds",
        "0.05",
        "--direction",
        "both",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    assert_eq!(rows.len(), 2 * 2 * 2);
    for r in &rows {
        assert_eq!(r["schema"], "cipherfleet.measurement/2");
        assert_eq!(r["status"], "ok");
        assert!(r["throughput_mb_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["ops_per_s"].as_f64().unwrap() > 0.0);
        for p in ["p50", "p90", "p99", "p999", "max"] {
            assert!(r["latency_ns"][p].as_u64().unwrap() > 0, "{p}: {r}");
        }
        assert!(r["samples"].as_u64().unwrap() >= 2);
        assert!(r["selftest_passed"].as_u64().unwrap() > 0);
        assert!(r["host"]["cpu"].is_object());
        assert!(r["key_setup_ns"].as_f64().unwrap() > 0.0);
        assert!(["accelerated", "partial", "software"].contains(&r["path_used"].as_str().unwrap()));
    }
    // DES has no hardware path anywhere: path_used comes from detection, not from the request.
    let des = rows.iter().find(|r| r["algorithm"] == "des-ede3-cbc").unwrap();
    assert_eq!(des["path_requested"], "accelerated");
    assert_eq!(des["path_used"], "software");
}

#[test]
fn csv_has_a_header_and_a_row_per_point() {
    let o = run(&[
        "bench",
        "-a",
        "chacha20-poly1305",
        "--size",
        "11,18",
        "--seconds",
        "0.05",
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("algorithm,direction,size_bytes"));
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[1].starts_with("chacha20-poly1305,encrypt,11,1,,static,accelerated,"),
        "{out}"
    );
}

#[test]
fn table_groups_sizes_into_columns() {
    let o = run(&["bench", "-a", "aes-256-ctr", "--size", "16,16KiB", "--seconds", "0.05"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("MB/s = 10^6 bytes"), "{out}");
    assert!(out.contains("16KiB"), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("aes-256-ctr") && l.ends_with("MB/s")),
        "{out}"
    );
    assert!(out.contains("p99 µs") && out.contains("cv"), "{out}");
}

#[test]
fn bad_input_exits_2_names_the_flag_and_prints_no_results() {
    for (args, needle) in [
        (&["bench", "-a", "aes-999-gcm"][..], "--algorithm"),
        (&["bench", "--size", "0"], "1 byte to 1 GiB"),
        (&["bench", "--size", "3GiB"], "1 GiB"),
        (&["bench", "--size", "lots"], "--size"),
        (&["bench", "--threads", "0"], "1 to 1024"),
        (&["bench", "--threads", "2000"], "1 to 1024"),
        (&["bench", "--seconds", "-1"], "--seconds"),
        (&["bench", "--seconds", "700"], "600"),
        (
            &[
                "bench",
                "-a",
                "aes-256-gcm",
                "--concurrency",
                "8",
                "--key-mode",
                "hkdf-per-user",
            ],
            "--key-mode",
        ),
        (
            &["bench", "-a", "aes-256-gcm", "--concurrency", "1", "--threads", "4"],
            "--concurrency",
        ),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?} printed results: {}", stdout(&o));
    }
}

#[test]
fn software_path_runs_in_the_soft_sibling() {
    if !require_soft_sibling() {
        return;
    }
    let o = run(&[
        "bench",
        "-a",
        "aes-256-gcm,chacha20-poly1305",
        "--size",
        "1k",
        "--seconds",
        "0.05",
        "--path",
        "both",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = json_lines(&o);
    let soft: Vec<_> = rows.iter().filter(|r| r["path_requested"] == "software").collect();
    assert_eq!(soft.len(), 2);
    for r in soft {
        // Every backend soft, Poly1305 included: its figures are all software.
        assert_eq!(r["path_used"], "software", "{r}");
        assert_eq!(r["build_flavour"], "software");
        for primitive in ["aes", "ghash", "chacha20", "poly1305", "sha256"] {
            assert_eq!(r["backends"][primitive], "soft", "{primitive}: {r}");
        }
    }
    let accel = rows.iter().find(|r| r["path_requested"] == "accelerated").unwrap();
    assert_eq!(accel["build_flavour"], "accelerated");
}

#[test]
fn missing_soft_sibling_is_an_error_not_a_silent_accelerated_run() {
    let dir = std::env::temp_dir().join(format!("cf-nosibling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lone = dir.join("cipherfleet-agent");
    std::fs::copy(agent(), &lone).unwrap();
    let o = run_with(
        lone,
        &["bench", "-a", "aes-256-gcm", "--path", "software", "--seconds", "0.05"],
        &[],
    );
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cipherfleet-agent-soft") && stderr(&o).contains("deploy/build.sh"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn a_crashing_or_hanging_worker_fails_only_its_point() {
    // Fault injection exists only in debug builds (see worker::fault).
    for (fault, needle) in [("abort", "signal"), ("hang", "timed out")] {
        let o = run_with(
            agent(),
            &[
                "bench",
                "-a",
                "aes-128-gcm,chacha20-poly1305",
                "--size",
                "64",
                "--seconds",
                "0.05",
                "--format",
                "json",
            ],
            &[
                ("CIPHERFLEET_WORKER_FAULT", &format!("{fault}:chacha20-poly1305")),
                ("CIPHERFLEET_WORKER_TIME_LIMIT", "3"),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{fault}: {}", stderr(&o));
        let rows = json_lines(&o);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["status"], "ok");
        assert_eq!(rows[1]["status"], "failed");
        assert!(
            rows[1]["error"].as_str().unwrap().contains(needle),
            "{fault}: {}",
            rows[1]
        );
        assert!(rows[1]["throughput_mb_s"].is_null());
    }
}

#[test]
fn object_scenario_reports_per_object_latency() {
    let o = run(&[
        "bench",
        "-a",
        "aes-256-gcm",
        "--size",
        "256KiB",
        "--threads",
        "2",
        "--concurrency",
        "8",
        "--seconds",
        "0.1",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = &json_lines(&o)[0];
    assert_eq!(r["concurrency"], 8);
    assert_eq!(r["latency_method"], "per-object");
}
