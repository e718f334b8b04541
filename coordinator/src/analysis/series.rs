//! Reason 5 over stored results: groups a host's results into series (one
//! [`Point`]: a job spec, its path and its provider), runs the [`slow`]
//! detectors on each, and folds what fired into one verdict per provider,
//! algorithm and kind — so a host with slow AES-GCM gets one finding per
//! comparison, with its worst series as the headline, not one per payload
//! size, and a slow OpenSSL is told apart from slow built-in crates. Each
//! provider's series are compared with its own history, its own software
//! path and the same provider on same-class peers only.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::provider::Provider;

use super::robust::Spread;
use super::slow::{self, SeriesSummary, SlowFinding, SlowKind, Thresholds};

/// One stored result, as the detectors need it (read straight from `results`).
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Observation {
    pub host_id: i64,
    /// What was measured, with the path asked for: the result's series.
    #[sqlx(flatten)]
    pub point: Point,
    /// What ran: `partial` or `software` when an accelerated request fell back.
    #[sqlx(try_from = "String")]
    pub path_used: PathUsed,
    pub throughput_mb_s: f64,
    pub created_at: DateTime<Utc>,
    /// The host's facts when the result arrived.
    pub snapshot_id: Option<i64>,
}

/// One series a detector flagged.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesVerdict {
    /// The accelerated-path series.
    pub series: Point,
    pub finding: SlowFinding,
    /// The latest result at a normal level, if any: (its snapshot, its time).
    pub last_good: Option<(Option<i64>, DateTime<Utc>)>,
    /// The first result after the last good one: when it started looking slow.
    pub first_bad: DateTime<Utc>,
    /// The snapshot of the series' latest result.
    pub latest_snapshot: Option<i64>,
}

/// Reason 5 for one host, provider, algorithm and kind.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowVerdict {
    pub host_id: i64,
    pub provider: Provider,
    pub algorithm: Algorithm,
    pub kind: SlowKind,
    /// The series with the lowest ratio.
    pub headline: SeriesVerdict,
    /// Every flagged series of the algorithm, worst first.
    pub flagged: Vec<SeriesVerdict>,
    /// Accelerated series of the algorithm that were examined.
    pub series_checked: usize,
}

/// The accelerated and software series of one host, grouped once per pass
/// and shared by every comparison that needs them. Each is keyed by its
/// point (path included), so a software series is found by its accelerated
/// twin's point with the path swapped. An accelerated request's results are
/// also keyed by what ran, accelerated or partial: a partial series is
/// compared with partial peers and its own partial history, never with a
/// fully accelerated one.
#[derive(Debug, Default)]
pub struct HostSeries<'a> {
    accelerated: HashMap<(&'a Point, PathUsed), Vec<&'a Observation>>,
    software: HashMap<&'a Point, Vec<&'a Observation>>,
}

impl<'a> HostSeries<'a> {
    /// Groups one host's results (chronological order).
    pub fn new(observations: &'a [Observation]) -> Self {
        let mut s = HostSeries::default();
        for o in observations {
            match (o.point.path, o.path_used) {
                (Path::Software, _) => s.software.entry(&o.point).or_default().push(o),
                // An accelerated request that ran in software is a fallback
                // (reasons 1–4), not a slow accelerated path; it joins neither series.
                (Path::Accelerated, PathUsed::Software) => {}
                (Path::Accelerated, used) => s.accelerated.entry((&o.point, used)).or_default().push(o),
            }
        }
        s
    }

