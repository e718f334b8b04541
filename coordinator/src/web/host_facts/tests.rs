use chrono::TimeZone;
use serde_json::json;

use super::*;

fn snapshot(id: i64, minute: u32, kernel: &str, usable: &[&str], version: &str) -> Snapshot {
    Snapshot {
        id,
        host_id: 1,
        taken_at: Utc.with_ymd_and_hms(2026, 11, 30, 4, minute, 0).unwrap(),
        facts: json!({}),
        columns: FactColumns {
            kernel_release: Some(kernel.into()),
            features_advertised: vec!["aes".into(), "avx".into(), "pclmulqdq".into()],
            features_usable: usable.iter().map(|s| s.to_string()).collect(),
            agent_version: Some(version.into()),
            build_flavour: Some("accelerated".into()),
            ..FactColumns::default()
        },
    }
}

#[test]
fn fact_changes_list_each_changed_fact_newest_first() {
    let all = ["aes", "avx", "pclmulqdq"];
    let history = [
        snapshot(1, 0, "4.19.0", &all, "0.1.0"),
        // Kernel upgrade that lost the AVX state.
        snapshot(2, 10, "6.1.0", &["aes", "pclmulqdq"], "0.1.0"),
        // Agent upgrade, AVX back.
        snapshot(3, 20, "6.1.0", &all, "0.2.0"),
    ];
    let got: Vec<(i64, &str, String, bool)> = fact_changes(&history)
        .into_iter()
        .map(|c| (c.snapshot_id, c.fact, c.change, c.lost))
        .collect();
    assert_eq!(
        got,
        [
            (3, "agent version", "0.1.0 → 0.2.0".to_string(), false),
            (3, "usable CPU features", "gained: avx".to_string(), false),
            (2, "kernel", "4.19.0 → 6.1.0".to_string(), false),
            (2, "usable CPU features", "lost: avx".to_string(), true),
        ]
    );
}

#[test]
fn the_openssl_table_lists_each_watched_service_and_what_it_masks() {
    use cipherfleet_core::provider::facts::OpensslBuild;
    let watched =
        |target: &str, name: Option<&str>, env: Option<&str>, masked: &[&str], error: Option<&str>| WatchedService {
            target: target.into(),
            name: name.map(str::to_string),
            source: if error.is_some() { "" } else { "/proc/7/environ" }.into(),
            capability_env: env.map(str::to_string),
            masked: masked.iter().map(|m| m.to_string()).collect(),
            error: error.map(str::to_string),
        };
    let mut s = snapshot(1, 0, "6.1.0", &["aes"], "0.1.0");
    s.columns.openssl_build = Some(sqlx::types::Json(OpensslBuild {
        version: "OpenSSL 3.0.19 27 Jan 2026".into(),
        watched: vec![
            watched(
                "pid 7",
                Some("nginx"),
                Some("OPENSSL_ia32cap=~0x200000200000000"),
                &["pclmulqdq", "aes"],
                None,
            ),
            watched("pid 8", Some("haproxy"), None, &[], None),
            watched("unit pg", None, None, &[], Some("no unit pg")),
        ],
        ..OpensslBuild::default()
    }));
    let rows: Vec<String> = openssl_facts(&s)
        .unwrap()
        .into_iter()
        .filter(|f| f.name == "Watched service")
        .map(|f| f.value)
        .collect();
    assert_eq!(
        rows,
        [
            "pid 7 (nginx): OPENSSL_ia32cap=~0x200000200000000 (masks pclmulqdq, aes), from /proc/7/environ",
            "pid 8 (haproxy): no capability variable, from /proc/7/environ",
            "unit pg: not read: no unit pg",
        ]
    );
}

#[test]
fn one_snapshot_or_none_has_no_changes() {
    assert!(fact_changes(&[]).is_empty());
    assert!(fact_changes(&[snapshot(1, 0, "6.1.0", &["aes"], "0.1.0")]).is_empty());
}

