//! The matrix of one view, before paging: rows (hosts, or machine classes
//! with the median of their hosts), algorithm columns, and each cell's colour
//! scaled within its column. Pure functions over the stored points.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::super::hosts::{SIMULATED_LABEL, is_marked};
use super::super::paging::with_query;
use super::params::{CompareParams, Metric, Rows};
use crate::db::matrix::{ClassedHost, Point, Slice, View};
use crate::findings::EMULATED_LABEL;

/// The colour class (0 = worst … 9 = best in its column) of `value` in a
/// column spanning `min..=max`, on a log scale because throughputs span
/// orders of magnitude (DES next to AES-GCM). A column of one value is mid-scale.
pub fn heat(value: f64, min: f64, max: f64, higher_is_better: bool) -> u8 {
    if !(value > 0.0 && min > 0.0 && max > 0.0) {
        return if higher_is_better { 0 } else { 9 };
    }
    if max <= min * (1.0 + 1e-9) {
        return 5;
    }
    let t = ((value.ln() - min.ln()) / (max.ln() - min.ln())).clamp(0.0, 1.0);
    let t = if higher_is_better { t } else { 1.0 - t };
    (t * 10.0).floor().min(9.0) as u8
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// Coefficient of variation (sample standard deviation / mean); `None` below two values.
fn cv(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean > 0.0).then(|| var.sqrt() / mean)
}

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
    /// Hosts whose worker ran another path than the one asked for (fell back to software).
    pub fell_back: usize,
    pub hosts: usize,
}

/// The whole matrix of a view, before paging.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub columns: Vec<String>,
    pub rows: Vec<(RowHead, Vec<Option<Cell>>)>,
}

/// The points that fall in one cell: one host's, or a class's hosts'.
type CellPoints<'a> = Vec<&'a Point>;

