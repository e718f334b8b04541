//! The planner's rows: the measured points of each machine class turned
//! into per-core rates, scaling and cores and hosts needed
//! ([`crate::analysis::capacity`] holds the formulas), one flat row per class
//! for the page, JSON and CSV alike.

use std::collections::{BTreeMap, BTreeSet};

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::Direction;
use serde::Serialize;

use super::Inputs;
use crate::analysis::capacity as model;
use crate::analysis::class::MachineClass;
use crate::analysis::marks::ranks;
use crate::analysis::scaling::{HostSeries, ThreadPoint};
use crate::domain::latest::LatestResult;
use crate::report::capacity::ClassHost;

/// One machine class (real, or emulated/simulated hosts of that class) at the
/// chosen point: a flat row for JSON and CSV. Empty figures: not measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityRow {
    /// `?class=` key of [`MachineClass::key`].
    pub class_key: String,
    pub class_label: String,
    pub emulated: bool,
    pub simulated: bool,
    /// Hosts of the class in the fleet, and those with a single-thread measurement.
    pub hosts_in_class: usize,
    pub hosts_measured: usize,
    /// Latest results (one per host and thread count) behind the figures.
    pub results: usize,
    pub algorithm: Algorithm,
    pub size_bytes: u64,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
    /// What the results really ran on, e.g. `accelerated` or `software`.
    pub path_used: String,
    pub per_core_mb_s: Option<f64>,
    pub per_core_min_mb_s: Option<f64>,
    pub per_core_max_mb_s: Option<f64>,
    /// Threads a host would run and the measured efficiency there.
    pub run_threads: Option<u32>,
    pub efficiency: Option<f64>,
    /// Only one thread measured: linear scaling assumed.
    pub scaling_assumed_linear: Option<bool>,
    /// Every measured efficiency, `threads:efficiency` separated by spaces.
    pub scaling: String,
    pub cores_per_host: Option<u32>,
    pub target_mb_s: f64,
    pub provision_mb_s: f64,
    pub cores_needed: Option<f64>,
    pub hosts_needed: Option<u64>,
    pub recommended_algorithm: Option<Algorithm>,
    pub recommended_per_core_mb_s: Option<f64>,
    pub runner_up_algorithm: Option<Algorithm>,
    pub runner_up_per_core_mb_s: Option<f64>,
    /// recommended / runner-up per-core MB/s.
    pub recommended_ratio: Option<f64>,
    pub warnings: String,
}

/// What the planner read, before planning.
pub struct Measurements {
    pub hosts: Vec<ClassHost>,
    pub points: Vec<LatestResult>,
}

/// Hosts that count: marked ones only with `include=emulated`.
pub(super) fn counted(host: &ClassHost, inputs: &Inputs) -> bool {
    inputs.include_emulated || !(host.emulated || host.simulated)
}

