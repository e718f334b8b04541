//! Reads of the capacity planner: every host with the facts its machine class
//! is made of, and the latest measured points at one payload size, direction
//! and path ([`crate::store::points`]), so the page never scans `results`.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use sqlx::PgExecutor;
use sqlx::types::Json;

use crate::analysis::marks::{self, EmulationFacts};
use crate::domain::labels::Labels;
use crate::domain::latest::LatestResult;
use crate::latest_result_columns;
use crate::store::Result;

/// A host as the planner groups it: its class facts and how it is marked.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassHost {
    pub host_id: i64,
    pub name: String,
    /// Emulated, by label or facts ([`marks::is_emulated`]): timings are not performance.
    pub emulated: bool,
    /// Label `simulated`: the results were generated, not measured.
    pub simulated: bool,
    pub arch: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_model_name: Option<String>,
    pub features_usable: Vec<String>,
    pub build_flavour: Option<String>,
    pub logical_cores: Option<i32>,
}

impl ClassHost {
    /// The host's machine class.
    pub fn class(&self) -> crate::analysis::class::MachineClass {
        crate::analysis::class::MachineClass::of(
            self.arch.as_deref(),
            self.cpu_vendor.as_deref(),
            self.cpu_model_name.as_deref(),
            &self.features_usable,
            self.build_flavour.as_deref(),
        )
    }
}

/// A [`ClassHost`] as stored: labels and facts, before the marks are worked out.
#[derive(sqlx::FromRow)]
struct ClassHostRow {
    host_id: i64,
    name: String,
    labels: Json<Labels>,
    hypervisor: Option<String>,
    cpuinfo_foreign: Option<bool>,
    arch: Option<String>,
    cpu_vendor: Option<String>,
    cpu_model_name: Option<String>,
    features_usable: Vec<String>,
    build_flavour: Option<String>,
    logical_cores: Option<i32>,
}

/// Every host with its current facts (a host whose snapshots were deleted
/// has no facts, and lands in the class of unknowns).
pub async fn hosts(db: impl PgExecutor<'_>) -> Result<Vec<ClassHost>> {
    let rows: Vec<ClassHostRow> = sqlx::query_as(
        "SELECT h.id AS host_id, h.name, h.labels, s.hypervisor, s.cpuinfo_foreign, \
             s.arch, s.cpu_vendor, s.cpu_model_name, coalesce(s.features_usable, '{}') AS features_usable, \
             s.build_flavour, s.logical_cores \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         ORDER BY h.id",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let facts = EmulationFacts {
                cpuinfo_foreign: r.cpuinfo_foreign,
                hypervisor: r.hypervisor.as_deref(),
            };
            ClassHost {
                host_id: r.host_id,
                name: r.name,
                emulated: marks::is_emulated(&r.labels.0, facts),
                simulated: marks::is_marked(&r.labels.0, marks::SIMULATED_LABEL),
                arch: r.arch,
                cpu_vendor: r.cpu_vendor,
                cpu_model_name: r.cpu_model_name,
                features_usable: r.features_usable,
                build_flavour: r.build_flavour,
                logical_cores: r.logical_cores,
            }
        })
        .collect())
}

/// Which points the planner reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointFilter<'a> {
    pub size_bytes: u64,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
    /// The implementation measured: the built-in crates' points are in
    /// `result_points`, every other provider's in `provider_points`.
    pub provider: Provider,
    pub algorithms: &'a [Algorithm],
    /// Only these hosts' points (the planner leaves marked hosts out unless asked).
    pub hosts: &'a [i64],
}

/// The latest results of `filter.algorithms` at one size, direction and
/// path, at every measured thread count. Only back-to-back operations with
/// one static key and counter nonces: the object-storage scenario
/// (concurrency), per-operation key setup and random nonces measure other
/// things and would skew a per-core figure.
/// Served by the primary key (host first) for each host.
pub async fn points(db: impl PgExecutor<'_>, filter: PointFilter<'_>) -> Result<Vec<LatestResult>> {
    let algorithms: Vec<&str> = filter.algorithms.iter().map(|a| a.name()).collect();
    if !filter.provider.is_rustcrypto() {
        return Ok(sqlx::query_as(concat!(
            "SELECT ",
            crate::provider_point_columns!(),
            " FROM provider_points \
             WHERE host_id = ANY($5) AND provider = $6 AND size_bytes = $1 AND direction = $2 AND path = $3 \
                 AND algorithm = ANY($4) AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' \
             ORDER BY host_id, algorithm, threads"
        ))
        .bind(i64::try_from(filter.size_bytes).unwrap_or(i64::MAX))
        .bind(filter.direction.as_str())
        .bind(filter.path.as_str())
        .bind(algorithms)
        .bind(filter.hosts)
        .bind(filter.provider.as_str())
        .fetch_all(db)
        .await?);
    }
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points \
         WHERE host_id = ANY($5) AND size_bytes = $1 AND direction = $2 AND path = $3 AND algorithm = ANY($4) \
             AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' \
         ORDER BY host_id, algorithm, threads"
    ))
    .bind(i64::try_from(filter.size_bytes).unwrap_or(i64::MAX))
    .bind(filter.direction.as_str())
    .bind(filter.path.as_str())
    .bind(algorithms)
    .bind(filter.hosts)
    .fetch_all(db)
    .await?)
}
