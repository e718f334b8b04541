//! `campaigns`: a suite run on the hosts a selector picked, and its progress.
//! A campaign is `running` until none of its jobs is queued or running, then
//! `finished`; or `cancelled` by an operator.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor, PgPool};

use super::Result;
use cipherfleet_core::spec::{Execution, JobSpec};
use uuid::Uuid;

use super::points::PointColumns;
use crate::domain::job::JobStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CampaignStatus {
    Running,
    Finished,
    Cancelled,
}

impl CampaignStatus {
    /// The spelling stored in `campaigns.status`.
    pub const fn as_str(self) -> &'static str {
        match self {
            CampaignStatus::Running => "running",
            CampaignStatus::Finished => "finished",
            CampaignStatus::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for CampaignStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for CampaignStatus {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        [
            CampaignStatus::Running,
            CampaignStatus::Finished,
            CampaignStatus::Cancelled,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or_else(|| format!("unknown campaign status {s:?}"))
    }
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Campaign {
    pub id: i64,
    pub name: String,
    pub suite: String,
    pub matrix: Value,
    pub selector: Value,
    pub started_by: String,
    #[sqlx(try_from = "String")]
    pub status: CampaignStatus,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// How long a job may stay queued before it fails ([`super::jobs::expire_queued`]).
    pub queued_ttl_seconds: f64,
}

/// The columns of [`Campaign`], as a literal for `concat!`.
macro_rules! campaign_columns {
    () => {
        "id, name, suite, matrix, selector, started_by, status, created_at, finished_at, queued_ttl_seconds"
    };
}

/// How long a job may stay queued unless the campaign says otherwise.
pub const DEFAULT_QUEUED_TTL: Duration = Duration::from_secs(24 * 3600);
/// The longest time to live a campaign may give its queued jobs.
pub const MAX_QUEUED_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// A campaign to create.
#[derive(Debug, Clone, Copy)]
pub struct NewCampaign<'a> {
    pub name: &'a str,
    pub suite: &'a str,
    /// The matrix as the operator gave it (the jobs hold its expansion).
    pub matrix: &'a Value,
    /// The host selector (labels, arch, CPU model) as the operator gave it.
    pub selector: &'a Value,
    /// Who started it (operator name or token id), for the campaign page.
    pub started_by: &'a str,
    /// How long its jobs may wait in the queue (at most [`MAX_QUEUED_TTL`]).
    pub queued_ttl: Duration,
}

/// Creates a campaign and queues its jobs in one transaction; returns its id.
/// A campaign without jobs (the selector matched no host) is finished at once.
pub async fn create_with_jobs(pool: &PgPool, new: &NewCampaign<'_>, jobs: &[NewJob]) -> Result<i64> {
    let mut tx = pool.begin().await?;
    let id = insert_with_jobs(&mut tx, new, jobs).await?;
    tx.commit().await?;
    Ok(id)
}

/// [`create_with_jobs`] in the caller's transaction (a schedule firing
/// creates its campaign and advances in one).
pub async fn insert_with_jobs(tx: &mut PgConnection, new: &NewCampaign<'_>, jobs: &[NewJob]) -> Result<i64> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO campaigns (name, suite, matrix, selector, started_by, queued_ttl_seconds) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(new.name)
    .bind(new.suite)
    .bind(new.matrix)
    .bind(new.selector)
    .bind(new.started_by)
    .bind(new.queued_ttl.as_secs_f64())
    .fetch_one(&mut *tx)
    .await?;
    insert_jobs(tx, id, jobs).await?;
    if keep_queue_statistics(tx).await? {
        tracing::info!(
            campaign = id,
            "jobs analysed: the planner's statistics of the queue were out of date"
        );
    }
    // Nobody else sees the new campaign yet: checking in this transaction is safe.
    close_if_complete(&mut *tx, &[id]).await?;
    Ok(id)
}

/// Number of a campaign's jobs in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct JobCounts {
    pub queued: i64,
    pub running: i64,
    pub done: i64,
    pub failed: i64,
    pub cancelled: i64,
}

impl JobCounts {
    pub fn total(&self) -> i64 {
        self.queued + self.running + self.done + self.failed + self.cancelled
    }

