//! The statistics of the comparison pages (`/compare`, `/modes`): what one
//! cell shows over the latest results that fall in it — one host's result,
//! or the median over a machine class's hosts — and how a cell is coloured
//! within its column.

use cipherfleet_core::path::PathUsed;
use cipherfleet_core::stats::{cv, median};

use crate::domain::latest::LatestResult;
use crate::domain::memory::StoredMemory;

/// A cell's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CellStats {
    /// The host's throughput, or the median over the hosts.
    pub throughput_mb_s: f64,
    pub latency_p99_ns: f64,
    /// One host: the CV of its samples. Several: the CV across the hosts'
    /// throughputs (how alike the class really is), never a mix of the two.
    pub cv: Option<f64>,
    /// Results whose worker ran wholly another path than the one asked for
    /// (an accelerated request that fell back to software).
    pub fell_back: usize,
    /// Results that ran partly in software (`partial`): some primitives had
    /// no hardware path on their host.
    pub partial: usize,
    /// Results with fewer samples than a figure needs to be trusted.
    pub low_samples: usize,
    /// One host: its figures. Several: the median of each over the hosts
    /// that reported it, except the per-operation heap figures, which are the
    /// largest (one allocating loop anywhere is the news).
    pub memory: StoredMemory,
    pub hosts: usize,
}

/// The figures of `results` (one per host), `None` when there are none.
pub fn cell_stats(results: &[&LatestResult]) -> Option<CellStats> {
    let partial = results.iter().filter(|r| r.path_used == PathUsed::Partial).count();
    let fell_back = results
        .iter()
        .filter(|r| r.path_used != PathUsed::Partial && r.path_used.differs_from(r.point.path))
        .count();
    let low_samples = results.iter().filter(|r| r.low_samples).count();
    if let [only] = results {
        return Some(CellStats {
            throughput_mb_s: only.throughput_mb_s,
            latency_p99_ns: only.latency_p99_ns as f64,
            cv: only.cv,
            fell_back,
            partial,
            low_samples,
            memory: only.memory,
            hosts: 1,
        });
    }
    let mb_s: Vec<f64> = results.iter().map(|r| r.throughput_mb_s).collect();
    let p99: Vec<f64> = results.iter().map(|r| r.latency_p99_ns as f64).collect();
    Some(CellStats {
        throughput_mb_s: median(&mb_s)?,
        latency_p99_ns: median(&p99)?,
        cv: cv(&mb_s),
        fell_back,
        partial,
        low_samples,
        memory: merged_memory(results.iter().map(|r| &r.memory)),
        hosts: results.len(),
    })
}

/// The memory figures of several hosts' results, as [`CellStats::memory`] says.
fn merged_memory<'a>(memory: impl Iterator<Item = &'a StoredMemory> + Clone) -> StoredMemory {
    let of = |field: fn(&StoredMemory) -> Option<f64>| memory.clone().filter_map(field).collect::<Vec<f64>>();
    let largest = |values: Vec<f64>| values.into_iter().reduce(f64::max);
    StoredMemory {
        cipher_state_bytes: median(&of(|m| m.cipher_state_bytes.map(|b| b as f64))).map(|b| b.round() as i64),
        peak_rss_bytes: median(&of(|m| m.peak_rss_bytes.map(|b| b as f64))).map(|b| b.round() as i64),
        heap_bytes_per_op: largest(of(|m| m.heap_bytes_per_op)),
        allocs_per_op: largest(of(|m| m.allocs_per_op)),
    }
}

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

#[cfg(test)]
pub(crate) mod tests {
    use cipherfleet_core::Point;
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::Suite;

    use super::*;

