//! The matrix of one view: rows (hosts, or machine classes with the median
//! of their hosts), algorithm columns, and each cell's colour scaled within
//! its column over every row, not only the page's. Pure functions over what
//! was read: the class rows of the fleet ([`crate::report::classes`]), the class cells
//! of the view ([`view_summaries::class_cells`]), and for host rows one page
//! of hosts with their latest results. The statistics of a cell and its
//! colour are [`crate::analysis::cells`], for class cells too (stored by
//! [`crate::report::view_summaries`]).
//!
//! [`view_summaries::class_cells`]: crate::report::view_summaries::class_cells

use std::collections::HashMap;

use cipherfleet_core::algorithm::{self, Algorithm};

use super::super::paging::with_query;
use super::params::{CompareParams, Metric, Rows};
use crate::analysis::cells::{cell_stats, heat};
use crate::analysis::marks::ranks;
use crate::domain::latest::LatestResult;
use crate::report::classes::ClassRow;
use crate::report::matrix::{Slice, View};
use crate::report::view_summaries::ClassCell;

/// What a host or class is, as a row heading shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RowHead {
    /// Host id, or the class row's id.
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

/// One page of the matrix of a view.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub columns: Vec<Algorithm>,
    /// The rows of the page.
    pub rows: Vec<(RowHead, Vec<Option<Cell>>)>,
    /// Rows of the view in all.
    pub total: u64,
    /// Per column, the lowest and highest figure of the metric over every
    /// row of the view that ranks ([`ranks`]); `(inf, -inf)` when none does.
    pub ranges: Vec<(f64, f64)>,
    /// Some row of the view is emulated or simulated.
    pub any_marked: bool,
}

/// The view's columns and the class rows it shows, read before its rows.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    pub columns: Vec<Algorithm>,
    /// The class rows shown (all, or those of `class=`), each with its cells in column order.
    pub rows: Vec<(&'a ClassRow, Vec<Option<&'a ClassCell>>)>,
}

impl<'a> Frame<'a> {
    /// The columns asked for, or those with data among the rows shown, in
    /// the agent's table order (AES by key size and mode, then ChaCha20, DES).
    pub fn new(params: &CompareParams, rows: &'a [ClassRow], cells: &'a [ClassCell]) -> Self {
        let shown: Vec<&ClassRow> = rows
            .iter()
            .filter(|r| params.class.as_ref().is_none_or(|k| r.key == *k))
            .collect();
        let by_row: HashMap<&str, usize> = shown.iter().enumerate().map(|(i, r)| (r.id.as_str(), i)).collect();
        let cells: Vec<&ClassCell> = cells
            .iter()
            .filter(|c| by_row.contains_key(c.class_row.as_str()))
            .collect();
        let columns: Vec<Algorithm> = if params.algorithms.is_empty() {
            algorithm::ALL
                .iter()
                .copied()
                .filter(|a| cells.iter().any(|c| c.algorithm == a.name()))
                .collect()
        } else {
            params.algorithms.clone()
        };
        let column_of: HashMap<&str, usize> = columns.iter().enumerate().map(|(i, c)| (c.name(), i)).collect();
        let mut framed: Vec<(&ClassRow, Vec<Option<&ClassCell>>)> =
            shown.iter().map(|r| (*r, vec![None; columns.len()])).collect();
        for c in cells {
            if let Some(&col) = column_of.get(c.algorithm.as_str()) {
                framed[by_row[c.class_row.as_str()]].1[col] = Some(c);
            }
        }
        framed.retain(|(_, cells)| cells.iter().any(Option::is_some));
        Frame { columns, rows: framed }
    }

    /// The column names, as the summaries take them.
    pub fn column_names(&self) -> Vec<&'static str> {
        self.columns.iter().map(|a| a.name()).collect()
    }

    /// Hosts of the rows shown when `class=` limits them (`None`: every host).
    pub fn only_hosts(&self, params: &CompareParams, rows: &[ClassRow]) -> Option<Vec<i64>> {
        params.class.as_ref().map(|k| {
            let mut ids: Vec<i64> = rows
                .iter()
                .filter(|r| r.key == *k)
                .flat_map(|r| r.host_ids.iter().copied())
                .collect();
            ids.sort_unstable();
            ids
        })
    }

    fn any_marked(&self) -> bool {
        self.rows.iter().any(|(r, _)| r.emulated || r.simulated)
    }

    /// Per column, the metric's range over every host (host rows) or class
    /// row that ranks: emulated and simulated classes (their hosts are never
    /// in a real class) neither set nor stretch a colour scale.
    fn ranges(&self, rows: Rows, metric: Metric) -> Vec<(f64, f64)> {
        (0..self.columns.len())
            .map(|col| {
                let cells = self
                    .rows
                    .iter()
                    .filter(|(row, _)| ranks(row.emulated, row.simulated))
                    .filter_map(|(_, cells)| cells[col]);
                cells.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
                    let (low, high) = match (rows, metric) {
                        (Rows::Hosts, Metric::Throughput) => (c.min_mb_s, c.max_mb_s),
                        (Rows::Hosts, Metric::P99) => (c.min_p99_ns as f64, c.max_p99_ns as f64),
                        (Rows::Classes, Metric::Throughput) => (c.median_mb_s, c.median_mb_s),
                        (Rows::Classes, Metric::P99) => (c.median_p99_ns, c.median_p99_ns),
                    };
                    (lo.min(low), hi.max(high))
                })
            })
            .collect()
    }
}

