//! The curves of `/modes`: a subject's latest results merged per algorithm,
//! size and thread count (the median when a class has several hosts), and
//! the speed-up of each thread count over one thread by the one scaling rule
//! ([`crate::analysis::scaling`]). Pure functions.

use std::collections::BTreeMap;

use cipherfleet_core::algorithm::Algorithm;

use crate::analysis::cells::cell_stats;
use crate::analysis::scaling::{HostSeries, ThreadPoint, thread_scaling};
use crate::domain::latest::LatestResult;
use crate::domain::memory::StoredMemory;

/// One point of one algorithm, merged over the subject's hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub algorithm: Algorithm,
    pub size_bytes: u64,
    pub threads: u32,
    /// The host's value, or the median over the class's hosts.
    pub throughput_mb_s: f64,
    pub latency_p99_ns: f64,
    /// One host: the sample CV. Several: the CV would mix two spreads, so none.
    pub cv: Option<f64>,
    pub hosts: usize,
    /// The raw result, for one host.
    pub result_id: Option<i64>,
    /// Some host's result had too few samples to trust.
    pub low_samples: bool,
    /// By the cells rule ([`crate::analysis::cells::CellStats::memory`]).
    pub memory: StoredMemory,
}

/// The position of `a` in the agent's table order.
fn order(a: Algorithm) -> usize {
    cipherfleet_core::algorithm::ALL
        .iter()
        .position(|x| *x == a)
        .unwrap_or(usize::MAX)
}

/// `results` of `algorithms` (all when empty).
fn wanted<'a>(results: &'a [LatestResult], algorithms: &'a [Algorithm]) -> impl Iterator<Item = &'a LatestResult> {
    results
        .iter()
        .filter(move |r| algorithms.is_empty() || algorithms.contains(&r.point.algorithm))
}

/// Merges the results of the subject's hosts per (algorithm, size, threads),
/// keeping `algorithms` (all when empty), in the agent's algorithm order.
pub fn merge(results: &[LatestResult], algorithms: &[Algorithm]) -> Vec<Merged> {
    let mut groups: BTreeMap<(usize, u64, u32), Vec<&LatestResult>> = BTreeMap::new();
    for r in wanted(results, algorithms) {
        let p = &r.point;
        groups
            .entry((order(p.algorithm), p.size_bytes, p.threads))
            .or_default()
            .push(r);
    }
    groups
        .into_values()
        .filter_map(|rs| {
            let stats = cell_stats(&rs)?;
            let single = rs.len() == 1;
            Some(Merged {
                algorithm: rs[0].point.algorithm,
                size_bytes: rs[0].point.size_bytes,
                threads: rs[0].point.threads,
                throughput_mb_s: stats.throughput_mb_s,
                latency_p99_ns: stats.latency_p99_ns,
                cv: if single { stats.cv } else { None },
                hosts: stats.hosts,
                result_id: single.then(|| rs[0].result_id),
                low_samples: stats.low_samples > 0,
                memory: stats.memory,
            })
        })
        .collect()
}

/// The algorithms of `merged` in order, each with its points passing `keep`.
pub fn by_algorithm(merged: &[Merged], keep: impl Fn(&Merged) -> bool) -> Vec<(Algorithm, Vec<&Merged>)> {
    let mut out: Vec<(Algorithm, Vec<&Merged>)> = Vec::new();
    for m in merged.iter().filter(|m| keep(m)) {
        match out.last_mut() {
            Some((algorithm, list)) if *algorithm == m.algorithm => list.push(m),
            _ => out.push((m.algorithm, vec![m])),
        }
    }
    out
}

/// A thread count's figures against the same algorithm on one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRow {
    pub algorithm: Algorithm,
    pub threads: u32,
    /// The merged throughput at `threads`.
    pub throughput_mb_s: f64,
    /// `threads × efficiency`; `None` where no host was measured at both 1 and `threads`.
    pub speedup: Option<f64>,
    /// Speed-up per thread, by [`thread_scaling`]: 1.0 is perfect scaling.
    pub efficiency: Option<f64>,
}

