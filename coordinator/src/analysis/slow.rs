//! Reason 5: the accelerated path is there by its flags but measures too slow.
//! Each detector compares one series — the same job spec (algorithm, size,
//! direction, threads, key mode) — and reports which comparison fired:
//!
//! - `near-software`: on the same host the accelerated path is within
//!   `near_software_ratio` of the software path;
//! - `below-peers`: far below the median of same-class hosts;
//! - `dropped-vs-history`: the recent results fell against the host's own past.
//!
//! Every detector needs a minimum number of results and both a relative drop
//! and a robust z-score (median/MAD) past its threshold, so a healthy host
//! with 10–20 % noise, one bad sample, or a class of one is never flagged.
//! A drop too large to be noise — the latest result `big_drop_ratio` (3×) or
//! more below the reference, and `min_z` robust σ below its spread — fires
//! `below-peers` or `dropped-vs-history` from that one result, so a lost
//! hardware path is not left waiting for three more nightly runs.

use serde::Serialize;

use super::robust::{Spread, median};

/// Which comparison found the path slow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlowKind {
    NearSoftware,
    BelowPeers,
    DroppedVsHistory,
}

impl SlowKind {
    /// The spelling stored in `findings.kind`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SlowKind::NearSoftware => "near-software",
            SlowKind::BelowPeers => "below-peers",
            SlowKind::DroppedVsHistory => "dropped-vs-history",
        }
    }
}

/// The evidence: this host's median against the reference median (MB/s).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SlowFinding {
    pub kind: SlowKind,
    pub value_mb_s: f64,
    pub reference_mb_s: f64,
    /// value / reference.
    pub ratio: f64,
    /// Robust z-score of the value below the reference values (none for
    /// `near-software`, whose reference is another path, not a spread).
    pub z: Option<f64>,
    /// Results behind the value.
    pub results: usize,
    /// What the reference is made of: software results, peers, or past results.
    pub reference_results: usize,
}

/// Detector settings; the defaults are deliberately conservative.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    /// Accelerated below this multiple of software on the same host is "at software speed".
    pub near_software_ratio: f64,
    /// Results per series before any judgement.
    pub min_results: usize,
    /// Same-class peers (other hosts) needed for a peer comparison.
    pub min_peers: usize,
    /// Relative drop below the reference that matters (0.3 = 30 % slower).
    pub min_drop: f64,
    /// Robust z-score below the reference that matters.
    pub min_z: f64,
    /// Past results the history comparison needs, besides the recent ones.
    pub min_baseline: usize,
    /// How many of the latest results form "recent".
    pub recent: usize,
    /// Smallest payload judged by `near-software`: below it, per-call overhead
    /// (key schedule, tag, dispatch) dominates and both paths converge.
    pub near_software_min_size_bytes: u64,
    /// The latest result alone counts once the reference is this many times it.
    pub big_drop_ratio: f64,
    /// Past results the one-result history comparison needs.
    pub big_drop_min_baseline: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            near_software_ratio: 1.5,
            min_results: 3,
            min_peers: 2,
            min_drop: 0.3,
            min_z: 3.0,
            min_baseline: 5,
            recent: 3,
            near_software_min_size_bytes: 1024,
            big_drop_ratio: 3.0,
            big_drop_min_baseline: 3,
        }
    }
}

fn finding(kind: SlowKind, value: f64, reference: f64, z: Option<f64>, counts: (usize, usize)) -> SlowFinding {
    SlowFinding {
        kind,
        value_mb_s: value,
        reference_mb_s: reference,
        ratio: value / reference,
        z,
        results: counts.0,
        reference_results: counts.1,
    }
}

/// The accelerated path measures within `near_software_ratio` of the software path on the same host.
pub fn near_software(accelerated: &[f64], software: &[f64], t: &Thresholds) -> Option<SlowFinding> {
    if accelerated.len() < t.min_results || software.len() < t.min_results {
        return None;
    }
    let (a, s) = (median(accelerated)?, median(software)?);
    (s > 0.0 && a < s * t.near_software_ratio)
        .then(|| finding(SlowKind::NearSoftware, a, s, None, (accelerated.len(), software.len())))
}

