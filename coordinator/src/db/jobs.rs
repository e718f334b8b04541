//! `jobs`: the scheduler's queue. A job is one point of a campaign's matrix on
//! one host and moves `queued → running → done | failed`, or to `cancelled`
//! with its campaign. A host runs one job at a time: benchmarks that overlap
//! on a machine measure each other. The unique index
//! `jobs_one_running_per_host` guarantees that whatever the callers do.

use std::collections::HashMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use cipherfleet_core::Point;
use cipherfleet_core::spec::{Execution, JobSpec};

use super::points::PointColumns;
use super::{Error, Result, advisory, campaigns};
use crate::attempt::{self, Ignored};

/// A job is given to its host at most this many times; losing the agent that
/// many times fails it (a job that crashes its agent must not loop forever).
pub const MAX_ATTEMPTS: i32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobStatus {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Done,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ];

    /// The spelling stored in `jobs.status`.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// No further change is expected.
    pub const fn is_terminal(self) -> bool {
        matches!(self, JobStatus::Done | JobStatus::Failed | JobStatus::Cancelled)
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for JobStatus {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        JobStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown job status {s:?}"))
    }
}

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
    /// outcome counts ([`crate::attempt`]). `None` before the first dispatch.
    pub attempt_id: Option<Uuid>,
}

/// The columns of [`Job`], as a literal for `concat!`.
macro_rules! job_columns {
    () => {
        "id, campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
         concurrency, key_mode, path, nonce, time_limit_seconds, status, attempts, created_at, \
         assigned_at, started_at, finished_at, deadline, error, attempt_id"
    };
}

