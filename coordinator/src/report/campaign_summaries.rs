//! Campaigns as the report lists them (the campaigns page, the overview):
//! each with the job counts that say where it stands; and every campaign's
//! jobs summed (the overview, `/metrics`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::store::Result;
use crate::store::campaigns::JobCounts;

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

/// Campaigns newest first, `limit` from `offset`. The job counts are the
/// sums of the page's campaigns' `campaign_host_jobs` rows (one per host,
/// kept by triggers on `jobs`), so neither a long history nor a campaign of
/// 100,000 jobs is counted job by job.
pub async fn list(db: impl PgExecutor<'_>, limit: i64, offset: i64) -> Result<Vec<CampaignSummary>> {
    Ok(sqlx::query_as(
        "SELECT c.id, c.name, c.suite, c.status, c.started_by, c.created_at, c.finished_at, \
             j.queued, j.running, j.done, j.failed, j.cancelled, j.hosts \
         FROM (SELECT * FROM campaigns ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2) c \
         CROSS JOIN LATERAL ( \
             SELECT coalesce(sum(queued), 0)::bigint AS queued, coalesce(sum(running), 0)::bigint AS running, \
                 coalesce(sum(done), 0)::bigint AS done, coalesce(sum(failed), 0)::bigint AS failed, \
                 coalesce(sum(cancelled), 0)::bigint AS cancelled, coalesce(sum(hosts), 0)::bigint AS hosts \
             FROM campaign_host_jobs WHERE campaign_id = c.id) j \
         ORDER BY c.created_at DESC, c.id DESC",
    )
    .bind(limit)
    .bind(offset)
    .fetch_all(db)
    .await?)
}

/// One campaign's job counts, and how many hosts it has jobs on: the sums
/// of its `campaign_host_jobs` rows (one a host, or one for all its hosts
/// once retention folded them: `hosts` says how many).
pub async fn totals(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<(JobCounts, i64)> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        counts: JobCounts,
        hosts: i64,
    }
    let row: Row = sqlx::query_as(
        "SELECT coalesce(sum(queued), 0)::bigint AS queued, coalesce(sum(running), 0)::bigint AS running, \
             coalesce(sum(done), 0)::bigint AS done, coalesce(sum(failed), 0)::bigint AS failed, \
             coalesce(sum(cancelled), 0)::bigint AS cancelled, coalesce(sum(hosts), 0)::bigint AS hosts \
         FROM campaign_host_jobs WHERE campaign_id = $1",
    )
    .bind(campaign_id)
    .fetch_one(db)
    .await?;
    Ok((row.counts, row.hosts))
}

/// The campaigns, split into those finished (every job ended: their counts
/// no longer change) and the others; with a key naming the database (its
/// server's start, port and oid), so counts kept in memory are never taken
/// for another database's.
pub async fn finished_or_not(db: impl PgExecutor<'_>) -> Result<(String, Vec<i64>, Vec<i64>)> {
    Ok(sqlx::query_as(
        "SELECT concat_ws('/', pg_postmaster_start_time(), inet_server_port(), \
                 (SELECT oid FROM pg_database WHERE datname = current_database())), \
             coalesce(array_agg(id ORDER BY id) FILTER (WHERE status = 'finished'), '{}'), \
             coalesce(array_agg(id ORDER BY id) FILTER (WHERE status <> 'finished'), '{}') \
         FROM campaigns",
    )
    .fetch_one(db)
    .await?)
}

/// The job counts of each finished campaign, and the database they are of
/// (see [`finished_or_not`]). Process-wide, as [`all_jobs`] gets only a pool.
static FINISHED: Mutex<Option<(String, HashMap<i64, JobCounts>)>> = Mutex::new(None);

