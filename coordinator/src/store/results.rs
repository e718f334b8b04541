//! `results`: the measurement of each finished job. Results are stored in
//! batches, one transaction each ([`record_batch`]); writes are idempotent
//! per job: an agent that reconnects and sends a result again, or two copies
//! racing, leave one row, and the job is marked done in the same transaction.
//! Reads of one result (the raw measurement behind a report's figure) and the
//! total are here too; a host's results pages are [`crate::report::host_results`].
//! [`crate::domain::memory::StoredMemory`] is how every read of a result
//! carries its memory figures. The document's stored form is in `document`,
//! the figures' columns in `figures`, the batch's insert in `insert`.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use cipherfleet_core::measurement::Figures;
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::jobs::{self, Job, Start};
use super::points;
use super::snapshots;
use super::{Result, advisory, campaigns};
use crate::domain::attempt::Ignored;
use crate::domain::job::JobStatus;

mod document;
mod figures;
mod insert;
pub use figures::FigureColumns;
use insert::insert_rows;

/// What storing one result did: stored it, had it already, let it pass, or
/// refused it for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOutcome {
    Inserted,
    /// The job already had a result of this attempt; nothing changed.
    Duplicate,
    /// Not the job's current attempt, or the job ended otherwise
    /// ([`crate::domain::attempt::judge`]); nothing changed.
    Ignored(Ignored),
    /// The measurement cannot be this job's result (malformed, of another
    /// point, or refused by the database's checks): the job failed with this
    /// reason, which the agent is told too. Only [`record_batch`] says this.
    Invalid(String),
}

/// A result as its agent reported it, for [`record_batch`].
#[derive(Debug, Clone)]
pub struct NewResult {
    pub job_id: Uuid,
    /// The host whose session sent it: only the job's own host may.
    pub host_id: i64,
    /// The attempt it names ([`crate::domain::attempt`]).
    pub attempt: Option<Uuid>,
    /// The measurement as checked without its job, or why it cannot be
    /// stored (the job then fails with "invalid measurement: …" if the
    /// attempt counts; an earlier attempt's bad result fails nothing).
    pub measurement: std::result::Result<Checked, String>,
}

/// A well-formed successful measurement: what fills a result's row.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The point it says it measured ([`cipherfleet_core::measurement::Measurement::spec`]), checked against
    /// the job's stored spec under the job's lock; `None`: the caller vouches for it.
    pub ran: Option<JobSpec>,
    /// The path that ran and the figures of the parsed measurement as the
    /// typed columns store them, stored as given: the database rejects
    /// negative figures.
    pub columns: FigureColumns,
    /// The object the agent sent (JSON text): as it sent it, or stored once
    /// ([`Checked::stored_once`]). Queued as text, a result takes a fraction
    /// of the memory of a parsed `serde_json::Value`.
    pub json: String,
    /// The host facts left out of `json` ([`Checked::stored_once`]); `None`:
    /// the document's host is whole, and the result is tied to its host's
    /// current snapshot when stored.
    pub from_snapshot: Option<FromSnapshot>,
    /// Which figures were left out of `json` because the typed columns give
    /// them back ([`figures`], `results.figures_in_columns`); 0: none.
    pub figures_in_columns: i32,
}

impl Checked {
    /// Measurement `json`, whose path and figures are these, as sent.
    pub fn new(ran: Option<JobSpec>, path_used: PathUsed, figures: Figures, json: String) -> Self {
        Checked {
            ran,
            columns: FigureColumns::of(path_used, figures),
            json,
            from_snapshot: None,
            figures_in_columns: 0,
        }
    }
}

/// The keys of a measurement's `host` left out of its stored document
/// because snapshot `snapshot_id`, which the result is tied to, holds the
/// same values (migration 0038); [`stored`] puts them back.
#[derive(Debug, Clone, PartialEq)]
pub struct FromSnapshot {
    pub snapshot_id: i64,
    pub keys: Vec<String>,
}

/// Stores the result of attempt `attempt` of `job_id` as reported by
/// `host_id`'s agent and marks the job done, with the rules of
/// [`record_batch`] for a batch of one, except that a measurement the
/// database refuses (a check violation) is an error and changes nothing.
/// An unknown job or one of another host is an error.
pub async fn record(
    pool: &PgPool,
    job_id: Uuid,
    host_id: i64,
    attempt: Option<Uuid>,
    path_used: PathUsed,
    figures: &Figures,
    measurement: &Value,
) -> Result<RecordOutcome> {
    let current = snapshots::current(pool, host_id).await?;
    let checked = Checked::new(None, path_used, figures.clone(), measurement.to_string()).stored_once(current.as_ref());
    let item = NewResult {
        job_id,
        host_id,
        attempt,
        measurement: Ok(checked),
    };
    store(pool, &[], std::slice::from_ref(&item), false)
        .await?
        .outcomes
        .remove(0)
}

