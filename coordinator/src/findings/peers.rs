//! A pass's first read: the peer medians of the targets' classes
//! ([`PeerMedians`]), kept between passes ([`PeerCache`]).
//!
//! A whole-fleet pass reads every series of every host here, once: each host
//! is judged on what needs no peers (`near-software`, `dropped-vs-history`)
//! as it is read, and on `below-peers` from a summary of each series once
//! its class is complete ([`PeerSummaries`]). Only the hosts where a rule
//! fires are read again by the second read, which writes their evidence;
//! the rest are [`FirstRead::clean`]. Other passes read the targets' own
//! series in the second read.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use cipherfleet_core::Point;
use cipherfleet_core::path::Path;
use sqlx::PgPool;

use super::{Ahead, HISTORY, Work};
use crate::analysis::class::MachineClass;
use crate::analysis::series::{self, HostSeries, Observation, PeerMedians, PeerSummaries};
use crate::analysis::slow::Thresholds;
use crate::store;

/// A machine class, and whether its hosts are emulated: who is whose peer.
pub(super) type Class = (MachineClass, bool);

/// How long the peer medians of a class read whole are used by later passes
/// ([`PeerCache`]) before they are read again. Each coordinator brings the
/// medians of the hosts whose results it stored up to date as it derives
/// them; this bounds how stale the medians of hosts that another coordinator
/// stored for can be. A fleet pass reads them afresh whatever their age.
const PEERS_KEPT: Duration = Duration::from_secs(600);

/// The peer medians of each class as the last pass left them, kept by the
/// background task between passes, so a pass over a few hosts reads those
/// hosts' series only rather than every series of their classes: a per-result
/// pass at 10,000 hosts in five classes read 2,000 hosts' results per class
/// touched. Kept per class with its members: a host joining, leaving or
/// moving class has the class read again. Memory: one median per host and
/// accelerated series, what a pass held while it ran anyway.
#[derive(Debug, Default)]
pub struct PeerCache(pub(super) HashMap<Class, KeptPeers>);

#[derive(Debug)]
pub(super) struct KeptPeers {
    /// The class's members when it was read whole, ascending.
    members: Vec<i64>,
    pub medians: PeerMedians,
    read_at: Instant,
}

/// How a whole-fleet pass reads the hosts' series.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Every series once, the hosts where a rule fires again: what every
    /// fleet pass does.
    Once,
    /// The accelerated series of every class first, then every host's
    /// series again, as fleet passes once did: the reference a test holds
    /// the single read to.
    Twice,
}

/// What the first read leaves the second.
#[derive(Debug, Default)]
pub(super) struct FirstRead {
    /// Hosts read whole here whose series no slow rule fires on: the second
    /// read need not read their series again.
    pub clean: HashSet<i64>,
}

/// What the first read is asked.
pub(super) struct Ask<'a> {
    pub work: &'a Work,
    /// The targets of each class, and each class's members, ascending.
    pub in_class: HashMap<&'a Class, Vec<i64>>,
    pub members: &'a HashMap<Class, Vec<i64>>,
    /// The algorithms in question (`None`: all).
    pub wanted_algorithms: &'a Option<BTreeSet<String>>,
    /// The algorithms in question for one host (`None`: all).
    pub algorithms: &'a (dyn Fn(i64) -> Option<&'a BTreeSet<String>> + Sync),
    pub chunk: usize,
    pub reads: Reads,
}

/// The first read: the medians of every series of the targets' classes. A
/// class whose medians `peers` kept from an earlier pass (same members, not
/// older than [`PEERS_KEPT`]) has only its targets read, their medians
/// replaced; the others are read whole. A fleet pass reads every class: its
/// verdicts are exact whatever was kept. Each chunk is read while the one
/// before is folded in. Leaves `peers` with the medians of every class read.
pub(super) async fn read(pool: &PgPool, ask: Ask<'_>, peers: &mut PeerCache) -> store::Result<FirstRead> {
    let t = Thresholds::default();
    let fleet = matches!(ask.work, Work::Fleet);
    // A fleet pass judges every host here: it reads every path.
    let once = fleet && ask.reads == Reads::Once;
    let fresh = |class: &Class| {
        !fleet
            && peers
                .0
                .get(class)
                .is_some_and(|k| k.members == ask.members[class] && k.read_at.elapsed() < PEERS_KEPT)
    };
    let mut parts: Vec<(&Class, bool, &[i64])> = Vec::new();
    for (class, mine) in &ask.in_class {
        let (whole, ids) = if fresh(class) {
            (false, mine.as_slice())
        } else {
            (true, ask.members[*class].as_slice())
        };
        parts.extend(ids.chunks(ask.chunk.max(1)).map(|part| (*class, whole, part)));
    }
    let read = |whole: bool, part: &[i64]| {
        // A class read whole is kept for later passes: all its algorithms.
        let algorithms = if whole { None } else { ask.wanted_algorithms.clone() };
        let path = (!once).then_some(Path::Accelerated);
        let (pool, part) = (pool.clone(), part.to_vec());
        Ahead::spawn(
            async move { store::series::latest_points(&pool, &part, algorithms.as_ref(), path, HISTORY).await },
        )
    };
    let mut read_whole: HashMap<Class, (PeerMedians, PeerSummaries)> = HashMap::new();
    let mut out = FirstRead::default();
    let mut next = parts.first().map(|(_, whole, part)| read(*whole, part));
    for (i, (class, whole, part)) in parts.iter().enumerate() {
        let points = match next.take() {
            Some(ahead) => ahead.join().await?,
            None => Vec::new(),
        };
        next = parts.get(i + 1).map(|(_, whole, part)| read(*whole, part));
        if *whole {
            let (medians, summaries) = read_whole.entry((*class).clone()).or_default();
            if once {
                out.clean.extend(part.iter().copied());
            }
            for (host, observations) in by_host(&points) {
                let series = HostSeries::new(observations);
                medians.add(host, &series, &t);
                if once {
                    // Without peers, what fires needs none: `near-software`, `dropped-vs-history`.
                    if !series::slow_verdicts(host, &series, &PeerMedians::default(), &t).is_empty() {
                        out.clean.remove(&host);
                    }
                    summaries.add(host, &series, &t);
                }
            }
        } else {
            let kept = &mut peers.0.get_mut(*class).expect("a class kept").medians;
            let read: HashMap<i64, &[Observation]> = by_host(&points).into_iter().collect();
            for host in *part {
                let in_scope = |p: &Point| (ask.algorithms)(*host).is_none_or(|a| a.contains(p.algorithm.name()));
                let series = HostSeries::new(read.get(host).copied().unwrap_or_default());
                kept.replace(*host, &series, in_scope, &t);
            }
        }
    }
    for (class, (medians, summaries)) in read_whole {
        let medians = medians.finish();
        for host in summaries.below(&medians, &t) {
            out.clean.remove(&host);
        }
        let members = ask.members[&class].clone();
        peers.0.insert(
            class,
            KeptPeers {
                members,
                medians,
                read_at: Instant::now(),
            },
        );
    }
    Ok(out)
}

/// `points` (ordered by host) split per host.
pub(super) fn by_host(points: &[Observation]) -> Vec<(i64, &[Observation])> {
    points
        .chunk_by(|a, b| a.host_id == b.host_id)
        .map(|run| (run[0].host_id, run))
        .collect()
}
