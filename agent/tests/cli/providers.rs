//! `bench --provider` and `probe`'s providers: ring built in, the host's
//! OpenSSL through `openssl speed`, the kernel through AF_ALG where it has it.

use crate::helpers::*;

fn has_openssl() -> bool {
    std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn ring_points_are_measured_and_say_their_path_is_inferred() {
    let o = run(&[
        "bench",
        "--provider",
        "ring",
        "-a",
        "aes-256-gcm,chacha20-poly1305",
        "--size",
        "16,1k",
        "--direction",
        "both",
        "--seconds",
        "0.1",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 2 * 2 * 2);
    for v in &lines {
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["provider"], "ring", "{v}");
        assert_eq!(v["path_basis"], "inferred", "{v}");
        assert!(
            v["implementation"]["name"].as_str().unwrap().starts_with("ring 0.17"),
            "{v}"
        );
        assert!(
            v["selftest_passed"].as_u64().unwrap() >= 3,
            "ring's KATs ran first: {v}"
        );
        assert!(v["throughput_mb_s"].as_f64().unwrap() > 0.0);
        assert!(v.get("harness").is_none(), "the engine's own shape: {v}");
    }
}

#[test]
fn what_a_provider_alone_cannot_run_exits_2_saying_why() {
    for (args, why) in [
        (
            &["--provider", "ring", "-a", "aes-128-cbc"][..],
            "the ring provider has no aes-128-cbc",
        ),
        (
            &["--provider", "ring", "-a", "aes-256-gcm", "--path", "software"],
            "ring cannot be built software-only",
        ),
        (
            &[
                "--provider",
                "openssl",
                "--openssl",
                "/nonexistent/openssl",
                "-a",
                "aes-256-gcm",
            ],
            "is not a file",
        ),
        (
            &["--provider", "boringssl"],
            "accepted: rustcrypto, ring, openssl, kernel, all",
        ),
    ] {
        let mut full = vec!["bench", "--seconds", "0.05", "--size", "16"];
        full.extend_from_slice(args);
        let o = run(&full);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains(why), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn all_providers_side_by_side_skip_what_they_cannot_run() {
    let o = run(&[
        "bench",
        "--provider",
        "rustcrypto,ring",
        "-a",
        "aes-128-cbc,aes-128-gcm",
        "--size",
        "16",
        "--seconds",
        "0.05",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("provider   algorithm"), "a provider column: {out}");
    assert!(out.lines().any(|l| l.starts_with("ring       aes-128-gcm")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("rustcrypto aes-128-cbc")), "{out}");
    assert!(
        stderr(&o).contains("ring aes-128-cbc: the ring provider has no aes-128-cbc"),
        "{}",
        stderr(&o)
    );
    assert!(
        out.contains("inferred"),
        "the table says ring's path is inferred: {out}"
    );
}

#[test]
fn the_kernel_provider_measures_through_af_alg_or_says_why_not() {
    let o = run(&[
        "bench",
        "--provider",
        "kernel",
        "-a",
        "aes-128-cbc,aes-256-gcm",
        "--size",
        "16",
        "--seconds",
        "0.05",
        "--format",
        "json",
    ]);
    if o.status.success() {
        for v in json_lines(&o) {
            assert_eq!(
                (v["status"].as_str(), v["provider"].as_str()),
                (Some("ok"), Some("kernel")),
                "{v}"
            );
            assert!(
                v["implementation"]["command"].as_str().unwrap().starts_with("AF_ALG "),
                "{v}"
            );
        }
    } else {
        // This development VM's kernel has no AF_ALG.
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("AF_ALG"), "{}", stderr(&o));
    }
}

#[test]
fn openssl_speed_runs_both_paths_and_records_what_ran() {
    if !has_openssl() {
        eprintln!("skipping: no openssl on PATH");
        return;
    }
    let o = run(&[
        "bench",
        "--provider",
        "openssl",
        "-a",
        "aes-128-gcm",
        "--size",
        "16",
        "--seconds",
        "1",
        "--path",
        "both",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 2);
    for v in &lines {
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["harness"], "openssl-speed", "{v}");
        assert_eq!(v["path_basis"], "inferred", "{v}");
        assert!(
            v["implementation"]["name"].as_str().unwrap().starts_with("OpenSSL"),
            "{v}"
        );
        assert!(v["samples"].as_u64().unwrap() >= 1, "{v}");
        let command = v["implementation"]["command"].as_str().unwrap();
        assert!(command.contains("speed -elapsed -mr"), "{command}");
        if v["path_requested"] == "software" {
            assert_eq!(v["path_used"], "software", "{v}");
            assert!(command.starts_with("OPENSSL_"), "the mask is in the command: {command}");
        }
    }
}

#[test]
fn probe_lists_every_provider_with_the_kernels_drivers() {
    let o = run(&["probe", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let caps = v["providers"]["capabilities"]
        .as_array()
        .expect("providers in probe's facts");
    let names: Vec<&str> = caps.iter().map(|c| c["provider"].as_str().unwrap()).collect();
    assert_eq!(names, ["rustcrypto", "ring", "openssl", "kernel"]);
    assert_eq!(caps[1]["available"], true, "ring is built in");
    for c in caps {
        if c["available"] == false {
            assert!(
                c["reason"].as_str().is_some_and(|r| !r.is_empty()),
                "a provider it cannot run says why: {c}"
            );
        }
    }
    if has_openssl() {
        assert!(
            v["providers"]["openssl"]["version"]
                .as_str()
                .unwrap()
                .starts_with("OpenSSL"),
            "{}",
            v["providers"]
        );
    }
    if std::path::Path::new("/proc/crypto").exists() {
        let drivers = v["providers"]["kernel"]["drivers"].as_array().unwrap();
        assert!(drivers.iter().any(|d| d["name"] == "aes"), "{drivers:?}");
    }
    let table = stdout(&run(&["probe"]));
    for section in ["Providers", "Kernel crypto drivers"] {
        assert!(table.contains(section), "{table}");
    }
}

#[test]
fn probe_watch_env_reports_a_processes_capability_variable_and_refuses_nonsense() {
    let refused = run(&["probe", "--watch-env", "nginx\nX=1"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("--watch-env"), "{}", stderr(&refused));
    if !has_openssl() {
        return;
    }
    let Some(variable) = cipherfleet_core::provider::openssl::capability_variable(std::env::consts::ARCH) else {
        return;
    };
    let mut sleep = std::process::Command::new("sleep")
        .arg("30")
        .env(variable, "~0x200000200000000")
        .spawn()
        .unwrap();
    let pid = sleep.id().to_string();
    // `spawn` returns once exec began, a moment before the kernel sets the new environment up.
    let environ = format!("/proc/{pid}/environ");
    let started = std::time::Instant::now();
    while std::fs::read(&environ).is_ok_and(|e| e.is_empty()) && started.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let o = run(&[
        "probe",
        "--format",
        "json",
        "--watch-env",
        &pid,
        "--watch-env",
        "4294967295",
    ]);
    let table = stdout(&run(&["probe", "--watch-env", &pid]));
    let _ = sleep.kill();
    let _ = sleep.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let watched = &v["providers"]["openssl"]["watched"];
    assert_eq!(watched[0]["target"], format!("pid {pid}"), "{watched}");
    assert_eq!(watched[0]["name"], "sleep", "{watched}");
    assert_eq!(
        watched[0]["capability_env"],
        format!("{variable}=~0x200000200000000"),
        "{watched}"
    );
    assert!(
        watched[1]["error"].as_str().is_some_and(|e| e.contains("no process")),
        "an unreadable target is reported, not fatal: {watched}"
    );
    assert!(
        table.contains(&format!("watched pid {pid} (sleep)"))
            && table.contains(&format!("{variable}=~0x200000200000000")),
        "{table}"
    );
}
