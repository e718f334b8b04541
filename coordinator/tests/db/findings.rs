//! Findings on a real database: derived from stored facts and results by
//! `findings::derive`, opened, refreshed, resolved, reopened, and counted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use cipherfleet_coordinator::cluster::leader::Leader;
use cipherfleet_coordinator::findings::{
    Deriver, Method, Outcome, PeerCache, Reads, Work, Writes, derive, derive_fleet, derive_in_chunks, derive_with,
    derive_with_peers, run,
};
use cipherfleet_coordinator::metrics;
use cipherfleet_coordinator::store::campaigns::NewJob;
use cipherfleet_coordinator::store::findings::{self, Finding, Severity};
use cipherfleet_coordinator::store::hosts;
use cipherfleet_coordinator::store::jobs;
use cipherfleet_coordinator::store::leases::{self, Holder};
use cipherfleet_coordinator::store::outbox;
use cipherfleet_coordinator::store::points;
use cipherfleet_coordinator::store::results::{self, RecordOutcome};
use cipherfleet_core::path::{Path, PathUsed};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::helpers::{campaign, facts, fresh_db, measurement, record, twin_dbs, with_providers};

/// Facts with the given advertised and usable features, kernel and flavour.
fn facts_with(kernel: &str, advertised: &[&str], usable: &[&str], flavour: &str) -> Value {
    let mut f = facts(kernel);
    f["features"]["advertised"] = json!(advertised);
    f["features"]["usable"] = json!(usable);
    f["build"]["flavour"] = json!(flavour);
    f
}

const FULL: &[&str] = &["aes", "avx", "avx2", "pclmulqdq"];

async fn hello(pool: &PgPool, name: &str, facts: &Value) -> i64 {
    hosts::upsert_host_with_facts(pool, name, None, facts)
        .await
        .expect("hello")
        .host_id
}

/// Stores one result per throughput for `host_id`, in order: aes-256-gcm,
/// 16 KiB, encrypt, 1 thread, static key, on `path`.
async fn results_for(pool: &PgPool, host_id: i64, path: Path, throughputs: &[f64]) {
    let new_jobs: Vec<NewJob> = throughputs
        .iter()
        .map(|_| crate::helpers::job_on(host_id, 16384, path))
        .collect();
    campaign(pool, &new_jobs).await;
    for mb_s in throughputs {
        let job = jobs::claim_next_for_host(pool, host_id)
            .await
            .unwrap()
            .expect("a queued job");
        let spec = crate::helpers::job_on(host_id, 16384, path).spec;
        record(pool, job.id, host_id, &measurement(&spec, path, *mb_s))
            .await
            .unwrap();
    }
}

fn reasons(list: &[Finding]) -> Vec<(String, Option<String>, String)> {
    list.iter()
        .map(|f| (f.reason.clone(), f.kind.clone(), f.status.clone()))
        .collect()
}