/// Whether a host carries the emulated / simulated labels.
fn marks(h: &ClassedHost) -> (bool, bool) {
    (
        is_marked(&h.labels.0, EMULATED_LABEL),
        is_marked(&h.labels.0, SIMULATED_LABEL),
    )
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

impl Matrix {
    /// Groups `points` (one view) into rows of `params.rows` and algorithm columns.
    pub fn build(params: &CompareParams, hosts: &[ClassedHost], points: &[Point]) -> Matrix {
        let by_id: HashMap<i64, &ClassedHost> = hosts
            .iter()
            .filter(|h| params.class.as_ref().is_none_or(|k| h.class().key() == *k))
            .map(|h| (h.id, h))
            .collect();
        let present: BTreeSet<&str> = points
            .iter()
            .filter(|p| by_id.contains_key(&p.host_id))
            .map(|p| p.algorithm.as_str())
            .collect();
        let columns: Vec<String> = if params.algorithms.is_empty() {
            // The agent's table order (AES by key size and mode, then ChaCha20, DES), unknown names last.
            let known = cipherfleet_core::algorithm::ALL.iter().map(|a| a.name());
            let mut columns: Vec<String> = known.filter(|n| present.contains(n)).map(String::from).collect();
            for name in &present {
                if !columns.iter().any(|c| c == name) {
                    columns.push(name.to_string());
                }
            }
            columns
        } else {
            params.algorithms.clone()
        };
        let column_of: HashMap<&str, usize> = columns.iter().enumerate().map(|(i, c)| (c.as_str(), i)).collect();

        // Row heading and, per column, the points that fall in the cell.
        // Each host's heading once: a class heading hashes the class.
        let heads: HashMap<i64, RowHead> = by_id.values().map(|h| (h.id, row_of(h, params))).collect();
        let mut grouped: BTreeMap<(&str, &str), (RowHead, Vec<CellPoints>)> = BTreeMap::new();
        for p in points {
            let (Some(head), Some(&col)) = (heads.get(&p.host_id), column_of.get(p.algorithm.as_str())) else {
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
                let cells = cells
                    .into_iter()
                    .map(|pts| Cell::of(&pts, &params.view.path, params.rows))
                    .collect();
                (head, cells)
            })
            .collect();
        Matrix { columns, rows }
    }
}

impl Cell {
    fn of(points: &[&Point], path: &str, rows: Rows) -> Option<Cell> {
        let first = points.first()?;
        // A requested accelerated path that ran in software is the finding this
        // report exists for: counted per cell, shown as a badge.
        let fell_back = points.iter().filter(|p| p.path_used != path).count();
        // One host: its own result, CV and raw-result link; no median to take.
        if rows == Rows::Hosts || points.len() == 1 {
            return Some(Cell {
                throughput_mb_s: first.throughput_mb_s,
                latency_p99_ns: first.latency_p99_ns as f64,
                cv: first.cv,
                result_id: (rows == Rows::Hosts).then_some(first.result_id),
                fell_back,
                hosts: 1,
            });
        }
        let mut mb_s: Vec<f64> = points.iter().map(|p| p.throughput_mb_s).collect();
        // Spread across hosts, not within a sample: how alike the class really is.
        let spread = cv(&mb_s);
        let mut p99: Vec<f64> = points.iter().map(|p| p.latency_p99_ns as f64).collect();
        Some(Cell {
            throughput_mb_s: median(&mut mb_s)?,
            latency_p99_ns: median(&mut p99)?,
            cv: spread,
            result_id: None,
            fell_back,
            hosts: points.len(),
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
pub fn heat_map(m: &Matrix, metric: Metric) -> Vec<Vec<Option<u8>>> {
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
    use chrono::Utc;
    use sqlx::types::Json;

    use super::super::params::CompareQuery;
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> CompareQuery {
        crate::web::params::query_from(pairs)
    }

    #[test]
    fn heat_scales_each_value_within_its_column_on_a_log_scale() {
        for (value, min, max, higher_is_better, want) in [
            (10.0, 10.0, 1000.0, true, 0),
            (1000.0, 10.0, 1000.0, true, 9),
            // The geometric middle of 10 and 1000 is 100.
            (100.0, 10.0, 1000.0, true, 5),
            (99.0, 10.0, 1000.0, true, 4),
            // Latency: lower is better.
            (10.0, 10.0, 1000.0, false, 9),
            (1000.0, 10.0, 1000.0, false, 0),
            // A column of one value, and values that cannot sit on a log scale.
            (42.0, 42.0, 42.0, true, 5),
            (0.0, 0.0, 50.0, true, 0),
        ] {
            assert_eq!(heat(value, min, max, higher_is_better), want, "{value} in {min}..{max}");
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        for (values, want) in [
            (vec![], None),
            (vec![3.0], Some(3.0)),
            (vec![5.0, 1.0, 3.0], Some(3.0)),
            (vec![4.0, 1.0, 3.0, 2.0], Some(2.5)),
        ] {
            assert_eq!(median(&mut values.clone()), want, "{values:?}");
        }
    }

    #[test]
    fn an_empty_view_suggests_the_nearest_stored_sizes_and_threads() {
        let slices = [(64, 1), (1024, 1), (8192, 1), (16384, 4), (1048576, 1)]
            .map(|(size_bytes, threads)| Slice { size_bytes, threads });
        let wanted = View {
            size_bytes: 16384,
            threads: 1,
            direction: "encrypt".into(),
            path: "accelerated".into(),
        };
        let got: Vec<(i64, i32)> = nearest(&slices, &wanted, 3)
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
        }
    }

    fn point(host_id: i64, algorithm: &str, mb_s: f64, result_id: i64, path_used: &str) -> Point {
        Point {
            host_id,
            algorithm: algorithm.into(),
            direction: "encrypt".into(),
            size_bytes: 16384,
            threads: 1,
            path: "accelerated".into(),
            path_used: path_used.into(),
            result_id,
            measured_at: Utc::now(),
            throughput_mb_s: mb_s,
            latency_p99_ns: (16384.0 / mb_s * 1e3) as i64,
            cv: Some(0.01),
            samples: 20,
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
            point(1, "aes-128-gcm", 1000.0, 11, "accelerated"),
            point(2, "aes-128-gcm", 3000.0, 12, "accelerated"),
            point(3, "aes-128-gcm", 2000.0, 13, "software"),
            point(4, "aes-128-gcm", 5.0, 14, "software"),
            point(1, "des-cbc", 50.0, 15, "software"),
        ];
        let mut params = CompareParams::parse(&query(&[("rows", "classes")])).unwrap();
        let m = Matrix::build(&params, &hosts, &points);
        assert_eq!(
            m.columns,
            ["aes-128-gcm", "des-cbc"],
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
        let m = Matrix::build(&params, &hosts, &points);
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
            point(1, "aes-128-gcm", 1000.0, 1, "accelerated"),
            point(2, "des-cbc", 50.0, 2, "software"),
        ];
        let mut params = CompareParams::parse(&query(&[("algorithms", "des-cbc,chacha20-poly1305")])).unwrap();
        let m = Matrix::build(&params, &hosts, &points);
        assert_eq!(m.columns, ["des-cbc", "chacha20-poly1305"]);
        assert_eq!(m.rows.len(), 1, "host a has none of the columns");
        // A class filter keeps only that class's hosts.
        params.algorithms.clear();
        params.class = Some(hosts[1].class().key());
        let m = Matrix::build(&params, &hosts, &points);
        assert_eq!(m.rows.iter().map(|(h, _)| h.label.as_str()).collect::<Vec<_>>(), ["b"]);
    }
}
