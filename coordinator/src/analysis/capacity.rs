//! Capacity planning from measured data: for one machine class and one
//! algorithm at one payload size, how fast a single core goes, how that
//! scales over threads, and so how many cores and hosts a target rate needs.
//!
//! The method (also printed on `/capacity`):
//! - **per-core throughput** = the median over the class's hosts of the
//!   latest `threads = 1` throughput; the spread is its min–max over hosts;
//! - **scaling efficiency** at `t` threads = [`super::scaling::thread_scaling`],
//!   the rule `/modes` uses too: the median over hosts measured at both 1 and
//!   `t` threads of `MB/s(t) / (t × MB/s(1))` — each host is compared with
//!   itself, so hosts of different speed do not blur the curve;
//! - **cores per host** = the median logical core count of the measured
//!   hosts, rounded down (fewer cores per host means more hosts: the safe side);
//! - the planner runs `N` threads per host: the largest measured thread count
//!   `≤` cores per host. Its efficiency applies to every core. If only one
//!   thread was measured, scaling is **assumed linear** and flagged as such;
//! - **cores needed** = target MB/s × headroom / (per-core × efficiency(N));
//! - **hosts needed** = ⌈cores needed / cores per host⌉.
//!
//! Nothing here knows a CPU: every figure comes from measured points. The
//! recommendation ([`recommend`]) likewise picks the fastest measured
//! authenticated algorithm and states by how much it wins.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::{Path, PathUsed};

use super::robust::median;
use super::scaling::{HostSeries, ThreadPoint, ThreadScaling, thread_scaling};

/// 1 Gbit/s is 10^9 bits/s = 125 × 10^6 bytes/s = 125 MB/s.
pub const MB_S_PER_GBIT_S: f64 = 125.0;
/// What the planner adds on top of the target unless told otherwise: room
/// for peaks, noisy neighbours and the other work a host does.
pub const DEFAULT_HEADROOM: f64 = 1.3;
/// Fewer results than this behind a figure earn a warning.
pub const FEW_RESULTS: usize = 3;

/// The unit a target rate is given in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RateUnit {
    /// Gbit/s of plaintext (10^9 bits/s).
    Gbit,
    /// MB/s of plaintext (10^6 bytes/s).
    Mb,
    /// Operations per second, each one payload (field-level encryption counts records, not bytes).
    Ops,
}

impl RateUnit {
    /// Every unit, in the order the form offers them.
    pub const ALL: [RateUnit; 3] = [RateUnit::Gbit, RateUnit::Mb, RateUnit::Ops];

    /// The query-parameter spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            RateUnit::Gbit => "gbit",
            RateUnit::Mb => "mb",
            RateUnit::Ops => "ops",
        }
    }

    /// How the page prints the unit.
    pub const fn symbol(self) -> &'static str {
        match self {
            RateUnit::Gbit => "Gbit/s",
            RateUnit::Mb => "MB/s",
            RateUnit::Ops => "ops/s",
        }
    }
}

impl FromStr for RateUnit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        RateUnit::ALL
            .into_iter()
            .find(|u| u.as_str() == s)
            .ok_or_else(|| format!("unknown unit {s:?}; use gbit (Gbit/s), mb (MB/s) or ops (operations/s)"))
    }
}

/// A rate to plan for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Target {
    pub value: f64,
    pub unit: RateUnit,
}

impl Target {
    /// The target in MB/s of plaintext, for payloads of `size_bytes` (only `ops` needs the size).
    pub fn mb_s(&self, size_bytes: u64) -> f64 {
        match self.unit {
            RateUnit::Gbit => self.value * MB_S_PER_GBIT_S,
            RateUnit::Mb => self.value,
            RateUnit::Ops => self.value * size_bytes as f64 / 1e6,
        }
    }
}

/// Why a figure deserves less trust; printed beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// One host: no spread, one machine's luck.
    SingleHost,
    /// Fewer than [`FEW_RESULTS`] results behind the figures.
    FewResults(usize),
    /// Only `threads = 1` measured (or nothing measured that fits the cores):
    /// the plan assumes every core adds a full core's throughput.
    LinearScalingAssumed,
    /// No logical core count in the facts: hosts needed is unknown.
    UnknownCores,
    /// Some results ran wholly on a path other than requested (an
    /// accelerated request that fell back to software, or the reverse).
    PathFellBack,
    /// Some results ran partly in software (`partial`): the figure is below
    /// what the class does with every primitive in hardware.
    PathPartial,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::SingleHost => f.write_str("one host only: no spread across hosts"),
            Warning::FewResults(n) => write!(f, "few results ({n})"),
            Warning::LinearScalingAssumed => {
                f.write_str("thread scaling not measured: linear scaling assumed (efficiency 100 %)")
            }
            Warning::UnknownCores => f.write_str("logical core count unknown: hosts needed cannot be computed"),
            Warning::PathFellBack => f.write_str("some results ran on another path than requested (see path used)"),
            Warning::PathPartial => {
                f.write_str("some results ran partly in software: not every primitive had a hardware path")
            }
        }
    }
}

