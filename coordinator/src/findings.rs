//! The deriver: runs [`crate::analysis`] over stored facts and results and
//! keeps the `findings` table in step — a finding opens when a rule fires,
//! is refreshed while it holds, and resolves once it no longer does.
//!
//! Derivation runs off the session path: a stored result only marks its host
//! and algorithm dirty ([`Deriver::result_stored`], a lock and a notify), and
//! one background task ([`run`]) derives whatever is dirty, coalescing bursts,
//! so ingest never waits on analysis. While results stream in, a pass waits
//! for them to pause (at most a minute), so it does not compete with ingest
//! for the database every few seconds; new facts (a lost flag) do not wait.
//! The whole fleet is derived at start and whenever a campaign finishes
//! (found by polling: a campaign finishes in several places — a result, a
//! failure, a sweep — and polling catches all).
//!
//! With several coordinators, each derives the hosts whose results it stored;
//! the passes over every host — the whole fleet (at start, after a finished
//! campaign) and every host's facts — run on the cluster's [`Leader`] only
//! (one pass reads every host's facts: three coordinators each running it in
//! a connect storm tripled that work), which learns of facts stored through
//! any coordinator by polling their count ([`watch`]). Every pass reconciles
//! under one advisory lock ([`advisory::Lock::Findings`]), so passes of two
//! coordinators take turns.
//!
//! Each pass reconciles in one transaction, so readers never see a finding
//! resolved before its successor is stored. What a finding says (severity,
//! evidence, summary, fact changes) is in [`describe`]; what a pass reads is
//! [`crate::store::series`]; the peers a host is compared with, [`peers`];
//! how a pass stores what it found, [`writes`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cipherfleet_core::path::Flavour;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio::time::Interval;
use tokio_util::sync::CancellationToken;

use crate::analysis::fallback::CpuGroups;
use crate::analysis::series::{HostSeries, PeerMedians};
use crate::analysis::slow::Thresholds;
use crate::analysis::unexplained::{self, Ran};
use crate::cluster::leader::Leader;
use crate::store;
use crate::store::advisory;
use crate::store::findings as stored;
use crate::store::series::CurrentFacts;

mod describe;
mod peers;
mod pending;
mod writes;

use peers::Class;
pub use peers::PeerCache;
#[doc(hidden)]
pub use peers::Reads;
use pending::{COALESCE, PATIENCE, Pending};
#[doc(hidden)]
pub use writes::Writes;
use writes::{HostChanges, write_chunk};

/// Every reason, in the spelling `check`, `/metrics` and the database use.
/// Adding one here (and to the `findings.reason` check of the schema) is all
/// the report, `/api/v1`, `check` and `/metrics` need to know it.
pub const REASONS: [&str; 9] = [
    "cpu-lacks",
    "hypervisor-masks",
    "os-disabled",
    "software-build",
    "slow-accelerated",
    unexplained::REASON,
    "kernel-crypto-generic",
    "openssl-masked",
    "openssl-no-acceleration",
];

/// The latest results per series (and path) the detectors see.
const HISTORY: i64 = 30;
/// How often finished campaigns are looked for; no shorter than [`COALESCE`],
/// which also spaces the passes this poll triggers.
const CAMPAIGN_POLL: Duration = Duration::from_secs(2);

/// A facts pass reads and judges every host, and in a connect storm new hosts
/// ask for one every [`COALESCE`]: after a facts pass of length T the next
/// waits `FACTS_SPACING` × T (if longer), so these passes take at most a fifth
/// of the time however large the fleet (every coordinator ran one every 2 s
/// through a storm, each reading every host's facts).
const FACTS_SPACING: u32 = 4;
/// A pass this long is logged at `info` whatever it found.
const SLOW_PASS: Duration = Duration::from_secs(1);

/// The handle the rest of the coordinator marks work on; cheap to call from
/// the session path.
#[derive(Debug, Default)]
pub struct Deriver {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Deriver {
    pub fn new() -> Arc<Self> {
        Arc::new(Deriver::default())
    }

    /// A result of `host_id` for `algorithm` was stored.
    pub fn result_stored(&self, host_id: i64, algorithm: &str) {
        let mut pending = self.lock();
        let now = tokio::time::Instant::now();
        pending.first_result.get_or_insert(now);
        pending.last_result = Some(now);
        pending.hosts.entry(host_id).or_default().insert(algorithm.to_string());
        drop(pending);
        self.wake.notify_one();
    }

