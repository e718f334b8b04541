//! `results`: the measurement of each finished job. Writes are idempotent per
//! job: an agent that reconnects and sends a result again, or two copies
//! racing, leave one row, and the job is marked done in the same transaction.
//! Reads of one result (the raw measurement behind a report's figure) and the
//! total are here too; a host's results pages are [`super::host_results`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{Error, Result, campaigns, points};

/// Latency figures in nanoseconds, as `latency_ns` in the measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyNs {
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub p999: i64,
    pub max: i64,
}

/// The figures of a successful measurement that get typed columns. Field
/// names follow `docs/measurement-schema.md`, so a measurement deserialises
/// straight into it ([`Metrics::from_measurement`]). Values are stored as
/// given: the database rejects negative figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// `accelerated` or `software`: what the worker really ran.
    pub path_used: String,
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    pub latency_ns: LatencyNs,
    /// `per-op`, `batch-mean` or `per-object`.
    pub latency_method: String,
    pub batch_ops: i64,
    pub cv: Option<f64>,
    pub samples: i32,
    pub cpu_user_seconds: f64,
    pub cpu_sys_seconds: f64,
    pub cpu_utilization: f64,
    pub key_setup_ns: f64,
    pub elapsed_seconds: f64,
    #[serde(rename = "sample_throughputs_mb_s")]
    pub sample_throughputs: Vec<f64>,
}

impl Metrics {
    /// Reads the figures of a `cipherfleet.measurement/1` object; fails for a
    /// failed point (it has no figures) or a malformed one.
    pub fn from_measurement(measurement: &Value) -> serde_json::Result<Self> {
        Metrics::deserialize(measurement)
    }
}

/// Whether [`record`] stored the result or had it already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    Inserted,
    /// The job already had a result; nothing changed.
    Duplicate,
}

/// Stores the result of `job_id` as reported by `host_id`'s agent and marks
/// the job done (a cancelled job stays cancelled; its result is kept). The
/// result is tied to the host's current facts snapshot. `measurement` is the
/// whole object the agent sent, kept verbatim.
pub async fn record(
    pool: &PgPool,
    job_id: Uuid,
    host_id: i64,
    metrics: &Metrics,
    measurement: &Value,
) -> Result<RecordOutcome> {
    let mut tx = pool.begin().await?;
    // Locking the job orders concurrent copies of the same result.
    let job: Option<(i64, i64)> = sqlx::query_as("SELECT host_id, campaign_id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(job_id)
        .fetch_optional(&mut *tx)
        .await?;
    let (job_host, campaign_id) = job.ok_or(Error::UnknownJob(job_id))?;
    if job_host != host_id {
        return Err(Error::JobOfAnotherHost {
            job: job_id,
            host: host_id,
        });
    }

    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO results (job_id, host_id, snapshot_id, algorithm, direction, size_bytes, \
             threads, concurrency, key_mode, path, path_used, throughput_mb_s, ops_per_s, \
             latency_p50_ns, latency_p90_ns, latency_p99_ns, latency_p999_ns, latency_max_ns, \
             latency_method, batch_ops, cv, samples, cpu_user_seconds, cpu_sys_seconds, \
             cpu_utilization, key_setup_ns, elapsed_seconds, sample_throughputs, measurement) \
         SELECT j.id, j.host_id, h.current_snapshot_id, j.algorithm, j.direction, j.size_bytes, \
             j.threads, j.concurrency, j.key_mode, j.path, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
             $11, $12, $13, $14, $15, $16, $17, $18, $19, $20 \
         FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.id = $1 \
         ON CONFLICT (job_id) DO NOTHING \
         RETURNING id",
    )
    .bind(job_id)
    .bind(&metrics.path_used)
    .bind(metrics.throughput_mb_s)
    .bind(metrics.ops_per_s)
    .bind(metrics.latency_ns.p50)
    .bind(metrics.latency_ns.p90)
    .bind(metrics.latency_ns.p99)
    .bind(metrics.latency_ns.p999)
    .bind(metrics.latency_ns.max)
    .bind(&metrics.latency_method)
    .bind(metrics.batch_ops)
    .bind(metrics.cv)
    .bind(metrics.samples)
    .bind(metrics.cpu_user_seconds)
    .bind(metrics.cpu_sys_seconds)
    .bind(metrics.cpu_utilization)
    .bind(metrics.key_setup_ns)
    .bind(metrics.elapsed_seconds)
    .bind(&metrics.sample_throughputs)
    .bind(measurement)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(result_id) = inserted else {
        return Ok(RecordOutcome::Duplicate);
    };
    points::record(&mut tx, result_id).await?;

    sqlx::query(
        "UPDATE jobs SET status = 'done', finished_at = now(), error = NULL \
         WHERE id = $1 AND status <> 'cancelled'",
    )
    .bind(job_id)
    .execute(&mut *tx)
    .await?;
    campaigns::close_if_complete(&mut tx, campaign_id).await?;
    tx.commit().await?;
    Ok(RecordOutcome::Inserted)
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
    use serde_json::json;

    use super::*;

    #[test]
    fn metrics_are_read_from_a_measurement() {
        let m = json!({
            "schema": "cipherfleet.measurement/1", "status": "ok",
            "algorithm": "aes-128-gcm", "direction": "encrypt", "size_bytes": 16384,
            "path_used": "accelerated", "throughput_mb_s": 4012.5, "ops_per_s": 244903.0,
            "latency_ns": {"p50": 4000, "p90": 4100, "p99": 5000, "p999": 9000, "max": 20000},
            "latency_method": "per-op", "batch_ops": 1, "cv": 0.01, "samples": 30,
            "sample_seconds": 0.033, "warmup_seconds": 0.25, "elapsed_seconds": 1.0,
            "operations": 244903, "bytes_processed": 4012490752u64,
            "cpu_user_seconds": 0.99, "cpu_sys_seconds": 0.0, "cpu_utilization": 0.99,
            "key_setup_ns": 120.5, "sample_throughputs_mb_s": [4000.0, 4012.5, 4020.0]
        });
        let metrics = Metrics::from_measurement(&m).unwrap();
        assert_eq!(metrics.latency_ns.p999, 9000);
        assert_eq!(metrics.sample_throughputs.len(), 3);
        assert_eq!(metrics.path_used, "accelerated");
    }

    #[test]
    fn a_failed_measurement_has_no_metrics() {
        let m = json!({"schema": "cipherfleet.measurement/1", "status": "failed",
                       "error": "self-test failed", "path_used": null});
        assert!(Metrics::from_measurement(&m).is_err());
    }
}
