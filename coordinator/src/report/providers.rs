//! The providers page's read-model (`/providers`, issue #31): per machine
//! class, each provider × algorithm × payload size, the median over the
//! class's hosts of its latest throughput on the accelerated and on the
//! software path, its ratio to the class's fastest provider, and what its
//! fallback costs (accelerated ÷ software).
//!
//! The built-in provider's points are in `result_points` and the others' in
//! `provider_points` (migrations/0036); one query reads both. Only one
//! thread, encryption, one static key, counter nonces and no concurrency: the
//! plain per-core speed of a library, the same point on every provider. The
//! built-in provider's points are read only where another provider measured
//! the same algorithm and size, so the page compares providers rather than
//! repeat `/compare`.
//!
//! Hosts are grouped as every class page groups them ([`super::classes`]):
//! emulated and simulated hosts are rows of their own, and are never ranked
//! (their timings are not performance, so no provider is "fastest" there).

use std::collections::{BTreeMap, HashMap};

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::stats::median;
use serde::Serialize;
use sqlx::PgPool;

use super::classes::{self, ClassRow};
use crate::analysis::marks;
use crate::store::Result;

/// The latest point of one host on one provider, at the page's point.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct HostPoint {
    pub host_id: i64,
    #[sqlx(try_from = "String")]
    pub provider: Provider,
    #[sqlx(try_from = "String")]
    pub algorithm: Algorithm,
    pub size_bytes: i64,
    /// The path asked for.
    #[sqlx(try_from = "String")]
    pub path: Path,
    /// What ran.
    #[sqlx(try_from = "String")]
    pub path_used: PathUsed,
    pub throughput_mb_s: f64,
}

/// The page's one query. The point is fixed here (never text from a
/// request), so it takes no parameters; the built-in provider's rows are
/// limited to the algorithms and sizes another provider measured.
const POINTS: &str = "\
    WITH measured AS ( \
        SELECT DISTINCT algorithm, size_bytes FROM provider_points \
        WHERE threads = 1 AND direction = 'encrypt' AND key_mode = 'static' AND nonce = 'counter' \
            AND concurrency = 0 \
    ) \
    SELECT r.host_id, 'rustcrypto' AS provider, r.algorithm, r.size_bytes, r.path, r.path_used, r.throughput_mb_s \
    FROM result_points r JOIN measured m ON m.algorithm = r.algorithm AND m.size_bytes = r.size_bytes \
    WHERE r.threads = 1 AND r.direction = 'encrypt' AND r.key_mode = 'static' AND r.nonce = 'counter' \
        AND r.concurrency = 0 \
    UNION ALL \
    SELECT host_id, provider, algorithm, size_bytes, path, path_used, throughput_mb_s FROM provider_points \
    WHERE threads = 1 AND direction = 'encrypt' AND key_mode = 'static' AND nonce = 'counter' \
        AND concurrency = 0 \
    ORDER BY host_id, provider, algorithm, size_bytes, path";

/// One path's figure over a class's hosts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PathFigure {
    /// The median over the hosts ([`cipherfleet_core::stats::median`]).
    pub median_mb_s: f64,
    pub hosts: usize,
    /// The slowest path any of the hosts ran: a median over hosts of which
    /// one ran in software is not a figure of acceleration.
    pub path_used: PathUsed,
}

/// One provider × algorithm × size in one class row: the page's cell and the API's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderRow {
    /// [`ClassRow::id`]: the class key, `-emulated` / `-simulated` for marked hosts.
    pub class_id: String,
    pub class_key: String,
    /// Class label (agent text: escaped by the template, neutralised in CSV).
    pub class: String,
    /// The class row's hosts are emulated or simulated: shown, never ranked
    /// ([`marks::ranks`]).
    pub marked: bool,
    pub provider: Provider,
    pub algorithm: Algorithm,
    pub size_bytes: u64,
    pub accelerated_mb_s: Option<f64>,
    pub accelerated_hosts: Option<usize>,
    pub accelerated_path_used: Option<PathUsed>,
    pub software_mb_s: Option<f64>,
    pub software_hosts: Option<usize>,
    pub software_path_used: Option<PathUsed>,
    /// Accelerated MB/s ÷ the class's fastest provider's for this algorithm
    /// and size (the fastest is 1.0); none in a marked row.
    pub ratio_to_fastest: Option<f64>,
    /// Accelerated ÷ software MB/s, where both paths were measured: what
    /// the provider loses without acceleration.
    pub fallback_cost: Option<f64>,
}