/// A snapshot of `features` as an agent reports them, typed as the coordinator stores them.
fn with_features(features: Value) -> Snapshot {
    let facts = json!({ "features": features });
    Snapshot {
        columns: FactColumns::from_facts(&facts),
        facts,
        ..snapshot(1, 0, "6.1.0", &[], "0.1.0")
    }
}

/// (name, advertised, usable, advertised but unusable) of each row.
fn rows(s: &Snapshot) -> Vec<(String, bool, bool, bool)> {
    feature_rows(s)
        .into_iter()
        .map(|f| (f.name.clone(), f.advertised, f.usable, f.unusable()))
        .collect()
}

fn row(name: &str, advertised: bool, usable: bool, unusable: bool) -> (String, bool, bool, bool) {
    (name.to_string(), advertised, usable, unusable)
}

#[test]
fn every_checked_feature_is_listed_in_checked_order_absent_ones_as_no() {
    // An emulated Nehalem: of the x86 probe's list only SSSE3 is there.
    let nehalem = with_features(json!({
        "source": "cpuid",
        "checked": ["aes", "pclmulqdq", "ssse3", "avx", "avx2", "vaes", "vpclmulqdq", "sha"],
        "advertised": ["ssse3"],
        "usable": ["ssse3"],
    }));
    assert_eq!(
        rows(&nehalem),
        [
            row("aes", false, false, false),
            row("pclmulqdq", false, false, false),
            row("ssse3", true, true, false),
            row("avx", false, false, false),
            row("avx2", false, false, false),
            row("vaes", false, false, false),
            row("vpclmulqdq", false, false, false),
            row("sha", false, false, false),
        ]
    );
    assert!(features_checked(&nehalem));
}

#[test]
fn advertised_but_unusable_features_are_singled_out() {
    // AVX without its register state enabled by the OS.
    let s = with_features(json!({
        "checked": ["aes", "avx", "sha"],
        "advertised": ["aes", "avx"],
        "usable": ["aes"],
    }));
    assert_eq!(
        rows(&s),
        [
            row("aes", true, true, false),
            row("avx", true, false, true),
            row("sha", false, false, false),
        ]
    );
}

#[test]
fn without_a_checked_list_the_features_found_are_listed_by_name() {
    // Older agents: what was absent is unknown, so only the found ones show.
    for features in [
        json!({ "advertised": ["sha", "aes", "avx"], "usable": ["aes", "vaes"] }),
        json!({ "checked": [], "advertised": ["sha", "aes", "avx"], "usable": ["aes", "vaes"] }),
    ] {
        let s = with_features(features);
        assert_eq!(
            rows(&s),
            [
                row("aes", true, true, false),
                row("avx", true, false, true),
                row("sha", true, false, true),
                row("vaes", false, true, false),
            ]
        );
        assert!(!features_checked(&s));
    }
    let none = with_features(json!(null));
    assert!(rows(&none).is_empty());
    assert!(!features_checked(&none));
}

#[test]
fn features_a_list_names_but_the_probe_did_not_check_follow_the_checked_ones() {
    let s = with_features(json!({
        "checked": ["pmull", "aes", "aes"],
        "advertised": ["sha3", "aes", "asimd"],
        "usable": ["sha3", "aes", "asimd"],
    }));
    let names: Vec<String> = rows(&s).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["pmull", "aes", "asimd", "sha3"]);
}

