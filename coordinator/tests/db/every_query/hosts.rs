//! hosts, snapshots, sessions.

use cipherfleet_coordinator::analysis::acceleration::Acceleration;
use cipherfleet_coordinator::domain::facts::FactColumns;
use cipherfleet_coordinator::domain::facts::NormalisedFacts;
use cipherfleet_coordinator::store::hosts::HostUpsert;
use cipherfleet_coordinator::store::{hosts, sessions, snapshots};
use serde_json::json;

use super::fixture::*;

#[tokio::test]
async fn hosts_their_snapshots_and_sessions_read_back_as_stored() {
    let f = populate().await;
    let pool = &f.pool;

    // hosts
    let bench = hosts::get(pool, f.bench).await.unwrap().expect("bench-01");
    assert_eq!(bench.name, "bench-01");
    assert_eq!(bench.labels.0, labels(&[("class", "storage-gen3")]));
    assert_eq!(bench.current_snapshot_id, Some(f.bench_snapshots[1]));
    assert_eq!(hosts::get(pool, i64::MAX).await.unwrap(), None);
    let vm = hosts::find_by_name(pool, "vm-01").await.unwrap().expect("vm-01");
    assert_eq!((vm.id, vm.labels.0.clone()), (f.vm, labels(&[("emulated", "yes")])));
    assert_eq!(hosts::find_by_name(pool, "nobody").await.unwrap(), None);
    assert_eq!(hosts::list(pool).await.unwrap(), [bench.clone(), vm.clone()]);

    sqlx::query("UPDATE hosts SET last_seen = last_seen - interval '1 hour' WHERE id = $1")
        .bind(f.bench)
        .execute(pool)
        .await
        .unwrap();
    let before = hosts::get(pool, f.bench).await.unwrap().unwrap().last_seen;
    hosts::touch_all(pool, &[f.bench]).await.unwrap();
    let bench = hosts::get(pool, f.bench).await.unwrap().unwrap();
    assert!(bench.last_seen > before, "touch left last_seen at {before}");

    let with_facts = hosts::list_with_facts(pool).await.unwrap();
    assert_eq!(with_facts.len(), 2);
    let (b, v) = (&with_facts[0], &with_facts[1]);
    assert_eq!((&b.host, &v.host), (&bench, &vm));
    assert_eq!(b.arch.as_deref(), Some("x86_64"));
    assert_eq!(b.cpu_model_name.as_deref(), Some("Intel(R) Xeon(R) Gold 6230"));
    assert_eq!(b.kernel_release.as_deref(), Some(KERNEL));
    assert_eq!(b.logical_cores, Some(8));
    assert_eq!(b.features_usable, Some(strings(&["aes", "avx", "pclmulqdq"])));
    assert_eq!(b.build_flavour.as_deref(), Some("accelerated"));
    assert_eq!(b.acceleration(), Acceleration::Accelerated);
    assert_eq!(v.arch.as_deref(), Some("aarch64"));
    assert_eq!(v.features_usable, Some(vec![]));
    assert_eq!(v.acceleration(), Acceleration::Software);

    // The same facts again (load average aside): no new snapshot.
    let mut same = bench_facts(KERNEL);
    same["noise"]["load_average"] = json!([3.0, 2.0, 1.0]);
    let again = hosts::upsert_host_with_facts(pool, "bench-01", None, &same)
        .await
        .unwrap();
    let unchanged = HostUpsert {
        host_id: f.bench,
        snapshot_id: f.bench_snapshots[1],
        facts_changed: false,
        new_host: false,
    };
    assert_eq!(again, unchanged);

    // snapshots
    let history = snapshots::history(pool, f.bench).await.unwrap();
    let ids: Vec<i64> = history.iter().map(|s| s.id).collect();
    assert_eq!(ids, f.bench_snapshots, "oldest first");
    for (snapshot, kernel) in history.iter().zip([OLD_KERNEL, KERNEL]) {
        assert_eq!(snapshot.host_id, f.bench);
        assert_eq!(snapshot.facts, NormalisedFacts::new(&bench_facts(kernel)).facts);
        assert_eq!(snapshot.columns, FactColumns::from_facts(&bench_facts(kernel)));
    }
    assert!(history[0].taken_at <= history[1].taken_at);
    let hash = NormalisedFacts::new(&bench_facts(KERNEL)).hash;
    assert_eq!(
        snapshots::hash_of(pool, f.bench_snapshots[1]).await.unwrap(),
        Some(hash.to_vec())
    );
    assert_eq!(snapshots::hash_of(pool, i64::MAX).await.unwrap(), None);
    let current = snapshots::current(pool, f.bench)
        .await
        .unwrap()
        .expect("a current snapshot");
    assert_eq!(current.snapshot_id, f.bench_snapshots[1]);
    assert_eq!(
        Some(&serde_json::Value::Object(current.facts)),
        history.last().map(|s| &s.facts)
    );
    assert_eq!(snapshots::current(pool, i64::MAX).await.unwrap(), None);
    let vm_history = snapshots::history(pool, f.vm).await.unwrap();
    assert_eq!(vm_history.len(), 1);
    assert_eq!(vm_history[0].id, f.vm_snapshot);
    assert_eq!(vm_history[0].columns, FactColumns::from_facts(&vm_facts()));

    let (count, latest) = snapshots::stored(pool).await.unwrap();
    let newer = NormalisedFacts::new(&bench_facts("6.6.0-1-amd64"));
    let mut conn = pool.acquire().await.unwrap();
    let inserted = snapshots::insert(&mut conn, f.bench, &newer).await.unwrap();
    drop(conn);
    assert!(latest < inserted);
    assert_eq!(snapshots::stored(pool).await.unwrap(), (count + 1, inserted));
    assert_eq!(
        snapshots::hash_of(pool, inserted).await.unwrap(),
        Some(newer.hash.to_vec())
    );
    let history = snapshots::history(pool, f.bench).await.unwrap();
    assert_eq!(
        history.last().map(|s| (s.id, s.facts.clone())),
        Some((inserted, newer.facts))
    );

    // sessions
    let bench_sessions = sessions::for_host(pool, f.bench, 10).await.unwrap();
    assert_eq!(bench_sessions.len(), 1);
    let s = &bench_sessions[0];
    assert_eq!(
        (s.id, s.host_id, s.snapshot_id),
        (f.bench_session, f.bench, Some(f.bench_snapshots[1]))
    );
    assert_eq!(s.peer_address.as_deref(), Some(BENCH_PEER));
    assert_eq!(s.agent_version.as_deref(), Some("0.1.0"));
    assert_eq!(s.disconnected_at, None);
    let vm_sessions = sessions::for_host(pool, f.vm, 10).await.unwrap();
    assert_eq!(vm_sessions.len(), 1);
    let closed_at = vm_sessions[0].disconnected_at.expect("vm's session is closed");
    assert_eq!(
        (vm_sessions[0].id, vm_sessions[0].peer_address.as_deref()),
        (f.vm_session, None)
    );
    sessions::close(pool, f.vm_session).await.unwrap();
    let vm_sessions = sessions::for_host(pool, f.vm, 10).await.unwrap();
    assert_eq!(
        vm_sessions[0].disconnected_at,
        Some(closed_at),
        "closing twice keeps the first time"
    );

    let reconnect = sessions::open(pool, f.bench, None, None, None).await.unwrap();
    let newest = sessions::for_host(pool, f.bench, 1).await.unwrap();
    assert_eq!(newest.iter().map(|s| s.id).collect::<Vec<_>>(), [reconnect]);
    assert!(newest[0].disconnected_at.is_none());
    // Opening it closed the host's earlier session; no lease keeps the new one.
    assert_eq!(sessions::close_orphaned(pool).await.unwrap(), 1);
    assert_eq!(sessions::close_orphaned(pool).await.unwrap(), 0);
    let bench_sessions = sessions::for_host(pool, f.bench, 10).await.unwrap();
    assert!(
        bench_sessions.iter().all(|s| s.disconnected_at.is_some()),
        "{bench_sessions:?}"
    );
}

