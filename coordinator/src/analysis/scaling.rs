//! Thread scaling: how much of a core each added thread is worth. One rule,
//! used by `/modes` (the speed-up curves) and `/capacity` (cores needed):
//!
//! efficiency at `t` threads = the median, over hosts measured at both 1 and
//! `t` threads, of `MB/s(t) / (t × MB/s(1))`.
//!
//! Each host is compared with itself, so a class whose hosts differ in speed
//! (or whose fast hosts were measured at 8 threads and slow ones only at 1)
//! does not show a curve no host has. The speed-up is `t × efficiency`.

use serde::Serialize;

use cipherfleet_core::path::PathUsed;

use super::robust::median;

/// One measured thread count of one host (its latest result there).
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadPoint {
    pub threads: u32,
    pub mb_s: f64,
    /// What the worker really ran.
    pub path_used: PathUsed,
}

/// One host's measurements of one algorithm at one size, direction and path.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSeries {
    pub host_id: i64,
    /// From the host's current facts; `None` if the probe could not tell.
    pub logical_cores: Option<u32>,
    pub points: Vec<ThreadPoint>,
}

impl HostSeries {
    /// The usable throughput at `threads`, if measured (zero or non-finite is no measurement).
    pub fn at(&self, threads: u32) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.threads == threads && p.mb_s.is_finite() && p.mb_s > 0.0)
            .map(|p| p.mb_s)
    }
}

/// The measured efficiency at one thread count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadScaling {
    pub threads: u32,
    /// `MB/s(t) / (t × MB/s(1))`, median over hosts; 1.0 is linear.
    pub efficiency: f64,
    /// Hosts measured at both 1 and `threads`.
    pub hosts: usize,
}

impl ThreadScaling {
    /// Throughput at `threads` over the throughput on one thread.
    pub fn speedup(&self) -> f64 {
        self.efficiency * f64::from(self.threads)
    }
}

/// The efficiency at every measured thread count above 1, ascending.
pub fn thread_scaling(series: &[HostSeries]) -> Vec<ThreadScaling> {
    let mut ratios: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for host in series {
        let Some(single) = host.at(1) else { continue };
        for p in &host.points {
            if p.threads > 1
                && let Some(mb_s) = host.at(p.threads)
            {
                ratios
                    .entry(p.threads)
                    .or_default()
                    .push(mb_s / (f64::from(p.threads) * single));
            }
        }
    }
    ratios
        .into_iter()
        .filter_map(|(threads, r)| {
            Some(ThreadScaling {
                threads,
                efficiency: median(&r)?,
                hosts: r.len(),
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn host(id: i64, cores: Option<u32>, points: &[(u32, f64)]) -> HostSeries {
        HostSeries {
            host_id: id,
            logical_cores: cores,
            points: points
                .iter()
                .map(|&(threads, mb_s)| ThreadPoint {
                    threads,
                    mb_s,
                    path_used: PathUsed::Accelerated,
                })
                .collect(),
        }
    }

    #[test]
    fn each_host_is_compared_with_itself() {
        // A fast host measured at 1 and 4 threads, a slow one only at 1 and 2:
        // merging medians first would divide the fast host's 4-thread figure
        // by a one-thread median that the slow host drags down.
        let hosts = [
            host(1, Some(4), &[(1, 1000.0), (2, 1900.0), (4, 3600.0)]),
            host(2, Some(4), &[(1, 100.0), (2, 170.0)]),
            host(3, Some(4), &[(4, 50.0)]),
        ];
        let s = thread_scaling(&hosts);
        let got: Vec<(u32, f64, usize)> = s.iter().map(|t| (t.threads, t.efficiency, t.hosts)).collect();
        assert_eq!(got, [(2, (0.95 + 0.85) / 2.0, 2), (4, 0.9, 1)]);
        assert!((s[1].speedup() - 3.6).abs() < 1e-12);
    }

    #[test]
    fn nothing_without_a_single_thread_figure_or_above_one_thread() {
        for hosts in [
            vec![],
            vec![host(1, None, &[(1, 100.0)])],
            vec![host(1, None, &[(2, 100.0), (4, 180.0)])],
            vec![host(1, None, &[(1, 0.0), (2, 100.0)])],
        ] {
            assert_eq!(thread_scaling(&hosts), vec![], "{hosts:?}");
        }
    }
}
