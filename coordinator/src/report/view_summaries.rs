//! Summaries of one view slice of `result_points` (migrations/0018), so the
//! compare matrix reads tens of rows rather than every host × algorithm
//! point (270,000 at 10,000 hosts):
//!
//! - `view_hosts`, kept by a trigger on `result_points`: which algorithms
//!   each host has a latest point of. Host rows are counted and paged by
//!   name from it ([`host_page`]), and class rows count their hosts ([`row_hosts`]).
//! - `class_cells`: per point and class row, the median and spread of the
//!   hosts' latest results ([`class_cells`]), computed by
//!   [`crate::analysis::cells::cell_stats`] ([`cells_of`]) and stored. Medians do not combine, so a
//!   point's cells are recomputed when read after a change: the trigger marks
//!   the points a transaction touched, and cells computed as of a snapshot
//!   that does not see that transaction are stale. The assignment of hosts to
//!   class rows is the coordinator's ([`crate::analysis::class`]), so it is
//!   passed in, and cells computed under another assignment are stale too.
//!   The coordinator recomputes stale cells in the background once ingest
//!   pauses ([`due`], [`refresh`]), so the first view after a campaign seldom
//!   pays for it; a view that comes first may read
//!   the stored cells as they are, told since when they miss newer results
//!   ([`Cells::changed_since`]), while the background refresh folds them in.
//!
//! These summaries are of the built-in provider, whose points are most of
//! the data. A view of another provider reads `provider_points` directly
//! (only its own suite's points: a few per host) and computes its cells as
//! it reads them, always up to date.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cipherfleet_core::provider::Provider;
use sha2::{Digest, Sha256};
use sqlx::{PgExecutor, PgPool};

use super::matrix::{View, with_provider};
use crate::analysis::cells::cell_stats;
use crate::domain::latest::LatestResult;
use crate::store::Result;
use crate::{latest_result_columns, provider_point_columns};

/// Which class row each host falls in, as the page groups them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    host_ids: Vec<i64>,
    rows: Vec<String>,
    /// Names this exact assignment: cells computed under another one are stale.
    fingerprint: String,
}

impl Assignment {
    /// From `(row, host ids)` pairs, in any order.
    pub fn new<'a>(groups: impl IntoIterator<Item = (&'a str, &'a [i64])>) -> Self {
        let mut pairs: Vec<(i64, &str)> = groups
            .into_iter()
            .flat_map(|(row, ids)| ids.iter().map(move |id| (*id, row)))
            .collect();
        pairs.sort_unstable();
        let mut hash = Sha256::new();
        for (id, row) in &pairs {
            hash.update(id.to_le_bytes());
            hash.update(row.as_bytes());
            hash.update([0xff]);
        }
        let fingerprint = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Assignment {
            host_ids: pairs.iter().map(|(id, _)| *id).collect(),
            rows: pairs.iter().map(|(_, row)| row.to_string()).collect(),
            fingerprint,
        }
    }
}

/// The figures of one class row at one point of a view.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ClassCell {
    pub algorithm: String,
    pub class_row: String,
    #[sqlx(try_from = "i32")]
    pub hosts: usize,
    /// The median over the hosts ([`cipherfleet_core::stats::median`]'s definition).
    pub median_mb_s: f64,
    pub median_p99_ns: f64,
    /// Two or more hosts: the CV across their throughputs; one host: its sample CV.
    pub cv: Option<f64>,
    /// Hosts whose result ran wholly another path than asked, and partly in software.
    #[sqlx(try_from = "i32")]
    pub fell_back: usize,
    #[sqlx(try_from = "i32")]
    pub partial: usize,
    pub min_mb_s: f64,
    pub max_mb_s: f64,
    pub min_p99_ns: i64,
    pub max_p99_ns: i64,
}

/// The view's slice as bind values: size, threads, direction, path.
fn slice(view: &View) -> (i64, i32, &'static str, &'static str) {
    (
        i64::try_from(view.size_bytes).unwrap_or(i64::MAX),
        i32::try_from(view.threads).unwrap_or(i32::MAX),
        view.direction.as_str(),
        view.path.as_str(),
    )
}

/// What a view does with stored cells that newer results made stale (cells
/// never computed, or computed under another assignment, are computed first
/// either way: there is nothing to show until then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// Recompute them before reading: the figures are exact, the view waits,
    /// long at fleet scale (docs/performance.md, "Coordinator queries and sessions").
    Recompute,
    /// Read them as they are, saying since when they miss newer results
    /// ([`Cells::changed_since`]): the caller has them refreshed in the background.
    Show,
}