/// A listed host: name, status, emulated, simulated, online, arch.
type Listed<'a> = (&'a str, Acceleration, bool, bool, bool, Option<&'a str>);
/// A configuration: arch, status, hosts, online, emulated, member ids.
type Counted<'a> = (Option<&'a str>, Acceleration, usize, usize, usize, Vec<i64>);

#[tokio::test]
async fn host_summaries_select_count_group_and_page_the_judged_hosts() {
    use std::collections::HashSet;

    use cipherfleet_coordinator::report::host_summaries::{self, Selection};

    let f = populate().await;
    let pool = &f.pool;
    // Nothing read them yet: both hosts are judged once, then none again.
    assert_eq!(host_summaries::refresh(pool).await.unwrap(), 2);
    assert_eq!(host_summaries::refresh(pool).await.unwrap(), 0);

    let online: HashSet<i64> = [f.bench].into();
    let all = host_summaries::list(pool, &online, &Selection::default(), None)
        .await
        .unwrap();
    let seen: Vec<Listed> = all
        .iter()
        .map(|h| {
            let facts = h.arch.as_deref();
            (
                h.host.name.as_str(),
                h.acceleration,
                h.emulated,
                h.simulated,
                h.online,
                facts,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "bench-01",
                Acceleration::Accelerated,
                false,
                false,
                true,
                Some("x86_64")
            ),
            ("vm-01", Acceleration::Software, true, false, false, Some("aarch64")),
        ]
    );
    let names = async |selection: Selection<'_>, page: Option<(u64, u64)>| {
        let listed = host_summaries::list(pool, &online, &selection, page).await.unwrap();
        let n = host_summaries::count(pool, &online, &selection).await.unwrap();
        (n, listed.into_iter().map(|h| h.host.name).collect::<Vec<_>>())
    };
    // (selection, page, (count, names listed))
    type Case<'a> = (Selection<'a>, Option<(u64, u64)>, (u64, &'a [&'a str]));
    let cases: [Case; 6] = [
        (
            Selection {
                label: Some(("emulated", None)),
                ..Selection::default()
            },
            None,
            (1, &["vm-01"]),
        ),
        (
            Selection {
                label: Some(("class", Some("storage-gen3"))),
                arch: Some("x86_64"),
                ..Selection::default()
            },
            None,
            (1, &["bench-01"]),
        ),
        (
            Selection {
                label: Some(("class", Some("gen2"))),
                ..Selection::default()
            },
            None,
            (0, &[]),
        ),
        (
            Selection {
                online: Some(false),
                acceleration: Some(Acceleration::Software),
                ..Selection::default()
            },
            None,
            (1, &["vm-01"]),
        ),
        (
            Selection {
                cpu: Some("Intel(R) Xeon(R) Gold 6230"),
                kernel: Some(KERNEL),
                ..Selection::default()
            },
            None,
            (1, &["bench-01"]),
        ),
        // The second page of one row each.
        (Selection::default(), Some((1, 1)), (2, &["vm-01"])),
    ];
    for (selection, page, (n, want)) in cases {
        assert_eq!(
            names(selection, page).await,
            (n, want.iter().map(|s| s.to_string()).collect()),
            "{selection:?}"
        );
    }

    let groups = host_summaries::configurations(pool, &online, 6).await.unwrap();
    let counted: Vec<Counted> = groups
        .iter()
        .map(|g| {
            let ids = g.members.iter().map(|(id, _)| *id).collect();
            (g.arch.as_deref(), g.acceleration, g.hosts, g.online, g.emulated, ids)
        })
        .collect();
    assert_eq!(
        counted,
        [
            (Some("aarch64"), Acceleration::Software, 1, 0, 1, vec![f.vm]),
            (Some("x86_64"), Acceleration::Accelerated, 1, 1, 0, vec![f.bench]),
        ]
    );
    assert_eq!(
        host_summaries::fleet(pool).await.unwrap(),
        (2, strings(&["aarch64", "x86_64"]))
    );
    let (hosts, mut by) = host_summaries::by_acceleration(pool).await.unwrap();
    by.sort();
    assert_eq!(
        (hosts, by),
        (2, vec![(Acceleration::Accelerated, 1), (Acceleration::Software, 1)])
    );

    let before = host_summaries::generation(pool).await.unwrap();
    assert_eq!(host_summaries::generation(pool).await.unwrap(), before);
    hosts::upsert_host_with_facts(pool, "vm-01", Some(&labels(&[])), &bench_facts(KERNEL))
        .await
        .unwrap();
    assert_ne!(
        host_summaries::generation(pool).await.unwrap(),
        before,
        "a label and facts changed"
    );

    let of = hosts::with_facts_of(pool, &[f.vm, i64::MAX]).await.unwrap();
    assert_eq!(of.iter().map(|h| h.host.id).collect::<Vec<_>>(), [f.vm]);
}