/// A job to queue; see [`campaigns::create_with_jobs`].
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
pub async fn insert_for_campaign(conn: &mut PgConnection, campaign_id: i64, jobs: &[NewJob]) -> Result<u64> {
    let points = PointColumns::new(jobs.iter().map(|j| j.spec.point()));
    let specs: Vec<Value> = jobs
        .iter()
        .map(|j| serde_json::to_value(&j.spec).expect("a spec serialises"))
        .collect();
    let done = sqlx::query(
        "INSERT INTO jobs (campaign_id, position, host_id, spec, algorithm, direction, \
         size_bytes, threads, concurrency, key_mode, path, nonce, time_limit_seconds) \
         SELECT $1, * FROM UNNEST($2::integer[], $3::bigint[], $4::jsonb[], $5::text[], \
         $6::text[], $7::bigint[], $8::integer[], $9::integer[], $10::text[], $11::text[], \
         $12::text[], $13::double precision[])",
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
    .bind(
        jobs.iter()
            .map(|j| j.spec.time_limit(j.execution).as_secs_f64())
            .collect::<Vec<f64>>(),
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Hands `host_id` its next queued job, as [`claim_next_for_hosts`] does for many.
pub async fn claim_next_for_host(pool: &PgPool, host_id: i64) -> Result<Option<Job>> {
    Ok(claim_next_for_hosts(pool, &[host_id]).await?.pop())
}

/// Hands each of `hosts` its next queued job (oldest campaign first, then
/// matrix order) and marks it running with a deadline and a new attempt id,
/// in one transaction of two statements however many hosts: the dispatch of a
/// whole ingest batch or of a campaign's start. A host that already runs a
/// job, or has nothing queued in a running campaign, gets none. Returns the
/// claimed jobs, at most one per host, in no particular order.
pub async fn claim_next_for_hosts(pool: &PgPool, hosts: &[i64]) -> Result<Vec<Job>> {
    let hosts = distinct(hosts);
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = pool.begin().await?;
    // Claims (and adoptions) of one host take turns, and the claim below is
    // a statement of its own, with a snapshot taken after the wait: it sees
    // what the other one left running.
    advisory::lock_hosts_transaction(&mut tx, &hosts).await?;
    let jobs = claim_locked(&mut tx, &hosts).await?;
    tx.commit().await?;
    Ok(jobs)
}

/// `hosts` sorted, each once: the order every claim takes their locks in.
pub(crate) fn distinct(hosts: &[i64]) -> Vec<i64> {
    let mut hosts = hosts.to_vec();
    hosts.sort_unstable();
    hosts.dedup();
    hosts
}

/// The claim of [`claim_next_for_hosts`] in the caller's transaction, which
/// holds the hosts' advisory locks ([`advisory::lock_hosts_transaction`]) and
/// may have finished their running jobs before (the ingest batch's store).
pub(crate) async fn claim_locked(tx: &mut PgConnection, hosts: &[i64]) -> Result<Vec<Job>> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(sqlx::query_as(concat!(
        "UPDATE jobs SET status = 'running', assigned_at = now(), started_at = NULL, \
             deadline = now() + time_limit_seconds * interval '1 second', attempt_id = gen_random_uuid() \
         FROM (SELECT n.next_id FROM UNNEST($1::bigint[]) AS h(id) \
               CROSS JOIN LATERAL ( \
                   SELECT q.id AS next_id FROM jobs q \
                   WHERE q.host_id = h.id AND q.status = 'queued' \
                     AND EXISTS (SELECT 1 FROM campaigns c WHERE c.id = q.campaign_id AND c.status = 'running') \
                   ORDER BY q.campaign_id, q.position \
                   LIMIT 1 \
                   FOR UPDATE SKIP LOCKED) n \
               WHERE NOT EXISTS (SELECT 1 FROM jobs r WHERE r.host_id = h.id AND r.status = 'running')) next \
         WHERE jobs.id = next.next_id \
         RETURNING ",
        job_columns!()
    ))
    .bind(hosts)
    .fetch_all(tx)
    .await?)
}

/// Notes that the agent began executing attempt `attempt_id` of a job it was
/// given. False if that attempt is not running on `host_id` (or was already started).
pub async fn mark_started(db: impl PgExecutor<'_>, job_id: Uuid, host_id: i64, attempt_id: Uuid) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE jobs SET started_at = now() \
         WHERE id = $1 AND host_id = $2 AND attempt_id = $3 AND status = 'running' AND started_at IS NULL",
    )
    .bind(job_id)
    .bind(host_id)
    .bind(attempt_id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// [`mark_started`] for many (job, host, attempt) at once, in one statement:
/// the ingest batch's `JobAccepted`s. Returns how many were marked.
pub async fn mark_started_many(db: impl PgExecutor<'_>, started: &[(Uuid, i64, Uuid)]) -> Result<u64> {
    if started.is_empty() {
        return Ok(0);
    }
    let jobs: Vec<Uuid> = started.iter().map(|s| s.0).collect();
    let hosts: Vec<i64> = started.iter().map(|s| s.1).collect();
    let attempts: Vec<Uuid> = started.iter().map(|s| s.2).collect();
    let done = sqlx::query(
        "UPDATE jobs SET started_at = now() \
         FROM UNNEST($1::uuid[], $2::bigint[], $3::uuid[]) AS s(id, host_id, attempt_id) \
         WHERE jobs.id = s.id AND jobs.host_id = s.host_id AND jobs.attempt_id = s.attempt_id \
           AND jobs.status = 'running' AND jobs.started_at IS NULL",
    )
    .bind(jobs)
    .bind(hosts)
    .bind(attempts)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Fails a job on the coordinator's own account (a stored spec it cannot
/// read); not queued again. False if the job was not queued or running on
/// `host_id`. An agent's report goes through [`fail_attempt`].
pub async fn fail(pool: &PgPool, job_id: Uuid, host_id: i64, error: &str) -> Result<bool> {
    let mut tx = pool.begin().await?;
    // The campaign's row first, as `campaigns::cancel` takes it: a cancel under
    // way then wins, and this finds the job cancelled.
    sqlx::query(
        "SELECT 1 FROM campaigns c JOIN jobs j ON j.campaign_id = c.id \
         WHERE j.id = $1 FOR NO KEY UPDATE OF c",
    )
    .bind(job_id)
    .execute(&mut *tx)
    .await?;
    let campaign: Option<i64> = sqlx::query_scalar(
        "UPDATE jobs SET status = 'failed', finished_at = now(), error = $3 \
         WHERE id = $1 AND host_id = $2 AND status IN ('queued', 'running') \
         RETURNING campaign_id",
    )
    .bind(job_id)
    .bind(host_id)
    .bind(error)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    if let Some(campaign_id) = campaign {
        campaigns::close_if_complete(pool, &[campaign_id]).await?;
    }
    Ok(campaign.is_some())
}

/// A job's row as an outcome reported for it finds it, locked by
/// [`lock_for_outcomes`] until the transaction ends.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Locked {
    pub host_id: i64,
    pub campaign_id: i64,
    #[sqlx(try_from = "String")]
    pub status: JobStatus,
    pub attempt_id: Option<Uuid>,
    /// The job's point, from its typed columns, and its measured time: what a
    /// measurement is checked against ([`Locked::spec`]). Not the whole spec
    /// jsonb, which each row of an ingest batch would send and parse twice.
    #[sqlx(flatten)]
    pub point: Point,
    pub seconds: f64,
}

impl Locked {
    /// The job as sent to the agent (its stored spec, from the typed copies).
    pub fn spec(&self) -> JobSpec {
        let p = &self.point;
        JobSpec {
            algorithm: p.algorithm,
            direction: p.direction,
            size_bytes: p.size_bytes,
            threads: p.threads,
            concurrency: p.concurrency,
            key_mode: p.key_mode,
            path: p.path,
            nonce: p.nonce,
            seconds: self.seconds,
        }
    }

    /// Whether an outcome that `host_id` reports for attempt `attempt` of job
    /// `job_id` (this row) counts ([`attempt::judge`]); one of another host is an error.
    pub fn judge(&self, job_id: Uuid, host_id: i64, attempt: Option<Uuid>) -> Result<Result<(), Ignored>> {
        if self.host_id != host_id {
            return Err(Error::JobOfAnotherHost {
                job: job_id,
                host: host_id,
            });
        }
        Ok(attempt::judge(self.status, self.attempt_id, attempt))
    }
}

/// Locks the rows of `job_ids` for outcomes reported for them, which orders
/// concurrent copies of the same outcome, in id order, so two batches never
/// wait on each other crosswise. Unknown ids are missing from the map.
pub(crate) async fn lock_for_outcomes(tx: &mut PgConnection, job_ids: &[Uuid]) -> Result<HashMap<Uuid, Locked>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        id: Uuid,
        #[sqlx(flatten)]
        locked: Locked,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, host_id, campaign_id, status, attempt_id, algorithm, direction, size_bytes, threads, \
             concurrency, key_mode, path, nonce, (spec -> 'seconds')::double precision AS seconds FROM jobs \
         WHERE id = ANY($1) ORDER BY id FOR UPDATE",
    )
    .bind(job_ids)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.locked)).collect())
}