impl ProviderRow {
    /// The fastest provider of its class for this algorithm and size.
    pub fn is_fastest(&self) -> bool {
        self.ratio_to_fastest == Some(1.0)
    }
}

/// The page's rows from `classes` and the hosts' `points`: grouped per class
/// row, provider, algorithm, size and path; by class label, algorithm,
/// provider and size. A host in no class row (it said hello after the classes
/// were read) is left out.
pub fn rows(classes: &[ClassRow], points: &[HostPoint]) -> Vec<ProviderRow> {
    let class_of: HashMap<i64, usize> = classes
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.host_ids.iter().map(move |&h| (h, i)))
        .collect();
    type Key = (usize, Algorithm, Provider, i64);
    let mut paths: BTreeMap<Key, [Vec<&HostPoint>; 2]> = BTreeMap::new();
    for p in points {
        let Some(&class) = class_of.get(&p.host_id) else {
            continue;
        };
        let side = usize::from(p.path == Path::Software);
        paths.entry((class, p.algorithm, p.provider, p.size_bytes)).or_default()[side].push(p);
    }
    let mut rows: Vec<ProviderRow> = paths
        .into_iter()
        .map(|((class, algorithm, provider, size), [accelerated, software])| {
            let c = &classes[class];
            let (acc, soft) = (figure(&accelerated), figure(&software));
            ProviderRow {
                class_id: c.id.clone(),
                class_key: c.key.clone(),
                class: c.label.clone(),
                marked: !marks::ranks(c.emulated, c.simulated),
                provider,
                algorithm,
                size_bytes: u64::try_from(size).unwrap_or_default(),
                accelerated_mb_s: acc.map(|f| f.median_mb_s),
                accelerated_hosts: acc.map(|f| f.hosts),
                accelerated_path_used: acc.map(|f| f.path_used),
                software_mb_s: soft.map(|f| f.median_mb_s),
                software_hosts: soft.map(|f| f.hosts),
                software_path_used: soft.map(|f| f.path_used),
                ratio_to_fastest: None,
                fallback_cost: match (acc, soft) {
                    (Some(a), Some(s)) if s.median_mb_s > 0.0 => Some(a.median_mb_s / s.median_mb_s),
                    _ => None,
                },
            }
        })
        .collect();
    rank(&mut rows);
    // Classes by label (as every class page lists them), then the table's order.
    let order: HashMap<&str, usize> = classes.iter().enumerate().map(|(i, c)| (c.id.as_str(), i)).collect();
    rows.sort_by(|a, b| {
        (order[a.class_id.as_str()], a.algorithm, a.provider, a.size_bytes).cmp(&(
            order[b.class_id.as_str()],
            b.algorithm,
            b.provider,
            b.size_bytes,
        ))
    });
    rows
}

/// The median and host count of one path's points, and the slowest path they ran.
fn figure(points: &[&HostPoint]) -> Option<PathFigure> {
    let mb_s: Vec<f64> = points.iter().map(|p| p.throughput_mb_s).collect();
    Some(PathFigure {
        median_mb_s: median(&mb_s)?,
        hosts: points.len(),
        // PathUsed is ordered best first.
        path_used: points.iter().map(|p| p.path_used).max()?,
    })
}

