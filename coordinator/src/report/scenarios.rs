//! The reads of the scenario views (`/scenarios`): the measured hosts' cores,
//! and every such host's latest results of the scenario's algorithms, from
//! `result_points` (never `results`); [`crate::analysis::scenarios`] picks
//! the points each view reads. The hosts themselves come grouped by class
//! ([`super::matrix::class_groups`]), so a fleet of simulated hosts costs a
//! handful of rows, not one per host.

use cipherfleet_core::algorithm::Algorithm;
use sqlx::PgExecutor;

use crate::domain::latest::LatestResult;
use crate::latest_result_columns;
use crate::store::Result;

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

/// The logical core count of each of `hosts` (the measured ones), as their current facts have it.
pub async fn logical_cores(db: impl PgExecutor<'_>, hosts: &[i64]) -> Result<Vec<(i64, Option<i32>)>> {
    Ok(sqlx::query_as(
        "SELECT h.id, s.logical_cores FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         WHERE h.id = ANY($1)",
    )
    .bind(hosts)
    .fetch_all(db)
    .await?)
}