/// Locks a job's row for an outcome that `host_id` reports for attempt
/// `attempt` ([`lock_for_outcomes`]). Returns the job's campaign, or why the
/// outcome does not count ([`attempt::judge`]); an unknown job or one of
/// another host is an error. The caller rolls back on `Ignored` at once, so
/// the lock is not held until the connection is reused.
pub(crate) async fn lock_for_outcome(
    tx: &mut PgConnection,
    job_id: Uuid,
    host_id: i64,
    attempt: Option<Uuid>,
) -> Result<std::result::Result<i64, Ignored>> {
    let locked = lock_for_outcomes(tx, &[job_id]).await?;
    let job = locked.get(&job_id).ok_or(Error::UnknownJob(job_id))?;
    Ok(job.judge(job_id, host_id, attempt)?.map(|()| job.campaign_id))
}

/// Fails the given jobs (locked by [`lock_for_outcomes`], their outcomes
/// judged to count) with their reasons, in the caller's transaction.
pub(crate) async fn fail_locked(tx: &mut PgConnection, failed: &[(Uuid, String)]) -> Result<()> {
    if failed.is_empty() {
        return Ok(());
    }
    let (ids, errors): (Vec<Uuid>, Vec<&str>) = failed.iter().map(|(id, e)| (*id, e.as_str())).unzip();
    sqlx::query(
        "UPDATE jobs SET status = 'failed', finished_at = now(), error = f.error \
         FROM UNNEST($1::uuid[], $2::text[]) AS f(id, error) WHERE jobs.id = f.id",
    )
    .bind(ids)
    .bind(errors)
    .execute(tx)
    .await?;
    Ok(())
}

/// Marks the given jobs done (their results inserted in the caller's transaction).
pub(crate) async fn finish_locked(tx: &mut PgConnection, done: &[Uuid]) -> Result<()> {
    if done.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE jobs SET status = 'done', finished_at = now(), error = NULL \
         WHERE id = ANY($1) AND status IN ('queued', 'running')",
    )
    .bind(done)
    .execute(tx)
    .await?;
    Ok(())
}