#[test]
fn facts_print_units_and_say_when_unknown() {
    let c = FactColumns {
        memory_total_bytes: Some(16 * 1024 * 1024 * 1024),
        hypervisor_present: Some(true),
        hypervisor: Some("kvm".into()),
        cpu_family: Some(6),
        ..FactColumns::default()
    };
    let mut s = Snapshot {
        id: 1,
        host_id: 1,
        taken_at: Utc::now(),
        facts: json!({}),
        columns: c,
    };
    let get = |s: &Snapshot, n: &str| facts_table(s).iter().find(|f| f.name == n).unwrap().value.clone();
    assert_eq!(get(&s, "Memory"), "16 GiB");
    assert_eq!(get(&s, "Hypervisor"), "yes (kvm)");
    assert_eq!(get(&s, "Family / model / stepping"), "6 / – / –");
    assert_eq!(get(&s, "Kernel"), "–");
    assert_eq!(get(&s, "Agent compiled with"), "–");
    assert_eq!(get(&s, "Compile-time target features"), "–");
    assert_eq!(
        (get(&s, "Clock source"), get(&s, "CPU emulation")),
        ("–".into(), "–".into())
    );

    s.facts = json!({"noise": {"clocksource": "hpet", "clock_read_ns": 1520.4}});
    s.columns.cpuinfo_foreign = Some(true);
    assert_eq!(get(&s, "Clock source"), "hpet");
    assert_eq!(
        get(&s, "Clock read"),
        "1520 ns (slow: timings of small payloads read low)"
    );
    assert!(get(&s, "CPU emulation").starts_with("emulated"));
    s.facts = json!({"noise": {"clock_read_ns": 31.62}});
    s.columns.cpuinfo_foreign = Some(false);
    assert_eq!(get(&s, "Clock read"), "31.6 ns");
    assert_eq!(get(&s, "CPU emulation"), "none seen");
}

#[test]
fn arm_parts_are_named_with_their_numbers_even_when_the_agent_did_not_name_them() {
    // The emulated Cortex-A72 as an agent whose table lacked the part stored it:
    // the part number in `model`, no name, no model name.
    let facts = json!({
        "arch": "aarch64",
        "cpu": {"vendor": "ARM", "model_name": null, "family": null, "model": 3336, "stepping": 3,
                "arm": {"implementer": 65, "variant": 0, "architecture": null, "part": 3336,
                        "revision": 3, "part_name": null, "midr": "0x00000000410fd083"}},
    });
    let s = Snapshot {
        columns: FactColumns::from_facts(&facts),
        facts,
        ..snapshot(1, 0, "6.1.0", &[], "0.1.0")
    };
    let shown = facts_table(&s);
    let get = |n: &str| shown.iter().find(|f| f.name == n).map(|f| f.value.clone());
    assert_eq!(get("CPU vendor").as_deref(), Some("ARM (0x41)"));
    assert_eq!(get("CPU model").as_deref(), Some("Cortex-A72 (part 0xd08)"));
    assert_eq!(
        get("Implementer / part / revision").as_deref(),
        Some("0x41 / 0xd08 / r0p3")
    );
    assert_eq!(
        get("Family / model / stepping"),
        None,
        "x86's numbers mean nothing on ARM"
    );
}

#[test]
fn a_rebuilt_agent_shows_its_new_compiler_settings_as_a_change() {
    let before = snapshot(1, 0, "6.1.0", &["aes"], "0.1.0");
    let mut after = snapshot(2, 5, "6.1.0", &["aes"], "0.1.0");
    after.columns.build_codegen = Some("release, opt-level 3, LTO fat, 1 codegen unit".into());
    after.columns.build_target_features = vec!["sse2".into()];
    let shown = facts_table(&after);
    let get = |n: &str| shown.iter().find(|f| f.name == n).unwrap().value.clone();
    assert_eq!(
        get("Agent compiled with"),
        "release, opt-level 3, LTO fat, 1 codegen unit"
    );
    assert_eq!(get("Compile-time target features"), "sse2");
    let changes: Vec<(&str, String)> = fact_changes(&[before, after])
        .into_iter()
        .map(|c| (c.fact, c.change))
        .collect();
    assert_eq!(
        changes,
        [
            (
                "agent compiler settings",
                "none → release, opt-level 3, LTO fat, 1 codegen unit".to_string()
            ),
            ("agent target features", "gained: sse2".to_string()),
        ]
    );
}