    /// A host said hello with new facts (a new host, a new kernel, a lost flag).
    pub fn facts_changed(&self) {
        self.lock().facts = true;
        self.wake.notify_one();
    }

    /// Derive everything (start, a finished campaign).
    pub fn whole_fleet(&self) {
        self.lock().fleet = true;
        self.wake.notify_one();
    }

    /// Work a failed pass did not do, picked up by the next tick (no wake-up:
    /// retrying at once would spin while the database is away).
    fn put_back(&self, work: Work) {
        let mut pending = self.lock();
        match work {
            Work::Fleet => pending.fleet = true,
            Work::Facts => pending.facts = true,
            Work::Hosts(hosts) => {
                // Due at the next tick, not after another quiet spell.
                let now = tokio::time::Instant::now();
                let long_ago = now.checked_sub(PATIENCE).unwrap_or(now);
                pending.first_result.get_or_insert(long_ago);
                pending.last_result.get_or_insert(long_ago);
                for (host, algorithms) in hosts {
                    pending
                        .hosts
                        .entry(host)
                        .or_default()
                        .extend(algorithms.unwrap_or_default());
                }
            }
        }
    }

    /// Waits until the next pass is due: [`COALESCE`] after work is marked
    /// (a burst lands in one pass) and, for new results, until they stopped
    /// coming ([`Pending::results_due`]), or the next poll `tick`. The tick
    /// restarts after a coalesced pass, which polls campaigns too, so passes
    /// start at least [`COALESCE`] apart. False once `shutdown` is cancelled.
    async fn next_pass(&self, tick: &mut Interval, shutdown: &CancellationToken) -> bool {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = self.wake.notified() => {
                    let mut until = tokio::time::Instant::now() + COALESCE;
                    loop {
                        tokio::select! {
                            _ = shutdown.cancelled() => return false,
                            _ = tokio::time::sleep_until(until) => {}
                        }
                        // Results still coming: the pass waits for a pause (or its patience).
                        let (due, wait) = {
                            let pending = self.lock();
                            (pending.results_due(), pending.must_wait())
                        };
                        match due {
                            Some(due) if wait => until = due,
                            _ => break,
                        }
                    }
                    // Else a tick missed while waiting fires at once, a second
                    // pass right behind this one.
                    tick.reset();
                    return true;
                }
                // A tick does not take results waiting for their pause: they
                // marked a wake-up, which leads into the wait above.
                _ = tick.tick() => if !self.lock().must_wait() {
                    return true;
                },
            }
        }
    }

    fn take(&self) -> Pending {
        self.lock().take_due()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The background task: derives whatever is marked dirty; on the cluster's
/// leader also the whole fleet once when it starts leading and after each
/// finished campaign, and every host's facts after new ones were stored by
/// any coordinator ([`watch`]); until `shutdown`.
pub async fn run(deriver: Arc<Deriver>, pool: PgPool, leader: Arc<Leader>, shutdown: CancellationToken) {
    tokio::join!(
        passes(deriver.clone(), pool.clone(), leader.clone(), shutdown.clone()),
        watch(deriver, pool, leader, shutdown),
    );
}

/// Runs the passes marked on `deriver`; facts passes only while this coordinator leads.
async fn passes(deriver: Arc<Deriver>, pool: PgPool, leader: Arc<Leader>, shutdown: CancellationToken) {
    let mut tick = poll_interval();
    let mut peers = PeerCache::default();
    let mut pace = FactsPace::new();
    while deriver.next_pass(&mut tick, &shutdown).await {
        let pending = deriver.take();
        let mut passes = Vec::new();
        if pending.fleet {
            passes.push(Work::Fleet);
        } else {
            // Not leading: the leader derives every host's facts, these included ([`watch`]).
            if pending.facts && leader.is_leader().await && pace.admit(&deriver) {
                passes.push(Work::Facts);
            }
            if !pending.hosts.is_empty() {
                passes.push(Work::Hosts(
                    pending.hosts.into_iter().map(|(h, a)| (h, Some(a))).collect(),
                ));
            }
        }
        for work in passes {
            let started = tokio::time::Instant::now();
            let outcome = derive_with_peers(&pool, &work, &mut peers).await;
            if matches!(work, Work::Facts) {
                pace.ran(started);
            }
            let took = started.elapsed();
            let took_ms = took.as_millis() as u64;
            match outcome {
                // A slow pass is worth knowing of too: it spaces the facts passes, and it competes with ingest.
                Ok(o) if o.opened + o.resolved > 0 || took >= SLOW_PASS => {
                    tracing::info!(?o, pass = work.kind(), took_ms, "findings derived")
                }
                Ok(o) => tracing::debug!(?o, pass = work.kind(), took_ms, "findings derived"),
                Err(e) => {
                    // Database away: keep the work for the next tick rather than lose it.
                    tracing::warn!(error = %e, "deriving findings");
                    deriver.put_back(work);
                }
            }
        }
    }
}

/// While this coordinator leads, every [`CAMPAIGN_POLL`]: marks a fleet pass
/// when it starts leading and when a campaign finished, and a facts pass when
/// facts were stored through any coordinator since the last look. A poll of
/// its own, so that results waiting for their pause ([`Deriver::next_pass`])
/// do not hold up what other coordinators' hosts said.
async fn watch(deriver: Arc<Deriver>, pool: PgPool, leader: Arc<Leader>, shutdown: CancellationToken) {
    // `None` until this coordinator leads: then the campaigns finished and the
    // facts stored before are covered by its first fleet pass.
    let mut seen: Option<Seen> = None;
    let mut tick = poll_interval();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !leader.is_leader().await {
            seen = None;
            continue;
        }
        let first = seen.is_none();
        let last = seen.get_or_insert_default();
        match last.poll(&pool).await {
            Ok(_) if first => deriver.whole_fleet(),
            Ok(Changes { finished: true, .. }) => deriver.whole_fleet(),
            Ok(Changes { facts: true, .. }) => deriver.facts_changed(),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "looking for finished campaigns and new facts");
                // A first look that failed is taken again whole.
                if first {
                    seen = None;
                }
            }
        }
    }
}

