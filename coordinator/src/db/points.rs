//! `result_points`: the latest result of every point on every host, which
//! the report reads instead of scanning all results (migrations/0003).

use sqlx::{PgExecutor, Postgres, Transaction};

use super::Result;

/// Makes result `result_id` the latest of its point; called in the transaction that inserts it.
pub async fn record(tx: &mut Transaction<'_, Postgres>, result_id: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO result_points AS p (host_id, algorithm, direction, size_bytes, threads, concurrency, \
             key_mode, path, result_id, measured_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, \
             cv, samples, result_count) \
         SELECT host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, \
             id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples, 1 \
         FROM results WHERE id = $1 \
         ON CONFLICT (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path) \
         DO UPDATE SET result_id = EXCLUDED.result_id, measured_at = EXCLUDED.measured_at, \
             path_used = EXCLUDED.path_used, throughput_mb_s = EXCLUDED.throughput_mb_s, \
             ops_per_s = EXCLUDED.ops_per_s, latency_p99_ns = EXCLUDED.latency_p99_ns, cv = EXCLUDED.cv, \
             samples = EXCLUDED.samples, result_count = p.result_count + 1",
    )
    .bind(result_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Rebuilds the table from `results`, after results were loaded in bulk.
pub async fn refresh(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query("SELECT refresh_result_points()").execute(db).await?;
    Ok(())
}
