//! The fallback page's list of hosts at software speed, kept per point in
//! `fallback_views` with the count of the point's rows (migrations/0030).
//!
//! The list groups every row of a point that the rule
//! ([`crate::analysis::software_speed`]) finds at software speed, ordered by
//! each host's worst row: 80,000 rows at 10,000 hosts when 4,000 lack AES,
//! too slow a query for every view (docs/performance.md, "How it got there").
//! So it is computed once per point and read back while nothing it depends on
//! changed:
//!
//! - the point's rows: the triggers writing `fallback_pairs` leave a change
//!   marker per point and transaction, and a list computed as of a snapshot
//!   that does not see a marker's transaction has [`Stored::changed`];
//! - the hosts' CPUs and the rule's cases on each ([`SlowCases`]): a list is
//!   stored with their fingerprint, and read only with the same one.
//!
//! Lists are recomputed one point at a time across coordinators (an advisory
//! lock), so the snapshot a list is as of only moves forward and a marker is
//! deleted only once the point's list has seen its transaction
//! ([`compute`]); markers of points without a list are deleted by
//! [`forget_changes`].
//!
//! All of this is the built-in crates' (`fallback_pairs`). Another provider's
//! list is judged from its pairs on every view and never stored: only the
//! `providers` suite and `--provider` campaigns measure those, a few rows per
//! host ([`slow_view`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::KeyMode;
use sha2::{Digest, Sha256};
use sqlx::{PgExecutor, PgPool};

use super::fallback::{self, PathPoint};
use crate::analysis::slow::Thresholds;
use crate::analysis::software_speed::{HostCpu, below_near_software, ratio, slow_cases};
use crate::store::Result;

/// The hosts of a view and the rows it judges at software speed, as the
/// grouping is told them: each host's CPU (an index into the view's distinct
/// host CPUs), and per CPU the [`crate::analysis::software_speed::SlowCase`]s on it.
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
    /// Names all of the above: a list judged with other cases is another list.
    pub fingerprint: String,
}

/// A host as the rule reads it: its id, arch, advertised features, and
/// whether it is emulated.
pub type HostCpuOf<'a> = (i64, Option<&'a str>, Option<&'a [String]>, bool);
/// What tells one host CPU from another for the rule: arch, advertised
/// features, emulated.
type CpuKey<'a> = (Option<&'a str>, Option<&'a [String]>, bool);

impl SlowCases {
    /// The cases of `hosts` at `key_mode` and `size_bytes`, the rule
    /// tabulated once per distinct CPU (a fleet has a handful).
    pub fn of<'a>(hosts: impl IntoIterator<Item = HostCpuOf<'a>>, key_mode: KeyMode, size_bytes: u64) -> Self {
        let t = Thresholds::default();
        let mut cpus: Vec<CpuKey<'_>> = Vec::new();
        let mut cases = Vec::new();
        let mut host_cpus = Vec::new();
        for (id, arch, advertised, emulated) in hosts {
            let key = (arch, advertised, emulated);
            let cpu = match cpus.iter().position(|c| *c == key) {
                Some(i) => i,
                None => {
                    let on = HostCpu { arch, advertised };
                    for c in slow_cases(on, emulated, key_mode, size_bytes, &t) {
                        cases.push((cpus.len(), c.algorithm.name(), c.path_used.as_str(), c.below_near));
                    }
                    cpus.push(key);
                    cpus.len() - 1
                }
            };
            host_cpus.push((id, i32::try_from(cpu).unwrap_or(i32::MAX)));
        }
        let cases = cases
            .into_iter()
            .map(|(cpu, a, p, b)| (i32::try_from(cpu).unwrap_or(i32::MAX), a, p, b));
        SlowCases::new(host_cpus, cases)
    }

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
        let mut hash = Sha256::new();
        hash.update(out.first_id.to_le_bytes());
        for cpu in &out.cpu_by_id {
            hash.update(cpu.map_or(-1, i64::from).to_le_bytes());
        }
        for key in &out.keys {
            hash.update(key.as_bytes());
            hash.update([0xff]);
        }
        out.fingerprint = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        out
    }

    /// Whether a row of host `host_id` is one of the cases of its CPU: the
    /// key [`compute`]'s query builds of a row, built the same way.
    fn has(&self, host_id: i64, algorithm: Algorithm, path_used: PathUsed, below_near: bool) -> bool {
        let cpu = usize::try_from(host_id - self.first_id)
            .ok()
            .and_then(|i| self.cpu_by_id.get(i).copied().flatten());
        cpu.is_some_and(|cpu| {
            let key = format!("{cpu}|{}|{}|{below_near}", algorithm.name(), path_used.as_str());
            self.keys.contains(&key)
        })
    }
}

