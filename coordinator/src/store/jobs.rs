//! `jobs`: the scheduler's queue. A job is one point of a campaign's matrix on
//! one host and moves `queued → running → done | failed`, or to `cancelled`
//! with its campaign. A host runs one job at a time: benchmarks that overlap
//! on a machine measure each other. The unique index
//! `jobs_one_running_per_host` guarantees that whatever the callers do.
//!
//! Here: the queue itself and its sweeps. Handing jobs out is [`claims`];
//! judging and storing what agents report for them is [`outcomes`].

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use cipherfleet_core::Point;

use super::{Result, campaigns};
use crate::domain::job::JobStatus;

/// A job is given to its host at most this many times; losing the agent that
/// many times fails it (a job that crashes its agent must not loop forever).
pub const MAX_ATTEMPTS: i32 = 2;

/// A stored job.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Job {
    pub id: Uuid,
    pub campaign_id: i64,
    pub host_id: i64,
    pub position: i32,
    /// The job as sent to the agent, verbatim.
    pub spec: Value,
    #[sqlx(flatten)]
    pub point: Point,
    pub time_limit_seconds: f64,
    #[sqlx(try_from = "String")]
    pub status: JobStatus,
    /// Runs lost with the agent so far.
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub assigned_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// When a running job is overdue: assignment plus its time limit.
    pub deadline: Option<DateTime<Utc>>,
    pub error: Option<String>,
    /// The current attempt: new on every claim, sent in `RunJob`; only its
    /// outcome counts ([`crate::domain::attempt`]). `None` before the first dispatch.
    pub attempt_id: Option<Uuid>,
}

/// The columns of [`Job`], as a literal for `concat!`.
macro_rules! job_columns {
    () => {
        "id, campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
         concurrency, key_mode, path, nonce, provider, time_limit_seconds, status, attempts, created_at, \
         assigned_at, started_at, finished_at, deadline, error, attempt_id"
    };
}

mod claims;
mod counts;
mod outcomes;

pub use claims::{Start, adopt, claim_next_for_host, claim_next_for_hosts, mark_started_many, release, unclaim};
pub(crate) use claims::{claim_locked, distinct};
pub(crate) use counts::Counts;
pub(crate) use outcomes::{Locked, fail_locked, finish_locked, lock_for_outcomes};
pub use outcomes::{fail, fail_attempt};

/// What [`requeue_lost`] did with the jobs of a lost agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requeued {
    /// Back in the queue for another attempt.
    pub requeued: Vec<Uuid>,
    /// Lost [`MAX_ATTEMPTS`] times: failed with "agent lost".
    pub failed: Vec<Uuid>,
}

/// The agent of `host_id` went away: its running job goes back to the queue
/// with one more attempt counted, or fails once [`MAX_ATTEMPTS`] is reached.
/// One statement (`functions/cipherfleet_requeue_lost.sql`, which a
/// session's start runs too when the agent comes back running nothing).
pub async fn requeue_lost(pool: &PgPool, host_id: i64) -> Result<Requeued> {
    let rows: Vec<(Uuid, String, i64)> =
        sqlx::query_as("SELECT job_id, status, campaign_id FROM cipherfleet_requeue_lost($1, $2, $3)")
            .bind(host_id)
            .bind(MAX_ATTEMPTS)
            .bind(lost_error())
            .fetch_all(pool)
            .await?;
    let mut outcome = Requeued::default();
    let mut ended = Vec::new();
    for (id, status, campaign_id) in rows {
        if status == JobStatus::Failed.as_str() {
            outcome.failed.push(id);
            ended.push(campaign_id);
        } else {
            outcome.requeued.push(id);
        }
    }
    campaigns::close_if_complete(pool, &ended).await?;
    Ok(outcome)
}

/// The error of a job failed by [`requeue_lost`] after its last attempt.
pub(crate) fn lost_error() -> String {
    format!("agent lost while running the job ({MAX_ATTEMPTS} attempts)")
}

