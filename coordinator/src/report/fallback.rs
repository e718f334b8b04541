//! Read queries of the fallback report: every host's accelerated and software
//! path at one point of the matrix side by side, and findings of any status.
//!
//! The built-in crates' pairs come from `fallback_pairs` (both paths' latest
//! results side by side, kept from `result_points` by triggers), never from
//! `results`: a page of the worst ratios is one range of its `(point, ratio)`
//! index. Every other provider's come from `provider_points`, grouped per host
//! and algorithm as they are read ([`provider_pairs!`]): only the `providers`
//! suite and `--provider` campaigns fill that table, too few rows to be worth
//! a table of pairs and its triggers. Each query branches on the provider of
//! its [`PathPoint`], once, so no caller tells the two apart.

use cipherfleet_core::Point;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, KeyMode, Nonce};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgExecutor, Row};

use crate::analysis::marks::{self, EmulationFacts};
use crate::domain::labels::Labels;
use crate::store::Result;
use crate::store::findings::Finding;

/// The point of the matrix a fallback view compares the two paths at: a
/// [`cipherfleet_core::Point`] without its algorithm (every one is shown),
/// its path (both are) and concurrency (none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathPoint {
    pub size_bytes: u64,
    pub threads: u32,
    pub direction: Direction,
    pub key_mode: KeyMode,
    /// Whose figures: the built-in crates' pairs are `fallback_pairs`, the others' `provider_points`.
    pub provider: Provider,
}

impl PathPoint {
    /// The whole point of `algorithm` on `path` (counter nonces, no concurrency, as the view reads).
    pub fn at(&self, algorithm: Algorithm, path: Path) -> Point {
        Point {
            algorithm,
            direction: self.direction,
            size_bytes: self.size_bytes,
            threads: self.threads,
            concurrency: None,
            key_mode: self.key_mode,
            path,
            nonce: Nonce::Counter,
            provider: self.provider,
        }
    }
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

/// The columns of [`PathPair`] from `p`, the pairs' source (`fallback_pairs`
/// or [`provider_pairs!`]), and the page's order: worst ratio first,
/// unmeasured ratios last, then host name and algorithm (byte order, as Rust
/// compares strings).
macro_rules! pair_columns {
    ($($from:tt)+) => {
        concat!(
            "p.host_id, p.algorithm, p.accelerated_result_id, p.accelerated_path_used, p.accelerated_mb_s, \
             p.accelerated_cv, p.software_result_id, p.software_mb_s, p.software_cv \
             FROM ",
            $($from)+,
            " p JOIN hosts h ON h.id = p.host_id \
             WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4 \
                 AND ($5::bigint[] IS NULL OR p.host_id = ANY($5)) "
        )
    };
}
macro_rules! pair_order {
    () => {
        " ORDER BY p.ratio NULLS LAST, h.name COLLATE \"C\", p.algorithm COLLATE \"C\""
    };
}

/// The pairs of the provider bound as `$param` (a literal, `"$8"`) in the
/// columns of `fallback_pairs`, from `provider_points`: each host's
/// accelerated and software rows of one algorithm and point side by side
/// (at most one of each: the provider, the point, no concurrency and counter
/// nonces are the rest of the table's key), with the ratio `fallback_pairs`
/// computes. The point is a grouping column, so the caller's filter on it
/// reaches the table's index.
macro_rules! provider_pairs {
    ($param:literal) => {
        concat!(
            "(SELECT size_bytes, threads, direction, key_mode, host_id, algorithm, \
                 max(result_id) FILTER (WHERE path = 'accelerated') AS accelerated_result_id, \
                 max(path_used) FILTER (WHERE path = 'accelerated') AS accelerated_path_used, \
                 max(throughput_mb_s) FILTER (WHERE path = 'accelerated') AS accelerated_mb_s, \
                 max(cv) FILTER (WHERE path = 'accelerated') AS accelerated_cv, \
                 max(result_id) FILTER (WHERE path = 'software') AS software_result_id, \
                 max(throughput_mb_s) FILTER (WHERE path = 'software') AS software_mb_s, \
                 max(cv) FILTER (WHERE path = 'software') AS software_cv, \
                 CASE WHEN max(throughput_mb_s) FILTER (WHERE path = 'software') > 0 \
                     THEN max(throughput_mb_s) FILTER (WHERE path = 'accelerated') \
                         / max(throughput_mb_s) FILTER (WHERE path = 'software') END AS ratio \
             FROM provider_points \
             WHERE provider = ",
            $param,
            " AND concurrency = 0 AND nonce = 'counter' \
             GROUP BY size_bytes, threads, direction, key_mode, host_id, algorithm)"
        )
    };
}

/// A statement for `point`'s provider: `$build` (a macro taking the pairs'
/// source) over `fallback_pairs` for the built-in crates, over
/// [`provider_pairs!`] with the provider bound as `$param` for the others.
macro_rules! for_provider {
    ($point:expr, $param:literal, $build:ident) => {
        if $point.provider.is_rustcrypto() {
            $build!("fallback_pairs")
        } else {
            $build!(provider_pairs!($param))
        }
    };
}

/// The provider as the last bind parameter of a [`for_provider!`]
/// statement, which only the other providers' form reads.
fn bind_provider<'q, O>(
    q: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    point: &PathPoint,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    if point.provider.is_rustcrypto() {
        q
    } else {
        q.bind(point.provider.as_str())
    }
}

