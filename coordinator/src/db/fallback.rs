//! Read queries of the fallback report: every host's accelerated and software
//! path at one point of the matrix side by side, and findings of any status.
//!
//! The pairs come from `result_points` (the latest result per point), never
//! from `results`: each side is one range of the `result_points_view` index
//! (size, threads, direction, path), so the page costs hosts × algorithms
//! rows however many results are stored.

use sqlx::PgExecutor;
use sqlx::types::Json;

use super::Result;
use super::findings::Finding;
use super::hosts::Labels;

/// The point of the matrix a fallback view compares the two paths at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPoint<'a> {
    pub size_bytes: i64,
    pub threads: i32,
    pub direction: &'a str,
    pub key_mode: &'a str,
}

/// One host and algorithm with its latest accelerated-path and software-path
/// results at a [`PathPoint`]; a side is `None` when that path was never measured.
/// The host's name and facts are in [`FallbackHost`], fetched once per host.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PathPair {
    pub host_id: i64,
    pub algorithm: String,
    pub accelerated_result_id: Option<i64>,
    /// What ran when the accelerated path was asked for (`software` after a fallback).
    pub accelerated_path_used: Option<String>,
    pub accelerated_mb_s: Option<f64>,
    pub accelerated_cv: Option<f64>,
    pub software_result_id: Option<i64>,
    pub software_mb_s: Option<f64>,
    pub software_cv: Option<f64>,
}

/// Both paths of every host and algorithm at `point` (jobs without concurrency
/// only: the object-storage scenario measures latency, not the path), unordered.
pub async fn pairs(db: impl PgExecutor<'_>, point: &PathPoint<'_>) -> Result<Vec<PathPair>> {
    Ok(sqlx::query_as(
        "WITH acc AS ( \
             SELECT host_id, algorithm, result_id, path_used, throughput_mb_s, cv FROM result_points \
             WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = 'accelerated' \
                 AND key_mode = $4 AND concurrency = 0), \
         soft AS ( \
             SELECT host_id, algorithm, result_id, throughput_mb_s, cv FROM result_points \
             WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = 'software' \
                 AND key_mode = $4 AND concurrency = 0) \
         SELECT COALESCE(acc.host_id, soft.host_id) AS host_id, COALESCE(acc.algorithm, soft.algorithm) AS algorithm, \
             acc.result_id AS accelerated_result_id, acc.path_used AS accelerated_path_used, \
             acc.throughput_mb_s AS accelerated_mb_s, acc.cv AS accelerated_cv, \
             soft.result_id AS software_result_id, soft.throughput_mb_s AS software_mb_s, soft.cv AS software_cv \
         FROM acc FULL JOIN soft ON soft.host_id = acc.host_id AND soft.algorithm = acc.algorithm",
    )
    .bind(point.size_bytes)
    .bind(point.threads)
    .bind(point.direction)
    .bind(point.key_mode)
    .fetch_all(db)
    .await?)
}

/// A host as the fallback page names and filters it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FallbackHost {
    pub id: i64,
    pub name: String,
    pub labels: Json<Labels>,
    pub arch: Option<String>,
    pub cpu_model_name: Option<String>,
}

/// Every host with the facts the page shows (a fleet is thousands of hosts at
/// most: one row each, where the pairs are hosts × algorithms).
pub async fn hosts(db: impl PgExecutor<'_>) -> Result<Vec<FallbackHost>> {
    Ok(sqlx::query_as(
        "SELECT h.id, h.name, h.labels, s.arch, s.cpu_model_name \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id",
    )
    .fetch_all(db)
    .await?)
}

/// The payload sizes measured anywhere, smallest first: a loose index scan
/// (one probe of `result_points_view` per distinct size), not a table scan.
pub async fn sizes(db: impl PgExecutor<'_>) -> Result<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "WITH RECURSIVE s(size) AS ( \
             SELECT min(size_bytes) FROM result_points \
             UNION ALL \
             SELECT (SELECT min(size_bytes) FROM result_points WHERE size_bytes > s.size) FROM s \
             WHERE s.size IS NOT NULL) \
         SELECT size FROM s WHERE size IS NOT NULL",
    )
    .fetch_all(db)
    .await?)
}

/// The architectures of the hosts' current facts, for the filter form.
pub async fn archs(db: impl PgExecutor<'_>) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT s.arch FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         WHERE s.arch IS NOT NULL ORDER BY 1",
    )
    .fetch_all(db)
    .await?)
}

/// Findings with status `open` or `resolved` (`None`: both), most severe and
/// open first, then by host — what `/api/v1/findings` lists.
/// ([`super::findings`] has the open ones and one host's history; this adds the fleet's resolved ones.)
pub async fn findings(db: impl PgExecutor<'_>, status: Option<&str>) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(
        "SELECT f.id, f.host_id, h.name AS host_name, f.reason, f.kind, f.subject, f.severity, f.status, \
             f.first_seen, f.last_seen, f.resolved_at, f.evidence, f.fact_changes, f.summary \
         FROM findings f JOIN hosts h ON h.id = f.host_id \
         WHERE $1::text IS NULL OR f.status = $1 \
         ORDER BY f.status = 'resolved', \
             CASE f.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, \
             h.name, f.reason, f.subject, f.first_seen DESC, f.id",
    )
    .bind(status)
    .fetch_all(db)
    .await?)
}
