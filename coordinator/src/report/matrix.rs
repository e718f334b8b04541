//! Read queries of the comparison pages (`/compare`, `/modes`) over
//! `result_points`, the latest result of every point on every host
//! (migrations/0003). Each query is an index range scan sized by the fleet
//! and the view, never by how many results were ever stored.
//!
//! The pages compare the plain benchmark: one static key (`key_mode =
//! 'static'`), counter nonces (`nonce = 'counter'`) and no object-storage
//! concurrency (`concurrency = 0`). Other key modes, random nonces and the
//! concurrency scenario have pages of their own (`/scenarios`).
//!
//! A view names its provider. The built-in one's points are in
//! `result_points`; every other provider's are in `provider_points`
//! (migrations/0036), read the same way with the provider in the key.

use std::sync::{Mutex, MutexGuard, PoisonError};

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use sqlx::{PgExecutor, PgPool};

use super::host_summaries::{self, Generation};
use crate::analysis::class::MachineClass;
use crate::analysis::marks::{self, EmulationFacts};
use crate::domain::labels::Labels;
use crate::domain::latest::LatestResult;
use crate::store::Result;
use crate::{latest_result_columns, provider_point_columns};

/// Hosts with the same current facts that decide a machine class, and the
/// same marks: how the compare and modes pages group the fleet without
/// reading every host (a handful of groups at 10,000 hosts).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ClassGroup {
    /// Ascending.
    pub host_ids: Vec<i64>,
    /// The `emulated` and `simulated` labels' values, where set.
    pub emulated_label: Option<String>,
    pub simulated_label: Option<String>,
    pub arch: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_model_name: Option<String>,
    pub features_usable: Option<Vec<String>>,
    pub build_flavour: Option<String>,
    pub hypervisor: Option<String>,
    pub cpuinfo_foreign: Option<bool>,
}

