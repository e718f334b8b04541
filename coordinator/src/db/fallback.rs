//! Read queries of the fallback report: every host's accelerated and software
//! path at one point of the matrix side by side, and findings of any status.
//!
//! The pairs come from `fallback_pairs` (both paths' latest results side by
//! side, kept from `result_points` by triggers), never from `results`: a page
//! of the worst ratios is one range of its `(point, ratio)` index.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
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

/// The columns of [`PathPair`] from `fallback_pairs p`, and the page's order:
/// worst ratio first, unmeasured ratios last, then host name and algorithm
/// (byte order, as Rust compares strings).
macro_rules! pair_columns {
    () => {
        "p.host_id, p.algorithm, p.accelerated_result_id, p.accelerated_path_used, p.accelerated_mb_s, \
         p.accelerated_cv, p.software_result_id, p.software_mb_s, p.software_cv \
         FROM fallback_pairs p JOIN hosts h ON h.id = p.host_id \
         WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4 \
             AND ($5::bigint[] IS NULL OR p.host_id = ANY($5)) "
    };
}
macro_rules! pair_order {
    () => {
        " ORDER BY p.ratio NULLS LAST, h.name COLLATE \"C\", p.algorithm COLLATE \"C\""
    };
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
/// host) keeps only those hosts' rows. Read from `fallback_pairs`, which
/// triggers keep from `result_points` with the ratio indexed: a page is an
/// index range, not a join of every host's two paths.
pub async fn pairs(
    db: impl PgExecutor<'_>,
    point: &PathPoint,
    hosts: Option<&[i64]>,
    limit: Option<i64>,
    offset: i64,
) -> Result<Vec<PathPair>> {
    let q = sqlx::query_as(concat!(
        "SELECT ",
        pair_columns!(),
        pair_order!(),
        " LIMIT $6 OFFSET $7"
    ));
    Ok(bind_point(q, point)
        .bind(hosts)
        .bind(limit)
        .bind(offset)
        .fetch_all(db)
        .await?)
}

/// How many rows [`pairs`] has at `point` for `hosts` (`None`: every host).
pub async fn count_pairs(db: impl PgExecutor<'_>, point: &PathPoint, hosts: Option<&[i64]>) -> Result<i64> {
    let (n,): (i64,) = bind_point(
        sqlx::query_as(
            "SELECT count(*) FROM fallback_pairs p \
             WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4 \
                 AND ($5::bigint[] IS NULL OR p.host_id = ANY($5))",
        ),
        point,
    )
    .bind(hosts)
    .fetch_one(db)
    .await?;
    Ok(n)
}

/// The rows of [`pairs`] that may be at software speed, in the page's order:
/// of `algorithms` (those whose best path is not software on some host),
/// whose accelerated request ran something else or measured below
/// `near_ratio` times the software path. A superset, for [`crate::analysis::software_speed::judge`] to decide;
/// the page asks it for the hosts of one page of [`slow_hosts`].
pub async fn slow_candidates(
    db: impl PgExecutor<'_>,
    point: &PathPoint,
    hosts: Option<&[i64]>,
    algorithms: &[&str],
    near_ratio: f64,
) -> Result<Vec<PathPair>> {
    let q = sqlx::query_as(concat!(
        "SELECT ",
        pair_columns!(),
        " AND p.algorithm = ANY($6) AND (p.accelerated_path_used <> $7 OR p.ratio < $8)",
        pair_order!()
    ));
    Ok(bind_point(q, point)
        .bind(hosts)
        .bind(algorithms)
        .bind(PathUsed::Accelerated.as_str())
        .bind(near_ratio)
        .fetch_all(db)
        .await?)
}

/// The hosts of a view and the rows it judges at software speed, as
/// [`slow_hosts`] is told them: each host's CPU (an index into the view's
/// distinct host CPUs), and per CPU the
/// [`crate::analysis::software_speed::SlowCase`]s on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlowCases {
    /// `cpu_by_id[id - first_id]` is host `id`'s CPU; `None` for ids not in the view.
    /// An array rather than a join: the planner cannot estimate a join with
    /// an unnested list and plans (and JIT-compiles) for millions of rows.
    pub first_id: i64,
    pub cpu_by_id: Vec<Option<i32>>,
    /// `cpu|algorithm|path used|below the ratio` (`true`/`false`, a boolean's `::text`).
    pub keys: Vec<String>,
    /// The paths used of the cases that need no ratio, and of those that need one under the threshold.
    pub paths_any_ratio: Vec<&'static str>,
    pub paths_below: Vec<&'static str>,
}

