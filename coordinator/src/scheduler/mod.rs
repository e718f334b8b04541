//! Who is connected, and handing them work.
//!
//! The queue lives in PostgreSQL (`store::jobs`); this module keeps the live
//! half: one outbound channel per host connected to this coordinator, and at
//! most one session per host in the whole cluster. Within this process a
//! second session is refused while the first lives ([`Scheduler::reserve`]);
//! across coordinators the host's lease decides ([`Scheduler::start_session`],
//! `store::leases`): whoever holds it live serves the host, renewing it every
//! heartbeat ([`Scheduler::renew_leases`]), so two agents claiming one host
//! cannot take turns replacing each other. Work is dispatched when a
//! host connects, when it finishes a job, when a campaign is created, and when
//! any coordinator queues jobs ([`crate::cluster`]); a sweeper re-queues jobs
//! that overran their time limit. One job at a time
//! per host is enforced by `claim_next_for_hosts` in the database, so two
//! coordinator tasks racing cannot double-book a host. Claims are batched:
//! the ingest batch claims the next job of every host in it, and a dispatch
//! to many hosts claims [`CLAIM_CHUNK`] at a time.
//!
//! Nothing here waits on an agent: every message goes out with
//! [`Outbound::try_send`], and an agent whose queue is full has its session
//! ended instead (see [`crate::scheduler::outbound`]).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cipherfleet_core::spec::JobSpec;
use cipherfleet_proto::v1::{self, coordinator_message::Body};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tonic::Status;
use uuid::Uuid;

pub mod outbound;

use crate::store;
use crate::store::leases::Holder;
use outbound::{NotSent, Outbound};

struct Connected {
    generation: u64,
    tx: Outbound,
    /// Set once the session's hello is stored: only then is it dispatched to.
    ready: bool,
    /// Cancelled to end the session from outside ([`Scheduler::end_session`]).
    ended: CancellationToken,
    /// Its lease is taken ([`Scheduler::start_session`]): renewed from then on.
    leased: bool,
}

/// [`Scheduler::reserve`] found the host's earlier session still alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("another session of this host is alive")]
pub struct AlreadyConnected;

/// A session's place in the scheduler, from [`Scheduler::reserve`].
#[derive(Debug, Clone)]
pub struct Reservation {
    /// Pass to [`Scheduler::activate`] and [`Scheduler::disconnect`].
    pub generation: u64,
    /// Cancelled when an operator ends the session (credential reset, retirement).
    pub ended: CancellationToken,
}

/// Connected hosts and dispatch.
pub struct Scheduler {
    pool: PgPool,
    connected: Mutex<HashMap<i64, Connected>>,
    generation: AtomicU64,
    /// This coordinator, as its leases name it.
    holder: Holder,
    /// How long a lease lives unrenewed.
    lease_ttl: Duration,
}