/// The class cells of a view, and whether they miss newer results.
#[derive(Debug, Clone, PartialEq)]
pub struct Cells {
    pub cells: Vec<ClassCell>,
    /// When the oldest of the cells that miss newer results was computed;
    /// `None` when every cell is up to date.
    pub changed_since: Option<DateTime<Utc>>,
}

/// The class cells of `algorithms` in `view` under `assignment`, computing
/// those never computed under it first, and recomputing those that changes
/// made stale as `stale` says.
pub async fn class_cells(
    pool: &PgPool,
    view: &View,
    algorithms: &[&str],
    assignment: &Assignment,
    stale: Stale,
) -> Result<Cells> {
    if !view.provider.is_rustcrypto() {
        let points = provider_view_points(pool, view, algorithms, &assignment.host_ids).await?;
        return Ok(Cells {
            cells: cells_of(assignment, &points),
            changed_since: None,
        });
    }
    let standing = standing(pool, view, algorithms, assignment).await?;
    let must = standing.iter().any(|s| s.missing) || (stale == Stale::Recompute && standing.iter().any(|s| s.changed));
    let changed_since = if must {
        recompute(pool, view, algorithms, assignment).await?;
        None
    } else {
        standing
            .iter()
            .filter(|s| s.changed)
            .filter_map(|s| s.computed_at)
            .min()
    };
    let (size, threads, direction, path) = slice(view);
    let cells = sqlx::query_as(
        "SELECT algorithm, class_row, hosts, median_mb_s, median_p99_ns, cv, fell_back, partial, \
             min_mb_s, max_mb_s, min_p99_ns, max_p99_ns \
         FROM class_cells \
         WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 AND algorithm = ANY($5) \
         ORDER BY algorithm, class_row",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(algorithms)
    .fetch_all(pool)
    .await?;
    Ok(Cells { cells, changed_since })
}

/// Recomputes the stale cells among `algorithms` in `view` under
/// `assignment` ([`class_cells`] without the read): the background refresh.
pub async fn refresh(pool: &PgPool, view: &View, algorithms: &[&str], assignment: &Assignment) -> Result<()> {
    if !view.provider.is_rustcrypto() || stale(pool, view, algorithms, assignment).await?.is_empty() {
        return Ok(());
    }
    recompute(pool, view, algorithms, assignment).await
}

/// The computed points whose cells miss a committed change, by view slice
/// (each with its algorithms), of the slices whose newest change is older
/// than `quiet` (ingest has paused) or whose oldest is older than `patience`
/// (it has not, but the cells have waited long enough). Read from the change
/// markers, which exist only for computed points: a few rows.
pub async fn due(db: impl PgExecutor<'_>, quiet: Duration, patience: Duration) -> Result<Vec<(View, Vec<String>)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        size_bytes: i64,
        threads: i32,
        direction: String,
        path: String,
        algorithms: Vec<String>,
    }
    let seconds = |d: Duration| d.as_secs_f64();
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT k.size_bytes, k.threads, k.direction, k.path, array_agg(k.algorithm ORDER BY k.algorithm) AS algorithms \
         FROM class_cells_computed k \
         CROSS JOIN LATERAL ( \
             SELECT min(c.written_at) AS first, max(c.written_at) AS last FROM class_cell_changes c \
             WHERE c.size_bytes = k.size_bytes AND c.threads = k.threads AND c.direction = k.direction \
               AND c.path = k.path AND c.algorithm = k.algorithm AND NOT pg_visible_in_snapshot(c.xid, k.as_of)) c \
         WHERE c.first IS NOT NULL \
         GROUP BY k.size_bytes, k.threads, k.direction, k.path \
         HAVING max(c.last) < now() - make_interval(secs => $1) OR min(c.first) < now() - make_interval(secs => $2) \
         ORDER BY 1, 2, 3, 4",
    )
    .bind(seconds(quiet))
    .bind(seconds(patience))
    .fetch_all(db)
    .await?;
    let mut due = Vec::new();
    for r in rows {
        // Slices are written from parsed views only; one that does not parse is no view to refresh.
        let (Ok(direction), Ok(path), Ok(size_bytes), Ok(threads)) = (
            r.direction.parse(),
            r.path.parse(),
            u64::try_from(r.size_bytes),
            u32::try_from(r.threads),
        ) else {
            continue;
        };
        let view = View {
            size_bytes,
            threads,
            direction,
            path,
            // Only the built-in provider's cells are stored.
            provider: Provider::RustCrypto,
        };
        due.push((view, r.algorithms));
    }
    Ok(due)
}

