//! `host_summaries` (migrations/0023): after every kind of change to a
//! host's inputs, the stored verdicts, the configurations and the class
//! groups equal what a plain computation over `hosts::list_with_facts` gives;
//! and without a trigger, the same check fails.

use std::collections::{BTreeMap, HashSet};

use cipherfleet_coordinator::analysis::acceleration::Acceleration;
use cipherfleet_coordinator::analysis::unexplained;
use cipherfleet_coordinator::domain::labels::Labels;
use cipherfleet_coordinator::report::host_summaries::{self, Selection};
use cipherfleet_coordinator::report::matrix;
use cipherfleet_coordinator::store::hosts;
use sqlx::PgPool;

use crate::helpers::{fresh_db, hello, with_features};

/// (acceleration, emulated, simulated) per host name.
type Verdicts = BTreeMap<String, (Acceleration, bool, bool)>;

/// What the stored summaries say, read as the pages read them.
async fn stored(pool: &PgPool) -> Verdicts {
    host_summaries::list(pool, &HashSet::new(), &Selection::default(), None)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.host.name, (h.acceleration, h.emulated, h.simulated)))
        .collect()
}

/// The same, judged now from every host's facts and findings.
async fn plain(pool: &PgPool) -> Verdicts {
    hosts::list_with_facts(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|h| {
            let v = (h.acceleration(), h.emulated(), h.simulated());
            (h.host.name, v)
        })
        .collect()
}

/// (arch, kernel, status) → hosts, from the configurations and from the plain verdicts.
async fn configurations_agree(pool: &PgPool) -> bool {
    let stored: BTreeMap<_, usize> = host_summaries::configurations(pool, &HashSet::new(), 6)
        .await
        .unwrap()
        .into_iter()
        .map(|g| ((g.arch, g.kernel, g.acceleration), g.hosts))
        .collect();
    let mut plain: BTreeMap<_, usize> = BTreeMap::new();
    for h in hosts::list_with_facts(pool).await.unwrap() {
        *plain
            .entry((h.arch.clone(), h.kernel_release.clone(), h.acceleration()))
            .or_default() += 1;
    }
    stored == plain
}

/// A class group's hosts, emulated label and usable features.
type Group = (Vec<i64>, Option<String>, Option<Vec<String>>);

/// The class groups (cached between calls) equal a fresh grouping of the hosts.
async fn class_groups_agree(pool: &PgPool) -> bool {
    let cached: Vec<Group> = matrix::class_groups(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.host_ids, g.emulated_label, g.features_usable))
        .collect();
    let fresh: Vec<Group> = sqlx::query_as(
        "SELECT array_agg(h.id ORDER BY h.id), h.labels ->> 'emulated', s.features_usable \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         GROUP BY h.labels ->> 'emulated', h.labels ->> 'simulated', s.arch, s.cpu_vendor, s.cpu_model_name, \
             s.features_usable, s.build_flavour, s.hypervisor, s.cpuinfo_foreign ORDER BY min(h.id)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    cached == fresh
}

/// Whether everything stored agrees with the plain computation.
async fn agrees(pool: &PgPool) -> bool {
    stored(pool).await == plain(pool).await && configurations_agree(pool).await && class_groups_agree(pool).await
}

const FULL: &[&str] = &["aes", "pclmulqdq", "avx", "avx2"];

/// Opens an unexplained-fallback finding of GHASH on `host`.
async fn open_fallback(pool: &PgPool, host: i64) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO findings (host_id, reason, subject, severity, summary) \
         VALUES ($1, $2, 'ghash', 'warning', 'GHASH ran in software') RETURNING id",
    )
    .bind(host)
    .bind(unexplained::REASON)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Every kind of change, each followed by `check` (which gets what changed).