/// `values` (their median) sit far below the median of `reference`, by both
/// the relative drop and the robust z-score.
fn below(kind: SlowKind, values: &[f64], reference: &Spread, t: &Thresholds) -> Option<SlowFinding> {
    below_median(kind, median(values)?, values.len(), reference, t)
}

/// [`below`] of a series whose median is `value`, of `results` results.
fn below_median(kind: SlowKind, value: f64, results: usize, reference: &Spread, t: &Thresholds) -> Option<SlowFinding> {
    let middle = reference.median;
    let z = reference.z_below(value)?;
    (value < middle * (1.0 - t.min_drop) && z >= t.min_z)
        .then(|| finding(kind, value, middle, Some(z), (results, reference.len)))
}

/// The latest result alone, `value`, `big_drop_ratio` times or more below
/// the median of `reference` and `min_z` robust σ below its spread.
fn one_big_drop(kind: SlowKind, value: f64, reference: &Spread, t: &Thresholds) -> Option<SlowFinding> {
    let middle = reference.median;
    let z = reference.z_below(value)?;
    (value * t.big_drop_ratio <= middle && z >= t.min_z)
        .then(|| finding(kind, value, middle, Some(z), (1, reference.len)))
}

/// What one peer's series contributes to a peer comparison: its median,
/// once it has enough results to have one.
pub fn peer_median(series: &[f64], t: &Thresholds) -> Option<f64> {
    (series.len() >= t.min_results).then(|| median(series)).flatten()
}

/// This host's median sits far below the median of its same-class peers'
/// medians, or its latest result alone is a drop too large to be noise.
pub fn below_peers(host: &[f64], peers: &[Vec<f64>], t: &Thresholds) -> Option<SlowFinding> {
    let medians: Vec<f64> = peers.iter().filter_map(|p| peer_median(p, t)).collect();
    below_peer_medians(host, Spread::of(&medians).as_ref(), t)
}

/// [`below_peers`] with the spread of the peers' medians ([`peer_median`])
/// worked out already (`None`: no peer has one).
pub fn below_peer_medians(host: &[f64], peers: Option<&Spread>, t: &Thresholds) -> Option<SlowFinding> {
    below_peer_summary(&SeriesSummary::of(host, t), peers, t)
}

/// What [`below_peer_medians`] reads of a host's series: its median (once
/// it has enough results to be judged on it), its latest result and how
/// many there are. All a pass keeps of a series until its peers are known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeriesSummary {
    pub median: Option<f64>,
    pub last: Option<f64>,
    pub results: usize,
}

impl SeriesSummary {
    /// The summary of `values` (chronological order).
    pub fn of(values: &[f64], t: &Thresholds) -> Self {
        SeriesSummary {
            median: peer_median(values, t),
            last: values.last().copied(),
            results: values.len(),
        }
    }
}

/// [`below_peer_medians`] of the series `host` summarises.
pub fn below_peer_summary(host: &SeriesSummary, peers: Option<&Spread>, t: &Thresholds) -> Option<SlowFinding> {
    let peers = peers.filter(|p| p.len >= t.min_peers)?;
    let kind = SlowKind::BelowPeers;
    host.median
        .and_then(|m| below_median(kind, m, host.results, peers, t))
        .or_else(|| one_big_drop(kind, host.last?, peers, t))
}