/// Where the cells of one algorithm stand.
#[derive(Debug, sqlx::FromRow)]
struct Standing {
    algorithm: String,
    /// Never computed, or under another assignment.
    missing: bool,
    /// Older than a committed change of their point.
    changed: bool,
    computed_at: Option<DateTime<Utc>>,
}

/// How the cells of each of `algorithms` in `view` stand under `assignment`.
async fn standing(
    db: impl PgExecutor<'_>,
    view: &View,
    algorithms: &[&str],
    assignment: &Assignment,
) -> Result<Vec<Standing>> {
    let (size, threads, direction, path) = slice(view);
    Ok(sqlx::query_as(
        "SELECT a.algorithm, k.algorithm IS NULL OR k.grouping <> $6 AS missing, \
             EXISTS (SELECT 1 FROM class_cell_changes c \
                     WHERE c.size_bytes = $1 AND c.threads = $2 AND c.direction = $3 AND c.path = $4 \
                       AND c.algorithm = a.algorithm AND NOT pg_visible_in_snapshot(c.xid, k.as_of)) AS changed, \
             k.computed_at \
         FROM unnest($5::text[]) AS a (algorithm) \
         LEFT JOIN class_cells_computed k ON k.size_bytes = $1 AND k.threads = $2 AND k.direction = $3 \
             AND k.path = $4 AND k.algorithm = a.algorithm",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(algorithms)
    .bind(&assignment.fingerprint)
    .fetch_all(db)
    .await?)
}

/// Those of `algorithms` whose cells in `view` are missing, of another
/// assignment, or older than a committed change of their points.
async fn stale(
    db: impl PgExecutor<'_>,
    view: &View,
    algorithms: &[&str],
    assignment: &Assignment,
) -> Result<Vec<String>> {
    Ok(standing(db, view, algorithms, assignment)
        .await?
        .into_iter()
        .filter(|s| s.missing || s.changed)
        .map(|s| s.algorithm)
        .collect())
}

/// Recomputes the stale cells among `algorithms`, one view slice at a time
/// across coordinators (an advisory lock), so the snapshots cells are
/// computed as of only move forward and a change marker is deleted only once
/// every later computation sees its transaction.
async fn recompute(pool: &PgPool, view: &View, algorithms: &[&str], assignment: &Assignment) -> Result<()> {
    let (size, threads, direction, path) = slice(view);
    let mut tx = pool.begin().await?;
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtext('class_cells'), hashtext(format('%s/%s/%s/%s', $1, $2, $3, $4)))",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .execute(&mut *tx)
    .await?;
    // Another coordinator may have recomputed them while this one waited.
    let stale = stale(&mut *tx, view, algorithms, assignment).await?;
    if stale.is_empty() {
        return Ok(tx.commit().await?);
    }
    sqlx::query(
        "DELETE FROM class_cells \
         WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 AND algorithm = ANY($5)",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(&stale)
    .execute(&mut *tx)
    .await?;
    // The snapshot the cells are stored as of is taken before the points are
    // read: a change committed in between is in the cells but not seen by the
    // snapshot, so it only costs one more recomputation, and no change can be
    // taken as folded in that the cells miss.
    let as_of: String = sqlx::query_scalar("SELECT pg_current_snapshot()::text")
        .fetch_one(&mut *tx)
        .await?;
    let points: Vec<LatestResult> = sqlx::query_as(concat!(
        "SELECT ",
        latest_result_columns!(),
        " FROM result_points \
         WHERE size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 AND algorithm = ANY($5) \
           AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' AND host_id = ANY($6) \
         ORDER BY host_id, algorithm"
    ))
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(&stale)
    .bind(&assignment.host_ids)
    .fetch_all(&mut *tx)
    .await?;
    let cells = cells_of(assignment, &points);
    sqlx::query(
        "INSERT INTO class_cells (size_bytes, threads, direction, path, algorithm, class_row, hosts, \
             median_mb_s, median_p99_ns, cv, fell_back, partial, min_mb_s, max_mb_s, min_p99_ns, max_p99_ns) \
         SELECT $1, $2, $3, $4, * FROM UNNEST($5::text[], $6::text[], $7::integer[], $8::float8[], $9::float8[], \
             $10::float8[], $11::integer[], $12::integer[], $13::float8[], $14::float8[], $15::bigint[], $16::bigint[])",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(cells.iter().map(|c| c.algorithm.as_str()).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.class_row.as_str()).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| count(c.hosts)).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.median_mb_s).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.median_p99_ns).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.cv).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| count(c.fell_back)).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| count(c.partial)).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.min_mb_s).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.max_mb_s).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.min_p99_ns).collect::<Vec<_>>())
    .bind(cells.iter().map(|c| c.max_p99_ns).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO class_cells_computed (size_bytes, threads, direction, path, algorithm, grouping, as_of, \
             computed_at) \
         SELECT $1, $2, $3, $4, a, $6, $7::pg_snapshot, now() FROM unnest($5::text[]) a \
         ON CONFLICT (size_bytes, threads, direction, path, algorithm) \
             DO UPDATE SET grouping = EXCLUDED.grouping, as_of = EXCLUDED.as_of, computed_at = EXCLUDED.computed_at",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(&stale)
    .bind(&assignment.fingerprint)
    .bind(&as_of)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "DELETE FROM class_cell_changes c USING class_cells_computed k \
         WHERE k.size_bytes = $1 AND k.threads = $2 AND k.direction = $3 AND k.path = $4 AND k.algorithm = ANY($5) \
           AND c.size_bytes = k.size_bytes AND c.threads = k.threads AND c.direction = k.direction \
           AND c.path = k.path AND c.algorithm = k.algorithm AND pg_visible_in_snapshot(c.xid, k.as_of)",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(&stale)
    .execute(&mut *tx)
    .await?;
    Ok(tx.commit().await?)
}

