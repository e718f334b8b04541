//! findings, series.

use std::collections::BTreeSet;

use cipherfleet_coordinator::domain::facts::FactColumns;
use cipherfleet_coordinator::store::findings::{NewFinding, OpenCount, Severity};
use cipherfleet_coordinator::store::snapshots;
use cipherfleet_coordinator::store::{findings, series};
use cipherfleet_core::path::Path;
use serde_json::json;

use super::fixture::*;

#[tokio::test]
async fn findings_and_the_series_they_come_from_read_back_as_stored() {
    let f = populate().await;
    let pool = &f.pool;
    let [slow, masks] = f.open_findings;

    // findings
    let open = findings::list_open(pool).await.unwrap();
    assert_eq!(
        open.iter().map(|finding| finding.id).collect::<Vec<_>>(),
        [slow, masks],
        "most severe first"
    );
    let first = &open[0];
    let stated = slow_finding(f.bench, json!({"ratio": 0.95}));
    assert!(stated.same_as(first));
    assert_eq!(
        (first.host_name.as_str(), first.severity, first.status.as_str()),
        ("bench-01", Severity::Critical, "open")
    );
    assert_eq!(
        (first.evidence.clone(), first.fact_changes.clone()),
        (stated.evidence, stated.fact_changes)
    );
    assert_eq!((Some(first.first_seen), first.resolved_at), (stated.first_seen, None));
    assert_eq!(first.summary, stated.summary);
    assert!(first.last_seen >= first.first_seen);

    // The overview's first open findings, in the same order, and their count.
    let first_one = findings::list_open_first(pool, 1).await.unwrap();
    assert_eq!(first_one.iter().map(|finding| finding.id).collect::<Vec<_>>(), [slow]);
    assert_eq!(findings::list_open_first(pool, 10).await.unwrap().len(), 2);
    assert_eq!(findings::count_open(pool).await.unwrap(), 2);

    let vm_open = findings::list_open_for_hosts(pool, &[f.vm]).await.unwrap();
    assert_eq!(vm_open.iter().map(|finding| finding.id).collect::<Vec<_>>(), [masks]);
    assert_eq!(vm_open[0].kind, None);
    let no_hosts = findings::list_open_for_hosts(pool, &[]).await.unwrap();
    assert!(no_hosts.is_empty(), "{no_hosts:?}");
    let vm_history = findings::list_for_host(pool, f.vm).await.unwrap();
    let history: Vec<(i64, &str, Severity)> = vm_history
        .iter()
        .map(|finding| (finding.id, finding.status.as_str(), finding.severity))
        .collect();
    assert_eq!(
        history,
        [
            (masks, "open", Severity::Warning),
            (f.resolved_finding, "resolved", Severity::Info)
        ],
        "newest first"
    );
    assert!(vm_history[1].resolved_at.is_some());

    let by = findings::count_open_by(pool).await.unwrap();
    let expected = [
        OpenCount {
            reason: "hypervisor-masks".into(),
            severity: Severity::Warning,
            findings: 1,
            hosts: 1,
        },
        OpenCount {
            reason: "slow-accelerated".into(),
            severity: Severity::Critical,
            findings: 1,
            hosts: 1,
        },
    ];
    assert_eq!(by, expected);
    let hosts_by_reason = findings::hosts_by_reason(pool).await.unwrap();
    assert_eq!(
        hosts_by_reason,
        [("hypervisor-masks".to_string(), 1), ("slow-accelerated".to_string(), 1)]
    );

    // Derived again with new evidence: the same row, refreshed.
    let mut conn = pool.acquire().await.unwrap();
    let refreshed = findings::upsert_open(&mut conn, &slow_finding(f.bench, json!({"ratio": 0.9})))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(refreshed, slow);
    let bench_history = findings::list_for_host(pool, f.bench).await.unwrap();
    assert_eq!(bench_history.len(), 1);
    assert_eq!(bench_history[0].evidence, json!({"ratio": 0.9}));
    assert_eq!(bench_history[0].first_seen, first.first_seen);

    // Several in one statement, as a pass stores a chunk: a refresh, a new
    // finding, and that one again, which ends as the later one says.
    let mut conn = pool.acquire().await.unwrap();
    let vm_slow = slow_finding(f.vm, json!({"ratio": 0.5}));
    let again = NewFinding {
        evidence: json!({"ratio": 0.4}),
        first_seen: None,
        ..vm_slow.clone()
    };
    let batch = [slow_finding(f.bench, json!({"ratio": 0.8})), vm_slow.clone(), again];
    let ids = findings::upsert_open_all(&mut conn, &batch).await.unwrap();
    assert!(findings::upsert_open_all(&mut conn, &[]).await.unwrap().is_empty());
    drop(conn);
    assert_eq!((ids[0], ids[1]), (slow, ids[2]), "{ids:?}");
    assert_ne!(ids[1], slow);
    let vm_new = findings::list_for_host(pool, f.vm).await.unwrap();
    let vm_new = vm_new.iter().find(|x| x.id == ids[1]).expect("opened");
    assert_eq!(
        (&vm_new.evidence, Some(vm_new.first_seen), vm_new.status.as_str()),
        (&json!({"ratio": 0.4}), vm_slow.first_seen, "open")
    );
    let bench_history = findings::list_for_host(pool, f.bench).await.unwrap();
    assert_eq!(bench_history.len(), 1);
    assert_eq!(bench_history[0].evidence, json!({"ratio": 0.8}));
    assert_eq!(findings::resolve(pool, &[ids[1]]).await.unwrap(), 1);

    assert_eq!(findings::resolve(pool, &[slow, f.resolved_finding]).await.unwrap(), 1);
    assert_eq!(findings::resolve(pool, &[slow]).await.unwrap(), 0, "already resolved");
    assert_eq!(findings::resolve(pool, &[]).await.unwrap(), 0);
    let open = findings::list_open(pool).await.unwrap();
    assert_eq!(open.iter().map(|finding| finding.id).collect::<Vec<_>>(), [masks]);

    // series
    let current = series::current_facts(pool).await.unwrap();
    assert_eq!(current.len(), 2);
    let (bench, vm) = (&current[0], &current[1]);
    assert_eq!((bench.host_id(), vm.host_id()), (f.bench, f.vm));
    assert_eq!(
        (bench.snapshot.id, vm.snapshot.id),
        (f.bench_snapshots[1], f.vm_snapshot)
    );
    assert_eq!(bench.labels.0, labels(&[("class", "storage-gen3")]));
    assert_eq!(bench.snapshot.facts, json!({}), "the rules read typed columns only");
    assert_eq!(bench.snapshot.columns, FactColumns::from_facts(&bench_facts(KERNEL)));
    assert_eq!(vm.snapshot.columns, FactColumns::from_facts(&vm_facts()));

    let bench_snapshot = f.bench_snapshots[1];
    let observed = series::latest_points(pool, &[f.bench, f.vm], None, None, 5)
        .await
        .unwrap();
    let expected = [
        f.bench_accelerated.observation(bench_snapshot),
        f.bench_software.observation(bench_snapshot),
        f.bench_chacha.observation(bench_snapshot),
        f.vm_fell_back.observation(f.vm_snapshot),
    ];
    assert_eq!(observed, expected);
    let accelerated = series::latest_points(pool, &[f.bench, f.vm], None, Some(Path::Accelerated), 5)
        .await
        .unwrap();
    let want: Vec<_> = expected
        .iter()
        .filter(|o| o.point.path == Path::Accelerated)
        .cloned()
        .collect();
    assert_eq!(accelerated, want, "only the accelerated path's series");
    assert!(want.len() < expected.len());
    // Every snapshot of the hosts, by host, oldest first; typed columns only.
    let histories = series::snapshot_histories(pool, &[f.vm, f.bench]).await.unwrap();
    let ids: Vec<(i64, i64)> = histories.iter().map(|s| (s.host_id, s.id)).collect();
    let mut want: Vec<(i64, i64)> = f.bench_snapshots.iter().map(|id| (f.bench, *id)).collect();
    want.push((f.vm, f.vm_snapshot));
    want.sort();
    assert_eq!(ids, want);
    let one_by_one = snapshots::history(pool, f.bench).await.unwrap();
    let bench_history: Vec<_> = histories.iter().filter(|s| s.host_id == f.bench).collect();
    for (got, full) in bench_history.iter().zip(&one_by_one) {
        assert_eq!((got.taken_at, &got.columns), (full.taken_at, &full.columns));
        assert_eq!(got.facts, json!({}));
    }
    assert!(series::snapshot_histories(pool, &[]).await.unwrap().is_empty());
    let only_chacha = BTreeSet::from([chacha().name().to_string()]);
    let observed = series::latest_points(pool, &[f.bench, f.vm], Some(&only_chacha), None, 1)
        .await
        .unwrap();
    assert_eq!(observed, [f.bench_chacha.observation(bench_snapshot)]);
    let no_algorithms = series::latest_points(pool, &[f.bench], Some(&BTreeSet::new()), None, 5)
        .await
        .unwrap();
    assert!(no_algorithms.is_empty(), "{no_algorithms:?}");
    let no_hosts = series::latest_points(pool, &[], None, None, 5).await.unwrap();
    assert!(no_hosts.is_empty(), "{no_hosts:?}");

    // What ran last at each accelerated point, with the worker's backends.
    let ran = series::latest_accelerated(pool, &[f.bench, f.vm]).await.unwrap();
    let asked_accelerated: Vec<(i64, i64)> = [
        &f.bench_accelerated,
        &f.bench_software,
        &f.bench_chacha,
        &f.vm_fell_back,
    ]
    .into_iter()
    .filter(|s| s.point.path == cipherfleet_core::path::Path::Accelerated)
    .map(|s| (s.host_id, s.result))
    .collect();
    assert_eq!(
        ran.iter().map(|r| (r.result.host_id, r.result_id)).collect::<Vec<_>>(),
        asked_accelerated
    );
    let fell_back = ran.iter().find(|r| r.result_id == f.vm_fell_back.result).unwrap();
    assert_eq!(fell_back.result, f.vm_fell_back.observation(f.vm_snapshot));
    assert_eq!(
        fell_back.backends.as_ref().map(|b| &b.0),
        f.vm_fell_back.measurement.backends.as_ref()
    );
    assert!(series::latest_accelerated(pool, &[]).await.unwrap().is_empty());
}