pub async fn get(db: impl PgExecutor<'_>, job_id: Uuid) -> Result<Option<Job>> {
    Ok(
        sqlx::query_as(concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"))
            .bind(job_id)
            .fetch_optional(db)
            .await?,
    )
}

/// The job `host_id` is running, if any.
pub async fn running_for_host(db: impl PgExecutor<'_>, host_id: i64) -> Result<Option<Job>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE host_id = $1 AND status = 'running'"
    ))
    .bind(host_id)
    .fetch_optional(db)
    .await?)
}

/// A campaign's jobs in matrix order.
pub async fn for_campaign(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Vec<Job>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE campaign_id = $1 ORDER BY position"
    ))
    .bind(campaign_id)
    .fetch_all(db)
    .await?)
}

/// How long past its deadline the running job of a host that nobody holds
/// (no live lease: its coordinator died or stopped) waits for the host's agent
/// to reconnect and report it before [`expire_overdue`] takes it back: longer
/// than a reconnect herd lasts (the agents' backoff is at most 30 s, a
/// coordinator's pushback too, and a herd of tens of thousands is admitted in
/// a few minutes at most).
pub const RECONNECT_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// A running job that passed its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub job_id: Uuid,
    pub host_id: i64,
    /// The attempt that overran.
    pub attempt_id: Option<Uuid>,
    /// Queued again (false: failed after its last attempt).
    pub requeued: bool,
}

/// Running jobs past their deadline go back to the queue with one more
/// attempt counted, or fail once [`MAX_ATTEMPTS`] is reached. The attempt
/// that overran is withdrawn (`attempt_id` cleared): its outcome, however
/// late or early, no longer counts, so the job is retried for real.
/// Only jobs of hosts whose live lease is `coordinator`'s, or nobody's: the
/// host's own coordinator handles its jobs, since only it can tell the agent.
/// A host nobody holds is reconnecting (its coordinator died or stopped, and
/// its agent still runs the job and reports it in its next hello, which adopts
/// it with a fresh deadline), or gone: its job is overdue only
/// [`RECONNECT_GRACE`] after its deadline, so a slow reconnect herd does not
/// get the jobs its agents still run dispatched again.
pub async fn expire_overdue(pool: &PgPool, coordinator: Uuid) -> Result<Vec<Expired>> {
    let mut tx = pool.begin().await?;
    let rows: Vec<(Uuid, i64, String, i64, Option<Uuid>)> = sqlx::query_as(
        "UPDATE jobs j SET \
             attempts = j.attempts + 1, \
             status = CASE WHEN j.attempts + 1 >= $1 THEN 'failed' ELSE 'queued' END, \
             error = CASE WHEN j.attempts + 1 >= $1 THEN $2::text END, \
             finished_at = CASE WHEN j.attempts + 1 >= $1 THEN now() END, \
             assigned_at = NULL, started_at = NULL, deadline = NULL, attempt_id = NULL \
         FROM (SELECT id, attempt_id FROM jobs WHERE status = 'running' AND deadline < now() \
               AND (EXISTS (SELECT 1 FROM host_leases l WHERE l.host_id = jobs.host_id \
                        AND l.expires_at > now() AND l.coordinator = $3) \
                    OR deadline < now() - $4 * interval '1 second' \
                        AND NOT EXISTS (SELECT 1 FROM host_leases l WHERE l.host_id = jobs.host_id \
                            AND l.expires_at > now())) \
               ORDER BY id FOR UPDATE OF jobs) overdue \
         WHERE j.id = overdue.id \
         RETURNING j.id, j.host_id, j.status, j.campaign_id, overdue.attempt_id",
    )
    .bind(MAX_ATTEMPTS)
    .bind(format!("exceeded its time limit ({MAX_ATTEMPTS} attempts)"))
    .bind(coordinator)
    .bind(RECONNECT_GRACE.as_secs_f64())
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut out = Vec::with_capacity(rows.len());
    let mut ended = Vec::new();
    for (job_id, host_id, status, campaign_id, attempt_id) in rows {
        let requeued = status == JobStatus::Queued.as_str();
        if !requeued {
            ended.push(campaign_id);
        }
        out.push(Expired {
            job_id,
            host_id,
            attempt_id,
            requeued,
        });
    }
    campaigns::close_if_complete(pool, &ended).await?;
    Ok(out)
}