/// The latest results of another provider than the built-in one in `view`,
/// of `algorithms` on `host_ids`, in host order (what [`cells_of`] takes).
async fn provider_view_points(
    db: impl PgExecutor<'_>,
    view: &View,
    algorithms: &[&str],
    host_ids: &[i64],
) -> Result<Vec<LatestResult>> {
    let (size, threads, direction, path) = slice(view);
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        provider_point_columns!(),
        " FROM provider_points \
         WHERE provider = $7 AND size_bytes = $1 AND threads = $2 AND direction = $3 AND path = $4 \
           AND algorithm = ANY($5) AND concurrency = 0 AND key_mode = 'static' AND nonce = 'counter' \
           AND host_id = ANY($6) \
         ORDER BY host_id, algorithm"
    ))
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(path)
    .bind(algorithms)
    .bind(host_ids)
    .bind(view.provider.as_str())
    .fetch_all(db)
    .await?)
}

/// The class cells of `points` (one latest result per host and algorithm, in
/// host order) under `assignment`: per class row and algorithm, the figures
/// [`cell_stats`] makes of its hosts' results, with their range. Hosts in no
/// class row are left out.
pub fn cells_of(assignment: &Assignment, points: &[LatestResult]) -> Vec<ClassCell> {
    let row_of: HashMap<i64, &str> = assignment
        .host_ids
        .iter()
        .copied()
        .zip(assignment.rows.iter().map(String::as_str))
        .collect();
    let mut groups: BTreeMap<(&str, &str), Vec<&LatestResult>> = BTreeMap::new();
    for p in points {
        if let Some(row) = row_of.get(&p.host_id) {
            groups.entry((p.point.algorithm.name(), row)).or_default().push(p);
        }
    }
    groups
        .into_iter()
        .filter_map(|((algorithm, class_row), results)| {
            let stats = cell_stats(&results)?;
            let mb_s = results.iter().map(|r| r.throughput_mb_s);
            let p99 = results.iter().map(|r| r.latency_p99_ns);
            Some(ClassCell {
                algorithm: algorithm.to_string(),
                class_row: class_row.to_string(),
                hosts: stats.hosts,
                median_mb_s: stats.throughput_mb_s,
                median_p99_ns: stats.latency_p99_ns,
                cv: stats.cv,
                fell_back: stats.fell_back,
                partial: stats.partial,
                min_mb_s: mb_s.clone().fold(f64::INFINITY, f64::min),
                max_mb_s: mb_s.fold(f64::NEG_INFINITY, f64::max),
                min_p99_ns: p99.clone().min().unwrap_or_default(),
                max_p99_ns: p99.max().unwrap_or_default(),
            })
        })
        .collect()
}

