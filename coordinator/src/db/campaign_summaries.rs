//! Campaigns as the report lists them (the campaigns page, the overview):
//! each with the job counts that say where it stands.

use chrono::{DateTime, Utc};
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
pub async fn list(db: impl PgExecutor<'_>, limit: i64, offset: i64) -> Result<Vec<CampaignSummary>> {
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
pub async fn count(db: impl PgExecutor<'_>) -> Result<(i64, i64)> {
    Ok(
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE status = 'running') FROM campaigns")
            .fetch_one(db)
            .await?,
    )
}