/// Sets each unmarked row's ratio to its class's fastest accelerated figure
/// at the same algorithm and size.
fn rank(rows: &mut [ProviderRow]) {
    let mut fastest: HashMap<(String, Algorithm, u64), f64> = HashMap::new();
    for r in rows.iter().filter(|r| !r.marked) {
        if let Some(mb_s) = r.accelerated_mb_s {
            let best = fastest
                .entry((r.class_id.clone(), r.algorithm, r.size_bytes))
                .or_insert(mb_s);
            *best = best.max(mb_s);
        }
    }
    for r in rows.iter_mut().filter(|r| !r.marked) {
        let best = fastest.get(&(r.class_id.clone(), r.algorithm, r.size_bytes));
        r.ratio_to_fastest = match (r.accelerated_mb_s, best) {
            (Some(mb_s), Some(&best)) if best > 0.0 => Some(mb_s / best),
            _ => None,
        };
    }
}

/// Every class's rows now: the fleet's class rows and the latest points of
/// every provider at the page's point.
pub async fn table(pool: &PgPool) -> Result<Vec<ProviderRow>> {
    let (classes, _) = classes::current(pool).await?;
    let points: Vec<HostPoint> = sqlx::query_as(POINTS).fetch_all(pool).await?;
    Ok(rows(&classes, &points))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(id: &str, hosts: &[i64], emulated: bool) -> ClassRow {
        ClassRow {
            id: id.into(),
            key: id.trim_end_matches("-emulated").into(),
            label: format!("x86_64 · {id}"),
            emulated,
            simulated: false,
            host_ids: hosts.to_vec(),
        }
    }

    fn point(host_id: i64, provider: Provider, path: Path, used: PathUsed, mb_s: f64) -> HostPoint {
        HostPoint {
            host_id,
            provider,
            algorithm: "aes-256-gcm".parse().unwrap(),
            size_bytes: 16384,
            path,
            path_used: used,
            throughput_mb_s: mb_s,
        }
    }

    #[test]
    fn medians_ratio_to_the_fastest_and_fallback_cost_per_class() {
        use Path::{Accelerated as A, Software as S};
        use PathUsed::{Accelerated as RanA, Software as RanS};
        let classes = [class("xeon", &[1, 2, 3], false), class("xeon-emulated", &[9], true)];
        let points = [
            point(1, Provider::Openssl, A, RanA, 4000.0),
            point(2, Provider::Openssl, A, RanA, 6000.0),
            point(3, Provider::Openssl, A, RanA, 5000.0),
            point(1, Provider::Openssl, S, RanS, 500.0),
            point(2, Provider::Openssl, S, RanS, 1500.0),
            point(1, Provider::RustCrypto, A, RanA, 2500.0),
            point(2, Provider::RustCrypto, A, PathUsed::Partial, 2500.0),
            point(1, Provider::Ring, A, RanA, 4500.0),
            // An emulated host faster than all: never ranked.
            point(9, Provider::Kernel, A, RanA, 90000.0),
            // A host in no class row.
            point(42, Provider::Kernel, A, RanA, 1.0),
        ];
        let rows = rows(&classes, &points);
        let find = |class: &str, p: Provider| rows.iter().find(|r| r.class_id == class && r.provider == p).unwrap();
        let openssl = find("xeon", Provider::Openssl);
        assert_eq!(openssl.accelerated_mb_s, Some(5000.0));
        assert_eq!(openssl.accelerated_hosts, Some(3));
        assert_eq!(openssl.software_mb_s, Some(1000.0));
        assert_eq!(openssl.fallback_cost, Some(5.0));
        assert!(openssl.is_fastest());
        let rustcrypto = find("xeon", Provider::RustCrypto);
        assert_eq!(rustcrypto.ratio_to_fastest, Some(0.5));
        assert_eq!(rustcrypto.accelerated_path_used, Some(PathUsed::Partial));
        assert_eq!(rustcrypto.fallback_cost, None);
        assert_eq!(find("xeon", Provider::Ring).ratio_to_fastest, Some(0.9));
        let emulated = find("xeon-emulated", Provider::Kernel);
        assert_eq!((emulated.marked, emulated.ratio_to_fastest), (true, None));
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!(rows.iter().filter(|r| r.is_fastest()).count(), 1);
    }
}
