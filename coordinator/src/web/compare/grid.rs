//! The matrix of one view, before paging: rows (hosts, or machine classes
//! with the median of their hosts), algorithm columns, and each cell's colour
//! scaled within its column. Pure functions over the stored points; the
//! statistics of a cell and its colour are [`crate::analysis::cells`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cipherfleet_core::algorithm::{self, Algorithm};

use super::super::paging::with_query;
use super::params::{CompareParams, Metric, Rows};
use crate::analysis::cells::{cell_stats, heat};
use crate::db::matrix::{ClassedHost, Slice, View};
use crate::db::points::LatestResult;

/// What a host or class is, as a row heading shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RowHead {
    /// Host id, or the class key.
    pub id: String,
    /// Hostname or class label (agent text: escaped by the template).
    pub label: String,
    pub href: String,
    pub emulated: bool,
    pub simulated: bool,
    /// Hosts behind the row (1 for a host row).
    pub hosts: usize,
}

/// One cell: a host's latest result, or the median over a class's hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub throughput_mb_s: f64,
    pub latency_p99_ns: f64,
    /// Hosts: the sample CV of the result. Classes: the CV across the hosts' throughputs.
    pub cv: Option<f64>,
    /// The raw result (host rows only).
    pub result_id: Option<i64>,
    /// Hosts whose worker ran wholly another path than the one asked for (fell back to software).
    pub fell_back: usize,
    /// Hosts whose worker ran partly in software (`partial`).
    pub partial: usize,
    pub hosts: usize,
}

/// The whole matrix of a view, before paging.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub columns: Vec<Algorithm>,
    pub rows: Vec<(RowHead, Vec<Option<Cell>>)>,
}

/// The results that fall in one cell: one host's, or a class's hosts'.
type CellResults<'a> = Vec<&'a LatestResult>;

/// Whether a host is emulated / simulated.
fn marks(h: &ClassedHost) -> (bool, bool) {
    (h.emulated(), h.simulated())
}

/// The row a host falls in. Emulated and simulated hosts form classes of
/// their own: their timings are not performance and must not move a real
/// class's median.
fn row_of(h: &ClassedHost, params: &CompareParams) -> RowHead {
    let (emulated, simulated) = marks(h);
    match params.rows {
        Rows::Hosts => RowHead {
            id: h.id.to_string(),
            label: h.name.clone(),
            href: format!("/hosts/{}", h.id),
            emulated,
            simulated,
            hosts: 1,
        },
        Rows::Classes => {
            let class = h.class();
            let key = class.key();
            // The hosts of the class in the same view.
            let mut hosts = params.clone();
            hosts.rows = Rows::Hosts;
            hosts.class = Some(key.clone());
            hosts.page = 1;
            RowHead {
                href: with_query("/compare", &hosts.query_pairs()),
                id: format!(
                    "{key}{}{}",
                    if emulated { "-emulated" } else { "" },
                    if simulated { "-simulated" } else { "" }
                ),
                label: class.label(),
                emulated,
                simulated,
                hosts: 0,
            }
        }
    }
}

impl Grid {
    /// Groups `points` (one view) into rows of `params.rows` and algorithm columns.
    pub fn build(params: &CompareParams, hosts: &[ClassedHost], points: &[LatestResult]) -> Grid {
        let by_id: HashMap<i64, &ClassedHost> = hosts
            .iter()
            .filter(|h| params.class.as_ref().is_none_or(|k| h.class().key() == *k))
            .map(|h| (h.id, h))
            .collect();
        let columns: Vec<Algorithm> = if params.algorithms.is_empty() {
            // The agent's table order: AES by key size and mode, then ChaCha20, DES.
            let present: BTreeSet<&str> = points
                .iter()
                .filter(|p| by_id.contains_key(&p.host_id))
                .map(|p| p.point.algorithm.name())
                .collect();
            algorithm::ALL
                .iter()
                .copied()
                .filter(|a| present.contains(a.name()))
                .collect()
        } else {
            params.algorithms.clone()
        };
        let column_of: HashMap<Algorithm, usize> = columns.iter().enumerate().map(|(i, c)| (*c, i)).collect();

        // Row heading and, per column, the points that fall in the cell.
        // Each host's heading once: a class heading hashes the class.
        let heads: HashMap<i64, RowHead> = by_id.values().map(|h| (h.id, row_of(h, params))).collect();
        let mut grouped: BTreeMap<(&str, &str), (RowHead, Vec<CellResults>)> = BTreeMap::new();
        for p in points {
            let (Some(head), Some(&col)) = (heads.get(&p.host_id), column_of.get(&p.point.algorithm)) else {
                continue;
            };
            let entry = grouped
                .entry((head.label.as_str(), head.id.as_str()))
                .or_insert_with(|| (head.clone(), vec![Vec::new(); columns.len()]));
            entry.1[col].push(p);
        }
        if params.rows == Rows::Classes {
            // A class counts the hosts of the view that fall in it.
            for (head, cells) in grouped.values_mut() {
                let ids: BTreeSet<i64> = cells.iter().flatten().map(|p| p.host_id).collect();
                head.hosts = ids.len();
            }
        }
        let rows = grouped
            .into_values()
            .map(|(head, cells)| {
                let cells = cells.into_iter().map(|pts| Cell::of(&pts, params.rows)).collect();
                (head, cells)
            })
            .collect();
        Grid { columns, rows }
    }
}