/// The latest `recent` results (chronological order) fell against the ones
/// before, or the latest alone fell too far to be noise.
pub fn dropped_vs_history(history: &[f64], t: &Thresholds) -> Option<SlowFinding> {
    let kind = SlowKind::DroppedVsHistory;
    let usual = (t.recent > 0 && history.len() >= t.min_baseline + t.recent)
        .then(|| {
            let (baseline, recent) = history.split_at(history.len() - t.recent);
            below(kind, recent, &Spread::of(baseline)?, t)
        })
        .flatten();
    usual.or_else(|| {
        let (baseline, latest) = history.split_at(history.len().checked_sub(1)?);
        (baseline.len() >= t.big_drop_min_baseline)
            .then(|| one_big_drop(kind, *latest.first()?, &Spread::of(baseline)?, t))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A healthy series around `mean` with ±`spread` noise (deterministic).
    fn noisy(mean: f64, spread: f64, n: usize) -> Vec<f64> {
        let pattern = [0.0, 1.0, -1.0, 0.5, -0.5, 0.8, -0.8, 0.2, -0.2, 1.0];
        (0..n)
            .map(|i| mean * (1.0 + spread * pattern[i % pattern.len()]))
            .collect()
    }

    /// Coefficient of variation (sample standard deviation / mean).
    fn cv(values: &[f64]) -> f64 {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        var.sqrt() / mean
    }

    #[test]
    fn the_noisy_series_really_are_noisy() {
        // The "healthy but noisy" cases below mean a CV of 10-20 %, as hosts show in practice.
        for (spread, n) in [(0.15, 10), (0.2, 5), (0.2, 13), (0.25, 10), (0.25, 13)] {
            let c = cv(&noisy(2000.0, spread, n));
            assert!((0.10..=0.20).contains(&c), "spread {spread}, n {n}: CV {c:.3}");
        }
    }

    #[test]
    fn near_software_cases() {
        let t = Thresholds::default();
        let cases: Vec<(&str, Vec<f64>, Vec<f64>, bool)> = vec![
            ("healthy AES-NI", noisy(2000.0, 0.15, 6), noisy(80.0, 0.1, 6), false),
            (
                "masked flag, software speed",
                noisy(85.0, 0.1, 6),
                noisy(80.0, 0.1, 6),
                true,
            ),
            (
                "healthy but noisy on both paths (CV ~17 %)",
                noisy(2000.0, 0.25, 10),
                noisy(80.0, 0.25, 10),
                false,
            ),
            (
                "one accelerated result at software speed",
                vec![2000.0, 60.0, 2100.0, 1950.0],
                noisy(80.0, 0.1, 6),
                false,
            ),
            ("too few results", vec![85.0, 86.0], noisy(80.0, 0.1, 6), false),
            ("no software results", noisy(85.0, 0.1, 6), vec![], false),
        ];
        for (name, a, s, flagged) in cases {
            let f = near_software(&a, &s, &t);
            assert_eq!(f.is_some(), flagged, "{name}: {f:?}");
        }
    }

    #[test]
    fn below_peers_cases() {
        let t = Thresholds::default();
        let peers = vec![noisy(2000.0, 0.15, 5), noisy(2100.0, 0.2, 5), noisy(1900.0, 0.1, 5)];
        type Case = (&'static str, Vec<f64>, Vec<Vec<f64>>, bool);
        let cases: Vec<Case> = vec![
            (
                "healthy but noisy (CV ~15 %)",
                noisy(1850.0, 0.2, 5),
                peers.clone(),
                false,
            ),
            (
                "one outlier sample",
                vec![2000.0, 400.0, 2050.0, 1980.0],
                peers.clone(),
                false,
            ),
            (
                "noisy host among noisy peers (CV ~17 %)",
                noisy(1800.0, 0.25, 10),
                vec![
                    noisy(2000.0, 0.25, 10),
                    noisy(2200.0, 0.25, 10),
                    noisy(1900.0, 0.25, 10),
                ],
                false,
            ),
            ("a third of peer speed", noisy(650.0, 0.1, 5), peers.clone(), true),
            ("class of one", noisy(650.0, 0.1, 5), vec![], false),
            (
                "peers with too few results",
                noisy(650.0, 0.1, 5),
                vec![vec![2000.0], vec![2100.0], vec![1900.0]],
                false,
            ),
            (
                "too few results on the host, half the peers' speed",
                vec![1000.0, 990.0],
                peers.clone(),
                false,
            ),
        ];
        for (name, host, peers, flagged) in cases {
            let f = below_peers(&host, &peers, &t);
            assert_eq!(f.is_some(), flagged, "{name}: {f:?}");
            if let Some(f) = f {
                assert_eq!(f.kind, SlowKind::BelowPeers);
                assert!(f.ratio < 0.4, "{f:?}");
            }
        }
    }

    #[test]
    fn one_result_too_far_below_to_be_noise_fires_alone() {
        let t = Thresholds::default();
        let peers = vec![noisy(2000.0, 0.15, 5), noisy(2100.0, 0.2, 5), noisy(1900.0, 0.1, 5)];
        let wide_peers = vec![vec![3000.0; 3], vec![600.0; 3], vec![2000.0; 3]];
        let with = |history: Vec<f64>, latest: &[f64]| [history, latest.to_vec()].concat();
        // name, the host's results (latest last), peers, kind expected from them.
        type Case = (&'static str, Vec<f64>, Vec<Vec<f64>>, Option<SlowKind>);
        let cases: Vec<Case> = vec![
            (
                "one result, 58× below peers",
                vec![23.0],
                peers.clone(),
                Some(SlowKind::BelowPeers),
            ),
            (
                "one result, 3× below peers",
                vec![660.0],
                peers.clone(),
                Some(SlowKind::BelowPeers),
            ),
            (
                "one result, 2.5× below peers: noise until it repeats",
                vec![800.0],
                peers.clone(),
                None,
            ),
            (
                "3× below peers whose spread is that wide",
                vec![600.0],
                wide_peers,
                None,
            ),
            (
                "one result 58× below its own past, no peers",
                with(noisy(1342.0, 0.15, 3), &[23.0]),
                vec![],
                Some(SlowKind::DroppedVsHistory),
            ),
            (
                "2.5× below its own past: waits for the 3-result rule",
                with(noisy(1342.0, 0.15, 6), &[540.0]),
                vec![],
                None,
            ),
            (
                "too little past for one result",
                vec![1342.0, 1300.0, 23.0],
                vec![],
                None,
            ),
            (
                "a past as noisy as the drop",
                with(vec![3000.0, 900.0, 2000.0, 600.0, 1500.0, 400.0], &[300.0]),
                vec![],
                None,
            ),
            (
                "recovered: the latest is normal again",
                with(noisy(1342.0, 0.15, 5), &[23.0, 1350.0]),
                vec![],
                None,
            ),
        ];
        for (name, host, peers, want) in cases {
            let got = below_peers(&host, &peers, &t).or_else(|| dropped_vs_history(&host, &t));
            assert_eq!(got.map(|f| f.kind), want, "{name}: {got:?}");
            if let Some(f) = got {
                assert!(f.ratio <= 1.0 / t.big_drop_ratio, "{name}: {f:?}");
            }
        }
    }

    #[test]
    fn dropped_vs_history_cases() {
        let t = Thresholds::default();
        let mut dropped = noisy(2000.0, 0.15, 10);
        dropped.extend([900.0, 950.0, 920.0]);
        let mut one_bad = noisy(2000.0, 0.15, 10);
        one_bad.extend([500.0, 2000.0, 2050.0]);
        let mut recovered = dropped.clone();
        recovered.extend([2010.0, 1990.0, 2050.0]);
        let cases: Vec<(&str, Vec<f64>, bool)> = vec![
            ("healthy, noisy history", noisy(2000.0, 0.2, 13), false),
            ("healthy, noisier history (CV ~17 %)", noisy(2000.0, 0.25, 13), false),
            ("fell by half", dropped, true),
            ("one bad result among the recent", one_bad, false),
            ("back to normal (the finding resolves)", recovered, false),
            ("too little history", vec![2000.0, 2000.0, 900.0, 900.0, 900.0], false),
        ];
        for (name, history, flagged) in cases {
            let f = dropped_vs_history(&history, &t);
            assert_eq!(f.is_some(), flagged, "{name}: {f:?}");
        }
    }
}