/// Fails a job its agent reported failed in attempt `attempt` (invalid point,
/// self-test failure, crash, time limit); such failures repeat, so it is not
/// queued again. Only the job's current attempt can fail it ([`attempt::judge`]):
/// otherwise the report is `Ignored`. An unknown job or one of another host is an error.
pub async fn fail_attempt(
    pool: &PgPool,
    job_id: Uuid,
    host_id: i64,
    attempt: Option<Uuid>,
    error: &str,
) -> Result<Result<(), Ignored>> {
    let mut tx = pool.begin().await?;
    let campaign_id = match lock_for_outcome(&mut tx, job_id, host_id, attempt).await? {
        Ok(campaign_id) => campaign_id,
        Err(ignored) => {
            // At once, not when the pool next uses the connection: until then the
            // row stays locked and a claim (SKIP LOCKED) would pass the job over.
            tx.rollback().await?;
            return Ok(Err(ignored));
        }
    };
    fail_locked(&mut tx, &[(job_id, error.to_string())]).await?;
    tx.commit().await?;
    campaigns::close_if_complete(pool, &[campaign_id]).await?;
    Ok(Ok(()))
}

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
/// One statement (`cipherfleet_requeue_lost`, migrations/0030, which a
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

/// A job the agent still runs after a reconnect, in attempt `attempt_id`: it
/// is running on `host_id` again with a fresh deadline, without counting an
/// attempt. Any other job marked running on the host goes back to the queue:
/// the agent is not running it. False if the job is not this host's, already
/// finished, or dispatched again since that attempt. Under the host's claim
/// lock, so a claim racing it finds the host busy instead of tripping the
/// one-running-job index: a step of a session's start (`cipherfleet_adopt`,
/// migrations/0030, [`super::sessions::start`]), here on its own.
pub async fn adopt(pool: &PgPool, job_id: Uuid, host_id: i64, attempt_id: Uuid) -> Result<bool> {
    Ok(sqlx::query_scalar("SELECT cipherfleet_adopt($1, $2, $3)")
        .bind(host_id)
        .bind(job_id)
        .bind(attempt_id)
        .fetch_one(pool)
        .await?)
}

/// The agent refused attempt `attempt_id` of a job because it is busy: back to
/// the queue, no attempt counted. False if that attempt is not running on `host_id`.
pub async fn release(pool: &PgPool, job_id: Uuid, host_id: i64, attempt_id: Uuid) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE jobs SET status = 'queued', assigned_at = NULL, started_at = NULL, deadline = NULL \
         WHERE id = $1 AND host_id = $2 AND attempt_id = $3 AND status = 'running'",
    )
    .bind(job_id)
    .bind(host_id)
    .bind(attempt_id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Undoes `claimed` (from [`claim_next_for_host`]) when its `RunJob` reached no
/// agent: back to the queue, no attempt counted. False if the job is no longer
/// in that claim (re-queued, and maybe claimed again, since).
pub async fn unclaim(pool: &PgPool, claimed: &Job) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE jobs SET status = 'queued', assigned_at = NULL, started_at = NULL, deadline = NULL \
         WHERE id = $1 AND host_id = $2 AND status = 'running' AND attempt_id = $3",
    )
    .bind(claimed.id)
    .bind(claimed.host_id)
    .bind(claimed.attempt_id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
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

/// Queued jobs older than their campaign's time to live fail with the reason
/// (their host is gone, or has not come back); their campaigns close when that
/// was their last work. Returns the failed jobs with their hosts.
pub async fn expire_queued(pool: &PgPool) -> Result<Vec<(Uuid, i64)>> {
    let mut tx = pool.begin().await?;
    let rows: Vec<(Uuid, i64, i64)> = sqlx::query_as(
        "UPDATE jobs j SET status = 'failed', finished_at = now(), \
             error = format('still queued after the campaign''s time to live of %s s: its host did not \
                 take it (offline, retired, or busy with other work)', c.queued_ttl_seconds) \
         FROM campaigns c \
         WHERE c.id = j.campaign_id AND j.status = 'queued' \
           AND j.created_at + c.queued_ttl_seconds * interval '1 second' < now() \
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

/// (job, host) of a campaign's running jobs.
pub async fn running_for_campaign(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Vec<(Uuid, i64)>> {
    Ok(
        sqlx::query_as("SELECT id, host_id FROM jobs WHERE campaign_id = $1 AND status = 'running'")
            .bind(campaign_id)
            .fetch_all(db)
            .await?,
    )
}

/// Jobs of every campaign per status (`/metrics`): (status, count).
pub async fn count_by_status(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>> {
    Ok(sqlx::query_as("SELECT status, count(*) FROM jobs GROUP BY status")
        .fetch_all(db)
        .await?)
}
