//! The write path of agents' reports: results and job starts from every
//! session go through one bounded queue and are stored in batches, one
//! transaction per batch ([`store::results::record_and_claim`]), which also
//! claims the next job of every host with a result in the batch, and each
//! session gets its host's job with its result's outcome ([`Next`]): per
//! result, there is no round trip to the database of its own.
//!
//! A session hands over a result and waits: for room in the queue first
//! (backpressure — while it waits it reads nothing more from its agent, which
//! keeps the result spooled and sends no other), then for the batch holding
//! its result to commit. Only then is the result acknowledged, so
//! exactly-once holds as with one transaction per result: an agent resends
//! what was not acknowledged, and the same attempt's result again is a
//! duplicate. A batch that fails because the database is away (restarted,
//! stopped for a while) is tried again, for up to [`RETRY_FOR`]: its sessions
//! wait meanwhile, the queue fills and backpressure reaches the agents, which
//! keep their results spooled, and no session is dropped, so a restarted
//! database does not set off a reconnect herd. A batch that still fails, or
//! fails otherwise, fails each of its results with `UNAVAILABLE`; their
//! sessions end, and the agents keep them spooled and resend.
//!
//! A batch closes after [`Config::batch`] items or [`Config::window`] after
//! its first one, whichever comes first; a job start without its job's result
//! in the batch moves to the next one, once ([`hold_back`]); at most [`Config::parallel`] are
//! stored at once, and while they are, what arrives waits in the queue and
//! makes the next batch larger. The queue holds at most [`Config::queue`]
//! items, those being stored included: memory stays bounded however slow
//! PostgreSQL is.
//!
//! Admitting agents goes first ([`Precedence`]): while handshakes wait for a
//! turn (a failover or restart herd), one small batch is stored at a time,
//! each a pause after the last ([`YIELD_BATCH`], [`YIELD_PAUSE`]), so the
//! database and the CPU serve the agents that cannot work at all yet before
//! more results of those that can; the queue fills meanwhile and backpressure
//! holds the connected agents' results in their spools.
//!
//! The batcher runs until the last [`Ingest`] handle is dropped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use chrono::Utc;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::store;
use crate::store::jobs::{Job, Start};
use crate::store::results::{NewResult, RecordOutcome};

/// How the batcher groups and bounds its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Most items queued or being stored (`--ingest-queue`).
    pub queue: usize,
    /// Most items in one batch.
    pub batch: usize,
    /// Longest a batch waits for more items after its first.
    pub window: Duration,
    /// Batches stored at once, each on a connection of its own.
    pub parallel: usize,
}

/// The default `--ingest-queue`.
pub const DEFAULT_QUEUE: usize = 4096;

/// While handshakes wait ([`Precedence`]): the most items in a batch, and the
/// pause between batches. About 200 results a second are stored meanwhile
/// (a second's worth of a few hundred busy agents), so a herd of thousands
/// is admitted at nearly the rate of an idle coordinator.
const YIELD_BATCH: usize = 64;
const YIELD_PAUSE: Duration = Duration::from_millis(250);

/// How long a batch is tried again while the database is away.
pub const RETRY_FOR: Duration = Duration::from_secs(60);
/// The first wait before trying a batch again; it doubles up to [`RETRY_MAX_WAIT`].
const RETRY_FIRST_WAIT: Duration = Duration::from_millis(100);
const RETRY_MAX_WAIT: Duration = Duration::from_millis(250);

impl Default for Config {
    fn default() -> Self {
        Config {
            queue: DEFAULT_QUEUE,
            batch: 512,
            window: Duration::from_millis(2),
            parallel: 4,
        }
    }
}

/// What a session is told about its result: its outcome (or why it was
/// refused for good) and the host's next job, or why it was not stored this
/// time (the session ends and the agent resends).
pub type Reply = Result<Recorded, Error>;

/// Why a result or a start was not stored this time; the agent resends it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// This coordinator is shutting down.
    #[error("the coordinator is shutting down; retry")]
    Stopped,
    /// The batch it was in failed (shared by every result of the batch).
    #[error(transparent)]
    Store(Arc<store::Error>),
}

/// A result's batch committed: what became of it, and what the host runs next.
#[derive(Debug)]
pub struct Recorded {
    pub outcome: Result<RecordOutcome, store::Error>,
    pub next: Next,
}

/// The host's next job, claimed for every host of a batch in one statement
/// of the batch's transaction ([`store::results::record_and_claim`]).
#[derive(Debug)]
pub enum Next {
    /// Claimed, to be sent to the host ([`crate::scheduler::Scheduler::hand_over`]).
    Job(Box<Job>),
    /// Nothing claimed: the host runs a job still, or none is queued for it.
    Idle,
    /// The claim failed (the database is away): the session dispatches itself.
    Unknown,
}

