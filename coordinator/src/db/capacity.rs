//! Reads of the capacity planner: every host with the facts its machine class
//! is made of, and the latest measured points at one payload size, direction
//! and path ([`super::points`]), so the page never scans `results`.

use sqlx::PgExecutor;

use super::Result;

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

/// The latest result of one point on one host.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MeasuredPoint {
    pub host_id: i64,
    pub algorithm: String,
    pub threads: i32,
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    /// `accelerated` or `software`: what the worker really ran.
    pub path_used: String,
    pub result_id: i64,
}

/// Which points the planner reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointFilter<'a> {
    pub size_bytes: i64,
    pub direction: &'a str,
    pub path: &'a str,
    pub algorithms: &'a [String],
}

/// The latest results of `filter.algorithms` at one size, direction and
/// path, at every measured thread count. Only back-to-back operations with
/// one static key: the object-storage scenario (concurrency) and per-operation
/// key setup measure other things and would skew a per-core figure.
/// Served by the `result_points_view` index (size first).
pub async fn points(db: impl PgExecutor<'_>, filter: PointFilter<'_>) -> Result<Vec<MeasuredPoint>> {
    Ok(sqlx::query_as(
        "SELECT host_id, algorithm, threads, throughput_mb_s, ops_per_s, path_used, result_id \
         FROM result_points \
         WHERE size_bytes = $1 AND direction = $2 AND path = $3 AND algorithm = ANY($4) \
             AND concurrency = 0 AND key_mode = 'static' \
         ORDER BY host_id, algorithm, threads",
    )
    .bind(filter.size_bytes)
    .bind(filter.direction)
    .bind(filter.path)
    .bind(filter.algorithms)
    .fetch_all(db)
    .await?)
}