/// `point` as the four bind parameters `$1`–`$4` of [`pair_columns!`].
fn bind_point<'q, O>(
    q: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    point: &PathPoint,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    q.bind(i64::try_from(point.size_bytes).unwrap_or(i64::MAX))
        .bind(i32::try_from(point.threads).unwrap_or(i32::MAX))
        .bind(point.direction.as_str())
        .bind(point.key_mode.as_str())
}

/// Both paths of the hosts and algorithms at `point` (jobs without
/// concurrency and with counter nonces only: the object-storage scenario
/// measures latency, random nonces the OS, not the path), in the page's
/// order, `limit` rows from `offset` (`None`: all). `hosts` (`None`: every
/// host) keeps only those hosts' rows. The built-in crates' are read from
/// `fallback_pairs`, which triggers keep from `result_points` with the ratio
/// indexed: a page is an index range, not a join of every host's two paths.
pub async fn pairs(
    db: impl PgExecutor<'_>,
    point: &PathPoint,
    hosts: Option<&[i64]>,
    limit: Option<i64>,
    offset: i64,
) -> Result<Vec<PathPair>> {
    macro_rules! sql {
        ($($from:tt)+) => {
            concat!("SELECT ", pair_columns!($($from)+), pair_order!(), " LIMIT $6 OFFSET $7")
        };
    }
    let q = bind_point(sqlx::query_as(for_provider!(point, "$8", sql)), point)
        .bind(hosts)
        .bind(limit)
        .bind(offset);
    Ok(bind_provider(q, point).fetch_all(db).await?)
}

/// How many rows [`pairs`] has at `point` for `hosts` (`None`: every host).
pub async fn count_pairs(db: impl PgExecutor<'_>, point: &PathPoint, hosts: Option<&[i64]>) -> Result<i64> {
    macro_rules! sql {
        ($($from:tt)+) => {
            concat!(
                "SELECT count(*) FROM ",
                $($from)+,
                " p WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4 \
                     AND ($5::bigint[] IS NULL OR p.host_id = ANY($5))"
            )
        };
    }
    let q = bind_point(sqlx::query_as(for_provider!(point, "$6", sql)), point).bind(hosts);
    let (n,): (i64,) = bind_provider(q, point).fetch_one(db).await?;
    Ok(n)
}

/// The rows of [`pairs`] that may be at software speed, in the page's order:
/// of `algorithms` (those whose best path is not software on some host),
/// whose accelerated request ran something else or measured below
/// `near_ratio` times the software path. A superset, for [`crate::analysis::software_speed::judge`] to decide;
/// the page asks it for the hosts of one page of its list at software speed
/// ([`super::fallback_views`]).
pub async fn slow_candidates(
    db: impl PgExecutor<'_>,
    point: &PathPoint,
    hosts: Option<&[i64]>,
    algorithms: &[&str],
    near_ratio: f64,
) -> Result<Vec<PathPair>> {
    macro_rules! sql {
        ($($from:tt)+) => {
            concat!(
                "SELECT ",
                pair_columns!($($from)+),
                " AND p.algorithm = ANY($6) AND (p.accelerated_path_used <> $7 OR p.ratio < $8)",
                pair_order!()
            )
        };
    }
    let q = bind_point(sqlx::query_as(for_provider!(point, "$9", sql)), point)
        .bind(hosts)
        .bind(algorithms)
        .bind(PathUsed::Accelerated.as_str())
        .bind(near_ratio);
    Ok(bind_provider(q, point).fetch_all(db).await?)
}

