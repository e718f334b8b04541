use crate::helpers::*;

#[test]
fn openssl_compat_points_are_measured_and_labelled() {
    let o = run(&[
        "bench",
        "-a",
        "aes-128-gcm,chacha20-poly1305,aes-128-cbc,aes-256-ctr",
        "--size",
        "16,1k",
        "--direction",
        "both",
        // Windows of 10 ms: on a loaded machine a debug build's 1 ms batches can
        // stretch past the 5 ms windows of a shorter run and leave most of them empty.
        "--seconds",
        "0.3",
        "--format",
        "json",
        "--openssl-compat",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 4 * 2 * 2);
    for v in &lines {
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["harness"], "openssl-compat", "{v}");
        assert!(v["throughput_mb_s"].as_f64().unwrap() > 0.0, "{v}");
    }
    // The engine's own results do not carry the field at all.
    let o = run(&[
        "bench",
        "-a",
        "aes-128-gcm",
        "--size",
        "16",
        "--seconds",
        "0.05",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(json_lines(&o)[0].get("harness").is_none());
}

#[test]
fn the_table_says_it_is_not_the_engines_shape() {
    let o = run(&[
        "bench",
        "-a",
        "aes-256-gcm",
        "--size",
        "16",
        "--seconds",
        "0.05",
        "--openssl-compat",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("harness: openssl-compat"), "{}", stdout(&o));
}

#[test]
fn what_openssl_speed_cannot_mirror_exits_2_saying_why() {
    for (args, why) in [
        (&["--format", "csv"][..], "CSV"),
        (&["-a", "aes-128-cbc-hmac-sha256"], "no openssl speed counterpart"),
        (&["--key-mode", "per-op"], "--key-mode static"),
        (&["-a", "aes-128-cbc", "--size", "11"], "16-byte blocks"),
    ] {
        let mut full = vec!["bench", "--openssl-compat", "--seconds", "0.05"];
        if !args.contains(&"-a") {
            full.extend(["-a", "aes-128-gcm"]);
        }
        full.extend_from_slice(args);
        let o = run(&full);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains(why), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}: no results before the refusal");
    }
}