impl Cell {
    fn of(results: &[&LatestResult], rows: Rows) -> Option<Cell> {
        // A host row is its own result, with its CV and raw-result link; a
        // class row the median over its hosts.
        let stats = cell_stats(results)?;
        Some(Cell {
            throughput_mb_s: stats.throughput_mb_s,
            latency_p99_ns: stats.latency_p99_ns,
            cv: stats.cv,
            result_id: (rows == Rows::Hosts).then(|| results[0].result_id),
            fell_back: stats.fell_back,
            partial: stats.partial,
            hosts: stats.hosts,
        })
    }

    /// The figure `metric` colours and sorts by.
    pub fn metric(&self, metric: Metric) -> f64 {
        match metric {
            Metric::Throughput => self.throughput_mb_s,
            Metric::P99 => self.latency_p99_ns,
        }
    }
}

/// Heat classes of every cell, scaled per column over all rows (not just the page shown).
pub fn heat_map(m: &Grid, metric: Metric) -> Vec<Vec<Option<u8>>> {
    let ranges: Vec<(f64, f64)> = (0..m.columns.len())
        .map(|c| {
            let values = m
                .rows
                .iter()
                .filter_map(|(_, cells)| cells[c].as_ref())
                .map(|x| x.metric(metric));
            values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
        })
        .collect();
    m.rows
        .iter()
        .map(|(_, cells)| {
            cells
                .iter()
                .zip(&ranges)
                .map(|(cell, (lo, hi))| {
                    cell.as_ref()
                        .map(|x| heat(x.metric(metric), *lo, *hi, metric == Metric::Throughput))
                })
                .collect()
        })
        .collect()
}

