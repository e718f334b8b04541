//! The curves of `/modes`: a subject's points merged per algorithm, size
//! and thread count (the median when a class has several hosts), and the
//! speed-up of each thread count over one thread. Pure functions.

use std::collections::BTreeMap;

use super::super::compare::median;
use crate::db::matrix::Point;

/// One point of one algorithm, merged over the subject's hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub algorithm: String,
    pub size_bytes: i64,
    pub threads: i32,
    /// The host's value, or the median over the class's hosts.
    pub throughput_mb_s: f64,
    pub latency_p99_ns: f64,
    /// One host: the sample CV. Several: the CV would mix two spreads, so none.
    pub cv: Option<f64>,
    pub hosts: usize,
    /// The raw result, for one host.
    pub result_id: Option<i64>,
}

/// Merges the points of the subject's hosts per (algorithm, size, threads),
/// keeping `algorithms` (all when empty), in the agent's algorithm order.
pub fn merge(points: &[Point], algorithms: &[String]) -> Vec<Merged> {
    let mut groups: BTreeMap<(usize, &str, i64, i32), Vec<&Point>> = BTreeMap::new();
    let order = |name: &str| {
        cipherfleet_core::algorithm::ALL
            .iter()
            .position(|a| a.name() == name)
            .unwrap_or(usize::MAX)
    };
    for p in points {
        if !algorithms.is_empty() && !algorithms.contains(&p.algorithm) {
            continue;
        }
        groups
            .entry((order(&p.algorithm), p.algorithm.as_str(), p.size_bytes, p.threads))
            .or_default()
            .push(p);
    }
    groups
        .into_iter()
        .filter_map(|((_, algorithm, size_bytes, threads), pts)| {
            let mut mb_s: Vec<f64> = pts.iter().map(|p| p.throughput_mb_s).collect();
            let mut p99: Vec<f64> = pts.iter().map(|p| p.latency_p99_ns as f64).collect();
            let single = pts.len() == 1;
            Some(Merged {
                algorithm: algorithm.to_string(),
                size_bytes,
                threads,
                throughput_mb_s: median(&mut mb_s)?,
                latency_p99_ns: median(&mut p99)?,
                cv: if single { pts[0].cv } else { None },
                hosts: pts.len(),
                result_id: single.then(|| pts[0].result_id),
            })
        })
        .collect()
}

/// The algorithms of `merged` in order, each with its points passing `keep`.
pub fn by_algorithm(merged: &[Merged], keep: impl Fn(&Merged) -> bool) -> Vec<(&str, Vec<&Merged>)> {
    let mut out: Vec<(&str, Vec<&Merged>)> = Vec::new();
    for m in merged.iter().filter(|m| keep(m)) {
        match out.last_mut() {
            Some((name, list)) if *name == m.algorithm => list.push(m),
            _ => out.push((m.algorithm.as_str(), vec![m])),
        }
    }
    out
}

/// A thread count's figures against the same algorithm on one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    pub algorithm: String,
    pub threads: i32,
    pub throughput_mb_s: f64,
    /// Throughput over the one-thread throughput; `None` without a one-thread point.
    pub speedup: Option<f64>,
    /// Speed-up per thread: 1.0 is perfect scaling.
    pub efficiency: Option<f64>,
}

/// Speed-up and efficiency of every point at `size_bytes`.
pub fn scaling(merged: &[Merged], size_bytes: i64) -> Vec<Scaling> {
    by_algorithm(merged, |m| m.size_bytes == size_bytes)
        .into_iter()
        .flat_map(|(algorithm, points)| {
            let base = points
                .iter()
                .find(|m| m.threads == 1)
                .map(|m| m.throughput_mb_s)
                .filter(|v| *v > 0.0);
            points.into_iter().map(move |m| {
                let speedup = base.map(|b| m.throughput_mb_s / b);
                Scaling {
                    algorithm: algorithm.to_string(),
                    threads: m.threads,
                    throughput_mb_s: m.throughput_mb_s,
                    speedup,
                    efficiency: speedup.map(|s| s / f64::from(m.threads)),
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn point(host_id: i64, algorithm: &str, size_bytes: i64, threads: i32, mb_s: f64) -> Point {
        Point {
            host_id,
            algorithm: algorithm.into(),
            direction: "encrypt".into(),
            size_bytes,
            threads,
            path: "accelerated".into(),
            path_used: "accelerated".into(),
            result_id: host_id * 1000 + size_bytes + i64::from(threads),
            measured_at: Utc::now(),
            throughput_mb_s: mb_s,
            latency_p99_ns: 1000,
            cv: Some(0.02),
            samples: 10,
        }
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
        let got: Vec<(&str, i64, f64, usize, Option<i64>)> = merged
            .iter()
            .map(|m| {
                (
                    m.algorithm.as_str(),
                    m.size_bytes,
                    m.throughput_mb_s,
                    m.hosts,
                    m.result_id,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("aes-128-gcm", 64, 200.0, 3, None),
                ("aes-128-gcm", 16384, 900.0, 1, Some(17385)),
                ("des-cbc", 64, 20.0, 1, Some(1065)),
            ]
        );
        assert_eq!(merged[0].cv, None, "no sample CV for a median of hosts");
        let only = merge(&points, &["des-cbc".to_string()]);
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
        let got: Vec<(String, i32, Option<f64>, Option<f64>)> = scaling(&merge(&points, &[]), 16384)
            .into_iter()
            .map(|s| (s.algorithm, s.threads, s.speedup, s.efficiency))
            .collect();
        assert_eq!(
            got,
            [
                ("aes-128-ctr".to_string(), 1, Some(1.0), Some(1.0)),
                ("aes-128-ctr".to_string(), 2, Some(1.9), Some(0.95)),
                ("aes-128-ctr".to_string(), 4, Some(3.0), Some(0.75)),
                ("des-cbc".to_string(), 4, None, None),
            ]
        );
    }
}
