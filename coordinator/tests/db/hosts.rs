use cipherfleet_coordinator::domain::labels::Labels;
use cipherfleet_coordinator::store::hosts;
use cipherfleet_coordinator::store::{sessions, snapshots};

use crate::helpers::{facts, fresh_db, with_providers};

#[tokio::test]
async fn same_facts_twice_keep_one_snapshot() {
    let pool = fresh_db().await;
    let first = hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();
    // A later hello: load average and the clock read cost differ, nothing about the machine does.
    let mut again = facts("6.1.0-18-amd64");
    again["noise"]["load_average"] = serde_json::json!([3.5, 2.0, 1.0]);
    again["noise"]["clock_read_ns"] = serde_json::json!(41.3);
    let second = hosts::upsert_host_with_facts(&pool, "bench-01", None, &again)
        .await
        .unwrap();

    assert!(first.new_host && first.facts_changed);
    assert!(!second.new_host && !second.facts_changed);
    assert_eq!(first.host_id, second.host_id);
    assert_eq!(first.snapshot_id, second.snapshot_id);
    assert_eq!(snapshots::history(&pool, first.host_id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn changed_kernel_adds_a_second_snapshot() {
    let pool = fresh_db().await;
    let old = hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("4.19.0-26-amd64"))
        .await
        .unwrap();
    let new = hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();

    assert!(new.facts_changed && !new.new_host);
    assert_ne!(old.snapshot_id, new.snapshot_id);
    let history = snapshots::history(&pool, old.host_id).await.unwrap();
    let kernels: Vec<_> = history.iter().map(|s| s.columns.kernel_release.as_deref()).collect();
    assert_eq!(kernels, [Some("4.19.0-26-amd64"), Some("6.1.0-18-amd64")]);
    let host = hosts::get(&pool, old.host_id).await.unwrap().unwrap();
    assert_eq!(host.current_snapshot_id, Some(new.snapshot_id));
    // The typed columns are filled from the probe JSON.
    assert_eq!(history[1].columns.cpu_model, Some(85));
    assert_eq!(history[1].columns.features_usable, ["aes", "avx"]);
    assert_eq!(history[1].columns.hypervisor.as_deref(), Some("kvm"));
}

#[tokio::test]
async fn an_agent_rebuilt_with_another_profile_is_a_fact_change() {
    let pool = fresh_db().await;
    let codegen = |lto: &str, units: u32| {
        let mut f = facts("6.1.0-18-amd64");
        f["build"]["codegen"] = serde_json::json!({"profile": "release", "opt_level": "3", "lto": lto,
            "codegen_units": units, "target_features": ["sse2", "fxsr", "sse"]});
        f
    };
    let old = hosts::upsert_host_with_facts(&pool, "bench-01", None, &codegen("thin-local", 4))
        .await
        .unwrap();
    let new = hosts::upsert_host_with_facts(&pool, "bench-01", None, &codegen("thin", 1))
        .await
        .unwrap();

    assert!(new.facts_changed);
    let history = snapshots::history(&pool, old.host_id).await.unwrap();
    let profiles: Vec<_> = history.iter().map(|s| s.columns.build_codegen.as_deref()).collect();
    assert_eq!(
        profiles,
        [
            Some("release, opt-level 3, LTO thin-local, 4 codegen units"),
            Some("release, opt-level 3, LTO thin, 1 codegen unit")
        ]
    );
    assert_eq!(history[1].columns.build_target_features, ["fxsr", "sse", "sse2"]);
    let changes = cipherfleet_coordinator::analysis::changes::diff(&history[0].columns, &history[1].columns);
    assert_eq!(changes.keys().collect::<Vec<_>>(), ["build_codegen"]);
}

#[tokio::test]
async fn provider_facts_are_stored_with_the_host_and_a_loaded_driver_is_a_change() {
    let pool = fresh_db().await;
    // An agent before providers, then one that reports them, then aesni_intel loaded.
    let generic = with_providers(facts("6.1.0-18-amd64"), &[("aes", "aes-generic", true)], &[]);
    let loaded = with_providers(facts("6.1.0-18-amd64"), &[("aes", "aes-aesni", false)], &[]);
    let mut host_id = 0;
    for f in [facts("6.1.0-18-amd64"), generic, loaded] {
        host_id = hosts::upsert_host_with_facts(&pool, "bench-01", None, &f)
            .await
            .unwrap()
            .host_id;
    }
    let history = snapshots::history(&pool, host_id).await.unwrap();
    assert_eq!(
        history.len(),
        3,
        "reporting providers and loading a driver are new facts"
    );
    assert_eq!(
        (&history[0].columns.kernel_drivers, &history[0].columns.openssl_build),
        (&None, &None)
    );
    let drivers = |i: usize| -> Vec<String> {
        history[i]
            .columns
            .kernel_drivers
            .as_ref()
            .unwrap()
            .0
            .iter()
            .map(|d| d.driver.clone())
            .collect()
    };
    assert_eq!(
        (drivers(1), drivers(2)),
        (vec!["aes-generic".to_string()], vec!["aes-aesni".to_string()])
    );
    let openssl = &history[2].columns.openssl_build.as_ref().unwrap().0;
    assert_eq!(
        (openssl.platform.as_deref(), openssl.no_asm),
        (Some("debian-amd64"), false)
    );
    let diff =
        |a: usize, b: usize| cipherfleet_coordinator::analysis::changes::diff(&history[a].columns, &history[b].columns);
    assert!(diff(0, 1).is_empty(), "a first report is no change: {:?}", diff(0, 1));
    assert_eq!(
        serde_json::Value::Object(diff(1, 2)),
        serde_json::json!({"kernel_drivers": {"gained": ["aes → aes-aesni"], "lost": ["aes → aes-generic"]}})
    );
}

#[tokio::test]
async fn labels_are_replaced_only_when_given() {
    let pool = fresh_db().await;
    let labels = Labels::from([("class".to_string(), "storage-gen3".to_string())]);
    let f = facts("6.1.0-18-amd64");
    let id = hosts::upsert_host_with_facts(&pool, "bench-01", Some(&labels), &f)
        .await
        .unwrap()
        .host_id;
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &f)
        .await
        .unwrap();
    let host = hosts::find_by_name(&pool, "bench-01").await.unwrap().unwrap();
    assert_eq!(host.id, id);
    assert_eq!(host.labels.0, labels);
}

#[tokio::test]
async fn sessions_left_open_without_a_lease_are_closed_at_start() {
    let pool = fresh_db().await;
    let up = hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();
    let closed = sessions::open(
        &pool,
        up.host_id,
        Some(up.snapshot_id),
        Some("127.0.0.1:50000"),
        Some("0.1.0"),
    )
    .await
    .unwrap();
    sessions::close(&pool, closed).await.unwrap();
    sessions::open(&pool, up.host_id, Some(up.snapshot_id), None, None)
        .await
        .unwrap();

    assert_eq!(sessions::close_orphaned(&pool).await.unwrap(), 1);
    let all = sessions::for_host(&pool, up.host_id, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|s| s.disconnected_at.is_some()));
}

#[tokio::test]
async fn a_host_whose_cpuinfo_is_foreign_is_emulated_without_a_label() {
    let pool = fresh_db().await;
    let mut emulated = facts("6.1.0-18-amd64");
    emulated["virtualization"]["cpuinfo_foreign"] = serde_json::json!(true);
    hosts::upsert_host_with_facts(&pool, "qemu-01", None, &emulated)
        .await
        .unwrap();
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();

    let listed = hosts::list_with_facts(&pool).await.unwrap();
    let marks: Vec<(&str, Option<bool>, bool)> = listed
        .iter()
        .map(|h| (h.host.name.as_str(), h.cpuinfo_foreign, h.emulated()))
        .collect();
    assert_eq!(marks, [("bench-01", None, false), ("qemu-01", Some(true), true)]);
}