    /// The accelerated series in a stable order (algorithm name, then the
    /// rest of the point), so verdicts and their headlines do not depend on hashing.
    fn accelerated_in_order(&self) -> Vec<((&'a Point, PathUsed), &Vec<&'a Observation>)> {
        type Order = (
            &'static str,
            &'static str,
            &'static str,
            u64,
            u32,
            Option<u32>,
            &'static str,
        );
        let order = |p: &Point| -> Order {
            (
                p.provider.as_str(),
                p.algorithm.name(),
                p.direction.as_str(),
                p.size_bytes,
                p.threads,
                p.concurrency,
                p.key_mode.as_str(),
            )
        };
        let mut series: Vec<_> = self.accelerated.iter().map(|(k, v)| (*k, v)).collect();
        series.sort_by_key(|((k, used), _)| (order(k), *used));
        series
    }
}

fn values(observations: &[&Observation]) -> Vec<f64> {
    observations.iter().map(|o| o.throughput_mb_s).collect()
}

/// An accelerated series: its point, and what ran.
type SeriesKey = (Point, PathUsed);

/// The medians of same-class hosts' accelerated series ([`slow::peer_median`]),
/// by series: all that `below-peers` compares a host with. Built one host at
/// a time, so a pass never holds every peer's results at once, and sorted
/// once, so each host is compared with the rest of a class of thousands in
/// linear time ([`Spread::of_sorted_without`]).
#[derive(Debug, Default, PartialEq)]
pub struct PeerMedians {
    /// Per series: the medians ascending, and the host of each.
    by_series: HashMap<SeriesKey, (Vec<f64>, Vec<i64>)>,
}

impl PeerMedians {
    /// Adds the medians of `host_id`'s accelerated series.
    pub fn add(&mut self, host_id: i64, series: &HostSeries, t: &Thresholds) {
        for ((point, used), observations) in &series.accelerated {
            if let Some(m) = slow::peer_median(&values(observations), t) {
                let (medians, hosts) = self.by_series.entry((**point, *used)).or_default();
                medians.push(m);
                hosts.push(host_id);
            }
        }
    }

    /// Sorts every series' medians; call once all hosts are added.
    pub fn finish(mut self) -> Self {
        for (medians, hosts) in self.by_series.values_mut() {
            let mut pairs: Vec<(f64, i64)> = medians.iter().copied().zip(hosts.iter().copied()).collect();
            pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            (*medians, *hosts) = pairs.into_iter().unzip();
        }
        self
    }

    /// Replaces `host_id`'s medians of the series whose point `in_scope`
    /// says with those of `series` (the host's results of those series as
    /// they are now), keeping every series ordered as [`PeerMedians::finish`]
    /// leaves it: how medians kept from an earlier pass follow the hosts whose
    /// results changed without the rest of their class being read again.
    pub fn replace(&mut self, host_id: i64, series: &HostSeries, in_scope: impl Fn(&Point) -> bool, t: &Thresholds) {
        for ((point, _), (medians, hosts)) in &mut self.by_series {
            if in_scope(point)
                && let Some(i) = hosts.iter().position(|h| *h == host_id)
            {
                medians.remove(i);
                hosts.remove(i);
            }
        }
        for ((point, used), observations) in series.accelerated.iter().filter(|((p, _), _)| in_scope(p)) {
            if let Some(m) = slow::peer_median(&values(observations), t) {
                let (medians, hosts) = self.by_series.entry((**point, *used)).or_default();
                let at = medians
                    .iter()
                    .zip(hosts.iter())
                    .position(|(v, h)| v.total_cmp(&m).then(h.cmp(&host_id)).is_gt())
                    .unwrap_or(medians.len());
                medians.insert(at, m);
                hosts.insert(at, host_id);
            }
        }
    }