    /// The latest result of aes-128-gcm-like `algorithm` at 16 KiB, one thread,
    /// on `host_id`, asked for the accelerated path.
    pub(crate) fn result(host_id: i64, algorithm: &str, mb_s: f64, path_used: impl Into<PathUsed>) -> LatestResult {
        LatestResult {
            host_id,
            point: Point {
                algorithm: algorithm.parse().expect("a known algorithm"),
                size_bytes: 16384,
                ..Suite::Quick.expand(1)[0].point
            },
            path_used: path_used.into(),
            result_id: host_id * 1000 + i64::from(mb_s as i32 % 1000),
            measured_at: chrono::Utc::now(),
            throughput_mb_s: mb_s,
            ops_per_s: mb_s * 1e6 / 16384.0,
            latency_p99_ns: (16384.0 / mb_s * 1e3) as i64,
            cv: Some(0.01),
            samples: 20,
            low_samples: false,
            memory: StoredMemory::default(),
        }
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
    fn one_host_shows_its_own_result_and_several_their_median_and_spread() {
        let a = result(1, "aes-128-gcm", 1000.0, Path::Accelerated);
        let b = result(2, "aes-128-gcm", 3000.0, Path::Accelerated);
        let c = result(3, "aes-128-gcm", 2000.0, Path::Software);
        let d = result(4, "aes-128-gcm", 2500.0, PathUsed::Partial);
        assert_eq!(cell_stats(&[]), None);
        let one = cell_stats(&[&c]).unwrap();
        assert_eq!(
            (one.throughput_mb_s, one.cv, one.fell_back, one.hosts),
            (2000.0, Some(0.01), 1, 1)
        );
        let three = cell_stats(&[&a, &b, &c]).unwrap();
        assert_eq!((three.throughput_mb_s, three.fell_back, three.hosts), (2000.0, 1, 3));
        assert!((three.cv.unwrap() - 0.5).abs() < 1e-9, "stdev 1000 over mean 2000");
        assert_eq!(three.latency_p99_ns, c.latency_p99_ns as f64);
        let two = cell_stats(&[&a, &b]).unwrap();
        assert_eq!(two.throughput_mb_s, 2000.0, "the mean of the middle two");
        // A partial path is counted as such, not as a fallback to software.
        let mixed = cell_stats(&[&a, &c, &d]).unwrap();
        assert_eq!((mixed.fell_back, mixed.partial), (1, 1));
    }

    #[test]
    fn memory_is_one_hosts_own_or_the_median_with_the_worst_heap_use_and_low_samples_are_counted() {
        let with = |host, state, rss, allocs: Option<f64>, low| LatestResult {
            low_samples: low,
            memory: StoredMemory {
                cipher_state_bytes: state,
                peak_rss_bytes: rss,
                heap_bytes_per_op: allocs.map(|a| a * 64.0),
                allocs_per_op: allocs,
            },
            ..result(host, "aes-128-ccm", 1000.0, Path::Accelerated)
        };
        let a = with(1, Some(480), Some(3_000_000), Some(0.0), false);
        let b = with(2, Some(1_200), Some(5_000_000), Some(0.5), true);
        let c = with(3, Some(1_000), Some(4_000_000), Some(0.0), false);
        // An agent from before memory was reported: it counts for nothing.
        let old = with(4, None, None, None, false);

        let one = cell_stats(&[&b]).unwrap();
        assert_eq!((one.memory, one.low_samples), (b.memory, 1));
        let all = cell_stats(&[&a, &b, &c, &old]).unwrap();
        assert_eq!(
            all.memory,
            StoredMemory {
                cipher_state_bytes: Some(1_000),
                peak_rss_bytes: Some(4_000_000),
                heap_bytes_per_op: Some(32.0),
                allocs_per_op: Some(0.5),
            }
        );
        assert_eq!(all.low_samples, 1);
        assert_eq!(cell_stats(&[&old, &old]).unwrap().memory, StoredMemory::default());
    }

    /// Medians and spreads are computed in one language, here and in
    /// `cipherfleet_core::stats`: no query or stored procedure computes them
    /// again (two definitions drift apart, as the SQL copy of the class
    /// cells' median once had to be kept equal "to the bit").
    #[test]
    fn no_statistic_is_computed_in_sql() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        let mut dirs = vec![root.join("src"), root.join("../functions")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs" || e == "sql")
                    && !path.ends_with("analysis/cells.rs")
                {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 100, "the source was read");
        let statistics = [
            "percentile_cont",
            "percentile_disc",
            "stddev",
            "var_samp",
            "var_pop",
            "mode() within",
        ];
        let mut found = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path)
                .expect("a readable file")
                .to_ascii_lowercase();
            for s in statistics.iter().filter(|s| text.contains(*s)) {
                found.push(format!("{} computes {s}", path.display()));
            }
        }
        assert!(found.is_empty(), "statistics in SQL: {found:?}");
    }
}
