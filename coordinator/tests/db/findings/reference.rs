//! Passes as they run now against the reference ways they once ran (one
//! finding at a time, every series read twice, peers read whole): the same
//! findings and webhook events either way.

use super::*;

/// Stores one aes-256-gcm 16 KiB accelerated-path result on `host_id` that
/// ran as `used`.
async fn ran_as(pool: &PgPool, host_id: i64, used: PathUsed, mb_s: f64) {
    let new_job = crate::helpers::job_on(host_id, 16384, Path::Accelerated);
    campaign(pool, std::slice::from_ref(&new_job)).await;
    let job = jobs::claim_next_for_host(pool, host_id)
        .await
        .unwrap()
        .expect("a queued job");
    record(pool, job.id, host_id, &measurement(&new_job.spec, used, mb_s))
        .await
        .unwrap();
}

/// Every finding as stored, by identity and first-seen, without the times a
/// pass stamps itself (last-seen, resolved-at: `now()`); and every outbox
/// event, by its finding's identity.
async fn stored_state(pool: &PgPool) -> (Vec<Value>, Vec<(Value, String)>) {
    let host_ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM hosts ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap();
    let mut all: Vec<Finding> = Vec::new();
    for host in host_ids {
        all.extend(findings::list_for_host(pool, host).await.unwrap());
    }
    let identity = |f: &Finding| json!([f.host_name, f.reason, f.kind, f.subject, f.first_seen]);
    let mut rows: Vec<Value> = all
        .iter()
        .map(|f| {
            json!({
                "identity": identity(f),
                "severity": f.severity,
                "status": f.status,
                "resolved": f.resolved_at.is_some(),
                "evidence": f.evidence,
                "fact_changes": f.fact_changes,
                "summary": f.summary,
            })
        })
        .collect();
    rows.sort_by_key(|r| r["identity"].to_string());
    let by_id: BTreeMap<i64, Value> = all.iter().map(|f| (f.id, identity(f))).collect();
    let mut events: Vec<(Value, String)> = outbox::list(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (by_id[&e.finding_id].clone(), e.event))
        .collect();
    events.sort_by_key(|(f, e)| (f.to_string(), e.clone()));
    (rows, events)
}

/// Runs `work` on `pool`'s database as `reference` says and on a copy of it
/// as every pass does, and checks both end the same; returns the database
/// the reference pass ran on, and what it did.
async fn both_ways(pool: PgPool, work: &Work, reference: Method) -> (PgPool, Outcome) {
    let (old_way, new_way) = twin_dbs(pool).await;
    // Two hosts a chunk: a chunk's statement holds several hosts' findings.
    let want = derive_with(&old_way, work, 2, reference, &mut PeerCache::default())
        .await
        .unwrap();
    let outcome = derive_with(&new_way, work, 2, Method::default(), &mut PeerCache::default())
        .await
        .unwrap();
    assert_eq!(outcome, want, "{work:?}: what the passes did");
    let (want_state, got) = (stored_state(&old_way).await, stored_state(&new_way).await);
    assert_eq!(got.0, want_state.0, "{work:?}: the findings");
    assert_eq!(got.1, want_state.1, "{work:?}: the webhook events");
    new_way.close().await;
    (old_way, want)
}

/// Stored one finding and statement at a time, as passes once did.
const ONE_BY_ONE: Method = Method {
    reads: Reads::Once,
    writes: Writes::OneByOne,
};