/// What [`record_and_claim`] did: each result's outcome, in order, and the
/// jobs claimed next for the batch's hosts (`None`: that claim failed).
#[derive(Debug)]
pub struct Stored {
    pub outcomes: Vec<Result<RecordOutcome>>,
    pub claimed: Option<Vec<Job>>,
}

/// Stores a batch of results in one transaction (the ingest batcher's,
/// [`crate::ingest`]): each result's outcome in order, or an error of the
/// whole batch (the database is away) that stored none of its results. The
/// batch's job starts ([`Start`]) are noted too, each at the time it was
/// heard: those of jobs with a result in the batch by the same transaction,
/// the others just before it, committed on their own (their results come in
/// a later batch, which must not wait for this one's locks; one that
/// committed first does not lose the start, [`jobs::mark_started_many`]).
///
/// The rules, for each result: only the job's own host may report it (else
/// `JobOfAnotherHost`, or `UnknownJob`); only the current attempt of a job
/// not yet finished counts ([`crate::domain::attempt::judge`]): a failed or cancelled job
/// stays so, an earlier attempt's result is `Ignored`, the same attempt's
/// again (a re-send after a lost ack, or two copies in one batch) is a
/// `Duplicate`; a result that counts is stored tied to the host's current
/// facts snapshot and its job marked done, unless its measurement is invalid
/// or not of the job's point, which fails the job (`Invalid`). A result the
/// database refuses fails alone: the batch is then stored one by one, and
/// that one's job fails with the database's reason.
pub async fn record_batch(pool: &PgPool, started: &[Start], items: &[NewResult]) -> Result<Vec<Result<RecordOutcome>>> {
    Ok(store_batch(pool, started, items, false).await?.outcomes)
}

/// [`record_batch`], and in the same transaction the next job of every host
/// with a result in the batch ([`jobs::claim_next_for_hosts`]): one commit
/// per batch instead of two. A batch stored one by one (a result the
/// database refused) claims after, in a transaction of its own.
pub async fn record_and_claim(pool: &PgPool, started: &[Start], items: &[NewResult]) -> Result<Stored> {
    store_batch(pool, started, items, true).await
}

async fn store_batch(pool: &PgPool, started: &[Start], items: &[NewResult], claim: bool) -> Result<Stored> {
    match store(pool, started, items, claim).await {
        Err(e) if check_violation(&e).is_some() => {}
        other => return other,
    }
    jobs::mark_started_many(pool, started).await?;
    let mut outcomes = Vec::with_capacity(items.len());
    for item in items {
        let outcome = match store(pool, &[], std::slice::from_ref(item), false).await {
            Ok(mut one) => one.outcomes.remove(0),
            Err(e) => match check_violation(&e) {
                Some(reason) => {
                    let refused = NewResult {
                        measurement: Err(reason),
                        ..item.clone()
                    };
                    store(pool, &[], std::slice::from_ref(&refused), false)
                        .await?
                        .outcomes
                        .remove(0)
                }
                None => return Err(e),
            },
        };
        outcomes.push(outcome);
    }
    let claimed = if claim {
        let hosts: Vec<i64> = items.iter().map(|i| i.host_id).collect();
        jobs::claim_next_for_hosts(pool, &hosts)
            .await
            .inspect_err(
                |e| tracing::warn!(error = %e, hosts = hosts.len(), "claiming the next jobs of a batch's hosts"),
            )
            .ok()
    } else {
        Some(Vec::new())
    };
    Ok(Stored { outcomes, claimed })
}

/// The database's reason when `e` refuses what a result holds
/// ([`super::Error::refused_value`]: a violated check constraint, such as a
/// negative figure, or a data exception, such as `\u0000` in `jsonb`). Either
/// fails that result alone; were it an error of the whole batch, its agent
/// would resend it, and it would fail every batch it lands in.
fn check_violation(e: &super::Error) -> Option<String> {
    e.refused_value()
}