    /// The spread of the medians of every host but `host_id` at `key`.
    fn spread_without(&self, key: &SeriesKey, host_id: i64) -> Option<Spread> {
        let (medians, hosts) = self.by_series.get(key)?;
        let own = hosts.iter().position(|h| *h == host_id);
        Spread::of_sorted_without(medians, own)
    }
}

/// The accelerated series of a class's hosts, each summarised
/// ([`SeriesSummary`]), by series: what a whole-fleet pass keeps of every
/// host it reads while the class's medians are still being gathered, so as
/// to find, once they are, the hosts whose `below-peers` comparison fires
/// without reading their results again. One summary per host and series,
/// beside the one median [`PeerMedians`] keeps.
#[derive(Debug, Default)]
pub struct PeerSummaries(HashMap<SeriesKey, Vec<(i64, SeriesSummary)>>);

impl PeerSummaries {
    /// Adds the summaries of `host_id`'s accelerated series.
    pub fn add(&mut self, host_id: i64, series: &HostSeries, t: &Thresholds) {
        for ((point, used), observations) in &series.accelerated {
            let summary = SeriesSummary::of(&values(observations), t);
            self.0.entry((**point, *used)).or_default().push((host_id, summary));
        }
    }

    /// The hosts with a series that [`slow_verdicts`] finds below `peers`
    /// (the class's medians, finished), by the same rule
    /// ([`slow::below_peer_summary`] is what [`slow::below_peer_medians`] applies).
    pub fn below(&self, peers: &PeerMedians, t: &Thresholds) -> HashSet<i64> {
        let mut below = HashSet::new();
        for (key, hosts) in &self.0 {
            let Some((medians, of)) = peers.by_series.get(key) else {
                continue;
            };
            let position: HashMap<i64, usize> = of.iter().enumerate().map(|(i, h)| (*h, i)).collect();
            for (host_id, summary) in hosts {
                let spread = Spread::of_sorted_without(medians, position.get(host_id).copied());
                if slow::below_peer_summary(summary, spread.as_ref(), t).is_some() {
                    below.insert(*host_id);
                }
            }
        }
        below
    }
}

/// What a slow finding is about: the algorithm, with its provider unless it
/// is the built-in one (`openssl/aes-128-gcm`), so the findings stored before
/// providers keep their subject and each provider's verdict is its own finding.
pub fn slow_subject(provider: Provider, algorithm: Algorithm) -> String {
    if provider.is_rustcrypto() {
        algorithm.name().to_string()
    } else {
        format!("{provider}/{}", algorithm.name())
    }
}

/// The algorithm a [`slow_subject`] names.
pub fn subject_algorithm(subject: &str) -> &str {
    subject.rsplit_once('/').map_or(subject, |(_, algorithm)| algorithm)
}

/// Reason 5 for `host_id`, whose series are `mine`, against the medians of
/// its same-class `peers` (its own, if there, left out).
pub fn slow_verdicts(host_id: i64, mine: &HostSeries, peers: &PeerMedians, t: &Thresholds) -> Vec<SlowVerdict> {
    type Group = (&'static str, &'static str, &'static str);
    let mut by_kind: BTreeMap<Group, (Provider, Algorithm, SlowKind, Vec<SeriesVerdict>)> = BTreeMap::new();
    let mut checked: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for ((key, used), series) in mine.accelerated_in_order() {
        *checked
            .entry((key.provider.as_str(), key.algorithm.name()))
            .or_default() += 1;
        let accelerated = values(series);
        let mut found: Vec<(SlowFinding, f64)> = Vec::new();
        let software_twin = Point {
            path: Path::Software,
            ..*key
        };
        // A partial path sits between the two by nature: only a fully
        // accelerated one is expected to be clearly faster than software.
        // OpenSSL's own case is `openssl-no-acceleration`, which names its
        // cause (a no-asm build, a CPU it does not know): not said twice.
        if used == PathUsed::Accelerated
            && key.provider != Provider::Openssl
            && key.size_bytes >= t.near_software_min_size_bytes
            && let Some(software) = mine.software.get(&software_twin)
            && let Some(f) = slow::near_software(&accelerated, &values(software), t)
        {
            // Normal means clearly faster than software.
            found.push((f, f.reference_mb_s * t.near_software_ratio));
        }
        let peer_spread = peers.spread_without(&(*key, used), host_id);
        if let Some(f) = slow::below_peer_medians(&accelerated, peer_spread.as_ref(), t) {
            found.push((f, f.reference_mb_s * (1.0 - t.min_drop)));
        }
        if let Some(f) = slow::dropped_vs_history(&accelerated, t) {
            found.push((f, f.reference_mb_s * (1.0 - t.min_drop)));
        }
        for (finding, normal) in found {
            let last_good_index = series.iter().rposition(|p| p.throughput_mb_s >= normal);
            let first_bad = series[last_good_index.map_or(0, |i| i + 1).min(series.len() - 1)].created_at;
            let verdict = SeriesVerdict {
                series: *key,
                finding,
                last_good: last_good_index.map(|i| (series[i].snapshot_id, series[i].created_at)),
                first_bad,
                latest_snapshot: series.last().and_then(|p| p.snapshot_id),
            };
            by_kind
                .entry((key.provider.as_str(), key.algorithm.name(), finding.kind.as_str()))
                .or_insert_with(|| (key.provider, key.algorithm, finding.kind, Vec::new()))
                .3
                .push(verdict);
        }
    }
    by_kind
        .into_values()
        .map(|(provider, algorithm, kind, mut flagged)| {
            flagged.sort_by(|a, b| a.finding.ratio.total_cmp(&b.finding.ratio));
            SlowVerdict {
                host_id,
                series_checked: checked
                    .get(&(provider.as_str(), algorithm.name()))
                    .copied()
                    .unwrap_or(0),
                provider,
                algorithm,
                kind,
                headline: flagged[0].clone(),
                flagged,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use cipherfleet_core::spec::{Direction, KeyMode};

    use super::*;

    /// The accelerated-path point of a series.
    fn key(algorithm: &str, size_bytes: u64) -> Point {
        Point {
            algorithm: algorithm.parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            nonce: cipherfleet_core::spec::Nonce::Counter,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        }
    }

    /// Results of one series (its software twin when `software`), one per minute, in order.
    fn series(host_id: i64, key: &Point, software: bool, values: &[f64]) -> Vec<Observation> {
        let path = if software { Path::Software } else { Path::Accelerated };
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Observation {
                host_id,
                point: Point { path, ..*key },
                path_used: path.into(),
                throughput_mb_s: *v,
                created_at: Utc.timestamp_opt(1_700_000_000 + 60 * i as i64, 0).unwrap(),
                snapshot_id: Some(if i < 10 { 1 } else { 2 }),
            })
            .collect()
    }

    /// Reason 5 for host 1, the other hosts of `points` being `peers` when given.
    fn verdicts(points: &[Observation], peers: &[i64]) -> Vec<SlowVerdict> {
        let of = |host: i64| -> Vec<Observation> { points.iter().filter(|p| p.host_id == host).cloned().collect() };
        let peer_points: Vec<Vec<Observation>> = peers.iter().map(|h| of(*h)).collect();
        let t = Thresholds::default();
        let mut medians = PeerMedians::default();
        for (host, points) in peers.iter().zip(&peer_points) {
            medians.add(*host, &HostSeries::new(points), &t);
        }
        let mine = of(1);
        // The host itself among the medians, as a pass adds its whole class: left out.
        medians.add(1, &HostSeries::new(&mine), &t);
        slow_verdicts(1, &HostSeries::new(&mine), &medians.finish(), &t)
    }

    fn kinds(v: &[SlowVerdict]) -> Vec<(String, SlowKind)> {
        v.iter().map(|v| (v.algorithm.name().to_string(), v.kind)).collect()
    }

    #[test]
    fn slow_series_are_folded_per_algorithm_and_kind() {
        let gcm_16k = key("aes-128-gcm", 16384);
        let gcm_1k = key("aes-128-gcm", 1024);
        let gcm_64 = key("aes-128-gcm", 64);
        let healthy = [2000.0, 2100.0, 1900.0, 2050.0];
        let software = [80.0, 82.0, 79.0, 81.0];
        let at_software = [90.0, 95.0, 88.0, 92.0];
        type Case = (&'static str, Vec<Observation>, Vec<(String, SlowKind)>);
        let cases: Vec<Case> = vec![
            (
                "healthy: accelerated far above software",
                [
                    series(1, &gcm_16k, false, &healthy),
                    series(1, &gcm_16k, true, &software),
                ]
                .concat(),
                vec![],
            ),
            (
                "two sizes at software speed: one finding",
                [
                    series(1, &gcm_16k, false, &at_software),
                    series(1, &gcm_16k, true, &software),
                    series(1, &gcm_1k, false, &at_software),
                    series(1, &gcm_1k, true, &software),
                ]
                .concat(),
                vec![("aes-128-gcm".into(), SlowKind::NearSoftware)],
            ),
            (
                "small payloads converge: not judged",
                [
                    series(1, &gcm_64, false, &at_software),
                    series(1, &gcm_64, true, &software),
                ]
                .concat(),
                vec![],
            ),
            (
                "a fallback (accelerated request, software used) is not a slow path",
                [
                    series(1, &gcm_16k, false, &at_software)
                        .into_iter()
                        .map(|o| Observation {
                            path_used: PathUsed::Software,
                            ..o
                        })
                        .collect(),
                    series(1, &gcm_16k, true, &software),
                ]
                .concat(),
                vec![],
            ),
            (
                "a partial path near software speed is what partial means",
                [
                    partial(series(1, &gcm_16k, false, &at_software)),
                    series(1, &gcm_16k, true, &software),
                ]
                .concat(),
                vec![],
            ),
        ];
        for (name, points, want) in cases {
            assert_eq!(kinds(&verdicts(&points, &[])), want, "{name}");
        }
    }

    /// `point` on `provider`.
    fn on(provider: Provider, point: Point) -> Point {
        Point { provider, ..point }
    }

    #[test]
    fn each_provider_is_judged_on_its_own_series_and_peers() {
        let gcm = key("aes-128-gcm", 16384);
        let (openssl, ring) = (on(Provider::Openssl, gcm), on(Provider::Ring, gcm));
        let found = |points: &[Vec<Observation>], peers: &[i64]| -> Vec<(String, SlowKind)> {
            verdicts(&points.concat(), peers)
                .iter()
                .map(|v| (slow_subject(v.provider, v.algorithm), v.kind))
                .collect()
        };
        // The host's OpenSSL fell to a third in its latest result; its
        // built-in crates did not: one finding, about OpenSSL.
        let mine = [
            series(1, &gcm, false, &[2000.0; 6]),
            series(1, &openssl, false, &[4000.0, 4100.0, 3900.0, 4050.0, 3950.0, 1200.0]),
        ];
        assert_eq!(
            found(&mine, &[]),
            vec![("openssl/aes-128-gcm".into(), SlowKind::DroppedVsHistory)]
        );
        // ring on three peers at 8,000 MB/s is no reference for this host's
        // built-in crates at 2,000, nor for its ring when it has none; the
        // same host's ring at 3,000 is below them.
        let peers: Vec<Vec<Observation>> = (2..=4)
            .map(|h| {
                [
                    series(h, &ring, false, &[8000.0; 3]),
                    series(h, &gcm, false, &[2000.0; 3]),
                ]
                .concat()
            })
            .collect();
        let without_ring = [&mine[..1], &peers[..]].concat();
        assert_eq!(found(&without_ring, &[2, 3, 4]), vec![]);
        let with_ring = [
            &[mine[0].clone(), series(1, &ring, false, &[3000.0; 3])][..],
            &peers[..],
        ]
        .concat();
        assert_eq!(
            found(&with_ring, &[2, 3, 4]),
            vec![("ring/aes-128-gcm".into(), SlowKind::BelowPeers)]
        );
        // OpenSSL at its own masked speed is `openssl-no-acceleration`'s to say.
        let masked = [
            series(1, &openssl, false, &[900.0; 4]),
            series(1, &openssl, true, &[880.0; 4]),
        ];
        assert_eq!(found(&masked, &[]), vec![]);
        assert_eq!(subject_algorithm("openssl/aes-128-gcm"), "aes-128-gcm");
        assert_eq!(subject_algorithm("aes-128-gcm"), "aes-128-gcm");
    }

    /// The same results, run partly in software.
    fn partial(observations: Vec<Observation>) -> Vec<Observation> {
        observations
            .into_iter()
            .map(|o| Observation {
                path_used: PathUsed::Partial,
                ..o
            })
            .collect()
    }

    #[test]
    fn a_partial_series_is_compared_with_partial_peers_and_its_own_past() {
        let k = key("aes-128-cbc-hmac-sha256", 16384);
        // Peers with SHA-NI run it accelerated, far faster: no reference for a partial host.
        let accelerated_peers = [
            series(2, &k, false, &[2000.0, 2100.0, 1900.0]),
            series(5, &k, false, &[2050.0, 1950.0, 2000.0]),
        ]
        .concat();
        let mine = partial(series(1, &k, false, &[600.0, 650.0, 620.0]));
        assert!(verdicts(&[mine.clone(), accelerated_peers].concat(), &[2, 5]).is_empty());
        // Partial peers at 2000 MB/s: this one is below them.
        let partial_peers = [
            partial(series(3, &k, false, &[2000.0, 2100.0, 1900.0])),
            partial(series(4, &k, false, &[2050.0, 1950.0, 2000.0])),
        ]
        .concat();
        let found = verdicts(&[mine, partial_peers].concat(), &[3, 4]);
        assert_eq!(kinds(&found), vec![(k.algorithm.name().into(), SlowKind::BelowPeers)]);
    }

    #[test]
    fn replacing_a_hosts_medians_equals_adding_its_new_series_from_scratch() {
        let (gcm, ctr) = (key("aes-256-gcm", 16384), key("aes-128-ctr", 16384));
        let t = Thresholds::default();
        let before: Vec<Vec<Observation>> = (1..=4)
            .map(|h| {
                let v = 1000.0 + 100.0 * h as f64;
                [series(h, &gcm, false, &[v, v, v]), series(h, &ctr, false, &[v, v, v])].concat()
            })
            .collect();
        // Host 2 gets slower at AES-GCM, loses its AES-CTR series, and gains a partial one.
        let host2 = [
            series(2, &gcm, false, &[500.0, 2000.0, 400.0]),
            partial(series(2, &gcm, false, &[900.0, 900.0, 900.0])),
        ]
        .concat();
        let medians = |hosts: &[&Vec<Observation>]| {
            let mut m = PeerMedians::default();
            for h in hosts {
                m.add(h[0].host_id, &HostSeries::new(h), &t);
            }
            m.finish()
        };
        let mut kept = medians(&before.iter().collect::<Vec<_>>());
        kept.replace(2, &HostSeries::new(&host2), |_| true, &t);
        assert_eq!(kept, medians(&[&before[0], &host2, &before[2], &before[3]]));

        // Only AES-GCM in scope: host 2's AES-CTR median stays.
        let mut kept = medians(&before.iter().collect::<Vec<_>>());
        kept.replace(2, &HostSeries::new(&host2), |p| p.algorithm == gcm.algorithm, &t);
        let ctr_of_2: Vec<Observation> = before[1].iter().filter(|o| o.point == ctr).cloned().collect();
        let want = medians(&[&before[0], &[host2.clone(), ctr_of_2].concat(), &before[2], &before[3]]);
        assert_eq!(kept, want);
    }

    #[test]
    fn the_summaries_find_exactly_the_hosts_whose_verdicts_are_below_peers() {
        let t = Thresholds::default();
        let (gcm, ctr) = (key("aes-256-gcm", 16384), key("aes-128-ctr", 1024));
        // Healthy hosts, one below by its median, one by its one latest
        // result (too few for a median), one partial below partial peers.
        let class: Vec<Vec<Observation>> = vec![
            [
                series(1, &gcm, false, &[2000.0, 2100.0, 1900.0]),
                series(1, &ctr, false, &[900.0; 3]),
            ]
            .concat(),
            [
                series(2, &gcm, false, &[2050.0, 1950.0, 2000.0]),
                series(2, &ctr, false, &[950.0; 3]),
            ]
            .concat(),
            [
                series(3, &gcm, false, &[1980.0, 2020.0, 2000.0]),
                series(3, &ctr, false, &[300.0; 3]),
            ]
            .concat(),
            series(4, &gcm, false, &[2000.0, 300.0]),
            series(5, &gcm, false, &[600.0, 620.0, 610.0]),
            partial(series(6, &gcm, false, &[900.0; 3])),
            partial(series(7, &gcm, false, &[950.0; 3])),
            partial(series(8, &gcm, false, &[250.0; 3])),
            series(9, &gcm, false, &[2010.0, 1990.0, 2000.0]),
        ];
        let (mut medians, mut summaries) = (PeerMedians::default(), PeerSummaries::default());
        for host in &class {
            let series = HostSeries::new(host);
            medians.add(host[0].host_id, &series, &t);
            summaries.add(host[0].host_id, &series, &t);
        }
        let medians = medians.finish();
        let from_verdicts: HashSet<i64> = class
            .iter()
            .filter(|host| {
                slow_verdicts(host[0].host_id, &HostSeries::new(host), &medians, &t)
                    .iter()
                    .any(|v| v.kind == SlowKind::BelowPeers)
            })
            .map(|host| host[0].host_id)
            .collect();
        assert_eq!(from_verdicts, HashSet::from([3, 4, 5, 8]));
        assert_eq!(summaries.below(&medians, &t), from_verdicts);
    }

    #[test]
    fn below_peers_uses_other_hosts_of_the_class_only() {
        let k = key("aes-256-gcm", 16384);
        let peers = [
            series(2, &k, false, &[2000.0, 2100.0, 1900.0]),
            series(3, &k, false, &[2050.0, 1950.0, 2000.0]),
        ]
        .concat();
        let slow = series(1, &k, false, &[600.0, 650.0, 620.0]);
        let points = [slow.clone(), peers.clone()].concat();
        let found = verdicts(&points, &[2, 3]);
        assert_eq!(kinds(&found), vec![("aes-256-gcm".into(), SlowKind::BelowPeers)]);
        let f = &found[0].headline;
        assert!((f.finding.ratio - 0.31).abs() < 0.01, "{f:?}");
        assert_eq!(f.last_good, None, "never at peer level");
        // A class of one (the peers are not in its class): nothing to compare with.
        assert!(verdicts(&points, &[]).is_empty());
    }

    #[test]
    fn a_drop_remembers_the_last_good_result() {
        let k = key("aes-128-ctr", 8192);
        let mut values = vec![
            3000.0, 3100.0, 2900.0, 3050.0, 2950.0, 3000.0, 3020.0, 2980.0, 3010.0, 2990.0,
        ];
        values.extend([1200.0, 1250.0, 1190.0]);
        let points = series(1, &k, false, &values);
        let found = verdicts(&points, &[]);
        assert_eq!(kinds(&found), vec![("aes-128-ctr".into(), SlowKind::DroppedVsHistory)]);
        let v = &found[0].headline;
        assert_eq!(
            v.last_good.map(|g| g.0),
            Some(Some(1)),
            "last good result on snapshot 1"
        );
        assert_eq!(v.first_bad, points[10].created_at);
        assert_eq!(v.latest_snapshot, Some(2));
        assert_eq!(found[0].series_checked, 1);
    }
}
