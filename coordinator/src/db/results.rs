//! `results`: the measurement of each finished job. Writes are idempotent per
//! job: an agent that reconnects and sends a result again, or two copies
//! racing, leave one row, and the job is marked done in the same transaction.
//! Reads of one result (the raw measurement behind a report's figure) and the
//! total are here too; a host's results pages are [`super::host_results`].
//! [`StoredMemory`] is how every read of a result carries its memory figures.

use chrono::{DateTime, Utc};
use cipherfleet_core::measurement::{Figures, Memory};
use cipherfleet_core::path::PathUsed;
use serde::Serialize;
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::jobs::{self, JobStatus};
use super::{Result, campaigns, points};
use crate::attempt::Ignored;

/// Whether [`record`] stored the result, had it already, or let it pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    Inserted,
    /// The job already had a result of this attempt; nothing changed.
    Duplicate,
    /// Not the job's current attempt, or the job ended otherwise
    /// ([`attempt::judge`]); nothing changed.
    Ignored(Ignored),
}

/// Stores the result of attempt `attempt` of `job_id` as reported by
/// `host_id`'s agent and marks the job done. Only the current attempt of a
/// job not yet finished counts: a failed or cancelled job stays so, and a
/// result of an earlier attempt is [`RecordOutcome::Ignored`]. The
/// result is tied to the host's current facts snapshot. `path_used` and
/// `figures` (of the parsed [`cipherfleet_core::measurement::Measurement`])
/// fill the typed columns, stored as given: the database rejects negative
/// figures. `measurement` is the whole object the agent sent, kept verbatim.
pub async fn record(
    pool: &PgPool,
    job_id: Uuid,
    host_id: i64,
    attempt: Option<Uuid>,
    path_used: PathUsed,
    figures: &Figures,
    measurement: &Value,
) -> Result<RecordOutcome> {
    let mut tx = pool.begin().await?;
    let campaign_id = match jobs::lock_for_outcome(&mut tx, job_id, host_id, attempt).await? {
        Ok(campaign_id) => campaign_id,
        Err(ignored) => {
            // At once, not when the pool next uses the connection: until then the
            // job's row stays locked and a claim (SKIP LOCKED) would pass it over.
            tx.rollback().await?;
            return Ok(match ignored {
                // The same attempt's result again (a re-send after a lost ack).
                Ignored::Finished(JobStatus::Done) => RecordOutcome::Duplicate,
                ignored => RecordOutcome::Ignored(ignored),
            });
        }
    };
    let memory = StoredMemory::from(figures.memory.as_ref());

    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO results (job_id, host_id, snapshot_id, algorithm, direction, size_bytes, \
             threads, concurrency, key_mode, path, nonce, path_used, throughput_mb_s, ops_per_s, \
             latency_p50_ns, latency_p90_ns, latency_p99_ns, latency_p999_ns, latency_max_ns, \
             latency_method, batch_ops, cv, samples, cpu_user_seconds, cpu_sys_seconds, \
             cpu_utilization, key_setup_ns, elapsed_seconds, sample_throughputs, measurement, \
             low_samples, cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op) \
         SELECT j.id, j.host_id, h.current_snapshot_id, j.algorithm, j.direction, j.size_bytes, \
             j.threads, j.concurrency, j.key_mode, j.path, j.nonce, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
             $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25 \
         FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.id = $1 \
         ON CONFLICT (job_id) DO NOTHING \
         RETURNING id",
    )
    .bind(job_id)
    .bind(path_used.as_str())
    .bind(figures.throughput_mb_s)
    .bind(figures.ops_per_s)
    .bind(bigint(figures.latency_ns.p50))
    .bind(bigint(figures.latency_ns.p90))
    .bind(bigint(figures.latency_ns.p99))
    .bind(bigint(figures.latency_ns.p999))
    .bind(bigint(figures.latency_ns.max))
    .bind(figures.latency_method.as_str())
    .bind(bigint(figures.batch_ops))
    .bind(figures.cv)
    .bind(i32::try_from(figures.samples).unwrap_or(i32::MAX))
    .bind(figures.cpu_user_seconds)
    .bind(figures.cpu_sys_seconds)
    .bind(figures.cpu_utilization)
    .bind(figures.key_setup_ns)
    .bind(figures.elapsed_seconds)
    .bind(&figures.sample_throughputs_mb_s)
    .bind(measurement)
    .bind(figures.low_samples)
    .bind(memory.cipher_state_bytes)
    .bind(memory.peak_rss_bytes)
    .bind(memory.heap_bytes_per_op)
    .bind(memory.allocs_per_op)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(result_id) = inserted else {
        return Ok(RecordOutcome::Duplicate);
    };
    points::record(&mut tx, result_id).await?;

    sqlx::query(
        "UPDATE jobs SET status = 'done', finished_at = now(), error = NULL \
         WHERE id = $1 AND status IN ('queued', 'running')",
    )
    .bind(job_id)
    .execute(&mut *tx)
    .await?;
    campaigns::close_if_complete(&mut tx, campaign_id).await?;
    tx.commit().await?;
    Ok(RecordOutcome::Inserted)
}

/// A count as PostgreSQL's `bigint`. Nanoseconds and batch sizes past 2^63
/// are not measurements anyone took; saturating keeps the row rather than
/// refusing it over a figure nobody could act on.
fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A result's memory figures as its columns hold them (migrations/0005): each
/// `None` for results of agents that did not report memory (before schema
/// `/2`), the per-operation ones also where the worker did not count
/// allocations. Flattened into every row type that shows them, and into their
/// API rows, so JSON and CSV always carry the four columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, sqlx::FromRow)]
pub struct StoredMemory {
    /// One keyed cipher instance: `size_of` plus the heap it owns.
    pub cipher_state_bytes: Option<i64>,
    /// The worker's peak resident set (`ru_maxrss`), buffers included.
    pub peak_rss_bytes: Option<i64>,
    /// Heap bytes and allocations per operation in the measured loops (0 expected).
    pub heap_bytes_per_op: Option<f64>,
    pub allocs_per_op: Option<f64>,
}

impl From<Option<&Memory>> for StoredMemory {
    fn from(m: Option<&Memory>) -> Self {
        m.map_or_else(StoredMemory::default, |m| StoredMemory {
            cipher_state_bytes: Some(bigint(m.cipher_state_bytes)),
            peak_rss_bytes: Some(bigint(m.peak_rss_bytes)),
            heap_bytes_per_op: m.heap_bytes_per_op,
            allocs_per_op: m.allocs_per_op,
        })
    }
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

/// Result `result_id` with its host's name, if it exists.
pub async fn stored(db: impl PgExecutor<'_>, result_id: i64) -> Result<Option<StoredResult>> {
    Ok(sqlx::query_as(
        "SELECT r.id, r.job_id, (SELECT j.campaign_id FROM jobs j WHERE j.id = r.job_id) AS campaign_id, \
             r.host_id, h.name AS host_name, r.snapshot_id, r.created_at, r.measurement \
         FROM results r JOIN hosts h ON h.id = r.host_id WHERE r.id = $1",
    )
    .bind(result_id)
    .fetch_optional(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_past_the_bigint_range_saturate() {
        assert_eq!((bigint(0), bigint(9000)), (0, 9000));
        assert_eq!(bigint(u64::MAX), i64::MAX);
    }
}