/// One transaction of [`record_batch`]'s rules, claiming the next jobs of the
/// results' hosts too if `claim`; a check violation fails it whole.
async fn store(pool: &PgPool, started: &[Start], items: &[NewResult], claim: bool) -> Result<Stored> {
    let mut ids: Vec<Uuid> = items.iter().map(|i| i.job_id).collect();
    ids.sort_unstable();
    ids.dedup();
    // Starts of jobs without a result here are noted first, on their own and
    // committed at once: inside the batch's transaction they would hold their
    // jobs' rows until it commits, and the batch with their results, stored
    // alongside, would wait for it (the jobs' lock statement waited many times
    // as long so: docs/performance.md, "Ingest, 10,000 agents"). Their results
    // come later; if one's batch commits first, the start is noted all the same
    // ([`jobs::mark_started_many`]).
    let (started, alone): (Vec<Start>, Vec<_>) = started
        .iter()
        .copied()
        .partition(|s| ids.binary_search(&s.job_id).is_ok());
    jobs::mark_started_many(pool, &alone).await?;
    let started = started.as_slice();
    let hosts = if claim {
        jobs::distinct(&items.iter().map(|i| i.host_id).collect::<Vec<_>>())
    } else {
        Vec::new()
    };
    let mut tx = pool.begin().await?;
    // The hosts' claim locks before any job's row: adoptions and claims take
    // them in that order too, so none of them waits on this batch crosswise.
    advisory::lock_hosts_transaction(&mut tx, &hosts).await?;
    let mut counts = jobs::Counts::take_over(&mut tx).await?;
    let mut locked = jobs::lock_for_outcomes(&mut tx, &ids).await?;
    // Starts that [`jobs::mark_started_many`] would note, of jobs whose result
    // may end them in this batch too, with when each was heard: those are
    // noted by the same update.
    let startable: HashMap<Uuid, DateTime<Utc>> = started
        .iter()
        .filter(|s| {
            locked.get(&s.job_id).is_some_and(|l| {
                l.host_id == s.host_id && l.attempt_id == Some(s.attempt_id) && l.status == JobStatus::Running
            })
        })
        .map(|s| (s.job_id, s.at))
        .collect();
    let mut outcomes = Vec::with_capacity(items.len());
    let mut inserts: Vec<(usize, &Checked)> = Vec::new();
    let mut failed: Vec<(Uuid, String)> = Vec::new();
    let mut ended: Vec<i64> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(job) = locked.get_mut(&item.job_id) else {
            outcomes.push(Err(super::Error::UnknownJob(item.job_id)));
            continue;
        };
        let judged = match job.judge(item.job_id, item.host_id, item.attempt) {
            Ok(judged) => judged,
            Err(e) => {
                outcomes.push(Err(e));
                continue;
            }
        };
        let outcome = match judged {
            Err(Ignored::Finished(JobStatus::Done)) => RecordOutcome::Duplicate,
            Err(ignored) => RecordOutcome::Ignored(ignored),
            Ok(()) => {
                ended.push(job.campaign_id);
                match of_job(job, &item.measurement) {
                    Ok(checked) => {
                        // A second copy later in this batch is then a duplicate.
                        job.status = JobStatus::Done;
                        inserts.push((i, checked));
                        RecordOutcome::Inserted
                    }
                    Err(reason) => {
                        job.status = JobStatus::Failed;
                        let reason = format!("invalid measurement: {reason}");
                        failed.push((item.job_id, reason.clone()));
                        RecordOutcome::Invalid(reason)
                    }
                }
            }
        };
        outcomes.push(Ok(outcome));
    }
    if inserts.is_empty() && failed.is_empty() {
        jobs::mark_started_many(&mut *tx, started).await?;
        // At once, not when the pool next uses the connection: until then the
        // jobs' rows stay locked and a claim (SKIP LOCKED) would pass them over.
        if started.is_empty() && hosts.is_empty() {
            tx.rollback().await?;
            return Ok(Stored {
                outcomes,
                claimed: Some(Vec::new()),
            });
        }
        // A re-sent result's host still gets its next job.
        let claimed = jobs::claim_locked(&mut tx, &mut counts, &hosts).await?;
        counts.apply(&mut tx).await?;
        tx.commit().await?;
        return Ok(Stored {
            outcomes,
            claimed: Some(claimed),
        });
    }
    let stored = insert_rows(&mut tx, items, &inserts).await?;
    let mut done = Vec::with_capacity(stored.len());
    let mut finished = HashSet::with_capacity(stored.len());
    let mut results = Vec::with_capacity(stored.len());
    for (i, _) in &inserts {
        match stored.get(&items[*i].job_id) {
            Some(result) if finished.insert(items[*i].job_id) => {
                let job = items[*i].job_id;
                done.push((job, startable.get(&job).copied()));
                results.push(*result);
            }
            // The job had a result already; nothing changed.
            _ => outcomes[*i] = Ok(RecordOutcome::Duplicate),
        }
    }
    // Starts not noted by their jobs' finish (their result was a duplicate,
    // ignored or invalid).
    let rest: Vec<Start> = started
        .iter()
        .filter(|s| !(startable.contains_key(&s.job_id) && finished.contains(&s.job_id)))
        .copied()
        .collect();
    jobs::mark_started_many(&mut *tx, &rest).await?;
    points::record_many(&mut tx, &results).await?;
    jobs::finish_locked(&mut tx, &mut counts, &done).await?;
    jobs::fail_locked(&mut tx, &mut counts, &failed).await?;
    let claimed = jobs::claim_locked(&mut tx, &mut counts, &hosts).await?;
    // A host's finished job and its next one change its counts once.
    counts.apply(&mut tx).await?;
    tx.commit().await?;
    ended.sort_unstable();
    ended.dedup();
    // Committed: failing now would undo nothing, and the claimed jobs must
    // reach their hosts. The sweep's `close_any_complete` closes it later.
    if let Err(e) = campaigns::close_if_complete(pool, &ended).await {
        tracing::warn!(error = %e, campaigns = ?ended, "closing the campaigns of a stored batch");
    }
    Ok(Stored {
        outcomes,
        claimed: Some(claimed),
    })
}