/// What the class's measurements say about one algorithm.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// Median `threads = 1` MB/s over hosts.
    pub per_core_mb_s: f64,
    /// Min and max of the hosts' `threads = 1` MB/s.
    pub per_core_min_mb_s: f64,
    pub per_core_max_mb_s: f64,
    /// Hosts with a `threads = 1` measurement (the per-core figure's basis).
    pub hosts: usize,
    /// Results (latest per host and thread count) the figures use.
    pub results: usize,
    /// Median logical cores of those hosts, rounded down.
    pub cores_per_host: Option<u32>,
    /// Every measured thread count above 1, ascending.
    pub scaling: Vec<ThreadScaling>,
    /// The thread count a host would run, and the efficiency used for it.
    pub run_threads: u32,
    pub efficiency: f64,
    pub linear_assumed: bool,
    /// The paths the results really ran on, sorted (best first) and deduplicated.
    pub paths_used: Vec<PathUsed>,
    pub warnings: Vec<Warning>,
}

/// Per-core throughput and scaling of one class from its hosts' series, with
/// `requested_path` the path the results were asked for. `None` when no host
/// has a usable `threads = 1` measurement: there is no per-core figure to plan with.
pub fn estimate(series: &[HostSeries], requested_path: Path) -> Option<Estimate> {
    let singles: Vec<(&HostSeries, f64)> = series.iter().filter_map(|s| Some((s, s.at(1)?))).collect();
    let per_core: Vec<f64> = singles.iter().map(|(_, v)| *v).collect();
    let per_core_mb_s = median(&per_core)?;
    let per_core_min_mb_s = per_core.iter().copied().fold(f64::INFINITY, f64::min);
    let per_core_max_mb_s = per_core.iter().copied().fold(f64::NEG_INFINITY, f64::max);

    let scaling = thread_scaling(series);

    let cores: Vec<f64> = singles
        .iter()
        .filter_map(|(s, _)| s.logical_cores)
        .map(f64::from)
        .collect();
    let cores_per_host = median(&cores).map(|c| c.floor() as u32);

    // The largest measured thread count a host of the class can run.
    let fits = |t: u32| cores_per_host.is_none_or(|c| t <= c);
    let chosen = scaling.iter().rev().find(|s| fits(s.threads));
    let (run_threads, efficiency, linear_assumed) = match chosen {
        Some(s) => (s.threads, s.efficiency, false),
        None => (1, 1.0, true),
    };

    let used: Vec<&ThreadPoint> = singles.iter().flat_map(|(s, _)| &s.points).collect();
    let mut paths_used: Vec<PathUsed> = used.iter().map(|p| p.path_used).collect();
    paths_used.sort();
    paths_used.dedup();
    let results = used.len();

    let mut warnings = Vec::new();
    if singles.len() == 1 {
        warnings.push(Warning::SingleHost);
    }
    if results < FEW_RESULTS {
        warnings.push(Warning::FewResults(results));
    }
    if linear_assumed {
        warnings.push(Warning::LinearScalingAssumed);
    }
    if cores_per_host.is_none() {
        warnings.push(Warning::UnknownCores);
    }
    if paths_used
        .iter()
        .any(|p| *p != PathUsed::Partial && p.differs_from(requested_path))
    {
        warnings.push(Warning::PathFellBack);
    }
    if paths_used.contains(&PathUsed::Partial) {
        warnings.push(Warning::PathPartial);
    }
    Some(Estimate {
        per_core_mb_s,
        per_core_min_mb_s,
        per_core_max_mb_s,
        hosts: singles.len(),
        results,
        cores_per_host,
        scaling,
        run_threads,
        efficiency,
        linear_assumed,
        paths_used,
        warnings,
    })
}

/// How much hardware a target needs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// The rate to provision: target MB/s × headroom.
    pub provision_mb_s: f64,
    /// What one core delivers when a host runs `run_threads` threads.
    pub effective_per_core_mb_s: f64,
    /// Fractional cores; round up to buy them.
    pub cores_needed: f64,
    /// Whole hosts; `None` when the cores per host are unknown.
    pub hosts_needed: Option<u64>,
}

