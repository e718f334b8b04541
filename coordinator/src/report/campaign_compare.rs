//! Two campaigns side by side: for each host and point, the result each
//! campaign stored (the latest, should a campaign repeat a point). What
//! `/campaigns/{a}/compare/{b}` reads; the change itself is
//! [`crate::analysis::campaign_change`].

use cipherfleet_core::Point;
use sqlx::PgExecutor;

use crate::store::Result;

/// One host and point with its result in each campaign; a side is `None`
/// when that campaign did not measure it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PointPair {
    pub host_id: i64,
    /// The host's name as its agent reported it: untrusted text.
    pub host_name: String,
    /// The point; its path is the one asked for.
    #[sqlx(flatten)]
    pub point: Point,
    pub before_result_id: Option<i64>,
    /// What ran (`accelerated`, `partial`, `software`), as stored.
    pub before_path_used: Option<String>,
    pub before_mb_s: Option<f64>,
    /// Throughput of each sample of the earlier result: its spread.
    pub before_samples: Option<Vec<f64>>,
    pub after_result_id: Option<i64>,
    pub after_path_used: Option<String>,
    pub after_mb_s: Option<f64>,
}

/// Every host and point measured by campaign `before` or `after`, by host
/// name and point. Served by the `jobs (campaign_id, position)` and
/// `results (job_id)` indexes: a campaign's rows, not the whole table.
pub async fn pairs(db: impl PgExecutor<'_>, before: i64, after: i64) -> Result<Vec<PointPair>> {
    Ok(sqlx::query_as(
        "WITH runs AS ( \
             SELECT DISTINCT ON (j.campaign_id, r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, \
                     coalesce(r.concurrency, 0), r.key_mode, r.path, r.nonce, r.provider) \
                 j.campaign_id, r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, \
                 coalesce(r.concurrency, 0) AS concurrency, r.key_mode, r.path, r.nonce, r.provider, r.id, r.path_used, \
                 r.throughput_mb_s, r.sample_throughputs \
             FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.campaign_id IN ($1, $2) \
             ORDER BY j.campaign_id, r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, \
                 coalesce(r.concurrency, 0), r.key_mode, r.path, r.nonce, r.provider, r.created_at DESC, r.id DESC), \
         a AS (SELECT * FROM runs WHERE campaign_id = $1), \
         b AS (SELECT * FROM runs WHERE campaign_id = $2) \
         SELECT h.id AS host_id, h.name AS host_name, \
             COALESCE(a.algorithm, b.algorithm) AS algorithm, COALESCE(a.direction, b.direction) AS direction, \
             COALESCE(a.size_bytes, b.size_bytes) AS size_bytes, COALESCE(a.threads, b.threads) AS threads, \
             COALESCE(a.concurrency, b.concurrency) AS concurrency, COALESCE(a.key_mode, b.key_mode) AS key_mode, \
             COALESCE(a.path, b.path) AS path, COALESCE(a.nonce, b.nonce) AS nonce, \
             COALESCE(a.provider, b.provider) AS provider, \
             a.id AS before_result_id, a.path_used AS before_path_used, a.throughput_mb_s AS before_mb_s, \
             a.sample_throughputs AS before_samples, \
             b.id AS after_result_id, b.path_used AS after_path_used, b.throughput_mb_s AS after_mb_s \
         FROM a FULL JOIN b ON b.host_id = a.host_id AND b.algorithm = a.algorithm \
             AND b.direction = a.direction AND b.size_bytes = a.size_bytes AND b.threads = a.threads \
             AND b.concurrency = a.concurrency AND b.key_mode = a.key_mode AND b.path = a.path \
             AND b.nonce = a.nonce AND b.provider = a.provider \
         JOIN hosts h ON h.id = COALESCE(a.host_id, b.host_id) \
         ORDER BY h.name, h.id, 3, 5, 4, 6, 7, 8, 9, 10, 11",
    )
    .bind(before)
    .bind(after)
    .fetch_all(db)
    .await?)
}

/// How many finished jobs of `campaigns` no longer have their result raw:
/// retention folded it into its day's summary (`serve --keep-raw`), so the
/// pairs leave it out. The jobs done, as counted when they ended (retention
/// deletes the jobs of folded results later), less the results still raw.
pub async fn folded(db: impl PgExecutor<'_>, campaigns: &[i64]) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT (SELECT coalesce(sum(done), 0) FROM campaign_host_jobs WHERE campaign_id = ANY($1))::bigint \
             - (SELECT count(*) FROM jobs j JOIN results r ON r.job_id = j.id \
                WHERE j.campaign_id = ANY($1) AND j.status = 'done')",
    )
    .bind(campaigns)
    .fetch_one(db)
    .await?)
}