/// A list as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The point's rows, every host.
    pub pairs: i64,
    /// The hosts with a row at software speed, worst row first.
    pub slow_hosts: Vec<i64>,
    pub computed_at: DateTime<Utc>,
    /// Rows of the point changed in a transaction the list does not see:
    /// it is being recomputed, and is as of `computed_at` until then.
    pub changed: bool,
}

/// `point` as the bind parameters `$1`–`$4`.
fn point_key(point: &PathPoint) -> (i64, i32, &'static str, &'static str) {
    (
        i64::try_from(point.size_bytes).unwrap_or(i64::MAX),
        i32::try_from(point.threads).unwrap_or(i32::MAX),
        point.direction.as_str(),
        point.key_mode.as_str(),
    )
}

/// The list of `point` judged with `cases`: the stored one, or, when none
/// is stored with these cases, one computed now. A stored list that changes
/// made stale is returned as it is, [`Stored::changed`] set: the caller
/// shows it as of when it was computed and has it recomputed in the background.
/// Another provider's list is judged now, from all its pairs at `point`.
pub async fn slow_view(pool: &PgPool, point: &PathPoint, cases: &SlowCases) -> Result<Stored> {
    if !point.provider.is_rustcrypto() {
        return judged_now(pool, point, cases).await;
    }
    if let Some(stored) = read(pool, point, cases).await? {
        return Ok(stored);
    }
    compute(pool, point, cases).await?;
    read(pool, point, cases)
        .await?
        .ok_or_else(|| sqlx::Error::RowNotFound.into())
}

/// The list of a provider other than the built-in crates, as [`compute`]
/// would store it, from every pair of the point in the page's order (so a
/// host's first row is its worst): a few rows, read on every view.
async fn judged_now(pool: &PgPool, point: &PathPoint, cases: &SlowCases) -> Result<Stored> {
    let pairs = fallback::pairs(pool, point, None, None, 0).await?;
    let t = Thresholds::default();
    let mut slow_hosts: Vec<i64> = Vec::new();
    for p in &pairs {
        let Some(used) = p.accelerated_path_used else {
            continue;
        };
        let below = below_near_software(ratio(p.accelerated_mb_s, p.software_mb_s), &t);
        if cases.has(p.host_id, p.algorithm, used, below) && !slow_hosts.contains(&p.host_id) {
            slow_hosts.push(p.host_id);
        }
    }
    Ok(Stored {
        pairs: i64::try_from(pairs.len()).unwrap_or(i64::MAX),
        slow_hosts,
        computed_at: Utc::now(),
        changed: false,
    })
}

/// The stored list of `point`, if it was judged with `cases`.
pub async fn read(db: impl PgExecutor<'_>, point: &PathPoint, cases: &SlowCases) -> Result<Option<Stored>> {
    let (size, threads, direction, key_mode) = point_key(point);
    let row: Option<(i64, Vec<i64>, DateTime<Utc>, bool)> = sqlx::query_as(
        "SELECT k.pairs, k.slow_hosts, k.computed_at, EXISTS ( \
             SELECT 1 FROM fallback_pair_changes c \
             WHERE c.size_bytes = k.size_bytes AND c.threads = k.threads AND c.direction = k.direction \
               AND c.key_mode = k.key_mode AND NOT pg_visible_in_snapshot(c.xid, k.as_of)) \
         FROM fallback_views k \
         WHERE k.size_bytes = $1 AND k.threads = $2 AND k.direction = $3 AND k.key_mode = $4 AND k.cases = $5",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(key_mode)
    .bind(&cases.fingerprint)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|(pairs, slow_hosts, computed_at, changed)| Stored {
        pairs,
        slow_hosts,
        computed_at,
        changed,
    }))
}