/// The measurement, if it is one of the locked job `job`; else why not.
fn of_job<'a>(
    job: &jobs::Locked,
    measurement: &'a std::result::Result<Checked, String>,
) -> std::result::Result<&'a Checked, String> {
    let checked = measurement.as_ref().map_err(Clone::clone)?;
    if let Some(ran) = &checked.ran {
        wire::check_spec_matches(&job.spec(), ran).map_err(|e| e.to_string())?;
    }
    Ok(checked)
}

/// Number of stored results for a job: 0 or 1.
pub async fn count_for_job(db: impl PgExecutor<'_>, job_id: Uuid) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM results WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(db)
        .await?)
}

/// Stored results in total.
pub async fn count(db: impl PgExecutor<'_>) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM results").fetch_one(db).await?)
}

/// A stored result with the measurement object exactly as the agent sent it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredResult {
    pub id: i64,
    pub job_id: Uuid,
    pub campaign_id: Option<i64>,
    pub host_id: i64,
    pub host_name: String,
    pub snapshot_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub measurement: Value,
}

/// Result `result_id` with its host's name, if it exists, its measurement
/// whole again: ingest keeps in its `host` only the keys that differ from the
/// snapshot the result is tied to and names the others (`host_from_snapshot`,
/// migration 0038), put back here from that snapshot; and it leaves out the
/// figures the typed columns give back (`figures_in_columns`, migration
/// 0042), put back from them.
pub async fn stored(db: impl PgExecutor<'_>, result_id: i64) -> Result<Option<StoredResult>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        result: StoredResult,
        figures_in_columns: i32,
        #[sqlx(flatten)]
        columns: FigureColumns,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT r.id, r.job_id, (SELECT j.campaign_id FROM jobs j WHERE j.id = r.job_id) AS campaign_id, \
             r.host_id, h.name AS host_name, r.snapshot_id, r.created_at, \
             CASE WHEN r.host_from_snapshot IS NULL THEN r.measurement \
                 ELSE jsonb_set(r.measurement, '{host}', (SELECT coalesce(jsonb_object_agg(k, s.facts -> k), '{}') \
                     FROM unnest(r.host_from_snapshot) k) || (r.measurement -> 'host')) END AS measurement, \
             r.figures_in_columns, r.path_used, r.throughput_mb_s, r.ops_per_s, r.latency_p50_ns, \
             r.latency_p90_ns, r.latency_p99_ns, r.latency_p999_ns, r.latency_max_ns, r.latency_method, \
             r.batch_ops, r.cv, r.samples, r.cpu_user_seconds, r.cpu_sys_seconds, r.cpu_utilization, \
             r.key_setup_ns, r.elapsed_seconds, r.sample_throughputs, r.low_samples, r.cipher_state_bytes, \
             r.peak_rss_bytes, r.heap_bytes_per_op, r.allocs_per_op \
         FROM results r JOIN hosts h ON h.id = r.host_id \
             LEFT JOIN host_fact_snapshots s ON s.id = r.snapshot_id WHERE r.id = $1",
    )
    .bind(result_id)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|mut row| {
        if let Value::Object(doc) = &mut row.result.measurement {
            figures::put_back(doc, &row.columns, row.figures_in_columns);
        }
        row.result
    }))
}