#[tokio::test]
async fn a_batched_pass_opens_refreshes_and_resolves_what_a_pass_one_finding_at_a_time_did() {
    let pool = fresh_db().await;
    let full = facts_with("6.1.0", FULL, FULL, "accelerated");
    // Five same-class peers, one of them slow; an accelerated path at software speed.
    let mut peers = Vec::new();
    for (i, mb_s) in [2000.0, 2100.0, 1900.0, 2050.0, 600.0].into_iter().enumerate() {
        let host = hello(&pool, &format!("peer-{i}"), &full).await;
        results_for(&pool, host, Path::Accelerated, &[mb_s, mb_s * 1.02, mb_s * 0.98]).await;
        peers.push(host);
    }
    let near = hello(&pool, "near-software", &full).await;
    results_for(&pool, near, Path::Accelerated, &[95.0, 90.0, 99.0]).await;
    results_for(&pool, near, Path::Software, &[80.0, 82.0, 79.0]).await;
    // Each fact reason, and a worker in software the facts cannot explain.
    let mut masked = facts_with(
        "6.1.0",
        &["avx", "avx2", "pclmulqdq"],
        &["avx", "avx2", "pclmulqdq"],
        "accelerated",
    );
    masked["virtualization"]["hypervisor"] = json!(true);
    let vm = hello(&pool, "vm-masked", &masked).await;
    let mut bare = facts_with("6.1.0", &["avx", "pclmulqdq"], &["avx", "pclmulqdq"], "accelerated");
    bare["virtualization"]["hypervisor"] = json!(false);
    hello(&pool, "bare-no-aes", &bare).await;
    hello(&pool, "soft-agent", &facts_with("6.1.0", FULL, FULL, "software")).await;
    let old = hello(
        &pool,
        "old-kernel",
        &facts_with("3.10.0", FULL, &["aes", "pclmulqdq"], "accelerated"),
    )
    .await;
    let emulated = hello(&pool, "in-software", &full).await;
    ran_as(&pool, emulated, PathUsed::Software, 300.0).await;

    // Everything opens.
    let (pool, first) = both_ways(pool, &Work::Fleet, ONE_BY_ONE).await;
    assert!(first.opened >= 7 && first.resolved == 0, "{first:?}");

    // Some resolve, one opens, the rest hold.
    hello(&pool, "vm-masked", &{
        let mut fixed = facts_with("6.1.0", FULL, FULL, "accelerated");
        fixed["virtualization"]["hypervisor"] = json!(true);
        fixed
    })
    .await;
    hello(&pool, "old-kernel", &full).await;
    ran_as(&pool, emulated, PathUsed::Accelerated, 2000.0).await;
    hello(&pool, "peer-0", &facts_with("6.1.0", FULL, FULL, "software")).await;
    let (pool, second) = both_ways(pool, &Work::Fleet, ONE_BY_ONE).await;
    assert!(
        second.opened >= 1 && second.refreshed >= 4 && second.resolved >= 3,
        "{second:?}"
    );

    // The per-result pass: some hosts, one algorithm; and the facts pass.
    results_for(&pool, near, Path::Accelerated, &[2000.0, 2100.0, 1950.0]).await;
    let some = Work::Hosts(
        [near, peers[4], vm, old]
            .into_iter()
            .map(|h| (h, Some(BTreeSet::from(["aes-256-gcm".to_string()]))))
            .collect(),
    );
    let (pool, third) = both_ways(pool, &some, ONE_BY_ONE).await;
    assert!(third.resolved >= 1 && third.refreshed >= 1, "{third:?}");
    let (_, facts_only) = both_ways(pool, &Work::Facts, ONE_BY_ONE).await;
    assert!(facts_only.refreshed >= 3, "{facts_only:?}");
}

/// Read twice, as fleet passes once did: the class's accelerated series, then every host's again.
const READ_TWICE: Method = Method {
    reads: Reads::Twice,
    writes: Writes::Batched,
};

/// One result per throughput of `host_id` at aes-256-gcm, 16 KiB, whose
/// accelerated request ran `used`.
async fn results_ran(pool: &PgPool, host_id: i64, used: PathUsed, throughputs: &[f64]) {
    for mb_s in throughputs {
        ran_as(pool, host_id, used, *mb_s).await;
    }
}