/// Takes the point's advisory lock for the rest of the transaction: one
/// computation (or clean-up of its markers) per point at a time, cluster-wide.
async fn lock_point(tx: &mut sqlx::PgConnection, point: &PathPoint) -> Result<()> {
    let (size, threads, direction, key_mode) = point_key(point);
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtext('fallback_views'), hashtext(format('%s/%s/%s/%s', $1, $2, $3, $4)))",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(key_mode)
    .execute(tx)
    .await?;
    Ok(())
}

/// Computes and stores the list of `point` judged with `cases`, unless one
/// as fresh is stored already (another coordinator computed it while this
/// one waited), and deletes the markers it has seen.
///
/// The hosts at software speed are those with a row whose algorithm,
/// accelerated path used and ratio under the threshold are a case of their
/// CPU, in the order of their worst row (worst ratio first, unmeasured last,
/// then by name); the rows come from two ranges of
/// `fallback_pairs_by_path_used`, read from the index alone. One statement,
/// so the snapshot stored is the one the rows were read in.
pub async fn compute(pool: &PgPool, point: &PathPoint, cases: &SlowCases) -> Result<()> {
    let (size, threads, direction, key_mode) = point_key(point);
    let mut tx = pool.begin().await?;
    lock_point(&mut tx, point).await?;
    if read(&mut *tx, point, cases).await?.is_some_and(|s| !s.changed) {
        return Ok(tx.commit().await?);
    }
    sqlx::query(
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
         INSERT INTO fallback_views AS v (size_bytes, threads, direction, key_mode, cases, as_of, computed_at, \
             pairs, slow_hosts) \
         SELECT $1, $2, $3, $4, $11, pg_current_snapshot(), now(), \
             (SELECT count(*) FROM fallback_pairs p \
              WHERE p.size_bytes = $1 AND p.threads = $2 AND p.direction = $3 AND p.key_mode = $4), \
             coalesce((SELECT array_agg(s.host_id ORDER BY s.worst NULLS LAST, h.name COLLATE \"C\", s.host_id) \
                       FROM slow s JOIN hosts h ON h.id = s.host_id), '{}') \
         ON CONFLICT (size_bytes, threads, direction, key_mode) DO UPDATE SET cases = EXCLUDED.cases, \
             as_of = EXCLUDED.as_of, computed_at = EXCLUDED.computed_at, pairs = EXCLUDED.pairs, \
             slow_hosts = EXCLUDED.slow_hosts",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(key_mode)
    .bind(&cases.cpu_by_id)
    .bind(cases.first_id)
    .bind(&cases.keys)
    .bind(&cases.paths_any_ratio)
    .bind(&cases.paths_below)
    .bind(Thresholds::default().near_software_ratio)
    .bind(&cases.fingerprint)
    .execute(&mut *tx)
    .await?;
    forget_seen(&mut tx, point).await?;
    Ok(tx.commit().await?)
}

/// Deletes the markers of `point` that its list has seen (all of them when
/// it has no list: any list computed later sees their committed
/// transactions). The point's lock must be held: a list being computed
/// without seeing a marker's transaction may not have been stored yet.
async fn forget_seen(tx: &mut sqlx::PgConnection, point: &PathPoint) -> Result<u64> {
    let (size, threads, direction, key_mode) = point_key(point);
    Ok(sqlx::query(
        "DELETE FROM fallback_pair_changes c \
         WHERE c.size_bytes = $1 AND c.threads = $2 AND c.direction = $3 AND c.key_mode = $4 \
           AND NOT EXISTS (SELECT 1 FROM fallback_views k \
                           WHERE k.size_bytes = $1 AND k.threads = $2 AND k.direction = $3 AND k.key_mode = $4 \
                             AND NOT pg_visible_in_snapshot(c.xid, k.as_of))",
    )
    .bind(size)
    .bind(threads)
    .bind(direction)
    .bind(key_mode)
    .execute(tx)
    .await?
    .rows_affected())
}

/// The points whose stored list changes made stale, of those whose newest
/// change is older than `quiet` (ingest has paused) or whose oldest is older
/// than `patience` (it has not, but the list has waited long enough). Read
/// from the markers: a few rows per point touched since its list.
pub async fn due(db: impl PgExecutor<'_>, quiet: Duration, patience: Duration) -> Result<Vec<PathPoint>> {
    let seconds = |d: Duration| d.as_secs_f64();
    let rows: Vec<(i64, i32, String, String)> = sqlx::query_as(
        "SELECT c.size_bytes, c.threads, c.direction, c.key_mode \
         FROM fallback_pair_changes c JOIN fallback_views k ON k.size_bytes = c.size_bytes \
             AND k.threads = c.threads AND k.direction = c.direction AND k.key_mode = c.key_mode \
         WHERE NOT pg_visible_in_snapshot(c.xid, k.as_of) \
         GROUP BY 1, 2, 3, 4 \
         HAVING max(c.written_at) < now() - make_interval(secs => $1) \
             OR min(c.written_at) < now() - make_interval(secs => $2) \
         ORDER BY 1, 2, 3, 4",
    )
    .bind(seconds(quiet))
    .bind(seconds(patience))
    .fetch_all(db)
    .await?;
    // Points are written from `result_points` rows, whose columns the schema checks.
    Ok(rows
        .into_iter()
        .filter_map(|(size_bytes, threads, direction, key_mode)| {
            Some(PathPoint {
                size_bytes: u64::try_from(size_bytes).ok()?,
                threads: u32::try_from(threads).ok()?,
                direction: direction.parse().ok()?,
                key_mode: key_mode.parse().ok()?,
                provider: Provider::RustCrypto,
            })
        })
        .collect())
}

/// Deletes the markers of the points that have no list; how many. In one
/// transaction whatever the number of points (a campaign of the whole
/// matrix marks a thousand): each point's lock is taken if free (a point
/// being computed keeps its markers for the next round), and the markers
/// are deleted by a statement that starts once the locks are held.
pub async fn forget_changes(pool: &PgPool) -> Result<u64> {
    let mut tx = pool.begin().await?;
    let locked: Vec<(i64, i32, String, String)> = sqlx::query_as(
        "SELECT size_bytes, threads, direction, key_mode FROM ( \
             SELECT DISTINCT size_bytes, threads, direction, key_mode FROM fallback_pair_changes c \
             WHERE NOT EXISTS (SELECT 1 FROM fallback_views k WHERE k.size_bytes = c.size_bytes \
                 AND k.threads = c.threads AND k.direction = c.direction AND k.key_mode = c.key_mode)) p \
         WHERE pg_try_advisory_xact_lock(hashtext('fallback_views'), \
             hashtext(format('%s/%s/%s/%s', size_bytes, threads, direction, key_mode)))",
    )
    .fetch_all(&mut *tx)
    .await?;
    if locked.is_empty() {
        return Ok(0);
    }
    let forgotten = sqlx::query(
        "DELETE FROM fallback_pair_changes c \
         USING unnest($1::bigint[], $2::int[], $3::text[], $4::text[]) AS p (size_bytes, threads, direction, key_mode) \
         WHERE (c.size_bytes, c.threads, c.direction, c.key_mode) = (p.size_bytes, p.threads, p.direction, p.key_mode) \
           AND NOT EXISTS (SELECT 1 FROM fallback_views k \
                           WHERE k.size_bytes = c.size_bytes AND k.threads = c.threads \
                             AND k.direction = c.direction AND k.key_mode = c.key_mode \
                             AND NOT pg_visible_in_snapshot(c.xid, k.as_of))",
    )
    .bind(locked.iter().map(|p| p.0).collect::<Vec<_>>())
    .bind(locked.iter().map(|p| p.1).collect::<Vec<_>>())
    .bind(locked.iter().map(|p| p.2.as_str()).collect::<Vec<_>>())
    .bind(locked.iter().map(|p| p.3.as_str()).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(forgotten)
}