/// Every campaign's jobs by status, summed: the finished campaigns' read
/// once each and kept (their jobs have all ended and no longer change), the
/// others' from their `campaign_host_jobs` rows now. Sized by the campaigns
/// running, not by the jobs stored, whose count grew with the history
/// (docs/performance.md, "Coordinator queries and sessions"). Its `done` is
/// also the results stored: storing its result is what ends a job done.
pub async fn all_jobs(pool: &PgPool) -> Result<JobCounts> {
    let (database, finished, others) = finished_or_not(pool).await?;
    let unread: Vec<i64> = match &*kept_finished() {
        Some((of, counts)) if *of == database => {
            finished.iter().copied().filter(|id| !counts.contains_key(id)).collect()
        }
        _ => finished.clone(),
    };
    let (read, live) = tokio::try_join!(job_totals(pool, &unread), job_totals(pool, &others))?;
    let mut kept = kept_finished();
    if kept.as_ref().is_none_or(|(of, _)| *of != database) {
        *kept = Some((database, HashMap::new()));
    }
    let counts = &mut kept.as_mut().expect("set above").1;
    // Finished campaigns without jobs count as none, and are not read again.
    counts.extend(unread.iter().map(|id| (*id, JobCounts::default())));
    counts.extend(read);
    let mut total = JobCounts::default();
    for c in finished
        .iter()
        .filter_map(|id| counts.get(id))
        .chain(live.iter().map(|(_, c)| c))
    {
        total.queued += c.queued;
        total.running += c.running;
        total.done += c.done;
        total.failed += c.failed;
        total.cancelled += c.cancelled;
    }
    Ok(total)
}

fn kept_finished() -> MutexGuard<'static, Option<(String, HashMap<i64, JobCounts>)>> {
    // A panic while holding it left whole counts or none: still usable.
    FINISHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The job counts of each of `campaign_ids` (those with jobs), from their
/// `campaign_host_jobs` rows.
pub async fn job_totals(db: impl PgExecutor<'_>, campaign_ids: &[i64]) -> Result<Vec<(i64, JobCounts)>> {
    if campaign_ids.is_empty() {
        return Ok(Vec::new());
    }
    #[derive(sqlx::FromRow)]
    struct Row {
        campaign_id: i64,
        #[sqlx(flatten)]
        counts: JobCounts,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT campaign_id, sum(queued)::bigint AS queued, sum(running)::bigint AS running, \
             sum(done)::bigint AS done, sum(failed)::bigint AS failed, sum(cancelled)::bigint AS cancelled \
         FROM campaign_host_jobs WHERE campaign_id = ANY($1) GROUP BY campaign_id ORDER BY campaign_id",
    )
    .bind(campaign_ids)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.campaign_id, r.counts)).collect())
}

/// One campaign's job counts per host, by host name, `limit` hosts from
/// `offset` (`None`: all): a page of the campaign page's progress table, read
/// from `campaign_host_jobs` ([`totals`] counts the hosts).
pub async fn host_progress(
    db: impl PgExecutor<'_>,
    campaign_id: i64,
    limit: Option<i64>,
    offset: i64,
) -> Result<Vec<(i64, String, JobCounts)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        host_id: i64,
        name: String,
        queued: i64,
        running: i64,
        done: i64,
        failed: i64,
        cancelled: i64,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT j.host_id, h.name, j.queued, j.running, j.done, j.failed, j.cancelled \
         FROM campaign_host_jobs j JOIN hosts h ON h.id = j.host_id \
         WHERE j.campaign_id = $1 ORDER BY h.name, j.host_id LIMIT $2 OFFSET $3",
    )
    .bind(campaign_id)
    .bind(limit)
    .bind(offset)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let counts = JobCounts {
                queued: r.queued,
                running: r.running,
                done: r.done,
                failed: r.failed,
                cancelled: r.cancelled,
            };
            (r.host_id, r.name, counts)
        })
        .collect())
}

/// (all campaigns, running campaigns).
pub async fn count(db: impl PgExecutor<'_>) -> Result<(i64, i64)> {
    Ok(
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE status = 'running') FROM campaigns")
            .fetch_one(db)
            .await?,
    )
}