/// Of `hosts`, those that run nothing and have a queued job of a running
/// campaign: the ones a dispatch would give work to.
pub async fn idle_with_work(db: impl PgExecutor<'_>, hosts: &[i64]) -> Result<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT h.id FROM UNNEST($1::bigint[]) AS h(id) \
         WHERE EXISTS (SELECT 1 FROM jobs j JOIN campaigns c ON c.id = j.campaign_id \
                 WHERE j.host_id = h.id AND j.status = 'queued' AND c.status = 'running') \
           AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.host_id = h.id AND r.status = 'running') \
         ORDER BY h.id",
    )
    .bind(hosts)
    .fetch_all(db)
    .await?)
}

/// Queued jobs of campaigns older than their time to live fail with the
/// reason (their host is gone, or has not come back); their campaigns close
/// when that was their last work. Returns the failed jobs with their hosts.
///
/// A job is queued with its campaign, in one transaction, so its age is its
/// campaign's, and only a running campaign has queued jobs (one closes when
/// none is left; a cancel cancels them): the sweep picks the running
/// campaigns past their time to live first and reads only their active jobs
/// (`jobs_active_per_campaign`), not every queued job of the fleet: a sweep,
/// every few seconds while a campaign runs, then costs a small fraction of
/// what it did in a large campaign (docs/performance.md, "Coordinator queries
/// and sessions").
/// The expired jobs' rows are locked in id order before they are updated,
/// and once, as by every statement over several jobs ([`mark_started_many`]);
/// the lock rechecks their status, so the update has no filter of its own.
pub async fn expire_queued(pool: &PgPool) -> Result<Vec<(Uuid, i64)>> {
    let mut tx = pool.begin().await?;
    let rows: Vec<(Uuid, i64, i64)> = sqlx::query_as(
        "WITH expired AS MATERIALIZED ( \
             SELECT q.id, c.queued_ttl_seconds FROM jobs q JOIN campaigns c ON c.id = q.campaign_id \
             WHERE q.status = 'queued' AND c.status = 'running' \
               AND c.created_at + c.queued_ttl_seconds * interval '1 second' < now() \
             ORDER BY q.id FOR NO KEY UPDATE OF q) \
         UPDATE jobs j SET status = 'failed', finished_at = now(), \
             error = format('still queued after the campaign''s time to live of %s s: its host did not \
                 take it (offline, retired, or busy with other work)', expired.queued_ttl_seconds) \
         FROM expired WHERE j.id = expired.id \
         RETURNING j.id, j.host_id, j.campaign_id",
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut campaign_ids: Vec<i64> = rows.iter().map(|r| r.2).collect();
    campaign_ids.sort_unstable();
    campaign_ids.dedup();
    campaigns::close_if_complete(pool, &campaign_ids).await?;
    Ok(rows.into_iter().map(|(job, host, _)| (job, host)).collect())
}

/// Failed jobs of a campaign with their host's name, newest first.
pub async fn failures(db: impl PgExecutor<'_>, campaign_id: i64, limit: i64) -> Result<Vec<(Job, String)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        job: Job,
        host_name: String,
    }
    let rows: Vec<Row> = sqlx::query_as(concat!(
        "SELECT ",
        job_columns!(),
        ", (SELECT name FROM hosts h WHERE h.id = jobs.host_id) AS host_name \
         FROM jobs WHERE campaign_id = $1 AND status = 'failed' ORDER BY finished_at DESC LIMIT $2"
    ))
    .bind(campaign_id)
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.job, r.host_name)).collect())
}
