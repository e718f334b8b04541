//! Read queries of the fallback report: every host's accelerated and software
//! path at one point of the matrix side by side, and findings of any status.
//!
//! The pairs come from `result_points` (the latest result per point), never
//! from `results`: each side is one range of the `result_points_view` index
//! (size, threads, direction, path), so the page costs hosts × algorithms
//! rows however many results are stored.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{Direction, KeyMode};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgExecutor, Row};

use super::Result;
use super::findings::Finding;
use super::hosts::Labels;
use crate::analysis::marks::{self, EmulationFacts};

/// The point of the matrix a fallback view compares the two paths at: a
/// [`cipherfleet_core::Point`] without its algorithm (every one is shown),
/// its path (both are) and concurrency (none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathPoint {
    pub size_bytes: u64,
    pub threads: u32,
    pub direction: Direction,
    pub key_mode: KeyMode,
}

/// One host and algorithm with its latest accelerated-path and software-path
/// results at a [`PathPoint`]; a side is `None` when that path was never measured.
/// The host's name and facts are in [`FallbackHost`], fetched once per host.
#[derive(Debug, Clone, PartialEq)]
pub struct PathPair {
    pub host_id: i64,
    pub algorithm: Algorithm,
    pub accelerated_result_id: Option<i64>,
    /// What ran when the accelerated path was asked for (`partial` or `software` after a fallback).
    pub accelerated_path_used: Option<PathUsed>,
    pub accelerated_mb_s: Option<f64>,
    pub accelerated_cv: Option<f64>,
    pub software_result_id: Option<i64>,
    pub software_mb_s: Option<f64>,
    pub software_cv: Option<f64>,
}

/// Written out because `accelerated_path_used` is a nullable text column
/// read as an enum, which `#[sqlx(try_from)]` cannot express.
impl<'r> sqlx::FromRow<'r, PgRow> for PathPair {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let decode_error = |column: &str, e: Box<dyn std::error::Error + Send + Sync>| sqlx::Error::ColumnDecode {
            index: column.to_string(),
            source: e,
        };
        let algorithm: String = row.try_get("algorithm")?;
        let path_used: Option<String> = row.try_get("accelerated_path_used")?;
        Ok(PathPair {
            host_id: row.try_get("host_id")?,
            algorithm: algorithm.parse().map_err(|e| decode_error("algorithm", Box::new(e)))?,
            accelerated_result_id: row.try_get("accelerated_result_id")?,
            accelerated_path_used: path_used
                .map(|p| p.parse::<PathUsed>())
                .transpose()
                .map_err(|e| decode_error("accelerated_path_used", Box::new(e)))?,
            accelerated_mb_s: row.try_get("accelerated_mb_s")?,
            accelerated_cv: row.try_get("accelerated_cv")?,
            software_result_id: row.try_get("software_result_id")?,
            software_mb_s: row.try_get("software_mb_s")?,
            software_cv: row.try_get("software_cv")?,
        })
    }
}

/// Both paths of every host and algorithm at `point` (jobs without concurrency
/// and with counter nonces only: the object-storage scenario measures latency,
/// random nonces the OS, not the path), unordered.
pub async fn pairs(db: impl PgExecutor<'_>, point: &PathPoint) -> Result<Vec<PathPair>> {
    Ok(sqlx::query_as(
        "WITH acc AS ( \
             SELECT host_id, algorithm, result_id, path_used, throughput_mb_s, cv FROM result_points \
             WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $5 \
                 AND key_mode = $4 AND concurrency = 0 AND nonce = 'counter'), \
         soft AS ( \
             SELECT host_id, algorithm, result_id, throughput_mb_s, cv FROM result_points \
             WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $6 \
                 AND key_mode = $4 AND concurrency = 0 AND nonce = 'counter') \
         SELECT COALESCE(acc.host_id, soft.host_id) AS host_id, COALESCE(acc.algorithm, soft.algorithm) AS algorithm, \
             acc.result_id AS accelerated_result_id, acc.path_used AS accelerated_path_used, \
             acc.throughput_mb_s AS accelerated_mb_s, acc.cv AS accelerated_cv, \
             soft.result_id AS software_result_id, soft.throughput_mb_s AS software_mb_s, soft.cv AS software_cv \
         FROM acc FULL JOIN soft ON soft.host_id = acc.host_id AND soft.algorithm = acc.algorithm",
    )
    .bind(i64::try_from(point.size_bytes).unwrap_or(i64::MAX))
    .bind(i32::try_from(point.threads).unwrap_or(i32::MAX))
    .bind(point.direction.as_str())
    .bind(point.key_mode.as_str())
    .bind(Path::Accelerated.as_str())
    .bind(Path::Software.as_str())
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
    pub hypervisor: Option<String>,
    pub cpuinfo_foreign: Option<bool>,
    pub features_advertised: Option<Vec<String>>,
}

impl FallbackHost {
    /// Emulated, by label or facts ([`marks::is_emulated`]).
    pub fn emulated(&self) -> bool {
        let facts = EmulationFacts {
            cpuinfo_foreign: self.cpuinfo_foreign,
            hypervisor: self.hypervisor.as_deref(),
        };
        marks::is_emulated(&self.labels.0, facts)
    }
}

/// Every host with the facts the page shows (a fleet is thousands of hosts at
/// most: one row each, where the pairs are hosts × algorithms).
pub async fn hosts(db: impl PgExecutor<'_>) -> Result<Vec<FallbackHost>> {
    Ok(sqlx::query_as(
        "SELECT h.id, h.name, h.labels, s.arch, s.cpu_model_name, s.hypervisor, s.cpuinfo_foreign, \
             s.features_advertised \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id",
    )
    .fetch_all(db)
    .await?)
}

/// The payload sizes measured anywhere, smallest first: a loose index scan
/// (one probe of `result_points_view` per distinct size), not a table scan.
pub async fn sizes(db: impl PgExecutor<'_>) -> Result<Vec<u64>> {
    let sizes: Vec<i64> = sqlx::query_scalar(
        "WITH RECURSIVE s(size) AS ( \
             SELECT min(size_bytes) FROM result_points \
             UNION ALL \
             SELECT (SELECT min(size_bytes) FROM result_points WHERE size_bytes > s.size) FROM s \
             WHERE s.size IS NOT NULL) \
         SELECT size FROM s WHERE size IS NOT NULL",
    )
    .fetch_all(db)
    .await?;
    // The schema keeps sizes positive.
    Ok(sizes.into_iter().filter_map(|s| u64::try_from(s).ok()).collect())
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
