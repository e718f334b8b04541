//! What every measured point carries (memory, sample counts and flags) and the
//! points that used to fail: CCM over 64 KiB, objects that must be counted.

use crate::helpers::*;

fn bench_json(args: &[&str], env: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let mut full = vec!["bench", "--format", "json"];
    full.extend_from_slice(args);
    let o = run_with(agent(), &full, env);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    json_lines(&o)
}

#[test]
fn every_point_reports_memory_and_no_measured_loop_allocates() {
    let rows = bench_json(
        &[
            "-a",
            "aes-128-gcm,aes-256-cbc-hmac-sha256,chacha20,des-ede3-cbc",
            "--size",
            "64",
            "--direction",
            "both",
            "--seconds",
            "0.05",
        ],
        &[],
    );
    assert_eq!(rows.len(), 8);
    for r in &rows {
        let m = &r["memory"];
        assert!(m["cipher_state_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(m["peak_rss_bytes"].as_u64().unwrap() > 1 << 20, "{r}");
        // Counted by the worker binary's allocator: a number, and zero.
        assert_eq!(m["allocs_per_op"].as_f64(), Some(0.0), "{r}");
        assert_eq!(m["heap_bytes_per_op"].as_f64(), Some(0.0), "{r}");
        assert!(r["samples"].as_u64().unwrap() >= 10, "{r}");
        assert_eq!(r["low_samples"], false, "{r}");
        assert!(r["latency_samples"].as_u64().unwrap() > 0, "{r}");
        assert!(r["throughput_batch_ops"].as_u64().unwrap() >= r["batch_ops"].as_u64().unwrap());
    }
    // AES's key schedule and 3DES's three DES schedules are not the same size.
    let state = |alg: &str| {
        rows.iter().find(|r| r["algorithm"] == alg).unwrap()["memory"]["cipher_state_bytes"]
            .as_u64()
            .unwrap()
    };
    assert_ne!(state("aes-128-gcm"), state("des-ede3-cbc"));
}

#[test]
fn memory_and_flags_appear_in_csv_and_table() {
    let o = run(&[
        "bench",
        "-a",
        "aes-128-ctr",
        "--size",
        "1k",
        "--seconds",
        "0.05",
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), row.len(), "{out}");
    let cell = |name: &str| {
        row[header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name}"))]
    };
    assert_eq!(cell("allocs_per_op"), "0");
    assert!(cell("cipher_state_bytes").parse::<u64>().unwrap() > 0);
    assert!(cell("peak_rss_bytes").parse::<u64>().unwrap() > 0);
    assert_eq!(cell("low_samples"), "false");
    // A window, or in a slow debug build perhaps one operation per sample.
    assert!(["window", "operation"].contains(&cell("sample_kind")), "{out}");

    let o = run(&["bench", "-a", "aes-128-ctr", "--size", "1k", "--seconds", "0.05"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("| memory"), "{table}");
    assert!(
        table.contains("state ") && table.contains("rss ") && table.contains("0 alloc/op"),
        "{table}"
    );
}

#[test]
fn a_point_cut_short_by_its_time_limit_is_flagged_low_samples_everywhere() {
    // The worker learns its 3.5 s limit, keeps 2 s back and 1 s for the report:
    // at most half a second of 100 ms windows, so under five samples.
    let env = [("CIPHERFLEET_WORKER_TIME_LIMIT", "3.5")];
    let args = ["-a", "aes-128-gcm", "--size", "1k", "--seconds", "3"];
    let rows = bench_json(&args, &env);
    assert_eq!(rows[0]["status"], "ok", "{}", rows[0]);
    assert_eq!(rows[0]["low_samples"], true, "{}", rows[0]);
    assert!(rows[0]["samples"].as_u64().unwrap() < 5);

    let mut csv_args = vec!["bench", "--format", "csv"];
    csv_args.extend_from_slice(&args);
    let csv = stdout(&run_with(agent(), &csv_args, &env));
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let low = header.iter().position(|h| *h == "low_samples").unwrap();
    assert_eq!(row[low], "true", "{csv}");

    let mut table_args = vec!["bench"];
    table_args.extend_from_slice(&args);
    let table = stdout(&run_with(agent(), &table_args, &env));
    assert!(table.contains('*') && table.contains("low_samples"), "{table}");
}

#[test]
fn ccm_over_64_kib_is_measured_with_its_kats_and_refused_past_its_length_field() {
    let rows = bench_json(
        &[
            "-a",
            "aes-128-ccm",
            "--size",
            "70000",
            "--direction",
            "both",
            "--seconds",
            "0.05",
        ],
        &[],
    );
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        assert!(r["selftest_passed"].as_u64().unwrap() >= 7, "{r}");
    }
    let o = run(&["bench", "-a", "aes-128-ccm", "--size", "16MiB"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("aes-128-ccm") && stderr(&o).contains("16777215"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn object_scenarios_count_ten_objects_per_slot_closed_and_open() {
    let base = [
        "-a",
        "aes-256-ctr",
        "--size",
        "16KiB",
        "--threads",
        "2",
        "--concurrency",
        "4",
        "--seconds",
        "0.1",
    ];
    let closed = &bench_json(&base, &[])[0];
    assert!(closed["objects"].as_u64().unwrap() >= 40, "{closed}");
    assert_eq!(closed["arrival_rate_per_s"], serde_json::Value::Null);

    let mut open_args = base.to_vec();
    open_args.extend_from_slice(&["--arrival-rate", "500"]);
    let open = &bench_json(&open_args, &[])[0];
    assert_eq!(open["arrival_rate_per_s"], 500.0, "{open}");
    assert_eq!(open["latency_method"], "per-object");
    assert!(open["objects"].as_u64().unwrap() >= 40, "{open}");

    let o = run(&["bench", "-a", "aes-256-ctr", "--arrival-rate", "500"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--concurrency"), "{}", stderr(&o));
}

#[test]
fn random_nonces_are_measured_beside_counters_and_every_row_says_which() {
    let args = [
        "bench",
        "-a",
        "aes-256-gcm",
        "--size",
        "11",
        "--nonce",
        "counter,random",
        "--seconds",
        "0.05",
    ];
    let rows = bench_json(&args[1..], &[]);
    let nonces: Vec<&str> = rows.iter().filter_map(|r| r["nonce"].as_str()).collect();
    assert_eq!(nonces, ["counter", "random"], "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["status"] == "ok" && r["ops_per_s"].as_f64().unwrap() > 0.0)
    );

    let mut csv = args.to_vec();
    csv.extend(["--format", "csv"]);
    let o = run(&csv);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split(',').collect()).collect();
    let column = lines[0].iter().position(|h| *h == "nonce").expect("a nonce column");
    let cells: Vec<&str> = lines[1..].iter().map(|r| r[column]).collect();
    assert_eq!(cells, ["counter", "random"], "{out}");

    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nonce=random"), "{}", stdout(&o));

    // Random nonces where they measure nothing: a usage error naming the flag.
    let o = run(&["bench", "-a", "aes-256-ctr", "--nonce", "random"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--nonce"), "{}", stderr(&o));
}
