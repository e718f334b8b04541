//! What the finding deriver reads (`crate::findings`): every host with its
//! current facts, and the latest results of each series — the same job spec
//! and path on one host — in the shape the detectors take.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use cipherfleet_core::path::Path;
use sqlx::PgExecutor;
use sqlx::types::Json;

use super::Result;
use super::snapshots::Snapshot;
use crate::analysis::providers::OpensslPaths;
use crate::analysis::series::Observation;
use crate::analysis::unexplained::Ran;
use crate::domain::labels::Labels;

/// A host's labels and current facts snapshot: what the deriver judges it by.
#[derive(Debug, sqlx::FromRow)]
pub struct CurrentFacts {
    pub labels: Json<Labels>,
    /// The current snapshot; its `facts` JSON is left empty (the rules read
    /// the typed columns only).
    #[sqlx(flatten)]
    pub snapshot: Snapshot,
    /// The host's OpenSSL's latest AES points measured on both paths (one
    /// thread, encryption, a static key), from `provider_points`; `None`
    /// when there are none.
    pub openssl_paths: Option<Json<Vec<OpensslPaths>>>,
}

impl CurrentFacts {
    pub fn host_id(&self) -> i64 {
        self.snapshot.host_id
    }
}

/// Every host that has facts, with its current snapshot, by id.
pub async fn current_facts(db: impl PgExecutor<'_>) -> Result<Vec<CurrentFacts>> {
    Ok(sqlx::query_as(
        "SELECT h.labels, s.id, s.host_id, s.taken_at, '{}'::jsonb AS facts, s.arch, s.cpu_vendor, \
             s.cpu_model_name, s.cpu_family, s.cpu_model, s.cpu_stepping, s.logical_cores, \
             s.memory_total_bytes, s.os_name, s.kernel_release, s.hypervisor_present, s.hypervisor, \
             s.features_advertised, s.features_usable, s.build_flavour, s.agent_version, s.cpuinfo_foreign, \
             s.build_codegen, s.build_target_features, s.kernel_drivers, s.openssl_build, \
             (SELECT jsonb_agg(jsonb_build_object('algorithm', a.algorithm, 'size_bytes', a.size_bytes, \
                         'accelerated_mb_s', a.throughput_mb_s, 'software_mb_s', w.throughput_mb_s) \
                     ORDER BY a.algorithm, a.size_bytes) \
              FROM provider_points a JOIN provider_points w ON w.host_id = a.host_id \
                  AND w.provider = a.provider AND w.algorithm = a.algorithm AND w.direction = a.direction \
                  AND w.size_bytes = a.size_bytes AND w.threads = a.threads AND w.concurrency = a.concurrency \
                  AND w.key_mode = a.key_mode AND w.nonce = a.nonce AND w.path = 'software' \
              WHERE a.host_id = h.id AND a.provider = 'openssl' AND a.path = 'accelerated' AND a.threads = 1 \
                  AND a.direction = 'encrypt' AND a.key_mode = 'static' AND a.nonce = 'counter' \
                  AND a.concurrency = 0) AS openssl_paths \
         FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id ORDER BY h.id",
    )
    .fetch_all(db)
    .await?)
}