impl Scheduler {
    /// A scheduler on `pool` for the coordinator `holder` (its leases name
    /// it), with leases of [`DEFAULT_LEASE_TTL`].
    pub fn new(pool: PgPool, holder: Holder) -> Self {
        Scheduler {
            pool,
            connected: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(1),
            holder,
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }

    /// Leases that live `ttl` unrenewed: how soon a dead coordinator's hosts are free.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// This coordinator, as its leases name it.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// Takes the host's one session slot for a session whose hello is being
    /// stored; nothing is dispatched to it before [`Scheduler::activate`].
    /// Refused while another session of the host is registered: the first one
    /// keeps the host until it ends.
    pub fn reserve(&self, host_id: i64, tx: Outbound) -> Result<Reservation, AlreadyConnected> {
        let mut map = self.lock();
        if map.contains_key(&host_id) {
            return Err(AlreadyConnected);
        }
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let ended = CancellationToken::new();
        map.insert(
            host_id,
            Connected {
                generation,
                tx,
                ready: false,
                ended: ended.clone(),
                leased: false,
            },
        );
        Ok(Reservation { generation, ended })
    }

    /// Starts the reserved session `generation` in the cluster
    /// ([`store::sessions::start`]): the host's lease, its session row, and its
    /// jobs adopted or re-queued as the agent's hello says. `None` while
    /// another coordinator holds the host's lease live: the session must be
    /// refused as [`AlreadyConnected`] (and [`Scheduler::disconnect`]ed).
    pub async fn start_session(
        &self,
        host_id: i64,
        generation: u64,
        opening: store::sessions::Opening<'_>,
    ) -> Result<Option<store::sessions::Started>, store::Error> {
        let lease = store::sessions::LeaseOf {
            holder: &self.holder,
            generation,
            ttl: self.lease_ttl,
        };
        let Some(started) = store::sessions::start(&self.pool, host_id, lease, opening).await? else {
            return Ok(None);
        };
        if let Some(c) = self.lock().get_mut(&host_id).filter(|c| c.generation == generation) {
            c.leased = true;
        }
        Ok(Some(started))
    }

    /// [`Scheduler::disconnect`], and gives back the session's lease (if it
    /// still has it) so the host may connect anywhere at once.
    pub async fn leave(&self, host_id: i64, generation: u64) -> bool {
        let current = self.disconnect(host_id, generation);
        self.release_lease(host_id, generation).await;
        current
    }

    /// Gives back session `generation`'s lease of the host, if it still has it.
    pub async fn release_lease(&self, host_id: i64, generation: u64) {
        if let Err(e) = store::leases::release(&self.pool, host_id, &self.holder, generation).await {
            // It expires by itself within a few heartbeats.
            tracing::debug!(host = host_id, error = %e, "releasing a session's lease");
        }
    }

    /// Extends the leases of this coordinator's sessions, in one statement,
    /// and ends the sessions whose lease was lost (taken over after this
    /// coordinator failed to renew in time) or revoked by an operator's
    /// command on another coordinator. Returns how many were renewed.
    pub async fn renew_leases(&self) -> Result<usize, store::Error> {
        let sessions: Vec<(i64, u64)> = self
            .lock()
            .iter()
            .filter(|(_, c)| c.leased)
            .map(|(h, c)| (*h, c.generation))
            .collect();
        let held = store::leases::renew(&self.pool, &self.holder, &sessions, self.lease_ttl).await?;
        let generation_of: HashMap<i64, u64> = sessions.iter().copied().collect();
        let mut kept: HashSet<i64> = HashSet::with_capacity(held.len());
        for h in held {
            match h.revoked {
                None => {
                    kept.insert(h.host_id);
                }
                Some(reason) => {
                    tracing::info!(
                        host = h.host_id,
                        "session ended by an operator's command on another coordinator"
                    );
                    self.end_generation(
                        h.host_id,
                        generation_of.get(&h.host_id).copied(),
                        Status::aborted(reason),
                    );
                }
            }
        }
        for (host_id, generation) in &sessions {
            if !kept.contains(host_id) {
                tracing::warn!(
                    host = host_id,
                    "the host's lease was lost (renewed too late, and taken over): ending its session here"
                );
                self.end_generation(
                    *host_id,
                    Some(*generation),
                    Status::unavailable("this coordinator lost the host's lease; reconnect"),
                );
            }
        }
        Ok(kept.len())
    }

    /// Gives back every lease of this coordinator (at shutdown).
    pub async fn release_leases(&self) -> Result<u64, store::Error> {
        store::leases::release_all(&self.pool, &self.holder).await
    }

    /// [`Scheduler::activate`], and the host counts as online in the whole
    /// cluster ([`Scheduler::online_in_cluster`]).
    pub async fn welcome(&self, host_id: i64, generation: u64) -> Result<(), store::Error> {
        self.activate(host_id, generation);
        store::leases::welcome(&self.pool, host_id, &self.holder, generation).await?;
        Ok(())
    }

    /// The reserved session is welcomed: it is online and gets work.
    pub fn activate(&self, host_id: i64, generation: u64) {
        if let Some(c) = self.lock().get_mut(&host_id).filter(|c| c.generation == generation) {
            c.ready = true;
        }
    }

    /// Registers and activates a session at once (tests); see [`Scheduler::reserve`].
    pub fn connect(&self, host_id: i64, tx: Outbound) -> Result<Reservation, AlreadyConnected> {
        let reservation = self.reserve(host_id, tx)?;
        self.activate(host_id, reservation.generation);
        Ok(reservation)
    }

    /// Ends the host's session, wherever in the cluster it is, telling its
    /// agent `why`; the session task then winds down as for a lost agent.
    /// A session on another coordinator ends at that one's next lease renewal
    /// (a heartbeat interval). Returns whether there was one.
    pub async fn end_session(&self, host_id: i64, why: Status) -> Result<bool, store::Error> {
        if self.end_generation(host_id, None, why.clone()) {
            return Ok(true);
        }
        store::leases::revoke(&self.pool, host_id, why.message()).await
    }

    /// Ends the host's session on this coordinator if it is `generation`
    /// (`None`: whichever it is). Returns whether there was one.
    fn end_generation(&self, host_id: i64, generation: Option<u64>, why: Status) -> bool {
        let c = {
            let mut map = self.lock();
            let this_one = |c: &Connected| generation.is_none_or(|g| g == c.generation);
            match map.get(&host_id) {
                Some(c) if this_one(c) => map.remove(&host_id).expect("just seen"),
                _ => return false,
            }
        };
        // Best effort: a full queue means the agent is not reading anyway.
        c.tx.try_close_with(why);
        c.ended.cancel();
        true
    }

    /// Forgets the session if it is still the current one for the host.
    /// Returns whether it was (only then are its jobs the session's to give back).
    pub fn disconnect(&self, host_id: i64, generation: u64) -> bool {
        let mut map = self.lock();
        if map.get(&host_id).is_some_and(|c| c.generation == generation) {
            map.remove(&host_id);
            true
        } else {
            false
        }
    }

    /// Sessions on this coordinator, those not yet welcomed included.
    pub fn sessions(&self) -> usize {
        self.lock().len()
    }

    /// Whether the host has a welcomed session on this coordinator.
    pub fn is_online(&self, host_id: i64) -> bool {
        self.lock().get(&host_id).is_some_and(|c| c.ready)
    }

    /// Hosts with a welcomed session on this coordinator (the ones it dispatches to).
    pub fn online_hosts(&self) -> Vec<i64> {
        self.lock().iter().filter(|(_, c)| c.ready).map(|(h, _)| *h).collect()
    }

    /// Hosts online anywhere in the cluster (a live lease): what the report,
    /// `/metrics` and online-only campaigns mean by online.
    pub async fn online_in_cluster(&self) -> Result<HashSet<i64>, store::Error> {
        Ok(store::leases::live_hosts(&self.pool).await?.into_iter().collect())
    }

    /// Whether `host_id` is online anywhere in the cluster.
    pub async fn is_online_in_cluster(&self, host_id: i64) -> Result<bool, store::Error> {
        if self.is_online(host_id) {
            return Ok(true);
        }
        store::leases::is_live(&self.pool, host_id).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Connected>> {
        self.connected.lock().expect("scheduler lock")
    }

    /// The host's current session: its generation and channel.
    fn sender(&self, host_id: i64) -> Option<(u64, Outbound)> {
        self.lock()
            .get(&host_id)
            .filter(|c| c.ready)
            .map(|c| (c.generation, c.tx.clone()))
    }

    /// Queues a message for a connected host without waiting; false if it is
    /// not connected or its queue is full (which ends its session).
    pub fn send(&self, host_id: i64, body: Body) -> bool {
        self.send_to_current(host_id, body).is_ok()
    }

    /// Queues for the host's current session; on failure says which session was
    /// tried (`None`: the host was not connected).
    fn send_to_current(&self, host_id: i64, body: Body) -> Result<(), Option<u64>> {
        let Some((generation, tx)) = self.sender(host_id) else {
            return Err(None);
        };
        tx.try_send(body).map_err(|e| {
            if e == NotSent::Full {
                tracing::warn!(host = host_id, "{e}: ending its session");
            }
            Some(generation)
        })
    }

    /// Gives `host_id` its next job if it is connected and idle.
    pub async fn dispatch(&self, host_id: i64) -> Result<(), store::Error> {
        if self.sender(host_id).is_none() {
            return Ok(());
        }
        match store::jobs::claim_next_for_host(&self.pool, host_id).await? {
            Some(job) => self.hand_over(job).await,
            None => Ok(()),
        }
    }

    /// Sends `job`, just claimed for its host, to the host's current session.
    /// A job that reached no agent goes back to the queue.
    pub async fn hand_over(&self, job: store::jobs::Job) -> Result<(), store::Error> {
        let host_id = job.host_id;
        let spec: JobSpec = match serde_json::from_value(job.spec.clone()) {
            Ok(spec) => spec,
            Err(e) => {
                // Specs are validated before they are stored; this is a bug, not the agent's fault.
                store::jobs::fail(&self.pool, job.id, host_id, &format!("stored job spec unreadable: {e}")).await?;
                return Box::pin(self.dispatch(host_id)).await;
            }
        };
        let run = v1::RunJob {
            job_id: job.id.to_string(),
            spec: Some(v1::JobSpec::from(&spec)),
            time_limit_ms: (job.time_limit_seconds * 1000.0).min(f64::from(u32::MAX)) as u32,
            attempt_id: job.attempt_id.map(|a| a.to_string()).unwrap_or_default(),
        };
        if let Err(tried) = self.send_to_current(host_id, Body::RunJob(run)) {
            // The session ended around the claim. Its teardown re-queues only
            // what was running when it ran, which may have been before this
            // claim: give the job back (no agent saw it, so no attempt counts).
            tracing::debug!(%host_id, job = %job.id, "host went away while a job was dispatched");
            store::jobs::unclaim(&self.pool, &job).await?;
            // A newer session of the host found it busy with this claim when it
            // connected, and waits for nothing: its turn now.
            let current = self.sender(host_id).map(|(generation, _)| generation);
            if current.is_some() && current != tried {
                return Box::pin(self.dispatch(host_id)).await;
            }
        }
        Ok(())
    }

    /// Gives back `job`, claimed for a session that ends before sending it:
    /// back to the queue, no attempt counted (else it would wait for its deadline).
    pub async fn hand_back(&self, job: &store::jobs::Job) {
        if let Err(e) = store::jobs::unclaim(&self.pool, job).await {
            tracing::warn!(job = %job.id, error = %e, "giving back a job claimed for a session that ended");
        }
    }

    /// Dispatches to every connected host (after a campaign is created, whose
    /// transaction made the planner's statistics of the queue true:
    /// [`store::campaigns::keep_queue_statistics`]). A host whose dispatch fails
    /// does not hold up the others; the first error is returned at the end.
    pub async fn dispatch_all(&self) -> Result<(), store::Error> {
        self.dispatch_each(self.online_hosts()).await
    }

    /// Dispatches to `hosts`, [`CLAIM_CHUNK`] of them claimed in one statement
    /// (see [`Scheduler::dispatch_all`]).
    async fn dispatch_each(&self, mut hosts: Vec<i64>) -> Result<(), store::Error> {
        hosts.sort_unstable();
        let mut first_error = None;
        for chunk in hosts.chunks(CLAIM_CHUNK) {
            let here: Vec<i64> = chunk.iter().copied().filter(|h| self.sender(*h).is_some()).collect();
            let claimed = match store::jobs::claim_next_for_hosts(&self.pool, &here).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::warn!(hosts = here.len(), error = %e, "dispatch failed");
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            for job in claimed {
                let host = job.host_id;
                if let Err(e) = self.hand_over(job).await {
                    tracing::warn!(host, error = %e, "dispatch failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Dispatches to this coordinator's idle hosts that have queued work (jobs
    /// were queued somewhere in the cluster, or the periodic safety net).
    /// Returns how many hosts were given a job.
    pub async fn dispatch_waiting(&self) -> Result<usize, store::Error> {
        let here = self.online_hosts();
        if here.is_empty() {
            return Ok(0);
        }
        let waiting = store::jobs::idle_with_work(&self.pool, &here).await?;
        let given = waiting.len();
        self.dispatch_each(waiting).await?;
        Ok(given)
    }

    /// Re-queues (or fails) jobs past their deadline and tells their agents to
    /// stop: the jobs of this coordinator's hosts and of hosts nobody holds
    /// (each overdue job is handled by its host's lease holder, who can tell
    /// the agent; row locks keep two sweeps from handling one twice).
    pub async fn expire_overdue(&self) -> Result<(), store::Error> {
        for expired in store::jobs::expire_overdue(&self.pool, self.holder.id).await? {
            let cancel = v1::CancelJob {
                job_id: expired.job_id.to_string(),
                reason: "the job exceeded its time limit".into(),
                attempt_id: expired.attempt_id.map(|a| a.to_string()).unwrap_or_default(),
            };
            self.send(expired.host_id, Body::CancelJob(cancel));
            self.dispatch(expired.host_id).await?;
        }
        Ok(())
    }

    /// Tells agents to abort the given running jobs (campaign cancelled).
    pub fn cancel_running(&self, running: &[(Uuid, i64)], reason: &str) {
        for (job_id, host_id) in running {
            let cancel = v1::CancelJob {
                job_id: job_id.to_string(),
                reason: reason.to_string(),
                attempt_id: String::new(),
            };
            self.send(*host_id, Body::CancelJob(cancel));
        }
    }
}

/// Hosts whose next jobs one statement claims when many are dispatched to at
/// once (a campaign's start): each holds a claim lock until it commits.
pub const CLAIM_CHUNK: usize = 256;

/// How often overdue jobs are looked for.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

/// A lease's life unrenewed when [`Scheduler::with_lease_ttl`] is not given:
/// three of the default 5 s heartbeats.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);