#[tokio::test]
async fn a_fleet_pass_reading_each_series_once_finds_what_reading_them_twice_did() {
    let pool = fresh_db().await;
    let full = facts_with("6.1.0", FULL, FULL, "accelerated");
    // A class of healthy peers, and in it each way a series is slow.
    for (i, mb_s) in [2000.0, 2100.0, 1900.0, 2050.0, 1950.0].into_iter().enumerate() {
        let host = hello(&pool, &format!("peer-{i}"), &full).await;
        results_for(&pool, host, Path::Accelerated, &[mb_s, mb_s * 1.02, mb_s * 0.98]).await;
        results_for(&pool, host, Path::Software, &[80.0, 81.0, 79.0]).await;
    }
    // Below its peers by its median; by its latest result alone, with too
    // few results for a median; and with a history that dropped.
    let below = hello(&pool, "below-peers", &full).await;
    results_for(&pool, below, Path::Accelerated, &[600.0, 610.0, 590.0]).await;
    let short = hello(&pool, "one-big-drop", &full).await;
    results_for(&pool, short, Path::Accelerated, &[2000.0, 300.0]).await;
    let dropped = hello(&pool, "dropped", &full).await;
    results_for(
        &pool,
        dropped,
        Path::Accelerated,
        &[2000.0, 2050.0, 1980.0, 2010.0, 650.0],
    )
    .await;
    // At software speed on its own host, once as a class member and once
    // with no CPU model (no class: never read in the first read).
    let near = hello(&pool, "near-software", &full).await;
    results_for(&pool, near, Path::Accelerated, &[95.0, 90.0, 99.0]).await;
    results_for(&pool, near, Path::Software, &[80.0, 82.0, 79.0]).await;
    let mut unknown = full.clone();
    unknown["cpu"]["model_name"] = Value::Null;
    let classless = hello(&pool, "no-cpu-model", &unknown).await;
    results_for(&pool, classless, Path::Accelerated, &[95.0, 90.0, 99.0]).await;
    results_for(&pool, classless, Path::Software, &[80.0, 82.0, 79.0]).await;
    // Partial peers, one of them below the others; a host that fell back.
    for (i, mb_s) in [900.0, 950.0, 920.0, 300.0].into_iter().enumerate() {
        let host = hello(&pool, &format!("partial-{i}"), &full).await;
        results_ran(&pool, host, PathUsed::Partial, &[mb_s, mb_s, mb_s]).await;
    }
    let fell_back = hello(&pool, "fell-back", &full).await;
    results_ran(&pool, fell_back, PathUsed::Software, &[80.0, 80.0, 80.0]).await;

    let (pool, first) = both_ways(pool, &Work::Fleet, READ_TWICE).await;
    let open = findings::list_open(&pool).await.unwrap();
    let slow: BTreeSet<i64> = open
        .iter()
        .filter(|f| f.reason == "slow-accelerated")
        .map(|f| f.host_id)
        .collect();
    for host in [below, short, dropped, near, classless] {
        assert!(slow.contains(&host), "host {host}: {:?}", reasons(&open));
    }
    assert!(first.opened >= 6, "{first:?}");

    // Some recover, one slows down: resolved and opened the same way.
    results_for(&pool, below, Path::Accelerated, &[2000.0, 2010.0, 1990.0]).await;
    results_for(&pool, near, Path::Accelerated, &[2000.0, 2010.0, 1990.0]).await;
    let peer = hosts::find_by_name(&pool, "peer-1").await.unwrap().unwrap().id;
    results_for(&pool, peer, Path::Accelerated, &[500.0, 510.0, 490.0]).await;
    let (_, second) = both_ways(pool, &Work::Fleet, READ_TWICE).await;
    assert!(second.resolved >= 2 && second.opened >= 1, "{second:?}");
}

/// The per-result pass of `hosts` (aes-256-gcm), with the peer medians `peers` kept.
async fn pass_over(pool: &PgPool, hosts: &[i64], peers: &mut PeerCache) -> Outcome {
    let work = Work::Hosts(
        hosts
            .iter()
            .map(|h| (*h, Some(BTreeSet::from(["aes-256-gcm".to_string()]))))
            .collect(),
    );
    derive_with_peers(pool, &work, peers).await.unwrap()
}

#[tokio::test]
async fn a_pass_over_one_host_with_kept_peer_medians_reads_that_hosts_series_only() {
    let pool = fresh_db().await;
    let full = facts_with("6.1.0", FULL, FULL, "accelerated");
    let mut hosts = Vec::new();
    for (i, mb_s) in [2000.0, 2100.0, 1900.0, 2050.0, 2000.0].into_iter().enumerate() {
        let host = hello(&pool, &format!("peer-{i}"), &full).await;
        results_for(&pool, host, Path::Accelerated, &[mb_s, mb_s * 1.02, mb_s * 0.98]).await;
        hosts.push(host);
    }
    let (peers, watched) = (&hosts[..4], hosts[4]);
    let mut kept = PeerCache::default();
    let first = derive_with_peers(&pool, &Work::Fleet, &mut kept).await.unwrap();
    assert_eq!(first.opened, 0, "a healthy class");

    // The whole class slows down, but only the watched host's results are derived.
    for host in hosts.iter().copied() {
        results_for(&pool, host, Path::Accelerated, &[600.0, 610.0, 590.0, 600.0]).await;
    }
    let o = pass_over(&pool, &[watched], &mut kept).await;
    let open = findings::list_open(&pool).await.unwrap();
    assert_eq!(
        (o.opened, open.iter().map(|f| f.host_id).collect::<Vec<_>>()),
        (1, vec![watched]),
        "judged against the medians kept, its peers' new results unread"
    );
    // Read afresh, the peers are as slow: nothing below them.
    let fresh = pass_over(&pool, &[watched], &mut PeerCache::default()).await;
    assert_eq!((fresh.opened, fresh.resolved), (0, 1));

    // As the coordinator runs: the peers' own passes bring their medians up to date.
    let again = derive_with_peers(&pool, &Work::Fleet, &mut kept).await.unwrap();
    assert_eq!(again.opened, 0);
    results_for(&pool, watched, Path::Accelerated, &[200.0, 210.0, 190.0, 200.0, 205.0]).await;
    for host in peers.iter().copied() {
        results_for(&pool, host, Path::Accelerated, &[2000.0; 6]).await;
        pass_over(&pool, &[host], &mut kept).await;
    }
    // The same pass on a copy of the database, every median read afresh.
    let (pool, copy) = crate::helpers::twin_dbs(pool).await;
    let with_kept = pass_over(&pool, &[watched], &mut kept).await;
    let read_afresh = pass_over(&copy, &[watched], &mut PeerCache::default()).await;
    assert_eq!(with_kept, read_afresh);
    assert_eq!(stored_state(&pool).await, stored_state(&copy).await);
    assert_eq!(with_kept.opened, 1, "{with_kept:?}");
}