#[tokio::test]
async fn a_finding_opens_resolves_and_reopens_as_a_new_row() {
    let pool = fresh_db().await;
    let no_aes = facts_with("6.1.0", &["avx", "pclmulqdq"], &["avx", "pclmulqdq"], "accelerated");
    let host = hello(&pool, "vm-01", &no_aes).await;

    let o = derive_fleet(&pool).await.unwrap();
    assert_eq!((o.opened, o.resolved), (1, 0));
    let open = findings::list_open(&pool).await.unwrap();
    assert_eq!(reasons(&open), [("cpu-lacks".into(), None, "open".into())]);
    assert_eq!(open[0].host_name, "vm-01");
    assert_eq!(open[0].subject, "aes");
    assert_eq!(open[0].severity, Severity::Warning);
    assert_eq!(open[0].evidence["features"], json!(["aes"]));
    assert!(
        open[0].summary.contains("does not advertise aes"),
        "{}",
        open[0].summary
    );

    // Still holding: refreshed, not duplicated.
    let o = derive_fleet(&pool).await.unwrap();
    assert_eq!((o.opened, o.refreshed, o.resolved), (0, 1, 0));

    // The VM gets a CPU model with AES: resolved.
    hello(&pool, "vm-01", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    let o = derive_fleet(&pool).await.unwrap();
    assert_eq!((o.opened, o.resolved), (0, 1));
    assert!(findings::list_open(&pool).await.unwrap().is_empty());
    let history = findings::list_for_host(&pool, host).await.unwrap();
    assert_eq!(reasons(&history), [("cpu-lacks".into(), None, "resolved".into())]);
    assert!(history[0].resolved_at.is_some());

    // Back to the old model: a new open row; the resolved one stays as history.
    hello(&pool, "vm-01", &no_aes).await;
    derive_fleet(&pool).await.unwrap();
    let history = findings::list_for_host(&pool, host).await.unwrap();
    assert_eq!(
        reasons(&history),
        [
            ("cpu-lacks".into(), None, "open".into()),
            ("cpu-lacks".into(), None, "resolved".into())
        ],
        "newest first"
    );
    assert!(history[0].first_seen >= history[1].resolved_at.unwrap());
}

#[tokio::test]
async fn the_fact_changes_around_first_seen_are_captured() {
    let pool = fresh_db().await;
    let host = hello(&pool, "db-07", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    derive_fleet(&pool).await.unwrap();
    assert!(findings::list_open(&pool).await.unwrap().is_empty(), "healthy host");

    // A kernel that does not enable AVX state: advertised, not usable.
    hello(
        &pool,
        "db-07",
        &facts_with("3.10.0", FULL, &["aes", "pclmulqdq"], "accelerated"),
    )
    .await;
    derive_fleet(&pool).await.unwrap();
    let open = findings::list_for_host(&pool, host).await.unwrap();
    assert_eq!(reasons(&open), [("os-disabled".into(), None, "open".into())]);
    let f = &open[0];
    assert_eq!(f.subject, "avx-state");
    assert_eq!(f.severity, Severity::Warning, "AVX itself is off");
    assert_eq!(f.evidence["features"], json!(["avx", "avx2"]));
    let changes = &f.fact_changes["changes"];
    assert_eq!(changes["kernel_release"], json!({"from": "6.1.0", "to": "3.10.0"}));
    assert_eq!(
        changes["features_usable"],
        json!({"gained": [], "lost": ["avx", "avx2"]})
    );
    assert!(changes.get("agent_version").is_none(), "{changes}");
    // First seen with the snapshot that brought it, not with the derivation.
    let snapshots = cipherfleet_coordinator::store::snapshots::history(&pool, host)
        .await
        .unwrap();
    assert_eq!(f.first_seen, snapshots[1].taken_at);
    assert_eq!(f.fact_changes["from"]["snapshot_id"], snapshots[0].id);
}

#[tokio::test]
async fn each_fact_reason_is_found_with_its_severity() {
    let pool = fresh_db().await;
    hello(&pool, "bare-ok", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    // AES hidden, everything else there: one finding, naming aes.
    let mut masked = facts_with(
        "6.1.0",
        &["avx", "avx2", "pclmulqdq"],
        &["avx", "avx2", "pclmulqdq"],
        "accelerated",
    );
    masked["virtualization"]["hypervisor"] = json!(true);
    hello(&pool, "vm-masked", &masked).await;
    hello(&pool, "soft-agent", &facts_with("6.1.0", FULL, FULL, "software")).await;
    derive_fleet(&pool).await.unwrap();

    let open: BTreeMap<String, (String, Severity)> = findings::list_open(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|f| (f.host_name, (f.reason, f.severity)))
        .collect();
    let want: BTreeMap<String, (String, Severity)> = [
        ("vm-masked", "hypervisor-masks", Severity::Critical),
        ("soft-agent", "software-build", Severity::Warning),
    ]
    .into_iter()
    .map(|(h, r, s)| (h.to_string(), (r.to_string(), s)))
    .collect();
    assert_eq!(open, want, "bare-ok has none");
    let all = findings::list_open(&pool).await.unwrap();
    let masked = all.iter().find(|f| f.host_name == "vm-masked").unwrap();
    assert_eq!(masked.subject, "aes", "the subject names the hidden flag");

    let counts = findings::count_open_by(&pool).await.unwrap();
    assert_eq!(counts.len(), 2);
    assert!(counts.iter().all(|c| c.findings == 1 && c.hosts == 1), "{counts:?}");
}

#[tokio::test]
async fn a_generic_kernel_driver_and_a_masked_openssl_are_found_and_resolve_when_the_facts_change() {
    let pool = fresh_db().await;
    let x86 = facts_with("6.12.48", FULL, FULL, "accelerated");
    // AES-NI in the CPU, no aesni_intel in the kernel, OPENSSL_ia32cap masking AES-NI and PCLMULQDQ.
    let generic = with_providers(
        x86.clone(),
        &[
            ("aes", "aes-fixed-time", true),
            ("gcm(aes)", "gcm_base(ctr(aes-generic),ghash-generic)", true),
        ],
        &["aes", "pclmulqdq"],
    );
    let host = hello(&pool, "db-kernel", &generic).await;
    // An emulated CPU runs on its emulator host's kernel: its drivers are not its own.
    let mut emulated = generic.clone();
    emulated["virtualization"]["cpuinfo_foreign"] = json!(true);
    hello(&pool, "db-emulated", &emulated).await;
    derive_fleet(&pool).await.unwrap();

    let open = findings::list_open(&pool).await.unwrap();
    let found: Vec<(&str, &str, &str, Severity)> = open
        .iter()
        .map(|f| (f.host_name.as_str(), f.reason.as_str(), f.subject.as_str(), f.severity))
        .collect();
    assert_eq!(
        found,
        [
            ("db-emulated", "openssl-masked", "openssl", Severity::Warning),
            ("db-kernel", "kernel-crypto-generic", "kernel-aes", Severity::Warning),
            ("db-kernel", "openssl-masked", "openssl", Severity::Warning),
        ],
        "{open:#?}"
    );
    let kernel = open.iter().find(|f| f.reason == "kernel-crypto-generic").unwrap();
    assert_eq!(kernel.evidence["features"], json!(["aes", "gcm(aes)"]));
    assert_eq!(
        kernel.evidence["load_modules"],
        json!(["aesni_intel (and ghash_clmulni_intel before Linux 6.5)"])
    );
    for said in [
        "aes → aes-fixed-time (kernel)",
        "modprobe aesni_intel",
        "dm-crypt/LUKS, IPsec and kTLS",
    ] {
        assert!(kernel.summary.contains(said), "{said:?} in {}", kernel.summary);
    }
    let openssl = open
        .iter()
        .find(|f| f.host_name == "db-kernel" && f.reason == "openssl-masked")
        .unwrap();
    assert!(
        openssl
            .summary
            .starts_with("OPENSSL_ia32cap=~0x200000200000000 in the agent's environment masks aes, pclmulqdq"),
        "{}",
        openssl.summary
    );

    // aesni_intel loaded, the variable gone: both resolve, and the kernel's change is on record.
    let fixed = with_providers(
        x86,
        &[("aes", "aes-aesni", false), ("gcm(aes)", "generic-gcm-aesni", false)],
        &[],
    );
    hello(&pool, "db-kernel", &fixed).await;
    derive_fleet(&pool).await.unwrap();
    let history = findings::list_for_host(&pool, host).await.unwrap();
    assert!(
        history
            .iter()
            .all(|f| f.status == "resolved" && f.resolved_at.is_some()),
        "{history:#?}"
    );
    assert_eq!(history.len(), 2, "{history:#?}");
}

#[tokio::test]
async fn a_slow_finding_resolves_when_accelerated_results_return_to_normal() {
    let pool = fresh_db().await;
    let host = hello(&pool, "bench-01", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    let healthy = [
        2000.0, 2300.0, 1750.0, 2150.0, 1850.0, 2250.0, 1800.0, 2050.0, 1950.0, 2100.0,
    ];
    results_for(&pool, host, Path::Accelerated, &healthy).await;
    derive_fleet(&pool).await.unwrap();
    assert!(
        findings::list_open(&pool).await.unwrap().is_empty(),
        "noisy but healthy"
    );

    // A new agent version, then the accelerated path halves.
    let mut upgraded = facts_with("6.1.0", FULL, FULL, "accelerated");
    upgraded["build"]["agent_version"] = json!("0.2.0");
    hello(&pool, "bench-01", &upgraded).await;
    results_for(&pool, host, Path::Accelerated, &[900.0, 950.0, 920.0]).await;
    // The per-result pass: this host, this algorithm.
    let work = Work::Hosts([(host, Some(BTreeSet::from(["aes-256-gcm".to_string()])))].into());
    let o = derive(&pool, &work).await.unwrap();
    assert_eq!(o.opened, 1);
    let open = findings::list_open(&pool).await.unwrap();
    assert_eq!(
        reasons(&open),
        [(
            "slow-accelerated".into(),
            Some("dropped-vs-history".into()),
            "open".into()
        )]
    );
    let f = &open[0];
    assert_eq!(f.subject, "aes-256-gcm");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.evidence["value_mb_s"], 920.0);
    assert_eq!(f.evidence["reference_mb_s"], 2025.0);
    assert!(f.evidence["z"].as_f64().unwrap() >= 3.0, "{}", f.evidence);
    assert_eq!(f.evidence["series"]["size_bytes"], 16384);
    assert_eq!(
        f.fact_changes["changes"]["agent_version"],
        json!({"from": "0.1.0", "to": "0.2.0"}),
        "what changed since the last good result"
    );
    assert!(
        f.summary.contains("dropped") || f.summary.contains("earlier"),
        "{}",
        f.summary
    );

    // Back to normal: the recent results are healthy again.
    results_for(&pool, host, Path::Accelerated, &[2010.0, 1990.0, 2050.0]).await;
    let o = derive(&pool, &work).await.unwrap();
    assert_eq!(o.resolved, 1);
    assert!(findings::list_open(&pool).await.unwrap().is_empty());
    let history = findings::list_for_host(&pool, host).await.unwrap();
    assert_eq!(history[0].status, "resolved");
}

#[tokio::test]
async fn a_pass_read_in_chunks_compares_each_host_with_its_whole_class() {
    let pool = fresh_db().await;
    let full = facts_with("6.1.0", FULL, FULL, "accelerated");
    let mut ids = Vec::new();
    for (i, mb_s) in [2000.0, 2100.0, 1900.0, 2050.0, 600.0].into_iter().enumerate() {
        let host = hello(&pool, &format!("peer-{i}"), &full).await;
        results_for(&pool, host, Path::Accelerated, &[mb_s, mb_s * 1.02, mb_s * 0.98]).await;
        ids.push(host);
    }
    // Two hosts a chunk: the slow host's peers are read in other chunks than its own.
    let o = derive_in_chunks(&pool, &Work::Fleet, 2).await.unwrap();
    let open = findings::list_open(&pool).await.unwrap();
    assert_eq!(
        reasons(&open),
        [("slow-accelerated".into(), Some("below-peers".into()), "open".into())]
    );
    assert_eq!(open[0].host_id, ids[4]);
    assert_eq!(
        open[0].evidence["reference_results"], 4,
        "every other host of the class"
    );
    assert_eq!(
        open[0].evidence["reference_mb_s"], 2025.0,
        "the median of the peers' medians"
    );
    // All in one chunk: the same findings, nothing opened or resolved.
    let again = derive_fleet(&pool).await.unwrap();
    assert_eq!((again.opened, again.refreshed, again.resolved), (0, o.opened, 0));
    assert_eq!(o.opened, 1);
}

#[tokio::test]
async fn an_accelerated_path_at_software_speed_is_critical() {
    let pool = fresh_db().await;
    let host = hello(&pool, "bench-02", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    results_for(&pool, host, Path::Accelerated, &[95.0, 90.0, 99.0]).await;
    results_for(&pool, host, Path::Software, &[80.0, 82.0, 79.0]).await;
    derive_fleet(&pool).await.unwrap();
    let open = findings::list_open(&pool).await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].kind.as_deref(), Some("near-software"));
    assert_eq!(open[0].severity, Severity::Critical);
    assert!((open[0].evidence["ratio"].as_f64().unwrap() - 95.0 / 80.0).abs() < 1e-9);
}

#[tokio::test]
async fn metrics_count_hosts_findings_jobs_and_results() {
    let pool = fresh_db().await;
    hello(&pool, "ok\"quoted", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    let soft = hello(&pool, "soft", &facts_with("6.1.0", FULL, FULL, "software")).await;
    results_for(&pool, soft, Path::Software, &[80.0]).await;
    derive_fleet(&pool).await.unwrap();
    // Online: a welcomed session's live lease, here held by another coordinator.
    let elsewhere = Holder {
        id: uuid::Uuid::new_v4(),
        name: "c2/7".into(),
    };
    let lease = std::time::Duration::from_secs(60);
    leases::acquire(&pool, soft, &elsewhere, 1, lease).await.unwrap();
    leases::welcome(&pool, soft, &elsewhere, 1).await.unwrap();

    let text = metrics::render(&pool, 0).await.unwrap();
    let want = [
        "cipherfleet_hosts 2",
        "cipherfleet_hosts_online 1",
        "cipherfleet_coordinator_sessions 0",
        "cipherfleet_host_leases{coordinator=\"c2/7\"} 1",
        "cipherfleet_hosts_by_acceleration{status=\"accelerated\"} 1",
        "cipherfleet_hosts_by_acceleration{status=\"software\"} 1",
        "cipherfleet_hosts_with_findings{reason=\"software-build\"} 1",
        "cipherfleet_hosts_with_findings{reason=\"cpu-lacks\"} 0",
        "cipherfleet_findings_open{reason=\"software-build\",severity=\"warning\"} 1",
        "cipherfleet_findings_open{reason=\"software-build\",severity=\"critical\"} 0",
        "cipherfleet_jobs{status=\"done\"} 1",
        "cipherfleet_jobs{status=\"queued\"} 0",
        "cipherfleet_results_ingested_total 1",
    ];
    for line in want {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }

    // A finished campaign's counts are kept; later campaigns' are added, running or finished.
    let new_jobs = [
        crate::helpers::job_on(soft, 16384, Path::Software),
        crate::helpers::job_on(soft, 1024, Path::Software),
    ];
    campaign(&pool, &new_jobs).await;
    results_for(&pool, soft, Path::Software, &[81.0, 82.0]).await;
    let text = metrics::render(&pool, 0).await.unwrap();
    for line in [
        "cipherfleet_jobs{status=\"done\"} 3",
        "cipherfleet_jobs{status=\"queued\"} 2",
        "cipherfleet_results_ingested_total 3",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    // The campaign read while running, finished since.
    for _ in &new_jobs {
        let job = jobs::claim_next_for_host(&pool, soft)
            .await
            .unwrap()
            .expect("a queued job");
        let spec = serde_json::from_value(job.spec).unwrap();
        record(&pool, job.id, soft, &measurement(&spec, Path::Software, 80.0))
            .await
            .unwrap();
    }
    let text = metrics::render(&pool, 0).await.unwrap();
    for line in [
        "cipherfleet_jobs{status=\"done\"} 5",
        "cipherfleet_jobs{status=\"queued\"} 0",
        "cipherfleet_results_ingested_total 5",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
}

#[tokio::test]
async fn a_pass_for_one_algorithm_leaves_the_slow_findings_of_others_open() {
    let pool = fresh_db().await;
    let host = hello(&pool, "bench-03", &facts_with("6.1.0", FULL, FULL, "accelerated")).await;
    results_for(&pool, host, Path::Accelerated, &[95.0, 90.0, 99.0]).await;
    results_for(&pool, host, Path::Software, &[80.0, 82.0, 79.0]).await;
    derive_fleet(&pool).await.unwrap();
    assert_eq!(findings::list_open(&pool).await.unwrap().len(), 1);

    // A result of another algorithm: its pass must not judge aes-256-gcm by its absence.
    let other = Work::Hosts([(host, Some(BTreeSet::from(["chacha20-poly1305".to_string()])))].into());
    let o = derive(&pool, &other).await.unwrap();
    assert_eq!(o.resolved, 0, "{o:?}");
    assert_eq!(findings::list_open(&pool).await.unwrap().len(), 1);
}

#[tokio::test]
async fn facts_stored_through_any_coordinator_are_derived_by_the_leader() {
    let pool = fresh_db().await;
    let no_aes = facts_with("6.1.0", &["avx", "pclmulqdq"], &["avx", "pclmulqdq"], "accelerated");
    hello(&pool, "vm-01", &no_aes).await;
    // Two coordinators' deriver tasks on one database; the first asked leads.
    let (leads, follows) = (Arc::new(Leader::new(&pool)), Arc::new(Leader::new(&pool)));
    assert!(leads.is_leader().await && !follows.is_leader().await);
    let (leader, follower) = (Deriver::new(), Deriver::new());
    let shutdown = CancellationToken::new();
    tokio::spawn(run(leader, pool.clone(), leads, shutdown.clone()));
    tokio::spawn(run(follower.clone(), pool.clone(), follows, shutdown.clone()));
    let open_on = |name: &'static str| {
        let pool = pool.clone();
        async move {
            for _ in 0..300 {
                let open = findings::list_open(&pool).await.unwrap();
                if open.iter().any(|f| f.host_name == name && f.reason == "cpu-lacks") {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("no finding of {name} after 30 s");
        }
    };
    // The leader's first pass, over the whole fleet.
    open_on("vm-01").await;

    // A host says hello to the other coordinator, which tells only its own deriver: the
    // leader sees the new snapshot at its next look and derives every host's facts.
    hello(&pool, "vm-02", &no_aes).await;
    follower.facts_changed();
    open_on("vm-02").await;
    shutdown.cancel();
}

mod reference;