    fn slot(&mut self, status: JobStatus) -> &mut i64 {
        match status {
            JobStatus::Queued => &mut self.queued,
            JobStatus::Running => &mut self.running,
            JobStatus::Done => &mut self.done,
            JobStatus::Failed => &mut self.failed,
            JobStatus::Cancelled => &mut self.cancelled,
        }
    }
}

/// A campaign and where its jobs stand.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub campaign: Campaign,
    pub jobs: JobCounts,
}

/// The campaign and a count of its job rows stored now, `None` if there is no
/// such campaign. Right for a campaign that runs (the cancel path's count);
/// once retention has folded an ended campaign's jobs, what it ran is in the
/// counts kept for it, [`crate::report::campaign_summaries::totals`].
pub async fn status(pool: &PgPool, campaign_id: i64) -> Result<Option<Progress>> {
    let Some(campaign) = get(pool, campaign_id).await? else {
        return Ok(None);
    };
    #[derive(sqlx::FromRow)]
    struct StatusCount {
        #[sqlx(try_from = "String")]
        status: JobStatus,
        count: i64,
    }
    let rows: Vec<StatusCount> =
        sqlx::query_as("SELECT status, count(*) AS count FROM jobs WHERE campaign_id = $1 GROUP BY status")
            .bind(campaign_id)
            .fetch_all(pool)
            .await?;
    let mut jobs = JobCounts::default();
    for row in rows {
        *jobs.slot(row.status) = row.count;
    }
    Ok(Some(Progress { campaign, jobs }))
}

pub async fn get(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Option<Campaign>> {
    Ok(
        sqlx::query_as(concat!("SELECT ", campaign_columns!(), " FROM campaigns WHERE id = $1"))
            .bind(campaign_id)
            .fetch_optional(db)
            .await?,
    )
}

/// Campaigns, newest first.
pub async fn list(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<Campaign>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        campaign_columns!(),
        " FROM campaigns ORDER BY created_at DESC, id DESC LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// Cancels a running campaign: its queued jobs are cancelled; running jobs
/// are left to fail (every coordinator tells its agents to stop them,
/// `crate::cluster::cancel`).
/// Returns those running jobs (job, host), read in the same transaction after
/// the queued ones were cancelled, so a job claimed while this runs is among
/// them: the claim either committed first (then it is read here) or waits on
/// the job's row and finds it cancelled. `None` if the campaign does not exist
/// or is no longer running.
///
/// It holds the campaign's row while it waits for its queued jobs' rows; no
/// transaction that ends a job locks the campaign (see [`close_if_complete`]),
/// so none waits the other way round.
pub async fn cancel(pool: &PgPool, campaign_id: i64) -> Result<Option<Vec<(uuid::Uuid, i64)>>> {
    cancel_because(pool, campaign_id, None).await
}

/// [`cancel`], keeping `reason` for the agents to be told (by every
/// coordinator, [`running_of_cancelled`]).
pub async fn cancel_because(
    pool: &PgPool,
    campaign_id: i64,
    reason: Option<&str>,
) -> Result<Option<Vec<(uuid::Uuid, i64)>>> {
    let mut tx = pool.begin().await?;
    // The trigger `campaign_cancelled_notify` tells every coordinator at commit.
    let cancelled = sqlx::query(
        "UPDATE campaigns SET status = 'cancelled', finished_at = now(), cancel_reason = $2 \
         WHERE id = $1 AND status = 'running'",
    )
    .bind(campaign_id)
    .bind(reason)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !cancelled {
        return Ok(None);
    }
    // Locked in id order first, as every statement over several jobs' rows,
    // and once ([`crate::store::jobs::mark_started_many`]): a lock rechecks the
    // status it waited for, so the update needs no filter of its own, which
    // the planner, its statistics counting few queued, would take for one row
    // and then lock the campaign's queue again for each job.
    sqlx::query(
        "WITH queued AS MATERIALIZED ( \
             SELECT id FROM jobs WHERE campaign_id = $1 AND status = 'queued' ORDER BY id FOR NO KEY UPDATE) \
         UPDATE jobs SET status = 'cancelled', finished_at = now() FROM queued WHERE jobs.id = queued.id",
    )
    .bind(campaign_id)
    .execute(&mut *tx)
    .await?;
    let running = running_jobs(&mut *tx, campaign_id).await?;
    tx.commit().await?;
    Ok(Some(running))
}

/// A running job of a cancelled campaign, which its agent is to stop.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ToStop {
    pub job_id: uuid::Uuid,
    pub host_id: i64,
    pub attempt_id: Option<uuid::Uuid>,
    /// What the agent is told: the cancel's reason.
    pub reason: String,
}

/// The running jobs of cancelled campaigns (of `campaign` only, when given)
/// on `hosts`: each coordinator asks for its own hosts' jobs, after a cancel
/// anywhere in the cluster and now and then as a safety net.
pub async fn running_of_cancelled(
    db: impl PgExecutor<'_>,
    hosts: &[i64],
    campaign: Option<i64>,
) -> Result<Vec<ToStop>> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as(
        "SELECT j.id AS job_id, j.host_id, j.attempt_id, \
             coalesce(c.cancel_reason, 'campaign cancelled') AS reason \
         FROM campaigns c JOIN jobs j ON j.campaign_id = c.id AND j.status = 'running' \
         WHERE c.status = 'cancelled' AND ($2::bigint IS NULL OR c.id = $2) AND j.host_id = ANY($1) \
         ORDER BY j.host_id",
    )
    .bind(hosts)
    .bind(campaign)
    .fetch_all(db)
    .await?)
}