impl ClassGroup {
    /// The labels that mark a host, as [`marks`] reads them.
    fn labels(&self) -> Labels {
        [
            (marks::EMULATED_LABEL, &self.emulated_label),
            (marks::SIMULATED_LABEL, &self.simulated_label),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
        .collect()
    }

    /// Emulated, by label or facts ([`marks::is_emulated`]).
    pub fn emulated(&self) -> bool {
        let facts = EmulationFacts {
            cpuinfo_foreign: self.cpuinfo_foreign,
            hypervisor: self.hypervisor.as_deref(),
        };
        marks::is_emulated(&self.labels(), facts)
    }

    /// Carries the simulated label.
    pub fn simulated(&self) -> bool {
        marks::is_marked(&self.labels(), marks::SIMULATED_LABEL)
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

/// The last [`class_groups`] answer and the [`Generation`] it was read at.
/// Process-wide, as the pages call it with only a pool; the generation names
/// the database, so pools of two databases never share an answer.
static CLASS_GROUPS: Mutex<Option<(Generation, Vec<ClassGroup>)>> = Mutex::new(None);

/// Every host in its [`ClassGroup`], the group of the lowest host id first.
/// The grouped pass over the hosts and their current snapshots runs only
/// when the hosts changed since the last call (a new host, labels, facts or
/// findings; see [`host_summaries::generation`]); otherwise the answer is the
/// last one, for the price of a pass over `host_summaries`' narrow rows.
pub async fn class_groups(pool: &PgPool) -> Result<Vec<ClassGroup>> {
    // Read before the groups: a change committed in between makes the next
    // call read again, never keeps an older answer.
    let generation = host_summaries::generation(pool).await?;
    if let Some((at, groups)) = &*cached_class_groups()
        && *at == generation
    {
        return Ok(groups.clone());
    }
    let groups = read_class_groups(pool).await?;
    *cached_class_groups() = Some((generation, groups.clone()));
    Ok(groups)
}

fn cached_class_groups() -> MutexGuard<'static, Option<(Generation, Vec<ClassGroup>)>> {
    // A panic while holding it left a whole answer or none: still usable.
    CLASS_GROUPS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One pass over the hosts and their current snapshots.
async fn read_class_groups(db: impl PgExecutor<'_>) -> Result<Vec<ClassGroup>> {
    Ok(sqlx::query_as(
        "SELECT array_agg(h.id ORDER BY h.id) AS host_ids, h.labels ->> $1 AS emulated_label, \
             h.labels ->> $2 AS simulated_label, s.arch, s.cpu_vendor, s.cpu_model_name, s.features_usable, \
             s.build_flavour, s.hypervisor, s.cpuinfo_foreign \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         GROUP BY 2, 3, 4, 5, 6, 7, 8, 9, 10 ORDER BY min(h.id)",
    )
    .bind(marks::EMULATED_LABEL)
    .bind(marks::SIMULATED_LABEL)
    .fetch_all(db)
    .await?)
}

/// Every host's id and name, by name (the modes page's chooser).
pub async fn host_names(db: impl PgExecutor<'_>) -> Result<Vec<(i64, String)>> {
    Ok(sqlx::query_as("SELECT id, name FROM hosts ORDER BY name, id")
        .fetch_all(db)
        .await?)
}

/// One slice of the matrix: a payload size, a thread count, a direction and
/// a path, as measured by one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub size_bytes: u64,
    pub threads: u32,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
    pub provider: Provider,
}

/// The latest results of `view` of the hosts `host_ids` (one page of the
/// matrix), for `algorithms` (all when empty), by algorithm then host.
/// Reads the primary key, which leads with the host.
pub async fn view_points(
    db: impl PgExecutor<'_>,
    view: &View,
    algorithms: &[Algorithm],
    host_ids: &[i64],
) -> Result<Vec<LatestResult>> {
    let algorithms: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
    let query = if view.provider.is_rustcrypto() {
        sqlx::query_as(concat!(
            "SELECT ",
            latest_result_columns!(),
            " FROM result_points \
             WHERE host_id = ANY($6) AND size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 \
               AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' \
               AND (cardinality($5::text[]) = 0 OR algorithm = ANY($5))\
             ORDER BY algorithm, host_id"
        ))
    } else {
        sqlx::query_as(concat!(
            "SELECT ",
            provider_point_columns!(),
            " FROM provider_points \
             WHERE host_id = ANY($6) AND size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 \
               AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' \
               AND (cardinality($5::text[]) = 0 OR algorithm = ANY($5)) AND provider = $7 \
             ORDER BY algorithm, host_id"
        ))
    };
    let query = query
        .bind(i64::try_from(view.size_bytes).unwrap_or(i64::MAX))
        .bind(i32::try_from(view.threads).unwrap_or(i32::MAX))
        .bind(view.direction.as_str())
        .bind(view.path.as_str())
        .bind(algorithms)
        .bind(host_ids);
    Ok(with_provider(query, view.provider).fetch_all(db).await?)
}

/// Every latest result of `provider` on the given hosts in one direction and
/// path: all sizes and thread counts (the payload-size and thread-scaling
/// curves). Reads the primary key, which leads with the host.
pub async fn host_points(
    db: impl PgExecutor<'_>,
    host_ids: &[i64],
    direction: Direction,
    path: Path,
    provider: Provider,
) -> Result<Vec<LatestResult>> {
    let query = if provider.is_rustcrypto() {
        sqlx::query_as(concat!(
            "SELECT ",
            latest_result_columns!(),
            " FROM result_points \
             WHERE host_id = ANY($1) AND direction = $2 AND path = $3 AND concurrency = 0 \
               AND key_mode = 'static' AND nonce = 'counter' \
             ORDER BY algorithm, size_bytes, threads, host_id"
        ))
    } else {
        sqlx::query_as(concat!(
            "SELECT ",
            provider_point_columns!(),
            " FROM provider_points \
             WHERE host_id = ANY($1) AND direction = $2 AND path = $3 AND concurrency = 0 \
               AND key_mode = 'static' AND nonce = 'counter' AND provider = $4 \
             ORDER BY algorithm, size_bytes, threads, host_id"
        ))
    };
    let query = query.bind(host_ids).bind(direction.as_str()).bind(path.as_str());
    Ok(with_provider(query, provider).fetch_all(db).await?)
}

/// A payload size and thread count with stored points, in any direction or path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, sqlx::FromRow)]
pub struct Slice {
    #[sqlx(try_from = "i64")]
    pub size_bytes: u64,
    #[sqlx(try_from = "i32")]
    pub threads: u32,
}

/// The distinct (size, threads) pairs `provider` has points at, ascending:
/// what the filters offer and what an empty view suggests instead. For the
/// built-in provider a loose index scan — one index probe per pair found —
/// because `SELECT DISTINCT` would read the whole table (hundreds of
/// thousands of points at a million results); the other providers' table
/// holds only their own suite's points.
pub async fn slices(db: impl PgExecutor<'_>, provider: Provider) -> Result<Vec<Slice>> {
    let query = if provider.is_rustcrypto() {
        sqlx::query_as(
            "WITH RECURSIVE s AS ( \
                 (SELECT size_bytes, threads FROM result_points ORDER BY size_bytes, threads LIMIT 1) \
                 UNION ALL \
                 SELECT n.size_bytes, n.threads FROM s CROSS JOIN LATERAL ( \
                     SELECT p.size_bytes, p.threads FROM result_points p \
                     WHERE (p.size_bytes, p.threads) > (s.size_bytes, s.threads) \
                     ORDER BY p.size_bytes, p.threads LIMIT 1) n \
             ) SELECT size_bytes, threads FROM s",
        )
    } else {
        sqlx::query_as(
            "SELECT DISTINCT size_bytes, threads FROM provider_points WHERE provider = $1 \
             ORDER BY size_bytes, threads",
        )
    };
    Ok(with_provider(query, provider).fetch_all(db).await?)
}

/// `query` with the provider bound last, where it reads `provider_points`
/// (the built-in provider's query has no such parameter).
pub(crate) fn with_provider<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    provider: Provider,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    if provider.is_rustcrypto() {
        query
    } else {
        query.bind(provider.as_str())
    }
}
