//! Claims: a host's next job handed to it (one host, or every host of an
//! ingest batch or a campaign's start in one statement), the agent's start of
//! it noted, and the ways a claim is undone (a job refused as busy, a
//! `RunJob` that reached no agent) or kept (a job adopted after a reconnect).
//! A host's claims and adoptions take turns under its advisory lock.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use super::{Counts, Job};
use crate::domain::job::JobStatus;
use crate::store::{Result, advisory};

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
    let mut counts = Counts::take_over(&mut tx).await?;
    let jobs = claim_locked(&mut tx, &mut counts, &hosts).await?;
    counts.apply(&mut tx).await?;
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
/// may have finished their running jobs before (the ingest batch's store),
/// and counts its jobs' changes ([`Counts`]).
pub(crate) async fn claim_locked(tx: &mut PgConnection, counts: &mut Counts, hosts: &[i64]) -> Result<Vec<Job>> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    // Every lookup is a host's, inside the lateral: its busy check too, which
    // beside it the planner may join as the set of all running jobs, scanned
    // again for every host when the statistics hold few running (a campaign's
    // dispatch then grows with the square of its hosts: docs/performance.md,
    // "Ingest, 1,000 agents"). A busy host's next job is not even locked.
    // The running campaigns are read once (their own index, migrations/0045),
    // as an array the host's queued jobs are filtered by in the queue's order,
    // the first one found ending the scan: as a join, the planner took a host
    // to have about one job in a running campaign, so read and sorted all of
    // its queue, and where the statistics counted the queue empty it read the
    // whole campaign for every host instead (docs/performance.md, "Coordinator
    // queries and sessions").
    let claimed: Vec<Job> = sqlx::query_as(concat!(
        "UPDATE jobs SET status = 'running', assigned_at = now(), started_at = NULL, \
             deadline = now() + time_limit_seconds * interval '1 second', attempt_id = gen_random_uuid() \
         FROM (SELECT n.next_id FROM UNNEST($1::bigint[]) AS h(id) \
               CROSS JOIN LATERAL ( \
                   SELECT q.id AS next_id FROM jobs q \
                   WHERE q.host_id = h.id AND q.status = 'queued' \
                     AND q.campaign_id = ANY (ARRAY(SELECT c.id FROM campaigns c WHERE c.status = 'running')) \
                     AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.host_id = h.id AND r.status = 'running') \
                   ORDER BY q.campaign_id, q.position \
                   LIMIT 1 \
                   FOR UPDATE SKIP LOCKED) n) next \
         WHERE jobs.id = next.next_id \
         RETURNING ",
        job_columns!()
    ))
    .bind(hosts)
    .fetch_all(tx)
    .await?;
    for job in &claimed {
        counts.moved(job.campaign_id, job.host_id, JobStatus::Queued, JobStatus::Running);
    }
    Ok(claimed)
}

/// A `JobAccepted`: the agent of `host_id` began attempt `attempt_id` of
/// `job_id`, as its coordinator heard at `at` (the time stored, however long
/// the start waits for its batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub job_id: Uuid,
    pub host_id: i64,
    pub attempt_id: Uuid,
    pub at: DateTime<Utc>,
}

/// Notes that agents began the attempts they were given, many at once in one
/// statement: the ingest batch's `JobAccepted`s that came without their
/// results (false starts — another host's job, another attempt, one started
/// already — are not counted). Each is noted at
/// its own time, also on a job that attempt has ended meanwhile (done,
/// failed, cancelled: its result's batch committed first) but not on one
/// queued again. Returns how many were marked.
///
/// The rows are locked in id order before any is updated, as every statement
/// that locks several jobs does: the ingest batch locks its jobs so
/// ([`super::lock_for_outcomes`]), and an update joined to the starts as they
/// came would lock in their order, holding one job's row while it waits for
/// another's that the batch holds, and the batch waiting for the first: a
/// deadlock, which PostgreSQL ends by aborting one of the two. Only the rows
/// to be noted are locked, once, in a materialized CTE: a locking subquery
/// beside the starts was planned as the inner side of a join, sorted and
/// locked again for every start, a batch's cost growing with its square
/// (docs/performance.md, "Coordinator queries and sessions").
pub async fn mark_started_many(db: impl PgExecutor<'_>, started: &[Start]) -> Result<u64> {
    if started.is_empty() {
        return Ok(0);
    }
    let jobs: Vec<Uuid> = started.iter().map(|s| s.job_id).collect();
    let hosts: Vec<i64> = started.iter().map(|s| s.host_id).collect();
    let attempts: Vec<Uuid> = started.iter().map(|s| s.attempt_id).collect();
    let at: Vec<DateTime<Utc>> = started.iter().map(|s| s.at).collect();
    let done = sqlx::query(
        "WITH locked AS MATERIALIZED ( \
             SELECT j.id, s.at FROM UNNEST($1::uuid[], $2::bigint[], $3::uuid[], $4::timestamptz[]) \
                 AS s(id, host_id, attempt_id, at) \
             JOIN jobs j ON j.id = s.id AND j.host_id = s.host_id AND j.attempt_id = s.attempt_id \
             WHERE j.status <> 'queued' AND j.started_at IS NULL \
             ORDER BY j.id FOR NO KEY UPDATE OF j) \
         UPDATE jobs SET started_at = locked.at FROM locked WHERE jobs.id = locked.id",
    )
    .bind(jobs)
    .bind(hosts)
    .bind(attempts)
    .bind(at)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// A job the agent still runs after a reconnect, in attempt `attempt_id`: it
/// is running on `host_id` again with a fresh deadline, without counting an
/// attempt. Any other job marked running on the host goes back to the queue:
/// the agent is not running it. False if the job is not this host's, already
/// finished, or dispatched again since that attempt. Under the host's claim
/// lock, so a claim racing it finds the host busy instead of tripping the
/// one-running-job index: a step of a session's start (`functions/cipherfleet_adopt.sql`,
/// [`crate::store::sessions::start`]), here on its own.
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