async fn changes(pool: &PgPool, mut check: impl AsyncFnMut(&PgPool, &str)) {
    let a = hello(pool, "a", None, &with_features(FULL)).await;
    hello(pool, "b", None, &with_features(&["aes"])).await;
    check(pool, "hosts said hello").await;
    hello(pool, "a", None, &with_features(&["aes", "pclmulqdq"])).await;
    check(pool, "a's facts changed (the AVX state lost)").await;
    let emulated: Labels = [("emulated".to_string(), "qemu".to_string())].into();
    hello(pool, "b", Some(&emulated), &with_features(&["aes"])).await;
    check(pool, "b's labels changed").await;
    hello(pool, "a", None, &with_features(FULL)).await;
    let finding = open_fallback(pool, a).await;
    check(pool, "a finding opened on a").await;
    sqlx::query("UPDATE findings SET status = 'resolved', resolved_at = now() WHERE id = $1")
        .bind(finding)
        .execute(pool)
        .await
        .unwrap();
    check(pool, "the finding resolved").await;
    let finding = open_fallback(pool, a).await;
    check(pool, "a finding opened again").await;
    sqlx::query("DELETE FROM findings WHERE id = $1")
        .bind(finding)
        .execute(pool)
        .await
        .unwrap();
    check(pool, "an open finding deleted").await;
    // A bulk load (the report bench's): hosts, then their snapshots, in SQL.
    sqlx::query(
        "INSERT INTO hosts (name, labels) SELECT format('bulk-%s', i), '{\"simulated\": \"yes\"}' \
         FROM generate_series(1, 3) i",
    )
    .execute(pool)
    .await
    .unwrap();
    check(pool, "hosts inserted in bulk, without facts yet").await;
    sqlx::query(
        "INSERT INTO host_fact_snapshots (host_id, facts_hash, facts, arch, features_usable, build_flavour) \
         SELECT id, sha256(convert_to(name, 'UTF8')), '{}', 'aarch64', '{aes,pmull}', 'accelerated' \
         FROM hosts WHERE name LIKE 'bulk-%'",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE hosts h SET current_snapshot_id = s.id FROM host_fact_snapshots s WHERE s.host_id = h.id AND h.name LIKE 'bulk-%'")
        .execute(pool)
        .await
        .unwrap();
    check(pool, "hosts loaded in bulk").await;
    sqlx::query("UPDATE host_fact_snapshots SET features_usable = '{aes}' WHERE facts = '{}'")
        .execute(pool)
        .await
        .unwrap();
    check(pool, "their snapshots rewritten (a migration's backfill)").await;
    sqlx::query("DELETE FROM host_fact_snapshots WHERE host_id = $1")
        .bind(a)
        .execute(pool)
        .await
        .unwrap();
    check(pool, "a's snapshots deleted (no facts left)").await;
    sqlx::query("DELETE FROM hosts WHERE name = 'b'")
        .execute(pool)
        .await
        .unwrap();
    check(pool, "b deleted").await;
}

#[tokio::test]
async fn summaries_equal_the_plain_verdicts_after_every_kind_of_change() {
    let pool = fresh_db().await;
    changes(&pool, async |pool, what| {
        assert_eq!(stored(pool).await, plain(pool).await, "after: {what}");
        assert!(configurations_agree(pool).await, "configurations after: {what}");
        assert!(class_groups_agree(pool).await, "class groups after: {what}");
    })
    .await;
    // The statuses the changes went through were not all one.
    let statuses: HashSet<Acceleration> = stored(&pool).await.into_values().map(|v| v.0).collect();
    assert!(statuses.len() >= 2, "{statuses:?}");
}

#[tokio::test]
async fn without_any_one_trigger_the_summaries_go_wrong() {
    for trigger in [
        "hosts_summary_insert ON hosts",
        "hosts_summary_update ON hosts",
        "host_fact_snapshots_summary_update ON host_fact_snapshots",
        "findings_summary_insert ON findings",
        "findings_summary_update ON findings",
        "findings_summary_delete ON findings",
    ] {
        let pool = fresh_db().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP TRIGGER {trigger}")))
            .execute(&pool)
            .await
            .unwrap();
        let mut wrong = Vec::new();
        changes(&pool, async |pool, what| {
            if !agrees(pool).await {
                wrong.push(what.to_string());
            }
        })
        .await;
        assert!(!wrong.is_empty(), "without {trigger} every check still agreed");
    }
}