enum Work {
    Result {
        item: Box<NewResult>,
        reply: oneshot::Sender<Reply>,
        _room: OwnedSemaphorePermit,
    },
    /// A `JobAccepted`. Nobody waits for it.
    Started {
        start: Start,
        /// Held back from a batch once already ([`hold_back`]).
        held: bool,
        _room: OwnedSemaphorePermit,
    },
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
struct Counters {
    high_water: AtomicUsize,
    batches: AtomicU64,
    results: AtomicU64,
    /// Batches being stored now, and the most there ever were at once.
    storing: AtomicUsize,
    most_storing: AtomicUsize,
}

/// Work that goes before storing results, counted by what waits for it:
/// handshakes waiting for a turn ([`crate::grpc::turns`]). While any waits,
/// the batcher stores one batch of at most [`YIELD_BATCH`] at a time, each
/// [`YIELD_PAUSE`] after the last, instead of [`Config::parallel`] at once.
#[derive(Debug, Default)]
pub struct Precedence {
    waiting: AtomicUsize,
}

/// One that waits, counted in its [`Precedence`] until dropped (also when
/// the future holding it is: a handshake whose agent gave up).
#[derive(Debug)]
pub struct Waiting<'a>(&'a Precedence);

impl Precedence {
    /// One more waits, until the returned guard is dropped.
    pub fn enter(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(self)
    }

    /// Whether any waits.
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }
}

impl Waiting<'_> {
    /// How many wait now, this one included.
    pub fn count(&self) -> usize {
        self.0.waiting.load(Ordering::Relaxed)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The handle sessions submit to; cheap to clone.
#[derive(Clone)]
pub struct Ingest {
    tx: mpsc::UnboundedSender<Work>,
    room: Arc<Semaphore>,
    capacity: usize,
    counters: Arc<Counters>,
    precedence: Arc<Precedence>,
}

/// What `/metrics` shows of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    /// Items queued or being stored now.
    pub queued: usize,
    /// The most there ever were at once.
    pub high_water: usize,
    pub capacity: usize,
    /// Batches stored, and the results in them.
    pub batches: u64,
    pub results: u64,
    /// The most batches ever stored at once.
    pub most_storing: usize,
}

fn stopped() -> Error {
    Error::Stopped
}

