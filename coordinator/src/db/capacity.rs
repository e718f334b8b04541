//! Reads of the capacity planner: every host with the facts its machine class
//! is made of, and the latest measured points at one payload size, direction
//! and path ([`super::points`]), so the page never scans `results`.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::Direction;
use sqlx::PgExecutor;

use super::Result;
use super::points::LatestResult;
use crate::latest_result_columns;

/// A host as the planner groups it: its class facts and how it is marked.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ClassHost {
    pub host_id: i64,
    pub name: String,
    /// Label `emulated` (any value but `false`, `no`, `0`): timings are not performance.
    pub emulated: bool,
    /// Label `simulated` (same values): the results were generated, not measured.
    pub simulated: bool,
    pub arch: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_model_name: Option<String>,
    pub features_usable: Vec<String>,
    pub build_flavour: Option<String>,
    pub logical_cores: Option<i32>,
}

/// Every host with its current facts (a host whose snapshots were deleted
/// has no facts, and lands in the class of unknowns).
pub async fn hosts(db: impl PgExecutor<'_>) -> Result<Vec<ClassHost>> {
    Ok(sqlx::query_as(
        "SELECT h.id AS host_id, h.name, \
             coalesce(h.labels->>'emulated', 'false') NOT IN ('false', 'no', '0') AS emulated, \
             coalesce(h.labels->>'simulated', 'false') NOT IN ('false', 'no', '0') AS simulated, \
             s.arch, s.cpu_vendor, s.cpu_model_name, coalesce(s.features_usable, '{}') AS features_usable, \
             s.build_flavour, s.logical_cores \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         ORDER BY h.id",
    )
    .fetch_all(db)
    .await?)
}

/// Which points the planner reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointFilter<'a> {
    pub size_bytes: u64,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
    pub algorithms: &'a [Algorithm],
}

/// The latest results of `filter.algorithms` at one size, direction and
/// path, at every measured thread count. Only back-to-back operations with
/// one static key: the object-storage scenario (concurrency) and per-operation
/// key setup measure other things and would skew a per-core figure.
/// Served by the `result_points_view` index (size first).
pub async fn points(db: impl PgExecutor<'_>, filter: PointFilter<'_>) -> Result<Vec<LatestResult>> {
    let algorithms: Vec<&str> = filter.algorithms.iter().map(|a| a.name()).collect();
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points \
         WHERE size_bytes = $1 AND direction = $2 AND path = $3 AND algorithm = ANY($4) \
             AND concurrency = 0 AND key_mode = 'static' \
         ORDER BY host_id, algorithm, threads"
    ))
    .bind(i64::try_from(filter.size_bytes).unwrap_or(i64::MAX))
    .bind(filter.direction.as_str())
    .bind(filter.path.as_str())
    .bind(algorithms)
    .fetch_all(db)
    .await?)
}