impl SlowCases {
    /// The hosts `(id, cpu)` of a view, and the cases per CPU as `(cpu, algorithm, path used, below the ratio)`.
    pub fn new(
        hosts: impl IntoIterator<Item = (i64, i32)>,
        cases: impl IntoIterator<Item = (i32, &'static str, &'static str, bool)>,
    ) -> Self {
        let hosts: Vec<(i64, i32)> = hosts.into_iter().collect();
        let first_id = hosts.iter().map(|h| h.0).min().unwrap_or(0);
        let last_id = hosts.iter().map(|h| h.0).max().unwrap_or(-1);
        let mut cpu_by_id = vec![None; usize::try_from(last_id - first_id + 1).unwrap_or(0)];
        for (id, cpu) in hosts {
            if let Ok(i) = usize::try_from(id - first_id) {
                cpu_by_id[i] = Some(cpu);
            }
        }
        let mut out = SlowCases {
            first_id,
            cpu_by_id,
            ..SlowCases::default()
        };
        for (cpu, algorithm, path_used, below) in cases {
            out.keys.push(format!("{cpu}|{algorithm}|{path_used}|{below}"));
            let list = if below {
                &mut out.paths_below
            } else {
                &mut out.paths_any_ratio
            };
            if !list.contains(&path_used) {
                list.push(path_used);
            }
        }
        out
    }
}

/// The hosts with a row at software speed at `point`, in the order of their
/// worst row (the page's order: worst ratio first, unmeasured last, then by
/// name): a row at software speed is one whose algorithm, accelerated path
/// used and ratio under `near_ratio` are a case of its host's CPU. Grouped
/// here rather than judged row by row in the coordinator (80,000 rows at
/// 10,000 hosts when 4,000 lack AES); the rows come from two ranges of
/// `fallback_pairs_by_path_used`, read from the index alone.
pub async fn slow_hosts(
    db: impl PgExecutor<'_>,
    point: &PathPoint,
    cases: &SlowCases,
    near_ratio: f64,
) -> Result<Vec<i64>> {
    let q = sqlx::query_as(
        "WITH r AS ( \
             SELECT p.host_id, p.algorithm, p.accelerated_path_used, p.ratio FROM fallback_pairs p \
             WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4 \
               AND p.accelerated_path_used = ANY($8) \
             UNION ALL \
             SELECT p.host_id, p.algorithm, p.accelerated_path_used, p.ratio FROM fallback_pairs p \
             WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4 \
               AND p.accelerated_path_used = ANY($9) AND p.ratio < $10 AND p.accelerated_path_used <> ALL($8)), \
         slow AS ( \
             SELECT r.host_id, min(r.ratio) AS worst FROM r \
             JOIN unnest($7::text[]) AS c (key) ON c.key = concat_ws('|', \
                 ($5::int[])[(r.host_id - $6 + 1)::int], r.algorithm, r.accelerated_path_used, \
                 coalesce(r.ratio < $10, false)::text) \
             WHERE ($5::int[])[(r.host_id - $6 + 1)::int] IS NOT NULL \
             GROUP BY r.host_id) \
         SELECT s.host_id FROM slow s JOIN hosts h ON h.id = s.host_id \
         ORDER BY s.worst NULLS LAST, h.name COLLATE \"C\", s.host_id",
    );
    let rows: Vec<(i64,)> = bind_point(q, point)
        .bind(&cases.cpu_by_id)
        .bind(cases.first_id)
        .bind(&cases.keys)
        .bind(&cases.paths_any_ratio)
        .bind(&cases.paths_below)
        .bind(near_ratio)
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Open findings in [`super::findings::list_open`]'s order, `limit` from
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