/// The heading of a class row, linking to its hosts in the same view.
fn class_head(row: &ClassRow, params: &CompareParams, hosts: usize) -> RowHead {
    let mut of_class = params.clone();
    of_class.rows = Rows::Hosts;
    of_class.class = Some(row.key.clone());
    of_class.page = 1;
    RowHead {
        id: row.id.clone(),
        label: row.label.clone(),
        href: with_query("/compare", &of_class.query_pairs()),
        emulated: row.emulated,
        simulated: row.simulated,
        hosts,
    }
}

impl Grid {
    /// The class rows of a view, `page` of them: `hosts` says how many hosts
    /// of each row have a latest point in the columns.
    pub fn classes(params: &CompareParams, frame: &Frame, hosts: &HashMap<String, usize>, page: (u64, u64)) -> Grid {
        let (offset, limit) = page;
        let rows = frame
            .rows
            .iter()
            .skip(offset as usize)
            .take(limit as usize)
            .map(|(row, cells)| {
                let head = class_head(row, params, hosts.get(&row.id).copied().unwrap_or_default());
                let cells = cells.iter().map(|c| c.map(Cell::of_class)).collect();
                (head, cells)
            })
            .collect();
        Grid {
            columns: frame.columns.clone(),
            rows,
            total: frame.rows.len() as u64,
            ranges: frame.ranges(Rows::Classes, params.metric),
            any_marked: frame.any_marked(),
        }
    }

    /// One page of host rows: `page` the hosts (id, name) in order, `points`
    /// their latest results of the view, `total` the host rows in all.
    pub fn hosts(
        params: &CompareParams,
        frame: &Frame,
        rows: &[ClassRow],
        page: &[(i64, String)],
        points: &[LatestResult],
        total: u64,
    ) -> Grid {
        let marks: HashMap<i64, (bool, bool)> = rows
            .iter()
            .flat_map(|r| r.host_ids.iter().map(move |id| (*id, (r.emulated, r.simulated))))
            .collect();
        let column_of: HashMap<Algorithm, usize> = frame.columns.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        let mut by_host: HashMap<i64, Vec<Option<&LatestResult>>> = HashMap::new();
        for p in points {
            if let Some(&col) = column_of.get(&p.point.algorithm) {
                by_host
                    .entry(p.host_id)
                    .or_insert_with(|| vec![None; frame.columns.len()])[col] = Some(p);
            }
        }
        let rows = page
            .iter()
            .map(|(id, name)| {
                let (emulated, simulated) = marks.get(id).copied().unwrap_or_default();
                let head = RowHead {
                    id: id.to_string(),
                    label: name.clone(),
                    href: format!("/hosts/{id}"),
                    emulated,
                    simulated,
                    hosts: 1,
                };
                let cells = match by_host.get(id) {
                    Some(results) => results.iter().map(|r| r.and_then(Cell::of_host)).collect(),
                    None => vec![None; frame.columns.len()],
                };
                (head, cells)
            })
            .collect();
        Grid {
            columns: frame.columns.clone(),
            rows,
            total,
            ranges: frame.ranges(Rows::Hosts, params.metric),
            any_marked: frame.any_marked(),
        }
    }
}

impl Cell {
    /// A host row's cell: its own result, with its CV and raw-result link.
    fn of_host(result: &LatestResult) -> Option<Cell> {
        let stats = cell_stats(&[result])?;
        Some(Cell {
            throughput_mb_s: stats.throughput_mb_s,
            latency_p99_ns: stats.latency_p99_ns,
            cv: stats.cv,
            result_id: Some(result.result_id),
            fell_back: stats.fell_back,
            partial: stats.partial,
            hosts: stats.hosts,
        })
    }

