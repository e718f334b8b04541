//! Read queries of the fleet pages of the report (overview, hosts, campaigns):
//! campaign summaries with their job counts, a host's results page by page,
//! its key series over time, and one stored result as the agent sent it.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgExecutor;

use super::Result;

/// A campaign with where its jobs stand, for lists.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CampaignSummary {
    pub id: i64,
    pub name: String,
    pub suite: String,
    /// `running`, `finished` or `cancelled`.
    pub status: String,
    pub started_by: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub queued: i64,
    pub running: i64,
    pub done: i64,
    pub failed: i64,
    pub cancelled: i64,
    /// Hosts the campaign has jobs on.
    pub hosts: i64,
}

impl CampaignSummary {
    pub fn total(&self) -> i64 {
        self.queued + self.running + self.done + self.failed + self.cancelled
    }

    /// Jobs that will not change any more.
    pub fn settled(&self) -> i64 {
        self.done + self.failed + self.cancelled
    }
}

/// Campaigns newest first, `limit` from `offset`. The job counts are taken
/// for the campaigns of the page only (a lateral join on the
/// `(campaign_id, position)` index), so a long history does not slow it down.
pub async fn campaign_summaries(db: impl PgExecutor<'_>, limit: i64, offset: i64) -> Result<Vec<CampaignSummary>> {
    Ok(sqlx::query_as(
        "SELECT c.id, c.name, c.suite, c.status, c.started_by, c.created_at, c.finished_at, \
             j.queued, j.running, j.done, j.failed, j.cancelled, j.hosts \
         FROM (SELECT * FROM campaigns ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2) c \
         CROSS JOIN LATERAL ( \
             SELECT count(*) FILTER (WHERE status = 'queued') AS queued, \
                 count(*) FILTER (WHERE status = 'running') AS running, \
                 count(*) FILTER (WHERE status = 'done') AS done, \
                 count(*) FILTER (WHERE status = 'failed') AS failed, \
                 count(*) FILTER (WHERE status = 'cancelled') AS cancelled, \
                 count(DISTINCT host_id) AS hosts \
             FROM jobs WHERE campaign_id = c.id) j \
         ORDER BY c.created_at DESC, c.id DESC",
    )
    .bind(limit)
    .bind(offset)
    .fetch_all(db)
    .await?)
}

/// (all campaigns, running campaigns).
pub async fn count_campaigns(db: impl PgExecutor<'_>) -> Result<(i64, i64)> {
    Ok(
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE status = 'running') FROM campaigns")
            .fetch_one(db)
            .await?,
    )
}

/// Stored results in total.
pub async fn count_results(db: impl PgExecutor<'_>) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM results").fetch_one(db).await?)
}

/// One result as a host's results table shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct HostResult {
    pub id: i64,
    pub campaign_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub algorithm: String,
    pub direction: String,
    pub size_bytes: i64,
    pub threads: i32,
    pub concurrency: Option<i32>,
    pub key_mode: String,
    /// The path the job asked for.
    pub path: String,
    /// The path the worker really ran.
    pub path_used: String,
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    pub latency_p99_ns: i64,
    pub cv: Option<f64>,
    pub samples: i32,
}

/// A host's results, newest first, `limit` from `offset`.
pub async fn host_results(db: impl PgExecutor<'_>, host_id: i64, limit: i64, offset: i64) -> Result<Vec<HostResult>> {
    Ok(sqlx::query_as(
        "SELECT r.id, (SELECT j.campaign_id FROM jobs j WHERE j.id = r.job_id) AS campaign_id, r.created_at, \
             r.algorithm, r.direction, r.size_bytes, r.threads, r.concurrency, r.key_mode, r.path, r.path_used, \
             r.throughput_mb_s, r.ops_per_s, r.latency_p99_ns, r.cv, r.samples \
         FROM results r WHERE r.host_id = $1 ORDER BY r.created_at DESC, r.id DESC LIMIT $2 OFFSET $3",
    )
    .bind(host_id)
    .bind(limit)
    .bind(offset)
    .fetch_all(db)
    .await?)
}

pub async fn count_host_results(db: impl PgExecutor<'_>, host_id: i64) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM results WHERE host_id = $1")
        .bind(host_id)
        .fetch_one(db)
        .await?)
}

/// One point of a host's throughput history.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SeriesPoint {
    pub algorithm: String,
    pub created_at: DateTime<Utc>,
    pub throughput_mb_s: f64,
}

/// A host's single-thread encrypt throughput on the accelerated path at
/// `size_bytes` for `algorithms`, oldest first (the `results_point` index
/// answers it), at most `limit` latest points per algorithm.
pub async fn host_series(
    db: impl PgExecutor<'_>,
    host_id: i64,
    algorithms: &[&str],
    size_bytes: i64,
    limit: i64,
) -> Result<Vec<SeriesPoint>> {
    Ok(sqlx::query_as(
        "SELECT algorithm, created_at, throughput_mb_s FROM ( \
             SELECT algorithm, created_at, throughput_mb_s, \
                 row_number() OVER (PARTITION BY algorithm ORDER BY created_at DESC) AS n \
             FROM results \
             WHERE host_id = $1 AND algorithm = ANY($2) AND size_bytes = $3 AND direction = 'encrypt' \
               AND path = 'accelerated' AND threads = 1 AND concurrency IS NULL AND key_mode = 'static') s \
         WHERE n <= $4 ORDER BY algorithm, created_at",
    )
    .bind(host_id)
    .bind(algorithms)
    .bind(size_bytes)
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// A stored result with the measurement object exactly as the agent sent it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredResult {
    pub id: i64,
    pub job_id: uuid::Uuid,
    pub campaign_id: Option<i64>,
    pub host_id: i64,
    pub host_name: String,
    pub snapshot_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub measurement: Value,
}

pub async fn stored_result(db: impl PgExecutor<'_>, result_id: i64) -> Result<Option<StoredResult>> {
    Ok(sqlx::query_as(
        "SELECT r.id, r.job_id, (SELECT j.campaign_id FROM jobs j WHERE j.id = r.job_id) AS campaign_id, \
             r.host_id, h.name AS host_name, r.snapshot_id, r.created_at, r.measurement \
         FROM results r JOIN hosts h ON h.id = r.host_id WHERE r.id = $1",
    )
    .bind(result_id)
    .fetch_optional(db)
    .await?)
}