/// Every `result_points` row against the result it names: the snapshot and
/// the worker's backends copied from it (migration 0025). Returns the rows
/// compared and how many carry backends.
async fn points_match_their_results(pool: &PgPool) -> (i64, i64) {
    let (rows, with_backends, differing): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(p.backends), \
             count(*) FILTER (WHERE p.snapshot_id IS DISTINCT FROM r.snapshot_id \
                 OR p.backends IS DISTINCT FROM NULLIF(r.measurement->'backends', 'null'::jsonb)) \
         FROM result_points p JOIN results r ON r.id = p.result_id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        differing, 0,
        "result_points rows whose snapshot or backends differ from their result's"
    );
    (rows, with_backends)
}

#[tokio::test]
async fn result_points_keep_the_snapshot_and_backends_of_their_latest_result() {
    let pool = fresh_db().await;
    let full = facts_with("6.1.0", FULL, FULL, "accelerated");
    let host = hello(&pool, "bench-01", &full).await;
    let other = hello(&pool, "bench-02", &full).await;
    // One result at a time, on the first snapshot.
    results_for(&pool, host, Path::Accelerated, &[2000.0]).await;
    results_for(&pool, other, Path::Software, &[80.0]).await;
    assert_eq!(points_match_their_results(&pool).await, (2, 2));

    // New facts, then a newer result of the same point: its snapshot replaces the old one.
    hello(&pool, "bench-01", &facts_with("6.2.0", FULL, FULL, "accelerated")).await;
    results_for(&pool, host, Path::Accelerated, &[1900.0]).await;
    let snapshots: Vec<Option<i64>> = sqlx::query_scalar("SELECT snapshot_id FROM result_points WHERE host_id = $1")
        .bind(host)
        .fetch_all(&pool)
        .await
        .unwrap();
    let current: Option<i64> = sqlx::query_scalar("SELECT current_snapshot_id FROM hosts WHERE id = $1")
        .bind(host)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(snapshots, [current], "the newest result's snapshot");
    assert_eq!(points_match_their_results(&pool).await, (2, 2));

    // A result whose measurement names no backends (an older agent's).
    let new_job = crate::helpers::job_on(other, 1024, Path::Accelerated);
    campaign(&pool, std::slice::from_ref(&new_job)).await;
    let job = jobs::claim_next_for_host(&pool, other)
        .await
        .unwrap()
        .expect("a queued job");
    let mut m = measurement(&new_job.spec, PathUsed::Software, 70.0);
    m.backends = None;
    record(&pool, job.id, other, &m).await.unwrap();
    assert_eq!(points_match_their_results(&pool).await, (3, 2));

    // A batch of results of two hosts, as ingest stores them.
    results_in_one_batch(&pool, &[host, other], 1800.0).await;
    assert_eq!(points_match_their_results(&pool).await, (4, 3));

    // The rebuild after a bulk load copies the same, and a deleted result takes its row along.
    points::refresh(&pool).await.unwrap();
    assert_eq!(points_match_their_results(&pool).await, (4, 3));
    sqlx::query("DELETE FROM results WHERE id = (SELECT max(result_id) FROM result_points WHERE host_id = $1)")
        .bind(other)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(points_match_their_results(&pool).await, (3, 2));
}

/// One aes-256-gcm 16 KiB accelerated-path result on each of `hosts` at
/// `mb_s`, stored in one batch as the ingest batcher does.
async fn results_in_one_batch(pool: &PgPool, hosts: &[i64], mb_s: f64) {
    let new_jobs: Vec<NewJob> = hosts
        .iter()
        .map(|h| crate::helpers::job_on(*h, 16384, Path::Accelerated))
        .collect();
    campaign(pool, &new_jobs).await;
    let mut batch = Vec::new();
    for host in hosts {
        let job = jobs::claim_next_for_host(pool, *host)
            .await
            .unwrap()
            .expect("a queued job");
        batch.push(crate::helpers::result_of(&job, mb_s));
    }
    let outcomes = results::record_batch(pool, &[], &batch).await.unwrap();
    assert!(
        outcomes.iter().all(|o| matches!(o, Ok(RecordOutcome::Inserted))),
        "{outcomes:?}"
    );
}