/// When the next facts pass may run ([`FACTS_SPACING`]).
struct FactsPace {
    after: tokio::time::Instant,
}

impl FactsPace {
    fn new() -> Self {
        FactsPace {
            after: tokio::time::Instant::now(),
        }
    }

    /// Whether a facts pass may run now; if not, the work goes back to
    /// `deriver` for a later tick (no wake-up, so no spinning meanwhile).
    fn admit(&self, deriver: &Deriver) -> bool {
        let due = tokio::time::Instant::now() >= self.after;
        if !due {
            deriver.put_back(Work::Facts);
        }
        due
    }

    /// A facts pass that began at `started` has just ended.
    fn ran(&mut self, started: tokio::time::Instant) {
        self.after = tokio::time::Instant::now() + started.elapsed() * FACTS_SPACING;
    }
}

/// The campaign poll; its first tick is at once.
fn poll_interval() -> Interval {
    let mut tick = tokio::time::interval(CAMPAIGN_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// What the leader saw at its last look: the campaigns finished within the
/// hour, and the count and latest id of stored facts snapshots (the count
/// too: a snapshot committed after a later one has a lower id).
#[derive(Default)]
struct Seen {
    finished: HashSet<i64>,
    facts: (i64, i64),
}

/// What changed since the last look.
struct Changes {
    finished: bool,
    facts: bool,
}

impl Seen {
    /// Looks again. Only the last hour's campaigns are looked at, which also bounds the set.
    async fn poll(&mut self, pool: &PgPool) -> store::Result<Changes> {
        let ids: HashSet<i64> = store::campaigns::ended_within(pool, 3600.0)
            .await?
            .into_iter()
            .collect();
        let facts = store::snapshots::stored(pool).await?;
        let changes = Changes {
            finished: ids.iter().any(|id| !self.finished.contains(id)),
            facts: facts != self.facts,
        };
        (self.finished, self.facts) = (ids, facts);
        Ok(changes)
    }
}

/// What one pass derives.
#[derive(Debug, Clone)]
pub enum Work {
    /// Every host, every algorithm.
    Fleet,
    /// Every host: fact-based reasons, and `unexplained-fallback` (which
    /// judges the facts against the latest result per point; no series read).
    Facts,
    /// These hosts; for each, the algorithms whose slow-path findings to
    /// re-derive (`None`: all). Fact-based reasons are always re-derived.
    Hosts(BTreeMap<i64, Option<BTreeSet<String>>>),
}

impl Work {
    /// The kind of pass, for the log.
    fn kind(&self) -> &'static str {
        match self {
            Work::Fleet => "fleet",
            Work::Facts => "facts",
            Work::Hosts(_) => "hosts",
        }
    }
}

/// What a pass changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    pub opened: usize,
    pub refreshed: usize,
    pub resolved: usize,
}