/// Both paths of one `algorithm` at `point`, hosts by name (byte order),
/// at most `limit`, leaving out the hosts `except`; `hosts` (`None`: every
/// host) keeps only those. The hosts of `/fallback`'s chart beside those at
/// software speed: an order that ranks nothing.
pub async fn algorithm_pairs(
    db: impl PgExecutor<'_>,
    point: &PathPoint,
    hosts: Option<&[i64]>,
    algorithm: Algorithm,
    except: &[i64],
    limit: i64,
) -> Result<Vec<PathPair>> {
    macro_rules! sql {
        ($($from:tt)+) => {
            concat!(
                "SELECT ",
                pair_columns!($($from)+),
                " AND p.algorithm = $6 AND NOT (p.host_id = ANY($7)) ORDER BY h.name COLLATE \"C\" LIMIT $8"
            )
        };
    }
    let q = bind_point(sqlx::query_as(for_provider!(point, "$9", sql)), point)
        .bind(hosts)
        .bind(algorithm.name())
        .bind(except)
        .bind(limit);
    Ok(bind_provider(q, point).fetch_all(db).await?)
}

/// Open findings in [`crate::store::findings::list_open`]'s order, `limit` from
/// `offset`: a page of the fallback page's findings list.
pub async fn open_findings(db: impl PgExecutor<'_>, limit: i64, offset: i64) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(
        "SELECT f.id, f.host_id, h.name AS host_name, f.reason, f.kind, f.subject, f.severity, f.status, \
             f.first_seen, f.last_seen, f.resolved_at, f.evidence, f.fact_changes, f.summary \
         FROM findings f JOIN hosts h ON h.id = f.host_id WHERE f.status = 'open' \
         ORDER BY CASE f.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, \
             h.name, f.reason, f.subject, f.id LIMIT $1 OFFSET $2",
    )
    .bind(limit)
    .bind(offset)
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

/// The payload sizes `provider` was measured at, smallest first. The built-in
/// crates' by a loose index scan (one probe of `result_points_view` per
/// distinct size), not a table scan; the other providers' few points are read whole.
pub async fn sizes(db: impl PgExecutor<'_>, provider: Provider) -> Result<Vec<u64>> {
    let query = if provider.is_rustcrypto() {
        sqlx::query_scalar(
            "WITH RECURSIVE s(size) AS ( \
                 SELECT min(size_bytes) FROM result_points \
                 UNION ALL \
                 SELECT (SELECT min(size_bytes) FROM result_points WHERE size_bytes > s.size) FROM s \
                 WHERE s.size IS NOT NULL) \
             SELECT size FROM s WHERE size IS NOT NULL",
        )
    } else {
        sqlx::query_scalar("SELECT DISTINCT size_bytes FROM provider_points WHERE provider = $1 ORDER BY 1")
            .bind(provider.as_str())
    };
    let sizes: Vec<i64> = query.fetch_all(db).await?;
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
/// open first, then by host — what `/api/v1/findings` lists — `limit` of
/// them from `offset` (`None`: all).
/// ([`crate::store::findings`] has the open ones and one host's history; this adds the fleet's resolved ones.)
pub async fn findings(
    db: impl PgExecutor<'_>,
    status: Option<&str>,
    limit: Option<i64>,
    offset: i64,
) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(
        "SELECT f.id, f.host_id, h.name AS host_name, f.reason, f.kind, f.subject, f.severity, f.status, \
             f.first_seen, f.last_seen, f.resolved_at, f.evidence, f.fact_changes, f.summary \
         FROM findings f JOIN hosts h ON h.id = f.host_id \
         WHERE $1::text IS NULL OR f.status = $1 \
         ORDER BY f.status = 'resolved', \
             CASE f.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, \
             h.name, f.reason, f.subject, f.first_seen DESC, f.id \
         LIMIT $2 OFFSET $3",
    )
    .bind(status)
    .bind(limit)
    .bind(offset)
    .fetch_all(db)
    .await?)
}

/// How many findings [`findings`] has with `status` (`None`: both).
pub async fn count_findings(db: impl PgExecutor<'_>, status: Option<&str>) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM findings WHERE $1::text IS NULL OR status = $1")
            .bind(status)
            .fetch_one(db)
            .await?,
    )
}
