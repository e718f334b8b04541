//! Outcomes: a result or failure an agent reports for a job counts only for
//! the job's current attempt ([`crate::domain::attempt`]), judged under the job's row
//! lock ([`lock_for_outcomes`]), which orders concurrent copies of the same
//! outcome; the job then ends done or failed in the caller's transaction.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use cipherfleet_core::spec::JobSpec;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::Counts;
use crate::domain::attempt::{self, Ignored};
use crate::domain::job::JobStatus;
use crate::store::{Error, Result, campaigns};

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
        self.point.spec(self.seconds)
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
             concurrency, key_mode, path, nonce, provider, (spec -> 'seconds')::double precision AS seconds FROM jobs \
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
async fn lock_for_outcome(
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
/// judged to count) with their reasons, in the caller's transaction, and
/// counts their changes ([`Counts`]).
pub(crate) async fn fail_locked(tx: &mut PgConnection, counts: &mut Counts, failed: &[(Uuid, String)]) -> Result<()> {
    if failed.is_empty() {
        return Ok(());
    }
    let (ids, errors): (Vec<Uuid>, Vec<&str>) = failed.iter().map(|(id, e)| (*id, e.as_str())).unzip();
    let changed: Vec<Changed> = sqlx::query_as(
        "UPDATE jobs SET status = 'failed', finished_at = now(), error = f.error \
         FROM UNNEST($1::uuid[], $2::text[]) AS f(id, error), jobs o \
         WHERE jobs.id = f.id AND o.id = f.id \
         RETURNING jobs.campaign_id, jobs.host_id, o.status",
    )
    .bind(ids)
    .bind(errors)
    .fetch_all(tx)
    .await?;
    count_changes(counts, changed, JobStatus::Failed);
    Ok(())
}

/// A job an update changed: its campaign, its host and its status before
/// (the update's `FROM jobs o`, which reads the rows as they were when it began).
#[derive(sqlx::FromRow)]
struct Changed {
    campaign_id: i64,
    host_id: i64,
    #[sqlx(try_from = "String")]
    status: JobStatus,
}

/// Counts the jobs an update moved to `to`.
fn count_changes(counts: &mut Counts, changed: Vec<Changed>, to: JobStatus) {
    for c in changed {
        counts.moved(c.campaign_id, c.host_id, c.status, to);
    }
}

/// Marks the given jobs done (their results inserted in the caller's
/// transaction), each with the time its agent began it when its `JobAccepted`
/// came with its result in this batch: one update of the row for both, not
/// one each ([`super::mark_started_many`] for the others); counts their
/// changes ([`Counts`]).
pub(crate) async fn finish_locked(
    tx: &mut PgConnection,
    counts: &mut Counts,
    done: &[(Uuid, Option<DateTime<Utc>>)],
) -> Result<()> {
    if done.is_empty() {
        return Ok(());
    }
    let (ids, started): (Vec<Uuid>, Vec<Option<DateTime<Utc>>>) = done.iter().copied().unzip();
    let changed: Vec<Changed> = sqlx::query_as(
        "UPDATE jobs SET status = 'done', finished_at = now(), error = NULL, \
             started_at = coalesce(jobs.started_at, d.started_at) \
         FROM UNNEST($1::uuid[], $2::timestamptz[]) AS d(id, started_at), jobs o \
         WHERE jobs.id = d.id AND o.id = d.id AND jobs.status IN ('queued', 'running') \
         RETURNING jobs.campaign_id, jobs.host_id, o.status",
    )
    .bind(ids)
    .bind(started)
    .fetch_all(tx)
    .await?;
    count_changes(counts, changed, JobStatus::Done);
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
    let mut counts = Counts::take_over(&mut tx).await?;
    fail_locked(&mut tx, &mut counts, &[(job_id, error.to_string())]).await?;
    counts.apply(&mut tx).await?;
    tx.commit().await?;
    campaigns::close_if_complete(pool, &[campaign_id]).await?;
    Ok(Ok(()))
}