/// Speed-up and efficiency of every merged point at `size_bytes`, each host
/// compared with itself (the rule `/capacity` plans with).
pub fn scaling(results: &[LatestResult], merged: &[Merged], size_bytes: u64) -> Vec<ScalingRow> {
    by_algorithm(merged, |m| m.size_bytes == size_bytes)
        .into_iter()
        .flat_map(|(algorithm, points)| {
            let mut hosts: BTreeMap<i64, HostSeries> = BTreeMap::new();
            for r in results
                .iter()
                .filter(|r| r.point.algorithm == algorithm && r.point.size_bytes == size_bytes)
            {
                hosts
                    .entry(r.host_id)
                    .or_insert_with(|| HostSeries {
                        host_id: r.host_id,
                        logical_cores: None,
                        points: Vec::new(),
                    })
                    .points
                    .push(ThreadPoint {
                        threads: r.point.threads,
                        mb_s: r.throughput_mb_s,
                        path_used: r.path_used,
                    });
            }
            let series: Vec<HostSeries> = hosts.into_values().collect();
            let measured = thread_scaling(&series);
            let has_single = series.iter().any(|s| s.at(1).is_some());
            points.into_iter().map(move |m| {
                let efficiency = if m.threads == 1 {
                    has_single.then_some(1.0)
                } else {
                    measured.iter().find(|s| s.threads == m.threads).map(|s| s.efficiency)
                };
                ScalingRow {
                    algorithm,
                    threads: m.threads,
                    throughput_mb_s: m.throughput_mb_s,
                    speedup: efficiency.map(|e| e * f64::from(m.threads)),
                    efficiency,
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::Path;

    use super::*;
    use crate::analysis::cells::tests::result;

    fn point(host_id: i64, algorithm: &str, size_bytes: u64, threads: u32, mb_s: f64) -> LatestResult {
        let mut r = result(host_id, algorithm, mb_s, Path::Accelerated);
        r.point.size_bytes = size_bytes;
        r.point.threads = threads;
        r.result_id = host_id * 1000 + size_bytes as i64 + i64::from(threads);
        r.latency_p99_ns = 1000;
        r
    }

    fn names(merged: &[Merged]) -> Vec<(&'static str, u64, f64, usize, Option<i64>)> {
        merged
            .iter()
            .map(|m| {
                (
                    m.algorithm.name(),
                    m.size_bytes,
                    m.throughput_mb_s,
                    m.hosts,
                    m.result_id,
                )
            })
            .collect()
    }

    #[test]
    fn a_class_merges_to_the_median_and_one_host_keeps_its_result() {
        let points = [
            point(1, "aes-128-gcm", 64, 1, 100.0),
            point(2, "aes-128-gcm", 64, 1, 300.0),
            point(3, "aes-128-gcm", 64, 1, 200.0),
            point(1, "des-cbc", 64, 1, 20.0),
            point(1, "aes-128-gcm", 16384, 1, 900.0),
        ];
        let merged = merge(&points, &[]);
        assert_eq!(
            names(&merged),
            [
                ("aes-128-gcm", 64, 200.0, 3, None),
                ("aes-128-gcm", 16384, 900.0, 1, Some(17385)),
                ("des-cbc", 64, 20.0, 1, Some(1065)),
            ]
        );
        assert_eq!(merged[0].cv, None, "no sample CV for a median of hosts");
        let only = merge(&points, &["des-cbc".parse().unwrap()]);
        assert_eq!(only.len(), 1);
    }

    #[test]
    fn speedup_and_efficiency_are_relative_to_one_thread() {
        let points = [
            point(1, "aes-128-ctr", 16384, 1, 1000.0),
            point(1, "aes-128-ctr", 16384, 2, 1900.0),
            point(1, "aes-128-ctr", 16384, 4, 3000.0),
            point(1, "aes-128-ctr", 64, 4, 50.0),
            // No one-thread point: no speed-up to state.
            point(1, "des-cbc", 16384, 4, 80.0),
        ];
        let got: Vec<(&str, u32, Option<f64>, Option<f64>)> = scaling(&points, &merge(&points, &[]), 16384)
            .into_iter()
            .map(|s| (s.algorithm.name(), s.threads, s.speedup, s.efficiency))
            .collect();
        assert_eq!(
            got,
            [
                ("aes-128-ctr", 1, Some(1.0), Some(1.0)),
                ("aes-128-ctr", 2, Some(1.9), Some(0.95)),
                ("aes-128-ctr", 4, Some(3.0), Some(0.75)),
                ("des-cbc", 4, None, None),
            ]
        );
    }

    #[test]
    fn a_class_scales_each_host_against_itself_not_the_merged_medians() {
        // Host 1 is fast and was measured at 1 and 2 threads; hosts 2 and 3 are
        // slow and measured at 1 thread only. The merged one-thread median
        // (host 3's 120) against host 1's 2-thread figure would claim 8.3×.
        let points = [
            point(1, "aes-256-gcm", 16384, 1, 1000.0),
            point(1, "aes-256-gcm", 16384, 2, 1800.0),
            point(2, "aes-256-gcm", 16384, 1, 100.0),
            point(3, "aes-256-gcm", 16384, 1, 120.0),
        ];
        let rows = scaling(&points, &merge(&points, &[]), 16384);
        let two = rows.iter().find(|r| r.threads == 2).unwrap();
        assert_eq!((two.throughput_mb_s, two.efficiency), (1800.0, Some(0.9)));
        assert!((two.speedup.unwrap() - 1.8).abs() < 1e-12);
    }
}