/// A count as the `integer` columns hold it (host counts are far below its range).
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The end of [`host_page`]'s query, after its `r` (the view's hosts and names).
macro_rules! host_page_tail {
    () => {
        "p AS (SELECT host_id, name FROM r ORDER BY name COLLATE \"C\", host_id OFFSET $7 LIMIT $8) \
         SELECT (SELECT count(*) FROM r), \
             coalesce((SELECT array_agg(host_id ORDER BY name COLLATE \"C\", host_id) FROM p), '{}'), \
             coalesce((SELECT array_agg(name ORDER BY name COLLATE \"C\", host_id) FROM p), '{}')"
    };
}

/// One page of the host rows of `view`: the hosts with a latest point of any
/// of `algorithms`, among `only` when given, by name (byte order, as Rust
/// sorts) with their names, `limit` from `offset`; and how many there are in all.
pub async fn host_page(
    db: impl PgExecutor<'_>,
    view: &View,
    algorithms: &[&str],
    only: Option<&[i64]>,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<(i64, String)>)> {
    let (size, threads, direction, path) = slice(view);
    // The built-in provider's hosts per view are kept in `view_hosts`; another
    // provider's are its points' hosts.
    let query = if view.provider.is_rustcrypto() {
        sqlx::query_as(concat!(
            "WITH r AS MATERIALIZED ( \
                 SELECT v.host_id, h.name FROM view_hosts v JOIN hosts h ON h.id = v.host_id \
                 WHERE v.size_bytes = $1 AND v.threads = $2 AND v.direction = $3 AND v.path = $4 \
                   AND v.algorithms && $5 AND ($6::bigint[] IS NULL OR v.host_id = ANY($6))), ",
            host_page_tail!()
        ))
    } else {
        sqlx::query_as(concat!(
            "WITH r AS MATERIALIZED ( \
                 SELECT DISTINCT p.host_id, h.name FROM provider_points p JOIN hosts h ON h.id = p.host_id \
                 WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.path = $4 \
                   AND p.algorithm = ANY($5) AND ($6::bigint[] IS NULL OR p.host_id = ANY($6)) \
                   AND p.provider = $9 AND p.concurrency = 0 AND p.key_mode = 'static' AND p.nonce = 'counter'), ",
            host_page_tail!()
        ))
    };
    let query = query
        .bind(size)
        .bind(threads)
        .bind(direction)
        .bind(path)
        .bind(algorithms)
        .bind(only)
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX));
    let (total, ids, names): (i64, Vec<i64>, Vec<String>) = with_provider(query, view.provider).fetch_one(db).await?;
    Ok((
        u64::try_from(total).unwrap_or_default(),
        ids.into_iter().zip(names).collect(),
    ))
}

/// Per class row of `assignment`, its hosts with a latest point of any of `algorithms` in `view`.
pub async fn row_hosts(
    db: impl PgExecutor<'_>,
    view: &View,
    algorithms: &[&str],
    assignment: &Assignment,
) -> Result<Vec<(String, i64)>> {
    let (size, threads, direction, path) = slice(view);
    let query = if view.provider.is_rustcrypto() {
        sqlx::query_as(
            "SELECT m.class_row, count(*) FROM view_hosts v \
             JOIN unnest($6::bigint[], $7::text[]) AS m (host_id, class_row) ON m.host_id = v.host_id \
             WHERE v.size_bytes = $1 AND v.threads = $2 AND v.direction = $3 AND v.path = $4 AND v.algorithms && $5 \
             GROUP BY m.class_row",
        )
    } else {
        sqlx::query_as(
            "SELECT m.class_row, count(DISTINCT p.host_id) FROM provider_points p \
             JOIN unnest($6::bigint[], $7::text[]) AS m (host_id, class_row) ON m.host_id = p.host_id \
             WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.path = $4 \
               AND p.algorithm = ANY($5) AND p.provider = $8 AND p.concurrency = 0 AND p.key_mode = 'static' \
               AND p.nonce = 'counter' \
             GROUP BY m.class_row",
        )
    };
    let query = query
        .bind(size)
        .bind(threads)
        .bind(direction)
        .bind(path)
        .bind(algorithms)
        .bind(&assignment.host_ids)
        .bind(&assignment.rows);
    Ok(with_provider(query, view.provider).fetch_all(db).await?)
}