impl Ingest {
    /// Starts the batcher on connections of its own to `pool`'s database
    /// (needs a Tokio runtime): results are not stored behind the claims,
    /// page reads and sweeps queued for the shared pool's connections.
    pub fn start(pool: &PgPool, config: Config) -> Ingest {
        let pool = PgPoolOptions::new()
            .max_connections(config.parallel.max(1) as u32 + 1)
            .acquire_timeout(store::ACQUIRE_TIMEOUT)
            .connect_lazy_with(pool.connect_options().as_ref().clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let ingest = Ingest {
            tx,
            room: Arc::new(Semaphore::new(config.queue.max(1))),
            capacity: config.queue.max(1),
            counters: Arc::default(),
            precedence: Arc::default(),
        };
        tokio::spawn(run(
            pool,
            rx,
            config,
            ingest.counters.clone(),
            ingest.precedence.clone(),
        ));
        ingest
    }

    /// What goes before storing results: while any counts in it, the batcher stores one small batch at a time.
    pub fn precedence(&self) -> Arc<Precedence> {
        self.precedence.clone()
    }

    /// Stores `item` in the next batch and returns its outcome once the batch
    /// committed. Waits for room in the queue first.
    pub async fn record(&self, item: NewResult) -> Reply {
        let room = self.room().await?;
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Work::Result {
                item: Box::new(item),
                reply,
                _room: room,
            })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Notes in a batch that the agent began attempt `attempt_id` of
    /// `job_id` now (the time stored, however long the start waits in the
    /// queue); waits only for room in the queue. It is stored with the job's
    /// result when that comes in the same or the next batch, else on its own
    /// just before that next batch's transaction.
    pub async fn started(&self, job_id: Uuid, host_id: i64, attempt_id: Uuid) -> Result<(), Error> {
        let start = Start {
            job_id,
            host_id,
            attempt_id,
            at: Utc::now(),
        };
        let room = self.room().await?;
        self.tx
            .send(Work::Started {
                start,
                held: false,
                _room: room,
            })
            .map_err(|_| stopped())
    }

    async fn room(&self) -> Result<OwnedSemaphorePermit, Error> {
        let permit = self.room.clone().acquire_owned().await.map_err(|_| stopped())?;
        let queued = self.capacity - self.room.available_permits();
        self.counters.high_water.fetch_max(queued, Ordering::Relaxed);
        Ok(permit)
    }

    pub fn stats(&self) -> QueueStats {
        QueueStats {
            queued: self.capacity - self.room.available_permits(),
            high_water: self.counters.high_water.load(Ordering::Relaxed),
            capacity: self.capacity,
            batches: self.counters.batches.load(Ordering::Relaxed),
            results: self.counters.results.load(Ordering::Relaxed),
            most_storing: self.counters.most_storing.load(Ordering::Relaxed),
        }
    }
}

/// The batcher: takes batches off the queue and stores up to
/// `config.parallel` of them at once (one small one at a time while
/// `precedence` has any waiting), until every handle is gone.
async fn run(
    pool: PgPool,
    mut rx: mpsc::UnboundedReceiver<Work>,
    config: Config,
    counters: Arc<Counters>,
    precedence: Arc<Precedence>,
) {
    let slots = Arc::new(Semaphore::new(config.parallel.max(1)));
    let mut storing = JoinSet::new();
    // Job starts held back from the batch before (see `hold_back`).
    let mut held: Vec<Work> = Vec::new();
    loop {
        // A slot first: while every one is busy, arrivals wait in the queue
        // and make the next batch larger.
        let slot = slots.clone().acquire_owned().await.expect("never closed");
        while storing.try_join_next().is_some() {}
        // Handshakes waiting go first: meanwhile one small batch at a time,
        // each a pause after the one before.
        let yielding = precedence.waiting();
        if yielding {
            while storing.join_next().await.is_some() {}
            tokio::time::sleep(YIELD_PAUSE).await;
        }
        let most = if yielding {
            YIELD_BATCH.min(config.batch)
        } else {
            config.batch
        }
        .max(1);
        // Starts held back wait one window at most for company.
        let (first, closed) = if held.is_empty() {
            let first = rx.recv().await;
            let closed = first.is_none();
            (first, closed)
        } else {
            match tokio::time::timeout(config.window, rx.recv()).await {
                Ok(first) => {
                    let closed = first.is_none();
                    (first, closed)
                }
                Err(_) => (None, false),
            }
        };
        let mut batch = std::mem::take(&mut held);
        batch.extend(first);
        let until = tokio::time::Instant::now() + config.window;
        while !closed && batch.len() < most {
            match rx.try_recv() {
                Ok(work) => batch.push(work),
                Err(_) => match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(work)) => batch.push(work),
                    Ok(None) | Err(_) => break,
                },
            }
        }
        if !closed {
            held = hold_back(&mut batch);
        }
        if !batch.is_empty() {
            let (pool, counters) = (pool.clone(), counters.clone());
            storing.spawn(async move {
                let now = counters.storing.fetch_add(1, Ordering::Relaxed) + 1;
                counters.most_storing.fetch_max(now, Ordering::Relaxed);
                store(&pool, batch, &counters).await;
                counters.storing.fetch_sub(1, Ordering::Relaxed);
                drop(slot);
            });
        }
        if closed {
            break;
        }
    }
    while storing.join_next().await.is_some() {}
}

/// Takes out of `batch` the job starts that came without their job's result
/// and were not held back before, to store them with the next batch: an agent
/// that finishes at once sends its result right behind its start, and stored
/// with its result, the start costs no update (and no commit) of its own
/// ([`store::results::record_and_claim`]); a start stored without its result is
/// committed before its batch's transaction, which does not hold its job's row.
fn hold_back(batch: &mut Vec<Work>) -> Vec<Work> {
    let with_results: HashSet<Uuid> = batch
        .iter()
        .filter_map(|w| match w {
            Work::Result { item, .. } => Some(item.job_id),
            Work::Started { .. } => None,
        })
        .collect();
    let (held, kept): (Vec<Work>, Vec<Work>) = std::mem::take(batch).into_iter().partition(|w| match w {
        Work::Started { start, held, .. } => !*held && !with_results.contains(&start.job_id),
        Work::Result { .. } => false,
    });
    *batch = kept;
    held.into_iter()
        .map(|w| match w {
            Work::Started { start, _room, .. } => Work::Started {
                start,
                held: true,
                _room,
            },
            result => result,
        })
        .collect()
}

