//! The read of the scenario views (`/scenarios`): every host's latest results
//! of the scenario's algorithms, from `result_points` (never `results`);
//! [`crate::analysis::scenarios`] picks the points each view reads.

use cipherfleet_core::algorithm::Algorithm;
use sqlx::PgExecutor;

use super::Result;
use super::points::LatestResult;
use crate::latest_result_columns;

/// Every host's latest results of `algorithms`, by host then point.
pub async fn points(db: impl PgExecutor<'_>, algorithms: &[Algorithm]) -> Result<Vec<LatestResult>> {
    let algorithms: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points WHERE algorithm = ANY($1) \
         ORDER BY host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce"
    ))
    .bind(algorithms)
    .fetch_all(db)
    .await?)
}