/// Marks the running campaigns among `campaign_ids` finished when none of
/// their jobs is queued or running; returns those it closed. Called *after*
/// the transaction that ended some of their jobs committed, never inside it,
/// and takes no lock unless it closes: results of one campaign are stored
/// side by side instead of one at a time behind the campaign's row.
///
/// Why that is enough: two transactions ending a campaign's last two jobs
/// (two hosts finishing together) each see the other's job still running
/// while both are open. But each runs this check after its own commit, in a
/// statement of its own (a fresh snapshot), so the check of whichever
/// committed last sees both jobs ended and closes the campaign. And it never
/// closes one too early: no job becomes queued or running again once ended,
/// and a campaign's jobs are all inserted with it. Should the process die
/// between the commit and this check, the sweep's [`close_any_complete`]
/// closes the campaign a few seconds later.
pub async fn close_if_complete(db: impl PgExecutor<'_>, campaign_ids: &[i64]) -> Result<Vec<i64>> {
    if campaign_ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_scalar(
        "UPDATE campaigns c SET status = 'finished', finished_at = now() \
         WHERE c.id = ANY($1) AND c.status = 'running' \
           AND NOT EXISTS (SELECT 1 FROM jobs j \
                           WHERE j.campaign_id = c.id AND j.status IN ('queued', 'running')) \
         RETURNING c.id",
    )
    .bind(campaign_ids)
    .fetch_all(db)
    .await?)
}

/// [`close_if_complete`] for every running campaign: the sweep's safety net
/// for a check that never ran (the coordinator died just after a commit).
pub async fn close_any_complete(db: impl PgExecutor<'_>) -> Result<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "UPDATE campaigns c SET status = 'finished', finished_at = now() \
         WHERE c.status = 'running' \
           AND NOT EXISTS (SELECT 1 FROM jobs j \
                           WHERE j.campaign_id = c.id AND j.status IN ('queued', 'running')) \
         RETURNING c.id",
    )
    .fetch_all(db)
    .await?)
}

/// Campaigns that ended (finished or cancelled) within the last `seconds`:
/// how the finding deriver notices campaigns end, wherever they ended.
pub async fn ended_within(db: impl PgExecutor<'_>, seconds: f64) -> Result<Vec<i64>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM campaigns WHERE finished_at > now() - make_interval(secs => $1)")
            .bind(seconds)
            .fetch_all(db)
            .await?,
    )
}

/// The campaign created just before `campaign_id`, if any: what its page
/// offers to compare with.
pub async fn previous(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT p.id FROM campaigns c JOIN campaigns p ON (p.created_at, p.id) < (c.created_at, c.id) \
         WHERE c.id = $1 ORDER BY p.created_at DESC, p.id DESC LIMIT 1",
    )
    .bind(campaign_id)
    .fetch_optional(db)
    .await?)
}

/// Queued jobs from which [`keep_queue_statistics`] refreshes the planner's
/// statistics; below it, a claim's wrong plan costs little.
pub const QUEUE_STATISTICS_FROM: i64 = 1000;