/// Derives the whole fleet now (tests, and what the task does at start).
pub async fn derive_fleet(pool: &PgPool) -> store::Result<Outcome> {
    derive(pool, &Work::Fleet).await
}

/// Derives one pass and reconciles it with the stored findings in one transaction.
///
/// Bounded however large the fleet: results are read [`CHUNK`] hosts at a
/// time — first the peers' series, reduced to their medians per class
/// ([`PeerMedians`], [`peers`]), then the targets' own, each chunk judged and
/// reconciled while the next is read — so memory holds two chunks' results
/// and the medians, and each host is compared with its class and CPU group
/// rather than with every other host. A whole-fleet pass reads each series
/// once: the first read judges every host, and the second reads again only
/// the hosts a slow rule fires on. A chunk costs a few statements whatever
/// it finds: its reads, its open findings, the snapshots dating its new
/// ones, one upsert of everything that holds and one resolve.
pub async fn derive(pool: &PgPool, work: &Work) -> store::Result<Outcome> {
    derive_in_chunks(pool, work, CHUNK).await
}

/// [`derive`] with the peer medians `peers` kept from earlier passes, and
/// keeping them for the next (what the background task does).
pub async fn derive_with_peers(pool: &PgPool, work: &Work, peers: &mut PeerCache) -> store::Result<Outcome> {
    derive_with(pool, work, CHUNK, Method::default(), peers).await
}

/// [`derive`], reading `chunk` hosts per query (tests make it small).
pub async fn derive_in_chunks(pool: &PgPool, work: &Work, chunk: usize) -> store::Result<Outcome> {
    derive_with(pool, work, chunk, Method::default(), &mut PeerCache::default()).await
}

/// How a pass reads and writes: what every pass does by default, the ways
/// passes once did for the tests that hold them to each other.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    pub reads: Reads,
    pub writes: Writes,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            reads: Reads::Once,
            writes: Writes::Batched,
        }
    }
}