    /// A class row's cell: the median over its hosts.
    fn of_class(c: &ClassCell) -> Cell {
        Cell {
            throughput_mb_s: c.median_mb_s,
            latency_p99_ns: c.median_p99_ns,
            cv: c.cv,
            result_id: None,
            fell_back: c.fell_back,
            partial: c.partial,
            hosts: c.hosts,
        }
    }

    /// The figure `metric` colours and sorts by.
    pub fn metric(&self, metric: Metric) -> f64 {
        match metric {
            Metric::Throughput => self.throughput_mb_s,
            Metric::P99 => self.latency_p99_ns,
        }
    }
}

/// Heat classes of the page's cells, scaled per column over every row of
/// the view that ranks; `None` for an empty cell and for every cell of a row
/// that does not rank ([`ranks`]: emulated or simulated), which is greyed.
pub fn heat_map(m: &Grid, metric: Metric) -> Vec<Vec<Option<u8>>> {
    m.rows
        .iter()
        .map(|(head, cells)| {
            let ranked = ranks(head.emulated, head.simulated);
            cells
                .iter()
                .zip(&m.ranges)
                .map(|(cell, (lo, hi))| {
                    cell.as_ref()
                        .filter(|_| ranked)
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
pub(crate) mod tests {
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::Direction;

    use super::super::params::{CompareQuery, names};
    use super::*;
    use crate::analysis::cells::tests::result;
    use crate::report::classes::tests::group;
    use crate::report::classes::{self, class_rows};
    use crate::report::view_summaries;

    fn query(pairs: &[(&str, &str)]) -> CompareQuery {
        crate::web::params::query_from(pairs)
    }

    /// Hosts 1-3 a real Xeon Gold class, host 4 an emulated one; AES-GCM on
    /// every host (on either path), DES on host 1.
    fn xeon_gold() -> (Vec<ClassRow>, [LatestResult; 5]) {
        let rows = class_rows(&[group(&[1, 2, 3], "Xeon Gold", false), group(&[4], "Xeon Gold", true)]);
        let points = [
            point(1, "aes-128-gcm", 1000.0, 11, Path::Accelerated),
            point(2, "aes-128-gcm", 3000.0, 12, Path::Accelerated),
            point(3, "aes-128-gcm", 2000.0, 13, Path::Software),
            point(4, "aes-128-gcm", 5.0, 14, Path::Software),
            point(1, "des-cbc", 50.0, 15, Path::Software),
        ];
        (rows, points)
    }

    /// The class cells of `points` as the report stores them.
    pub(crate) fn cells_of(rows: &[ClassRow], points: &[LatestResult]) -> Vec<ClassCell> {
        view_summaries::cells_of(&classes::assignment(rows), points)
    }

    fn point(host_id: i64, algorithm: &str, mb_s: f64, result_id: i64, path_used: Path) -> LatestResult {
        LatestResult {
            result_id,
            ..result(host_id, algorithm, mb_s, path_used)
        }
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
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        };
        let got: Vec<(u64, u32)> = nearest(&slices, &wanted, 3)
            .iter()
            .map(|s| (s.size_bytes, s.threads))
            .collect();
        assert_eq!(got, [(8192, 1), (16384, 4), (1024, 1)]);
    }

    #[test]
    fn classes_take_the_median_of_their_hosts_and_keep_emulated_hosts_apart() {
        let (rows, points) = xeon_gold();
        let cells = cells_of(&rows, &points);
        let params = CompareParams::parse(&query(&[("rows", "classes")])).unwrap();
        let frame = Frame::new(&params, &rows, &cells);
        assert_eq!(
            names(&frame.columns),
            "aes-128-gcm,des-cbc",
            "the agent's order: AES before DES"
        );
        let hosts: HashMap<String, usize> = [(rows[0].id.clone(), 3), (rows[1].id.clone(), 1)].into();
        let m = Grid::classes(&params, &frame, &hosts, (0, 50));
        assert_eq!((m.rows.len(), m.total), (2, 2), "{m:#?}");
        assert!(m.any_marked);
        let (real, cells) = &m.rows[0];
        assert!(!real.emulated);
        assert_eq!(real.hosts, 3);
        let gcm = cells[0].as_ref().unwrap();
        assert_eq!(
            (gcm.throughput_mb_s, gcm.hosts, gcm.fell_back, gcm.result_id),
            (2000.0, 3, 1, None)
        );
        assert!((gcm.cv.unwrap() - 0.5).abs() < 1e-9, "stdev 1000 over mean 2000");
        let (emulated, cells) = &m.rows[1];
        assert!(emulated.emulated);
        assert_eq!((emulated.hosts, cells[0].as_ref().unwrap().throughput_mb_s), (1, 5.0));
        assert!(cells[1].is_none());
        assert!(real.href.contains(&format!("class={}", rows[0].key)), "{}", real.href);
    }

    #[test]
    fn host_rows_are_coloured_over_every_host_not_only_the_page() {
        let (rows, points) = xeon_gold();
        let cells = cells_of(&rows, &points);
        let params = CompareParams::parse(&query(&[])).unwrap();
        let frame = Frame::new(&params, &rows, &cells);
        // The second page of one host: b, whose figures are the column's highest.
        let page = [(2, "b".to_string())];
        let m = Grid::hosts(&params, &frame, &rows, &page, &points[1..2], 4);
        assert_eq!(m.rows.len(), 1);
        assert_eq!(m.total, 4);
        let (head, cells) = &m.rows[0];
        assert_eq!((head.label.as_str(), head.href.as_str()), ("b", "/hosts/2"));
        assert_eq!(cells[0].as_ref().unwrap().result_id, Some(12));
        assert!(cells[1].is_none(), "b measured no DES");
        assert_eq!(
            m.ranges[0],
            (1000.0, 3000.0),
            "the real hosts set the colour scale, the emulated one (5 MB/s) does not"
        );
        assert_eq!(heat_map(&m, Metric::Throughput)[0][0], Some(9), "fastest of the column");
        // The emulated host's page: shown, not ranked.
        let m = Grid::hosts(&params, &frame, &rows, &[(4, "qemu".into())], &points[3..4], 4);
        assert!(m.rows[0].0.emulated);
        assert_eq!(m.rows[0].1[0].as_ref().unwrap().throughput_mb_s, 5.0);
        assert_eq!(heat_map(&m, Metric::Throughput)[0][0], None, "greyed, not the slowest");
    }

    #[test]
    fn an_emulated_host_faster_than_the_real_one_is_greyed_not_green() {
        // The fleet's des-ede3-cbc column: qemu's Nehalem beat the native host.
        let rows = class_rows(&[group(&[1], "Xeon", false), group(&[2], "Nehalem", true)]);
        let points = [
            point(1, "des-ede3-cbc", 2.70, 1, Path::Accelerated),
            point(2, "des-ede3-cbc", 5.16, 2, Path::Accelerated),
        ];
        let cells = cells_of(&rows, &points);
        for rows_as in ["hosts", "classes"] {
            let params = CompareParams::parse(&query(&[("rows", rows_as)])).unwrap();
            let frame = Frame::new(&params, &rows, &cells);
            let m = match params.rows {
                Rows::Hosts => Grid::hosts(
                    &params,
                    &frame,
                    &rows,
                    &[(1, "native".into()), (2, "qemu".into())],
                    &points,
                    2,
                ),
                Rows::Classes => Grid::classes(&params, &frame, &HashMap::new(), (0, 50)),
            };
            assert_eq!(m.ranges[0], (2.70, 2.70), "{rows_as}: only the real host ranks");
            let heat: Vec<(bool, Option<u8>)> = m
                .rows
                .iter()
                .zip(heat_map(&m, Metric::Throughput))
                .map(|((head, _), heat)| (head.emulated, heat[0]))
                .collect();
            assert!(
                heat.contains(&(false, Some(5))),
                "{rows_as}: the real host alone is mid-scale: {heat:?}"
            );
            assert!(
                heat.contains(&(true, None)),
                "{rows_as}: the emulated host is greyed: {heat:?}"
            );
        }
    }

    #[test]
    fn asked_algorithms_set_the_columns_and_a_class_filter_the_rows() {
        let rows = class_rows(&[group(&[1], "Xeon", false), group(&[2], "EPYC", false)]);
        let points = [
            point(1, "aes-128-gcm", 1000.0, 1, Path::Accelerated),
            point(2, "des-cbc", 50.0, 2, Path::Software),
        ];
        let cells = cells_of(&rows, &points);
        let params = CompareParams::parse(&query(&[("algorithms", "des-cbc,chacha20-poly1305")])).unwrap();
        let frame = Frame::new(&params, &rows, &cells);
        assert_eq!(names(&frame.columns), "des-cbc,chacha20-poly1305");
        assert_eq!(frame.rows.len(), 1, "the Xeon class has none of the columns");
        assert_eq!(frame.only_hosts(&params, &rows), None);
        let epyc = rows.iter().find(|r| r.host_ids == [2]).unwrap();
        let params = CompareParams::parse(&query(&[("class", epyc.key.as_str())])).unwrap();
        let frame = Frame::new(&params, &rows, &cells);
        assert_eq!(names(&frame.columns), "des-cbc", "only the class's columns");
        assert_eq!(frame.only_hosts(&params, &rows), Some(vec![2]));
    }
}