/// The planner's rows, one per class (marked hosts in rows of their own),
/// sorted by class label; and how many marked hosts were left out.
pub fn plan_rows(m: &Measurements, inputs: &Inputs) -> (Vec<CapacityRow>, usize) {
    type Group<'a> = (MachineClass, bool, bool);
    let excluded = m.hosts.iter().filter(|h| !counted(h, inputs)).count();
    let mut groups: BTreeMap<Group, Vec<&ClassHost>> = BTreeMap::new();
    for h in m.hosts.iter().filter(|h| counted(h, inputs)) {
        groups.entry((h.class(), h.emulated, h.simulated)).or_default().push(h);
    }
    let mut by_host: BTreeMap<(i64, Algorithm), Vec<ThreadPoint>> = BTreeMap::new();
    for p in &m.points {
        by_host
            .entry((p.host_id, p.point.algorithm))
            .or_default()
            .push(ThreadPoint {
                threads: p.point.threads,
                mb_s: p.throughput_mb_s,
                path_used: p.path_used,
            });
    }
    let series = |hosts: &[&ClassHost], algorithm: Algorithm| -> Vec<HostSeries> {
        hosts
            .iter()
            .filter_map(|h| {
                Some(HostSeries {
                    host_id: h.host_id,
                    logical_cores: h.logical_cores.and_then(|c| u32::try_from(c).ok()),
                    points: by_host.get(&(h.host_id, algorithm))?.clone(),
                })
            })
            .collect()
    };
    let algorithms: BTreeSet<Algorithm> = m.points.iter().map(|p| p.point.algorithm).collect();

    let mut rows: Vec<CapacityRow> = groups
        .iter()
        .map(|((class, emulated, simulated), hosts)| {
            let estimate = model::estimate(&series(hosts, inputs.algorithm), inputs.path);
            let plan = estimate
                .as_ref()
                .map(|e| model::plan(e, inputs.target_mb_s, inputs.headroom));
            let candidates: Vec<(Algorithm, f64)> = algorithms
                .iter()
                .copied()
                .filter(|a| model::is_candidate(*a))
                .filter_map(|a| Some((a, model::estimate(&series(hosts, a), inputs.path)?.per_core_mb_s)))
                .collect();
            // Emulated and simulated figures never rank: no "fastest" among them.
            let recommendation = ranks(*emulated, *simulated)
                .then(|| model::recommend(&candidates))
                .flatten();
            let e = estimate.as_ref();
            CapacityRow {
                class_key: class.key(),
                class_label: class.label(),
                emulated: *emulated,
                simulated: *simulated,
                hosts_in_class: hosts.len(),
                hosts_measured: e.map_or(0, |e| e.hosts),
                results: e.map_or(0, |e| e.results),
                algorithm: inputs.algorithm,
                size_bytes: inputs.size_bytes,
                direction: inputs.direction,
                path: inputs.path,
                path_used: e
                    .map(|e| e.paths_used.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default(),
                per_core_mb_s: e.map(|e| e.per_core_mb_s),
                per_core_min_mb_s: e.map(|e| e.per_core_min_mb_s),
                per_core_max_mb_s: e.map(|e| e.per_core_max_mb_s),
                run_threads: e.map(|e| e.run_threads),
                efficiency: e.map(|e| e.efficiency),
                scaling_assumed_linear: e.map(|e| e.linear_assumed),
                scaling: e
                    .map(|e| {
                        let curve: Vec<String> = e
                            .scaling
                            .iter()
                            .map(|s| format!("{}:{:.3}", s.threads, s.efficiency))
                            .collect();
                        curve.join(" ")
                    })
                    .unwrap_or_default(),
                cores_per_host: e.and_then(|e| e.cores_per_host),
                target_mb_s: inputs.target_mb_s,
                provision_mb_s: inputs.provision_mb_s,
                cores_needed: plan.map(|p| p.cores_needed),
                hosts_needed: plan.and_then(|p| p.hosts_needed),
                recommended_algorithm: recommendation.as_ref().map(|r| r.algorithm),
                recommended_per_core_mb_s: recommendation.as_ref().map(|r| r.per_core_mb_s),
                runner_up_algorithm: recommendation.as_ref().and_then(|r| r.runner_up),
                runner_up_per_core_mb_s: recommendation.as_ref().and_then(|r| r.runner_up_per_core_mb_s),
                recommended_ratio: recommendation.as_ref().and_then(|r| r.ratio()),
                warnings: e
                    .map(|e| {
                        e.warnings
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .unwrap_or_else(|| "no single-thread measurement of this algorithm at this point".into()),
            }
        })
        .collect();
    // Measured classes first, then by label; marked rows after their real class.
    rows.sort_by(|a, b| {
        (a.per_core_mb_s.is_none(), &a.class_label, a.emulated, a.simulated).cmp(&(
            b.per_core_mb_s.is_none(),
            &b.class_label,
            b.emulated,
            b.simulated,
        ))
    });
    (rows, excluded)
}

/// Hosts and points for the tests of the rows and of the page.
#[cfg(test)]
pub(super) mod fixtures {
    use cipherfleet_core::Point;
    use cipherfleet_core::spec::Suite;

    use super::*;

    pub fn class_host(id: i64, model: &str, cores: i32, emulated: bool) -> ClassHost {
        ClassHost {
            host_id: id,
            name: format!("h{id}"),
            emulated,
            simulated: false,
            arch: Some("x86_64".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            cpu_model_name: Some(model.into()),
            features_usable: vec!["aes".into(), "pclmulqdq".into()],
            build_flavour: Some("accelerated".into()),
            logical_cores: Some(cores),
        }
    }

    pub fn point(host_id: i64, algorithm: &str, threads: u32, mb_s: f64) -> LatestResult {
        let spec = Suite::Quick.expand(1)[0].clone();
        LatestResult {
            host_id,
            point: Point {
                algorithm: algorithm.parse().expect("a known algorithm"),
                size_bytes: 16384,
                threads,
                ..spec.point
            },
            path_used: cipherfleet_core::path::PathUsed::Accelerated,
            result_id: host_id * 100 + i64::from(threads),
            measured_at: chrono::Utc::now(),
            throughput_mb_s: mb_s,
            ops_per_s: mb_s * 1e6 / 16384.0,
            latency_p99_ns: (16384.0 / mb_s * 1e3) as i64,
            cv: Some(0.01),
            samples: 20,
            low_samples: false,
            memory: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{class_host, point};
    use super::*;
    use crate::web::capacity::CapacityQuery;

    fn query(pairs: &[(&str, &str)]) -> CapacityQuery {
        crate::web::params::query_from(pairs)
    }

    #[test]
    fn classes_are_planned_apart_and_marked_hosts_only_on_request() {
        let m = Measurements {
            hosts: vec![
                class_host(1, "Fast CPU", 4, false),
                class_host(2, "Fast CPU", 4, false),
                class_host(3, "Slow CPU", 2, false),
                class_host(4, "Fast CPU", 4, true),
                // In the fleet, never measured: counted in its class, not in the figures.
                class_host(5, "Slow CPU", 2, false),
            ],
            points: vec![
                point(1, "aes-256-gcm", 1, 1000.0),
                point(1, "aes-256-gcm", 4, 3600.0),
                point(2, "aes-256-gcm", 1, 1200.0),
                point(2, "aes-256-gcm", 4, 4320.0),
                point(1, "chacha20-poly1305", 1, 500.0),
                point(3, "aes-256-gcm", 1, 100.0),
                point(3, "chacha20-poly1305", 1, 400.0),
                point(4, "aes-256-gcm", 1, 10.0),
            ],
        };
        let inputs = query(&[("target", "10"), ("headroom", "1")]).inputs().unwrap();
        let (rows, excluded) = plan_rows(&m, &inputs);
        assert_eq!(excluded, 1);
        assert_eq!(rows.len(), 2);
        let fast = &rows[0];
        assert!(fast.class_label.contains("Fast CPU"), "{}", fast.class_label);
        assert_eq!((fast.hosts_in_class, fast.hosts_measured, fast.results), (2, 2, 4));
        assert_eq!(fast.per_core_mb_s, Some(1100.0));
        assert_eq!((fast.run_threads, fast.efficiency), (Some(4), Some(0.9)));
        // 1250 MB/s / (1100 × 0.9) cores, one 4-core host.
        assert!((fast.cores_needed.unwrap() - 1250.0 / 990.0).abs() < 1e-9);
        assert_eq!(fast.hosts_needed, Some(1));
        assert_eq!(fast.recommended_algorithm.map(|a| a.name()), Some("aes-256-gcm"));
        assert_eq!(fast.runner_up_algorithm.map(|a| a.name()), Some("chacha20-poly1305"));
        assert_eq!(fast.recommended_ratio, Some(1100.0 / 500.0));

        let slow = &rows[1];
        assert_eq!((slow.hosts_in_class, slow.hosts_measured), (2, 1));
        assert_eq!(slow.hosts_needed, Some(7), "12.5 cores on 2-core hosts, linear assumed");
        assert_eq!(slow.scaling_assumed_linear, Some(true));
        assert_eq!(slow.recommended_algorithm.map(|a| a.name()), Some("chacha20-poly1305"));
        assert_eq!(slow.recommended_ratio, Some(4.0));
        assert!(slow.warnings.contains("linear scaling assumed"), "{}", slow.warnings);

        let with = query(&[("include", "emulated")]).inputs().unwrap();
        let (rows, excluded) = plan_rows(&m, &with);
        assert_eq!(excluded, 0);
        let marked: Vec<&CapacityRow> = rows.iter().filter(|r| r.emulated).collect();
        assert_eq!(marked.len(), 1, "the emulated host is a row of its own");
        assert_eq!((marked[0].hosts_in_class, marked[0].per_core_mb_s), (1, Some(10.0)));
        assert_eq!(
            marked[0].recommended_algorithm, None,
            "planned with on request, but its figures never name a fastest algorithm"
        );
        assert_eq!(
            rows.iter()
                .find(|r| !r.emulated && r.class_key == marked[0].class_key)
                .unwrap()
                .hosts_in_class,
            2
        );
    }
}
