//! A host's results as its page reads them: newest first, page by page, and
//! its key algorithms' throughput over time for the chart.

use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use sqlx::PgExecutor;

use crate::domain::memory::StoredMemory;
use crate::store::Result;

/// One result as a host's results table shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct HostResult {
    pub id: i64,
    pub campaign_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    /// What was measured; its `path` is the one the job asked for.
    #[sqlx(flatten)]
    pub point: Point,
    /// The path the worker really ran.
    #[sqlx(try_from = "String")]
    pub path_used: PathUsed,
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    pub latency_p99_ns: i64,
    pub cv: Option<f64>,
    pub samples: i32,
    /// Fewer samples than a figure needs to be trusted, even after the run was extended.
    pub low_samples: bool,
    #[sqlx(flatten)]
    pub memory: StoredMemory,
}

impl HostResult {
    /// It ran another path than asked for: an accelerated request that ran
    /// partly or wholly in software (or a software request that used hardware).
    pub fn fell_back(&self) -> bool {
        self.path_used.differs_from(self.point.path)
    }
}

/// A host's results, newest first, `limit` from `offset`.
pub async fn list(db: impl PgExecutor<'_>, host_id: i64, limit: i64, offset: i64) -> Result<Vec<HostResult>> {
    Ok(sqlx::query_as(
        "SELECT r.id, (SELECT j.campaign_id FROM jobs j WHERE j.id = r.job_id) AS campaign_id, r.created_at, \
             r.algorithm, r.direction, r.size_bytes, r.threads, r.concurrency, r.key_mode, r.path, r.nonce, r.provider, \
             r.path_used, r.throughput_mb_s, r.ops_per_s, r.latency_p99_ns, r.cv, r.samples, r.low_samples, \
             r.cipher_state_bytes, r.peak_rss_bytes, r.heap_bytes_per_op, r.allocs_per_op \
         FROM results r WHERE r.host_id = $1 ORDER BY r.created_at DESC, r.id DESC LIMIT $2 OFFSET $3",
    )
    .bind(host_id)
    .bind(limit)
    .bind(offset)
    .fetch_all(db)
    .await?)
}

/// How many results a host has.
pub async fn count(db: impl PgExecutor<'_>, host_id: i64) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM results WHERE host_id = $1")
        .bind(host_id)
        .fetch_one(db)
        .await?)
}

/// One algorithm's throughput at one time: a dot of the host's history chart.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ThroughputSample {
    #[sqlx(try_from = "String")]
    pub algorithm: Algorithm,
    pub created_at: DateTime<Utc>,
    pub throughput_mb_s: f64,
}

/// A host's single-thread encrypt throughput on the accelerated path at
/// `size_bytes` for `algorithms` (names), oldest first (the `results_series`
/// index answers it, newest first per series), at most `limit` latest samples
/// per algorithm.
pub async fn key_series(
    db: impl PgExecutor<'_>,
    host_id: i64,
    algorithms: &[&str],
    size_bytes: i64,
    limit: i64,
) -> Result<Vec<ThroughputSample>> {
    Ok(sqlx::query_as(
        "SELECT algorithm, created_at, throughput_mb_s FROM ( \
             SELECT algorithm, created_at, throughput_mb_s, \
                 row_number() OVER (PARTITION BY algorithm ORDER BY created_at DESC) AS n \
             FROM results \
             WHERE host_id = $1 AND algorithm = ANY($2) AND size_bytes = $3 AND direction = 'encrypt' \
               AND path = 'accelerated' AND threads = 1 AND concurrency IS NULL AND key_mode = 'static' \
               AND nonce = 'counter' AND provider = 'rustcrypto') s \
         WHERE n <= $4 ORDER BY algorithm, created_at",
    )
    .bind(host_id)
    .bind(algorithms)
    .bind(size_bytes)
    .bind(limit)
    .fetch_all(db)
    .await?)
}
