//! Benchmark points in the database: the column arrays that bind many
//! [`Point`]s at once, and `result_points`, the latest result of every point
//! on every host, which the report reads instead of scanning all results
//! (migrations/0003). Reading a point back is `#[sqlx(flatten)] point: Point`
//! (its `FromRow` lives in `cipherfleet_core`).

use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use sqlx::{PgConnection, PgExecutor};

use super::Result;

/// Points as the column arrays of an `UNNEST` insert, in the column order
/// `algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, provider`.
#[derive(Debug, Default)]
pub struct PointColumns {
    pub algorithm: Vec<String>,
    pub direction: Vec<String>,
    pub size_bytes: Vec<i64>,
    pub threads: Vec<i32>,
    pub concurrency: Vec<Option<i32>>,
    pub key_mode: Vec<String>,
    pub path: Vec<String>,
    pub nonce: Vec<String>,
    pub provider: Vec<String>,
}

impl PointColumns {
    /// The columns of `points`. Sizes, threads and concurrency were validated
    /// against bounds far inside the SQL integer types, hence the saturation
    /// rather than an error nobody could act on.
    pub fn new(points: impl IntoIterator<Item = Point>) -> Self {
        let mut c = PointColumns::default();
        for p in points {
            c.algorithm.push(p.algorithm.name().to_string());
            c.direction.push(p.direction.to_string());
            c.size_bytes.push(i64::try_from(p.size_bytes).unwrap_or(i64::MAX));
            c.threads.push(i32::try_from(p.threads).unwrap_or(i32::MAX));
            c.concurrency
                .push(p.concurrency.map(|n| i32::try_from(n).unwrap_or(i32::MAX)));
            c.key_mode.push(p.key_mode.to_string());
            c.path.push(p.path.to_string());
            c.nonce.push(p.nonce.to_string());
            c.provider.push(p.provider.to_string());
        }
        c
    }
}

/// A result as [`record_many`] finds it: its id, and its
/// `created_at`, which names the week partition of `results` that holds it
/// (migrations/0040).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultKey {
    pub id: i64,
    pub created_at: DateTime<Utc>,
}

/// Makes each of `results` the latest of its point, in the transaction that
/// inserts them, in one statement. The built-in provider's points are in
/// `result_points`, every other provider's in `provider_points`
/// (migrations/0036). Two of them of the same point on the same host (rare:
/// re-sent outcomes of two campaigns) count both, and the newer one becomes
/// the latest; a single `INSERT … ON CONFLICT` may not touch one row twice,
/// hence the grouping.
///
/// The results are found by id within the span of their `created_at`: by id
/// alone, every week partition kept (13 in the default raw window) would be
/// searched for each of them (docs/performance.md, "Ingest, 1,000 agents").
pub async fn record_many(tx: &mut PgConnection, results: &[ResultKey]) -> Result<()> {
    let (Some(from), Some(to)) = (
        results.iter().map(|r| r.created_at).min(),
        results.iter().map(|r| r.created_at).max(),
    ) else {
        return Ok(());
    };
    let ids: Vec<i64> = results.iter().map(|r| r.id).collect();
    // One statement, one round trip per batch: the built-in provider's points
    // and the others' go to their two tables together.
    sqlx::query(
        "WITH crates AS ( \
         INSERT INTO result_points AS p (host_id, algorithm, direction, size_bytes, threads, concurrency, \
             key_mode, path, nonce, result_id, measured_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, \
             cv, samples, low_samples, cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op, \
             snapshot_id, backends, result_count) \
         SELECT DISTINCT ON (host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), \
                 key_mode, path, nonce) \
             host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, \
             nonce, id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples, low_samples, \
             cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op, \
             snapshot_id, NULLIF(measurement->'backends', 'null'::jsonb), \
             count(*) OVER (PARTITION BY host_id, algorithm, direction, size_bytes, threads, \
                 coalesce(concurrency, 0), key_mode, path, nonce) \
         FROM results WHERE id = ANY($1) AND NOT kept AND created_at BETWEEN $2 AND $3 AND provider = 'rustcrypto' \
         ORDER BY host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, nonce, \
             id DESC \
         ON CONFLICT (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce) \
         DO UPDATE SET result_id = EXCLUDED.result_id, measured_at = EXCLUDED.measured_at, \
             path_used = EXCLUDED.path_used, throughput_mb_s = EXCLUDED.throughput_mb_s, \
             ops_per_s = EXCLUDED.ops_per_s, latency_p99_ns = EXCLUDED.latency_p99_ns, cv = EXCLUDED.cv, \
             samples = EXCLUDED.samples, low_samples = EXCLUDED.low_samples, \
             cipher_state_bytes = EXCLUDED.cipher_state_bytes, peak_rss_bytes = EXCLUDED.peak_rss_bytes, \
             heap_bytes_per_op = EXCLUDED.heap_bytes_per_op, allocs_per_op = EXCLUDED.allocs_per_op, \
             snapshot_id = EXCLUDED.snapshot_id, backends = EXCLUDED.backends, \
             result_count = p.result_count + EXCLUDED.result_count \
             RETURNING 1), \
         others AS ( \
         INSERT INTO provider_points AS p (host_id, provider, algorithm, direction, size_bytes, threads, \
             concurrency, key_mode, path, nonce, result_id, measured_at, path_used, throughput_mb_s, ops_per_s, \
             latency_p99_ns, cv, samples, low_samples, snapshot_id, implementation, result_count) \
         SELECT DISTINCT ON (host_id, provider, algorithm, direction, size_bytes, threads, \
                 coalesce(concurrency, 0), key_mode, path, nonce) \
             host_id, provider, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, \
             path, nonce, id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples, \
             low_samples, snapshot_id, NULLIF(measurement->'implementation', 'null'::jsonb), \
             count(*) OVER (PARTITION BY host_id, provider, algorithm, direction, size_bytes, threads, \
                 coalesce(concurrency, 0), key_mode, path, nonce) \
         FROM results WHERE id = ANY($1) AND NOT kept AND created_at BETWEEN $2 AND $3 AND provider <> 'rustcrypto' \
         ORDER BY host_id, provider, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), \
             key_mode, path, nonce, id DESC \
         ON CONFLICT (host_id, provider, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, \
             nonce) \
         DO UPDATE SET result_id = EXCLUDED.result_id, measured_at = EXCLUDED.measured_at, \
             path_used = EXCLUDED.path_used, throughput_mb_s = EXCLUDED.throughput_mb_s, \
             ops_per_s = EXCLUDED.ops_per_s, latency_p99_ns = EXCLUDED.latency_p99_ns, cv = EXCLUDED.cv, \
             samples = EXCLUDED.samples, low_samples = EXCLUDED.low_samples, snapshot_id = EXCLUDED.snapshot_id, \
             implementation = EXCLUDED.implementation, result_count = p.result_count + EXCLUDED.result_count \
             RETURNING 1) \
         SELECT (SELECT count(*) FROM crates) + (SELECT count(*) FROM others)",
    )
    .bind(ids)
    .bind(from)
    .bind(to)
    .execute(tx)
    .await?;
    Ok(())
}

/// Rebuilds the table from `results`, after results were loaded in bulk.
pub async fn refresh(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query("SELECT refresh_result_points()").execute(db).await?;
    Ok(())
}