/// [`store::results::record_and_claim`], tried again while the database is away
/// (for up to [`RETRY_FOR`]). A transaction whose commit was cut off may have
/// committed: the retry then finds its results stored (duplicates, acknowledged
/// as such) and its hosts' next jobs claimed, which the sweep hands out again
/// at their deadline, as after any lost session.
async fn record_while_away(
    pool: &PgPool,
    started: &[Start],
    items: &[NewResult],
) -> Result<store::results::Stored, store::Error> {
    let since = tokio::time::Instant::now();
    let mut wait = RETRY_FIRST_WAIT;
    loop {
        match store::results::record_and_claim(pool, started, items).await {
            Err(e) if e.is_database_away() && since.elapsed() < RETRY_FOR => {
                if wait == RETRY_FIRST_WAIT {
                    tracing::warn!(error = %e, results = items.len(), "the database is away: the batch waits for it");
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX_WAIT);
            }
            Ok(stored) => {
                if wait != RETRY_FIRST_WAIT {
                    tracing::info!(results = items.len(), waited = ?since.elapsed(), "the database is back: batch stored");
                }
                return Ok(stored);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Stores one batch: its job starts and results, and the next job of every
/// host that sent a result (one statement for the batch, instead of a claim
/// per result), in one transaction; answers every result's session.
async fn store(pool: &PgPool, batch: Vec<Work>, counters: &Counters) {
    let mut started = Vec::new();
    let mut items = Vec::new();
    let mut replies = Vec::new();
    // Held until the batch is answered: the queue's bound counts it.
    let mut rooms = Vec::with_capacity(batch.len());
    for work in batch {
        match work {
            Work::Started { start, _room, .. } => {
                started.push(start);
                rooms.push(_room);
            }
            Work::Result { item, reply, _room } => {
                items.push(*item);
                replies.push(reply);
                rooms.push(_room);
            }
        }
    }
    if items.is_empty() {
        if let Err(e) = store::jobs::mark_started_many(pool, &started).await {
            // Only `started_at` is lost (the report's timing of the job); the result still counts.
            tracing::warn!(error = %e, jobs = started.len(), "noting started jobs");
        }
        return;
    }
    counters.batches.fetch_add(1, Ordering::Relaxed);
    counters.results.fetch_add(items.len() as u64, Ordering::Relaxed);
    let stored = match record_while_away(pool, &started, &items).await {
        Ok(stored) => stored,
        Err(e) => {
            let e = Error::Store(Arc::new(e));
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
            return;
        }
    };
    let outcomes = stored.outcomes;
    let mut claimed = stored
        .claimed
        .map(|jobs| jobs.into_iter().map(|j| (j.host_id, j)).collect::<HashMap<_, _>>());
    // A host with two results in the batch gets its job with the last one.
    let mut last_of_host = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        last_of_host.insert(item.host_id, i);
    }
    for (i, (reply, outcome)) in replies.into_iter().zip(outcomes).enumerate() {
        let host = items[i].host_id;
        let next = match claimed.as_mut() {
            None => Next::Unknown,
            Some(_) if last_of_host[&host] != i => Next::Idle,
            Some(jobs) => jobs.remove(&host).map_or(Next::Idle, |j| Next::Job(Box::new(j))),
        };
        // A session that went away meanwhile: its agent resends, and gets a
        // duplicate's ack. The job claimed for it reached no agent: back to
        // the queue, no attempt counted.
        if let Err(Ok(Recorded {
            next: Next::Job(job), ..
        })) = reply.send(Ok(Recorded { outcome, next }))
            && let Err(e) = store::jobs::unclaim(pool, &job).await
        {
            tracing::warn!(job = %job.id, error = %e, "giving back a job claimed for a session that ended");
        }
    }
    drop(rooms);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room() -> OwnedSemaphorePermit {
        Arc::new(Semaphore::new(1)).try_acquire_owned().expect("a permit")
    }

    fn start(job: Uuid) -> Work {
        Work::Started {
            start: Start {
                job_id: job,
                host_id: 1,
                attempt_id: Uuid::new_v4(),
                at: Utc::now(),
            },
            held: false,
            _room: room(),
        }
    }

    fn result(job: Uuid) -> Work {
        let item = NewResult {
            job_id: job,
            host_id: 1,
            attempt: None,
            measurement: Err("not needed here".into()),
        };
        Work::Result {
            item: Box::new(item),
            reply: oneshot::channel().0,
            _room: room(),
        }
    }

    /// (job, is a start) of each item, in order.
    fn jobs(batch: &[Work]) -> Vec<(Uuid, bool)> {
        batch
            .iter()
            .map(|w| match w {
                Work::Started { start, .. } => (start.job_id, true),
                Work::Result { item, .. } => (item.job_id, false),
            })
            .collect()
    }

    #[test]
    fn a_start_without_its_result_waits_for_the_next_batch_once() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        // `a` started and finished; `b` only started, its result still to come.
        let mut batch = vec![start(a), result(a), start(b)];
        let held = hold_back(&mut batch);
        assert_eq!(jobs(&batch), [(a, true), (a, false)]);
        assert_eq!(jobs(&held), [(b, true)]);

        // Next batch: with its result, or without it again: stored now either way.
        let mut with = held;
        with.push(result(b));
        assert!(hold_back(&mut with).is_empty());
        assert_eq!(jobs(&with), [(b, true), (b, false)]);
        let mut alone = hold_back(&mut vec![start(b)]);
        assert!(hold_back(&mut alone).is_empty(), "held once only");
        assert_eq!(jobs(&alone), [(b, true)]);
    }
}