/// Stored views nearest to the one asked for: by payload size (log distance), then threads.
pub fn nearest(slices: &[Slice], wanted: &View, n: usize) -> Vec<Slice> {
    let distance = |s: &Slice| {
        let size = ((s.size_bytes as f64).log2() - (wanted.size_bytes as f64).log2()).abs();
        let threads = ((s.threads as f64).log2() - (wanted.threads as f64).log2()).abs();
        size + threads
    };
    let mut others: Vec<Slice> = slices
        .iter()
        .copied()
        .filter(|s| (s.size_bytes, s.threads) != (wanted.size_bytes, wanted.threads))
        .collect();
    others.sort_by(|a, b| distance(a).total_cmp(&distance(b)).then(a.cmp(b)));
    others.truncate(n);
    others
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::Direction;
    use sqlx::types::Json;

    use super::super::params::{CompareQuery, names};
    use super::*;
    use crate::analysis::cells::tests::result;

    fn query(pairs: &[(&str, &str)]) -> CompareQuery {
        crate::web::params::query_from(pairs)
    }

    #[test]
    fn an_empty_view_suggests_the_nearest_stored_sizes_and_threads() {
        let slices = [(64, 1), (1024, 1), (8192, 1), (16384, 4), (1048576, 1)]
            .map(|(size_bytes, threads)| Slice { size_bytes, threads });
        let wanted = View {
            size_bytes: 16384,
            threads: 1,
            direction: Direction::Encrypt,
            path: Path::Accelerated,
        };
        let got: Vec<(u64, u32)> = nearest(&slices, &wanted, 3)
            .iter()
            .map(|s| (s.size_bytes, s.threads))
            .collect();
        assert_eq!(got, [(8192, 1), (16384, 4), (1024, 1)]);
    }

    fn host(id: i64, name: &str, model: &str, labels: &[(&str, &str)]) -> ClassedHost {
        ClassedHost {
            id,
            name: name.into(),
            labels: Json(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            arch: Some("x86_64".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            cpu_model_name: Some(model.into()),
            features_usable: Some(vec!["aes".into(), "pclmulqdq".into()]),
            build_flavour: Some("accelerated".into()),
            hypervisor: None,
            cpuinfo_foreign: None,
        }
    }

    fn point(host_id: i64, algorithm: &str, mb_s: f64, result_id: i64, path_used: Path) -> LatestResult {
        LatestResult {
            result_id,
            ..result(host_id, algorithm, mb_s, path_used)
        }
    }

    #[test]
    fn classes_take_the_median_of_their_hosts_and_keep_emulated_hosts_apart() {
        let hosts = [
            host(1, "a", "Xeon Gold", &[]),
            host(2, "b", "Xeon Gold", &[]),
            host(3, "c", "Xeon Gold", &[]),
            host(4, "qemu", "Xeon Gold", &[("emulated", "qemu")]),
        ];
        let points = [
            point(1, "aes-128-gcm", 1000.0, 11, Path::Accelerated),
            point(2, "aes-128-gcm", 3000.0, 12, Path::Accelerated),
            point(3, "aes-128-gcm", 2000.0, 13, Path::Software),
            point(4, "aes-128-gcm", 5.0, 14, Path::Software),
            point(1, "des-cbc", 50.0, 15, Path::Software),
        ];
        let mut params = CompareParams::parse(&query(&[("rows", "classes")])).unwrap();
        let m = Grid::build(&params, &hosts, &points);
        assert_eq!(
            names(&m.columns),
            "aes-128-gcm,des-cbc",
            "the agent's order: AES before DES"
        );
        assert_eq!(m.rows.len(), 2, "{m:#?}");
        let (real, cells) = m.rows.iter().find(|(h, _)| !h.emulated).unwrap();
        assert_eq!(real.hosts, 3);
        let gcm = cells[0].as_ref().unwrap();
        assert_eq!(
            (gcm.throughput_mb_s, gcm.hosts, gcm.fell_back, gcm.result_id),
            (2000.0, 3, 1, None)
        );
        assert!((gcm.cv.unwrap() - 0.5).abs() < 1e-9, "stdev 1000 over mean 2000");
        let (emulated, cells) = m.rows.iter().find(|(h, _)| h.emulated).unwrap();
        assert_eq!((emulated.hosts, cells[0].as_ref().unwrap().throughput_mb_s), (1, 5.0));
        assert!(cells[1].is_none());

        // Host rows: one per host, each cell its own result.
        params.rows = Rows::Hosts;
        let m = Grid::build(&params, &hosts, &points);
        let names: Vec<&str> = m.rows.iter().map(|(h, _)| h.label.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "qemu"]);
        assert_eq!(m.rows[1].1[0].as_ref().unwrap().result_id, Some(12));
        let heat = heat_map(&m, Metric::Throughput);
        assert_eq!(heat[0][1], Some(5), "a single value in its column is mid-scale");
        assert_eq!(
            (heat[1][0], heat[3][0]),
            (Some(9), Some(0)),
            "fastest and slowest of the column"
        );
    }

    #[test]
    fn asked_algorithms_set_the_columns_and_their_order() {
        let hosts = [host(1, "a", "Xeon", &[]), host(2, "b", "EPYC", &[])];
        let points = [
            point(1, "aes-128-gcm", 1000.0, 1, Path::Accelerated),
            point(2, "des-cbc", 50.0, 2, Path::Software),
        ];
        let mut params = CompareParams::parse(&query(&[("algorithms", "des-cbc,chacha20-poly1305")])).unwrap();
        let m = Grid::build(&params, &hosts, &points);
        assert_eq!(names(&m.columns), "des-cbc,chacha20-poly1305");
        assert_eq!(m.rows.len(), 1, "host a has none of the columns");
        // A class filter keeps only that class's hosts.
        params.algorithms.clear();
        params.class = Some(hosts[1].class().key());
        let m = Grid::build(&params, &hosts, &points);
        assert_eq!(m.rows.iter().map(|(h, _)| h.label.as_str()).collect::<Vec<_>>(), ["b"]);
    }
}