/// The plan for `target_mb_s` with `headroom` (≥ 1) on the estimated class.
pub fn plan(estimate: &Estimate, target_mb_s: f64, headroom: f64) -> Plan {
    let provision_mb_s = target_mb_s * headroom;
    let effective_per_core_mb_s = estimate.per_core_mb_s * estimate.efficiency;
    let cores_needed = provision_mb_s / effective_per_core_mb_s;
    let hosts_needed = estimate
        .cores_per_host
        .filter(|c| *c > 0)
        .map(|c| (cores_needed / f64::from(c)).ceil() as u64);
    Plan {
        provision_mb_s,
        effective_per_core_mb_s,
        cores_needed,
        hosts_needed,
    }
}

/// The fastest measured algorithm of a class, and by how much it wins.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recommendation {
    pub algorithm: Algorithm,
    pub per_core_mb_s: f64,
    /// The second fastest, when more than one was measured.
    pub runner_up: Option<Algorithm>,
    pub runner_up_per_core_mb_s: Option<f64>,
}

impl Recommendation {
    /// How many times faster than the runner-up (`2.0` = twice as fast).
    pub fn ratio(&self) -> Option<f64> {
        self.runner_up_per_core_mb_s.map(|r| self.per_core_mb_s / r)
    }
}

/// Whether `algorithm` is a candidate for a recommendation: authenticated
/// encryption (AEADs and CBC + HMAC), since nobody should be advised to ship
/// an unauthenticated mode because it measures faster.
pub fn is_candidate(algorithm: Algorithm) -> bool {
    algorithm.is_authenticated()
}

/// The fastest of `(algorithm, per-core MB/s)` candidates; ties go to the
/// name sorting first so the answer does not depend on row order.
pub fn recommend(candidates: &[(Algorithm, f64)]) -> Option<Recommendation> {
    let mut ranked: Vec<&(Algorithm, f64)> = candidates.iter().filter(|(_, v)| v.is_finite() && *v > 0.0).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.name().cmp(b.0.name())));
    let best = ranked.first()?;
    let second = ranked.get(1);
    Some(Recommendation {
        algorithm: best.0,
        per_core_mb_s: best.1,
        runner_up: second.map(|s| s.0),
        runner_up_per_core_mb_s: second.map(|s| s.1),
    })
}

#[cfg(test)]
mod tests {
    use super::super::scaling::tests::host;
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn targets_convert_to_mb_s_by_unit() {
        let cases = [
            (10.0, RateUnit::Gbit, 16384, 1250.0),
            (40.0, RateUnit::Gbit, 11, 5000.0),
            (800.0, RateUnit::Mb, 16384, 800.0),
            // 1 M phone numbers of 11 bytes a second: 11 MB/s.
            (1e6, RateUnit::Ops, 11, 11.0),
            (1000.0, RateUnit::Ops, 16384, 16.384),
        ];
        for (value, unit, size, want) in cases {
            let got = Target { value, unit }.mb_s(size);
            assert!(close(got, want), "{value} {unit:?} at {size} B: {got} != {want}");
        }
    }

    #[test]
    fn units_parse_from_their_query_spelling_and_reject_others() {
        for u in RateUnit::ALL {
            assert_eq!(u.as_str().parse::<RateUnit>(), Ok(u));
        }
        let err = "gbps".parse::<RateUnit>().unwrap_err();
        assert!(err.contains("gbps") && err.contains("gbit"), "{err}");
    }