/// The latest `per_series` results of every series of `hosts` (only
/// `algorithms` when given, by name; only series on `path` when given), by
/// host, each series' oldest first. A series is one point on one provider:
/// each provider's regressions are judged on its own results.
///
/// Read from the index `results_series` alone (migration 0020; the provider
/// is among its included columns since 0036, so a series' providers are told
/// apart by a sort within each point's entries, not a heap page per result),
/// and sent as one row per series with its results in arrays.
pub async fn latest_points(
    db: impl PgExecutor<'_>,
    hosts: &[i64],
    algorithms: Option<&BTreeSet<String>>,
    path: Option<Path>,
    per_series: i64,
) -> Result<Vec<Observation>> {
    if hosts.is_empty() || algorithms.is_some_and(BTreeSet::is_empty) {
        return Ok(Vec::new());
    }
    let algorithms: Option<Vec<&String>> = algorithms.map(|a| a.iter().collect());
    let series: Vec<SeriesRow> = sqlx::query_as(
        "SELECT host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, provider, \
             array_agg(path_used ORDER BY created_at, id) AS path_used, \
             array_agg(throughput_mb_s ORDER BY created_at, id) AS throughput_mb_s, \
             array_agg(created_at ORDER BY created_at, id) AS created_at, \
             array_agg(snapshot_id ORDER BY created_at, id) AS snapshot_id \
         FROM (SELECT host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                   provider, path_used, throughput_mb_s, created_at, snapshot_id, id, \
                   row_number() OVER (PARTITION BY host_id, algorithm, direction, size_bytes, threads, \
                       concurrency, key_mode, path, nonce, provider ORDER BY created_at DESC, id DESC) AS newest \
               FROM results WHERE host_id = ANY($1) AND ($2::text[] IS NULL OR algorithm = ANY($2)) \
                   AND ($3::text IS NULL OR path = $3)) r \
         WHERE newest <= $4 \
         GROUP BY host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, provider \
         ORDER BY host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, provider",
    )
    .bind(hosts)
    .bind(algorithms)
    .bind(path.map(|p| p.as_str()))
    .bind(per_series)
    .fetch_all(db)
    .await?;
    let mut out = Vec::with_capacity(series.iter().map(|s| s.throughput_mb_s.len()).sum());
    for s in series {
        for (i, used) in s.path_used.iter().enumerate() {
            let path_used = used.parse().map_err(|e: cipherfleet_core::text::UnknownValue| {
                sqlx::Error::Decode(format!("results.path_used: {e}").into())
            })?;
            out.push(Observation {
                host_id: s.host_id,
                point: s.point,
                path_used,
                throughput_mb_s: s.throughput_mb_s[i],
                created_at: s.created_at[i],
                snapshot_id: s.snapshot_id[i],
            });
        }
    }
    Ok(out)
}

/// One series as [`latest_points`] reads it: its results' columns as arrays, oldest first.
#[derive(sqlx::FromRow)]
struct SeriesRow {
    host_id: i64,
    #[sqlx(flatten)]
    point: Point,
    path_used: Vec<String>,
    throughput_mb_s: Vec<f64>,
    created_at: Vec<DateTime<Utc>>,
    snapshot_id: Vec<Option<i64>>,
}

/// The snapshots of `hosts`, by host, each one's oldest first (their `facts`
/// JSON left empty: the rules read the typed columns): what dates the new
/// findings of a chunk of hosts, in one query.
pub async fn snapshot_histories(db: impl PgExecutor<'_>, hosts: &[i64]) -> Result<Vec<Snapshot>> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as(
        "SELECT id, host_id, taken_at, '{}'::jsonb AS facts, arch, cpu_vendor, cpu_model_name, cpu_family, \
             cpu_model, cpu_stepping, logical_cores, memory_total_bytes, os_name, kernel_release, \
             hypervisor_present, hypervisor, features_advertised, features_usable, build_flavour, \
             agent_version, cpuinfo_foreign, build_codegen, build_target_features, \
         kernel_drivers, openssl_build \
         FROM host_fact_snapshots WHERE host_id = ANY($1) ORDER BY host_id, taken_at, id",
    )
    .bind(hosts)
    .fetch_all(db)
    .await?)
}

/// The latest result of every accelerated-path point of `hosts` (from
/// `result_points`, so hosts × points rows however many results are stored),
/// with the snapshot it ran on and the backends its worker reported, which
/// `result_points` keeps beside its figures (migration 0025): what
/// `unexplained-fallback` and a host's acceleration status judge, read from
/// that one table rather than a `results` heap page per point.
pub async fn latest_accelerated(db: impl PgExecutor<'_>, hosts: &[i64]) -> Result<Vec<Ran>> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as(
        "SELECT host_id, result_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
             path_used, throughput_mb_s, measured_at AS created_at, snapshot_id, backends \
         FROM result_points WHERE host_id = ANY($1) AND path = $2 ORDER BY host_id, measured_at, result_id",
    )
    .bind(hosts)
    .bind(Path::Accelerated.as_str())
    .fetch_all(db)
    .await?)
}