/// Makes the planner's idea of the queue true again when a campaign queues
/// its jobs: `ANALYZE` of `jobs` when at least [`QUEUE_STATISTICS_FROM`] are
/// queued and the statistics, once taken, count fewer than half of them.
/// Returns whether it analysed. Run in the transaction that queued them
/// ([`insert_with_jobs`]): `ANALYZE` counts its own transaction's rows, so
/// the statistics are true before the commit's notice wakes every
/// coordinator's dispatch, not only after this one's.
///
/// Why: the partial indexes of queued and running jobs are as good as empty
/// in the statistics whenever `jobs` was last vacuumed or analysed between
/// campaigns, which on a long-lived database, nearly every job done, is the
/// rule. The planner then reads a host's next job by scanning every active
/// job (`jobs_active_per_campaign`) instead of the host's queue: a claim's
/// cost grew with the campaign's size, and dispatch with its square
/// (docs/performance.md, "Ingest, 1,000 agents"). `SKIP_LOCKED`: a vacuum
/// of `jobs` under way is not waited for; it counts only committed jobs, so
/// this queue is then counted by the next campaign's check or autovacuum.
pub async fn keep_queue_statistics(conn: &mut PgConnection) -> Result<bool> {
    let (queued, counted): (i64, f32) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM jobs WHERE status = 'queued'), \
                (SELECT reltuples FROM pg_class WHERE oid = 'jobs_queued_per_host'::regclass)",
    )
    .fetch_one(&mut *conn)
    .await?;
    // -1: never counted, and then the planner goes by the indexes' size on
    // disk, which follows the queue.
    if queued < QUEUE_STATISTICS_FROM || counted < 0.0 || f64::from(counted) * 2.0 >= queued as f64 {
        return Ok(false);
    }
    // The hosts and campaigns too: a queue's per-host lookup is planned by
    // their statistics as much as by the status's (a fleet that grew since
    // the last count has its new hosts' queues planned as the few hosts'
    // whole history, and a claim scans the campaign in its order instead).
    sqlx::query("ANALYZE (SKIP_LOCKED) jobs (status, host_id, campaign_id)")
        .execute(conn)
        .await?;
    Ok(true)
}

/// A job to queue; see [`create_with_jobs`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub host_id: i64,
    pub spec: JobSpec,
    /// Whether the host runs its workers under an emulator, which scales the
    /// job's time limit ([`JobSpec::time_limit`]).
    pub execution: Execution,
}

/// Queues `jobs` for `campaign_id` in one statement, positions in slice order.
/// The point columns, the time limit (the agent's own rule, for the host's
/// execution) and the spec as sent all come from each job's [`JobSpec`].
pub async fn insert_jobs(conn: &mut PgConnection, campaign_id: i64, jobs: &[NewJob]) -> Result<u64> {
    let points = PointColumns::new(jobs.iter().map(|j| j.spec.point));
    let specs: Vec<Json<&JobSpec>> = jobs.iter().map(|j| Json(&j.spec)).collect();
    let done = sqlx::query(
        "INSERT INTO jobs (campaign_id, position, host_id, spec, algorithm, direction, \
         size_bytes, threads, concurrency, key_mode, path, nonce, provider, time_limit_seconds) \
         SELECT $1, * FROM UNNEST($2::integer[], $3::bigint[], $4::jsonb[], $5::text[], \
         $6::text[], $7::bigint[], $8::integer[], $9::integer[], $10::text[], $11::text[], \
         $12::text[], $13::text[], $14::double precision[])",
    )
    .bind(campaign_id)
    .bind((0..).take(jobs.len()).collect::<Vec<i32>>())
    .bind(jobs.iter().map(|j| j.host_id).collect::<Vec<i64>>())
    .bind(specs)
    .bind(points.algorithm)
    .bind(points.direction)
    .bind(points.size_bytes)
    .bind(points.threads)
    .bind(points.concurrency)
    .bind(points.key_mode)
    .bind(points.path)
    .bind(points.nonce)
    .bind(points.provider)
    .bind(
        jobs.iter()
            .map(|j| j.spec.time_limit(j.execution).as_secs_f64())
            .collect::<Vec<f64>>(),
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
/// (job, host) of a campaign's running jobs.
pub async fn running_jobs(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Vec<(Uuid, i64)>> {
    Ok(
        sqlx::query_as("SELECT id, host_id FROM jobs WHERE campaign_id = $1 AND status = 'running'")
            .bind(campaign_id)
            .fetch_all(db)
            .await?,
    )
}