    /// (hosts, target MB/s, headroom) → (per-core, run threads, efficiency,
    /// linear assumed, cores needed, hosts needed).
    #[test]
    fn plans_follow_the_formula_for_linear_and_measured_scaling() {
        struct Case {
            what: &'static str,
            hosts: Vec<HostSeries>,
            target: f64,
            headroom: f64,
            per_core: f64,
            run_threads: u32,
            efficiency: f64,
            linear: bool,
            cores: f64,
            hosts_needed: Option<u64>,
        }
        let cases = [
            Case {
                what: "single thread only: linear assumed",
                hosts: vec![host(1, Some(8), &[(1, 1000.0)])],
                target: 1250.0,
                headroom: 1.0,
                per_core: 1000.0,
                run_threads: 1,
                efficiency: 1.0,
                linear: true,
                cores: 1.25,
                hosts_needed: Some(1),
            },
            Case {
                what: "headroom multiplies the target",
                hosts: vec![host(1, Some(8), &[(1, 1000.0)])],
                target: 1250.0,
                headroom: 1.3,
                per_core: 1000.0,
                run_threads: 1,
                efficiency: 1.0,
                linear: true,
                cores: 1.625,
                hosts_needed: Some(1),
            },
            Case {
                what: "measured efficiency at 8 threads of 8 cores",
                hosts: vec![host(1, Some(8), &[(1, 1000.0), (8, 6000.0)])],
                target: 30000.0,
                headroom: 1.0,
                per_core: 1000.0,
                run_threads: 8,
                efficiency: 0.75,
                linear: false,
                cores: 40.0,
                hosts_needed: Some(5),
            },
            Case {
                what: "a thread count above the cores is not used",
                hosts: vec![host(1, Some(4), &[(1, 500.0), (2, 900.0), (16, 4000.0)])],
                target: 900.0,
                headroom: 2.0,
                per_core: 500.0,
                run_threads: 2,
                efficiency: 0.9,
                linear: false,
                cores: 4.0,
                hosts_needed: Some(1),
            },
            Case {
                what: "only a thread count above the cores: linear assumed",
                hosts: vec![host(1, Some(2), &[(1, 100.0), (64, 3200.0)])],
                target: 1000.0,
                headroom: 1.0,
                per_core: 100.0,
                run_threads: 1,
                efficiency: 1.0,
                linear: true,
                cores: 10.0,
                hosts_needed: Some(5),
            },
            Case {
                what: "per-core is the median over hosts, efficiency each host against itself",
                hosts: vec![
                    host(1, Some(4), &[(1, 100.0), (4, 360.0)]),
                    host(2, Some(4), &[(1, 200.0), (4, 640.0)]),
                    host(3, Some(4), &[(1, 300.0), (4, 1080.0)]),
                ],
                target: 1800.0,
                headroom: 1.0,
                per_core: 200.0,
                run_threads: 4,
                efficiency: 0.9,
                linear: false,
                cores: 10.0,
                hosts_needed: Some(3),
            },
            Case {
                what: "cores per host are the median, rounded down",
                hosts: vec![host(1, Some(4), &[(1, 100.0)]), host(2, Some(7), &[(1, 100.0)])],
                target: 1100.0,
                headroom: 1.0,
                per_core: 100.0,
                run_threads: 1,
                efficiency: 1.0,
                linear: true,
                cores: 11.0,
                hosts_needed: Some(3),
            },
            Case {
                what: "unknown cores: cores needed but no host count",
                hosts: vec![host(1, None, &[(1, 100.0), (2, 180.0)])],
                target: 90.0,
                headroom: 1.0,
                per_core: 100.0,
                run_threads: 2,
                efficiency: 0.9,
                linear: false,
                cores: 1.0,
                hosts_needed: None,
            },
        ];
        for c in cases {
            let e = estimate(&c.hosts, Path::Accelerated).unwrap_or_else(|| panic!("{}: no estimate", c.what));
            let p = plan(&e, c.target, c.headroom);
            assert!(
                close(e.per_core_mb_s, c.per_core),
                "{}: per-core {}",
                c.what,
                e.per_core_mb_s
            );
            assert_eq!(e.run_threads, c.run_threads, "{}", c.what);
            assert!(
                close(e.efficiency, c.efficiency),
                "{}: efficiency {}",
                c.what,
                e.efficiency
            );
            assert_eq!(e.linear_assumed, c.linear, "{}", c.what);
            assert_eq!(
                e.warnings.contains(&Warning::LinearScalingAssumed),
                c.linear,
                "{}",
                c.what
            );
            assert!(close(p.cores_needed, c.cores), "{}: cores {}", c.what, p.cores_needed);
            assert_eq!(p.hosts_needed, c.hosts_needed, "{}", c.what);
            assert!(close(p.provision_mb_s, c.target * c.headroom), "{}", c.what);
        }
    }

