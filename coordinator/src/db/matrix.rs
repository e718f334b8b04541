//! Read queries of the comparison pages (`/compare`, `/modes`) over
//! `result_points`, the latest result of every point on every host
//! (migrations/0003). Each query is an index range scan sized by the fleet
//! and the view, never by how many results were ever stored.
//!
//! The pages compare the plain benchmark: one static key (`key_mode =
//! 'static'`), counter nonces (`nonce = 'counter'`) and no object-storage
//! concurrency (`concurrency = 0`). Other key modes, random nonces and the
//! concurrency scenario have pages of their own (`/scenarios`).

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::Direction;
use sqlx::PgExecutor;
use sqlx::types::Json;

use super::Result;
use super::hosts::Labels;
use super::points::LatestResult;
use crate::analysis::class::MachineClass;
use crate::analysis::marks::{self, EmulationFacts};
use crate::latest_result_columns;

/// A host with the current facts that decide its machine class.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ClassedHost {
    pub id: i64,
    pub name: String,
    pub labels: Json<Labels>,
    pub arch: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_model_name: Option<String>,
    pub features_usable: Option<Vec<String>>,
    pub build_flavour: Option<String>,
    pub hypervisor: Option<String>,
    pub cpuinfo_foreign: Option<bool>,
}

impl ClassedHost {
    /// Emulated, by label or facts ([`marks::is_emulated`]).
    pub fn emulated(&self) -> bool {
        let facts = EmulationFacts {
            cpuinfo_foreign: self.cpuinfo_foreign,
            hypervisor: self.hypervisor.as_deref(),
        };
        marks::is_emulated(&self.labels.0, facts)
    }

    /// Carries the simulated label.
    pub fn simulated(&self) -> bool {
        marks::is_marked(&self.labels.0, marks::SIMULATED_LABEL)
    }

    pub fn class(&self) -> MachineClass {
        MachineClass::of(
            self.arch.as_deref(),
            self.cpu_vendor.as_deref(),
            self.cpu_model_name.as_deref(),
            self.features_usable.as_deref().unwrap_or_default(),
            self.build_flavour.as_deref(),
        )
    }
}

/// Every host with its current facts, by name (the fleet is thousands of hosts at most).
pub async fn hosts(db: impl PgExecutor<'_>) -> Result<Vec<ClassedHost>> {
    Ok(sqlx::query_as(
        "SELECT h.id, h.name, h.labels, s.arch, s.cpu_vendor, s.cpu_model_name, s.features_usable, s.build_flavour, \
             s.hypervisor, s.cpuinfo_foreign \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id ORDER BY h.name, h.id",
    )
    .fetch_all(db)
    .await?)
}

/// One slice of the matrix: a payload size, a thread count, a direction and a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub size_bytes: u64,
    pub threads: u32,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
}

/// Every host's latest result of `view`, for `algorithms` (all when empty), by
/// algorithm then host. Reads the `result_points_view` index range of the view.
pub async fn view_points(db: impl PgExecutor<'_>, view: &View, algorithms: &[Algorithm]) -> Result<Vec<LatestResult>> {
    let algorithms: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points \
         WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 \
           AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' \
           AND (cardinality($5::text[]) = 0 OR algorithm = ANY($5)) \
         ORDER BY algorithm, host_id"
    ))
    .bind(i64::try_from(view.size_bytes).unwrap_or(i64::MAX))
    .bind(i32::try_from(view.threads).unwrap_or(i32::MAX))
    .bind(view.direction.as_str())
    .bind(view.path.as_str())
    .bind(algorithms)
    .fetch_all(db)
    .await?)
}

/// Every latest result of the given hosts in one direction and path: all
/// sizes and thread counts (the payload-size and thread-scaling curves).
/// Reads the primary key, which leads with the host.
pub async fn host_points(
    db: impl PgExecutor<'_>,
    host_ids: &[i64],
    direction: Direction,
    path: Path,
) -> Result<Vec<LatestResult>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points \
         WHERE host_id = ANY($1) AND direction = $2 AND path = $3 AND concurrency = 0 AND key_mode = 'static' \
           AND nonce = 'counter' \
         ORDER BY algorithm, size_bytes, threads, host_id"
    ))
    .bind(host_ids)
    .bind(direction.as_str())
    .bind(path.as_str())
    .fetch_all(db)
    .await?)
}

/// A payload size and thread count with stored points, in any direction or path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, sqlx::FromRow)]
pub struct Slice {
    #[sqlx(try_from = "i64")]
    pub size_bytes: u64,
    #[sqlx(try_from = "i32")]
    pub threads: u32,
}

/// The distinct (size, threads) pairs stored, ascending: what the filters
/// offer and what an empty view suggests instead. A loose index scan —
/// one index probe per pair found — because `SELECT DISTINCT` would read the
/// whole table (hundreds of thousands of points at a million results).
pub async fn slices(db: impl PgExecutor<'_>) -> Result<Vec<Slice>> {
    Ok(sqlx::query_as(
        "WITH RECURSIVE s AS ( \
             (SELECT size_bytes, threads FROM result_points ORDER BY size_bytes, threads LIMIT 1) \
             UNION ALL \
             SELECT n.size_bytes, n.threads FROM s CROSS JOIN LATERAL ( \
                 SELECT p.size_bytes, p.threads FROM result_points p \
                 WHERE (p.size_bytes, p.threads) > (s.size_bytes, s.threads) \
                 ORDER BY p.size_bytes, p.threads LIMIT 1) n \
         ) SELECT size_bytes, threads FROM s",
    )
    .fetch_all(db)
    .await?)
}
