//! The read of the scenario views (`/scenarios`): every host's latest results
//! of the scenario's algorithms, from `result_points` (never `results`);
//! [`crate::analysis::scenarios`] picks the points each view reads.

use cipherfleet_core::algorithm::Algorithm;
use sqlx::PgExecutor;

use super::Result;
use super::points::LatestResult;
use crate::latest_result_columns;

/// The latest results of `algorithms` on `hosts` (the measured ones: the page
/// leaves emulated and simulated hosts out before asking, so their points are
/// never read), by host then point; each host is one range of the primary key.
pub async fn points(db: impl PgExecutor<'_>, algorithms: &[Algorithm], hosts: &[i64]) -> Result<Vec<LatestResult>> {
    let algorithms: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points WHERE algorithm = ANY($1) AND host_id = ANY($2) \
         ORDER BY host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce"
    ))
    .bind(algorithms)
    .bind(hosts)
    .fetch_all(db)
    .await?)
}