/// [`derive_in_chunks`], reading and storing as `method` says, with the peer medians `peers` kept.
#[doc(hidden)]
pub async fn derive_with(
    pool: &PgPool,
    work: &Work,
    chunk: usize,
    method: Method,
    peers: &mut PeerCache,
) -> store::Result<Outcome> {
    let chunk = chunk.max(1);
    let t = Thresholds::default();
    let hosts = store::series::current_facts(pool).await?;
    let targets: Vec<&CurrentFacts> = match work {
        Work::Fleet | Work::Facts => hosts.iter().collect(),
        Work::Hosts(h) => hosts.iter().filter(|r| h.contains_key(&r.host_id())).collect(),
    };
    let no_algorithms = BTreeSet::new();
    let algorithms = |host_id: i64| -> Option<&BTreeSet<String>> {
        match work {
            Work::Fleet => None,
            Work::Facts => Some(&no_algorithms),
            Work::Hosts(h) => h.get(&host_id).and_then(Option::as_ref),
        }
    };
    // Same-class hosts are peers; a host whose CPU is unknown has none.
    let class_of = |h: &CurrentFacts| -> Option<Class> {
        let c = h.class();
        c.0.cpu_model_name.is_some().then_some(c)
    };
    let mut members: HashMap<Class, Vec<i64>> = HashMap::new();
    for h in &hosts {
        if let Some(c) = class_of(h) {
            members.entry(c).or_default().push(h.host_id());
        }
    }

    // The algorithms in question.
    let mut wanted_algorithms: Option<BTreeSet<String>> = Some(BTreeSet::new());
    for h in &targets {
        match (algorithms(h.host_id()), &mut wanted_algorithms) {
            (Some(a), Some(all)) => all.extend(a.iter().cloned()),
            _ => wanted_algorithms = None,
        }
    }
    // The targets of each class.
    let mut in_class: HashMap<&Class, Vec<i64>> = HashMap::new();
    for h in &targets {
        if let Some((class, _)) = class_of(h).and_then(|c| members.get_key_value(&c)) {
            in_class.entry(class).or_default().push(h.host_id());
        }
    }
    // No algorithm in question (a facts pass): no series to judge, no peers needed.
    if wanted_algorithms.as_ref().is_some_and(BTreeSet::is_empty) {
        in_class.clear();
    }
    let ask = peers::Ask {
        work,
        in_class,
        members: &members,
        wanted_algorithms: &wanted_algorithms,
        algorithms: &algorithms,
        chunk,
        reads: method.reads,
    };
    let first = peers::read(pool, ask, peers).await?;

    let fleet = CpuGroups::new(hosts.iter().map(CurrentFacts::crypto));
    let no_peers = PeerMedians::default();
    let mut tx = pool.begin().await?;
    advisory::lock_transaction(&mut *tx, advisory::Lock::Findings).await?;
    let mut outcome = Outcome::default();
    // Second read: the targets' own results (those the first read did not
    // judge clean), a chunk at a time, each read while the one before is
    // judged and stored.
    let parts: Vec<&[&CurrentFacts]> = targets.chunks(chunk).collect();
    let read = |part: &[&CurrentFacts]| {
        let ids: Vec<i64> = part
            .iter()
            .map(|h| h.host_id())
            .filter(|h| !first.clean.contains(h))
            .collect();
        // What ran last at each accelerated point (one row per point), for
        // `unexplained-fallback`, which only an accelerated build can have.
        let accelerated_builds: Vec<i64> = part
            .iter()
            .filter(|h| describe::crypto_of(h.host_id(), &h.snapshot).build_flavour == Some(Flavour::Accelerated))
            .map(|h| h.host_id())
            .collect();
        let (pool, algorithms) = (pool.clone(), wanted_algorithms.clone());
        Ahead::spawn(async move {
            tokio::try_join!(
                store::series::latest_points(&pool, &ids, algorithms.as_ref(), None, HISTORY),
                store::series::latest_accelerated(&pool, &accelerated_builds),
            )
        })
    };
    let mut next = parts.first().map(|part| read(part));
    for (i, &part) in parts.iter().enumerate() {
        let (points, accelerated) = match next.take() {
            Some(ahead) => ahead.join().await?,
            None => Default::default(),
        };
        next = parts.get(i + 1).map(|part| read(part));
        let ids: Vec<i64> = part.iter().map(|h| h.host_id()).collect();
        let grouped: HashMap<i64, HostSeries> = peers::by_host(&points)
            .into_iter()
            .map(|(h, o)| (h, HostSeries::new(o)))
            .collect();
        let mut latest: HashMap<i64, Vec<Ran>> = HashMap::new();
        for r in accelerated {
            latest.entry(r.result.host_id).or_default().push(r);
        }
        let open = stored::list_open_for_hosts(&mut *tx, &ids).await?;
        let none = HostSeries::default();
        let mut changes = Vec::with_capacity(part.len());
        for host in part {
            let peers = class_of(host)
                .and_then(|c| peers.0.get(&c))
                .map_or(&no_peers, |k| &k.medians);
            // A host judged clean has no slow finding: judged without its series, none is found.
            let mine = grouped.get(&host.host_id()).unwrap_or(&none);
            let only = algorithms(host.host_id());
            let ran = latest.get(&host.host_id()).map_or(&[][..], Vec::as_slice);
            let derived = describe::for_host(host, &fleet, mine, peers, ran, only, &t);
            changes.push(HostChanges::new(host.host_id(), derived, &open, only));
        }
        write_chunk(&mut tx, changes, &fleet, method.writes, &mut outcome).await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// Hosts read per query of a pass: a few thousand results each.
const CHUNK: usize = 200;

/// A chunk read in a task of its own, so the database reads the next chunk
/// while the pass works on this one; memory holds two chunks at most. Dropped
/// unjoined (the pass failed), the read is aborted.
pub(super) struct Ahead<T>(tokio::task::JoinHandle<store::Result<T>>);

impl<T: Send + 'static> Ahead<T> {
    fn spawn(read: impl Future<Output = store::Result<T>> + Send + 'static) -> Self {
        Ahead(tokio::spawn(read))
    }

    async fn join(mut self) -> store::Result<T> {
        match (&mut self.0).await {
            Ok(read) => read,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(sqlx::Error::Io(std::io::Error::other(e)).into()),
        }
    }
}

impl<T> Drop for Ahead<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests;