    #[test]
    fn spread_hosts_and_results_describe_what_the_figure_rests_on() {
        let hosts = [
            host(1, Some(8), &[(1, 90.0), (8, 640.0)]),
            host(2, Some(8), &[(1, 110.0)]),
            // No single-thread figure: cannot be compared per core, so not counted.
            host(3, Some(8), &[(8, 10.0)]),
        ];
        let e = estimate(&hosts, Path::Accelerated).unwrap();
        assert_eq!(
            (e.per_core_min_mb_s, e.per_core_mb_s, e.per_core_max_mb_s),
            (90.0, 100.0, 110.0)
        );
        assert_eq!((e.hosts, e.results), (2, 3));
        assert_eq!(
            e.scaling,
            vec![ThreadScaling {
                threads: 8,
                efficiency: 640.0 / 720.0,
                hosts: 1
            }]
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn a_class_of_one_host_with_few_results_is_warned_about() {
        let e = estimate(&[host(1, Some(2), &[(1, 50.0), (2, 95.0)])], Path::Accelerated).unwrap();
        assert_eq!(e.warnings, vec![Warning::SingleHost, Warning::FewResults(2)]);
        assert_eq!(e.warnings[0].to_string(), "one host only: no spread across hosts");
    }

    #[test]
    fn a_fallen_back_path_is_shown_and_warned_about() {
        let mut h = host(1, Some(2), &[(1, 50.0)]);
        h.points[0].path_used = PathUsed::Software;
        let e = estimate(std::slice::from_ref(&h), Path::Accelerated).unwrap();
        assert_eq!(e.paths_used, vec![PathUsed::Software]);
        assert!(e.warnings.contains(&Warning::PathFellBack));
        assert!(!e.warnings.contains(&Warning::PathPartial));
        h.points[0].path_used = PathUsed::Partial;
        let e = estimate(&[h], Path::Accelerated).unwrap();
        assert_eq!(e.paths_used, vec![PathUsed::Partial]);
        assert_eq!(
            (
                e.warnings.contains(&Warning::PathFellBack),
                e.warnings.contains(&Warning::PathPartial)
            ),
            (false, true),
            "partly in software is said as such"
        );
    }

    #[test]
    fn no_single_thread_measurement_gives_no_estimate() {
        assert_eq!(estimate(&[], Path::Accelerated), None);
        assert_eq!(estimate(&[host(1, Some(4), &[(4, 400.0)])], Path::Accelerated), None);
        // A zero throughput is a failed measurement, not an infinitely slow core.
        assert_eq!(estimate(&[host(1, Some(4), &[(1, 0.0)])], Path::Accelerated), None);
    }

    #[test]
    fn the_fastest_measured_candidate_is_recommended_with_its_lead() {
        /// (recommended, runner-up, ratio).
        type Want<'a> = Option<(&'a str, Option<&'a str>, Option<f64>)>;
        let cases: [(&[(&str, f64)], Want); 5] = [
            (&[], None),
            (&[("aes-256-gcm", 0.0)], None),
            (&[("chacha20-poly1305", 800.0)], Some(("chacha20-poly1305", None, None))),
            (
                &[
                    ("chacha20-poly1305", 800.0),
                    ("aes-256-gcm", 3200.0),
                    ("aes-128-gcm", 2000.0),
                ],
                Some(("aes-256-gcm", Some("aes-128-gcm"), Some(1.6))),
            ),
            // Where AES runs in software, ChaCha20-Poly1305 measures faster and wins.
            (
                &[("aes-256-gcm", 150.0), ("chacha20-poly1305", 450.0)],
                Some(("chacha20-poly1305", Some("aes-256-gcm"), Some(3.0))),
            ),
        ];
        for (input, want) in cases {
            let input: Vec<(Algorithm, f64)> = input.iter().map(|(a, v)| (a.parse().unwrap(), *v)).collect();
            let got = recommend(&input);
            let got = got
                .as_ref()
                .map(|r| (r.algorithm.name(), r.runner_up.map(|a| a.name()), r.ratio()));
            match (got, want) {
                (Some((a, r, Some(x))), Some((wa, wr, Some(wx)))) => {
                    assert_eq!((a, r), (wa, wr), "{input:?}");
                    assert!(close(x, wx), "{input:?}: ratio {x}");
                }
                (got, want) => assert_eq!(got, want, "{input:?}"),
            }
        }
    }

    #[test]
    fn ties_are_broken_by_name_not_row_order() {
        let (chacha, gcm) = ("chacha20-poly1305".parse().unwrap(), "aes-128-gcm".parse().unwrap());
        let a = recommend(&[(chacha, 100.0), (gcm, 100.0)]).unwrap();
        let b = recommend(&[(gcm, 100.0), (chacha, 100.0)]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.algorithm, gcm);
    }

    #[test]
    fn only_authenticated_encryption_is_a_candidate() {
        for (alg, want) in [
            ("aes-256-gcm", true),
            ("chacha20-poly1305", true),
            ("aes-128-ocb", true),
            ("aes-256-cbc-hmac-sha256", true),
            ("aes-128-ctr", false),
            ("aes-128-ecb", false),
            ("chacha20", false),
            ("des-ede3-cbc", false),
        ] {
            assert_eq!(is_candidate(alg.parse().unwrap()), want, "{alg}");
        }
    }
}
