//! One simulated host: a task (no thread) with its own gRPC connection and
//! stream, name and host credential, speaking the agent protocol as `run`
//! does (see `daemon/session.rs` for the rules it follows): `Hello` with its
//! credential, its running job and its unacknowledged outcomes; `Welcome`'s
//! credential kept; outcomes re-sent after every reconnect until
//! acknowledged; `RunJob` accepted when idle and refused as busy otherwise;
//! `CancelJob` and `Ping` answered; heartbeats with jitter. A job is a timer,
//! not a measurement; its result comes from [`super::figures`].
//!
//! Connecting, the reconnect backoff, the classification of a refusal and
//! the credential file are the daemon's own code.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::daemon::CoordinatorUrl;
use anyhow::Context as _;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::token::Secret;
use cipherfleet_core::wire;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::agent_service_client::AgentServiceClient;
use cipherfleet_proto::v1::{self, agent_message::Body, coordinator_message};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;

use super::figures;
use super::rng::Rng;
use super::stats::Stats;
use super::template::Profile;
use crate::daemon::backoff::Backoff;
use crate::daemon::credential::HostCredential;
use crate::daemon::session::{self, HANDSHAKE_TIMEOUT, SessionEnd, lost};

/// Messages queued for the coordinator before sending waits.
const OUTBOUND_QUEUE: usize = 16;
/// A slow job (`--slow-prob`) takes this many times its delay.
pub const SLOW_FACTOR: f64 = 10.0;

/// What every simulated host shares.
pub struct Fleet {
    /// Host `index` starts with coordinator `index % len` and moves to the
    /// next after a lost session, as `run` does with its list.
    pub coordinators: Vec<CoordinatorUrl>,
    /// `--local-address`: host `index` dials from `index % len` (empty: the kernel's choice).
    pub local_addresses: Vec<IpAddr>,
    pub token: Secret,
    /// `--label`s plus `simulated=true`.
    pub labels: Vec<v1::Label>,
    pub behaviour: Behaviour,
    pub stats: Arc<Stats>,
    pub shutdown: CancellationToken,
}

/// How simulated hosts answer jobs.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// From `RunJob` to its outcome: each job takes 0.5 to 1.5 times this.
    pub job_delay: Duration,
    /// A job fails (`JobFailed`) instead of measuring.
    pub fail_prob: f64,
    /// The session drops while a job runs; the host reconnects and reports it.
    pub disconnect_prob: f64,
    /// A job takes [`SLOW_FACTOR`] times as long.
    pub slow_prob: f64,
}

/// One simulated host's state, kept across its sessions.
pub struct Host {
    pub name: String,
    index: u64,
    profile: Profile,
    labels: Vec<v1::Label>,
    /// Built once: the facts never change.
    facts: v1::HostFacts,
    /// Its credential and proposal: in `--state-dir`, or in memory.
    credential: HostCredential,
    job: Option<Running>,
    /// Which of [`Fleet::coordinators`] the next session dials.
    coordinator: usize,
    /// Outcomes sent or to send, until acknowledged (the daemon's spool, in memory).
    outbox: Vec<Pending>,
    rng: Rng,
}

/// The job "running" on the host: it ends at `done_at`.
struct Running {
    job_id: String,
    attempt_id: String,
    spec: JobSpec,
    done_at: Instant,
    fails: bool,
}

struct Pending {
    job_id: String,
    attempt_id: String,
    body: Body,
    /// When it was last sent in the current session.
    sent_at: Option<Instant>,
}

impl Fleet {
    /// The source address host `index` dials from.
    fn local_address(&self, index: u64) -> Option<IpAddr> {
        let n = self.local_addresses.len() as u64;
        (n > 0).then(|| self.local_addresses[(index % n) as usize])
    }
}

impl Host {
    /// Host `index` named `name`; its credential in `state_dir/<name>/credential` when given.
    /// Blocking: the proposal for its credential is stored before its first `Hello`.
    pub fn new(
        index: u64,
        name: String,
        state_dir: Option<&std::path::Path>,
        labels: &[v1::Label],
    ) -> anyhow::Result<Host> {
        let profile = Profile::of(index, &name);
        let mut credential = match state_dir {
            Some(dir) => HostCredential::open(&dir.join(&name), &name)?,
            None => HostCredential::in_memory(),
        };
        credential
            .prepare()
            .with_context(|| format!("storing the credential proposal of simulated host {name}"))?;
        let mut labels = labels.to_vec();
        labels.push(v1::Label {
            key: "sim-template".into(),
            value: profile.template.key.into(),
        });
        Ok(Host {
            facts: v1::HostFacts::from(&profile.facts),
            name,
            index,
            profile,
            labels,
            credential,
            job: None,
            coordinator: index as usize,
            outbox: Vec::new(),
            rng: Rng::from_os(),
        })
    }

    /// Runs sessions until shutdown or a refusal.
    pub async fn run(mut self, fleet: Arc<Fleet>) {
        let mut backoff = Backoff::default();
        while !fleet.shutdown.is_cancelled() {
            match self.session(&fleet).await {
                SessionEnd::Shutdown => return,
                SessionEnd::Rejected(reason) => {
                    fleet.stats.bump(|s| &s.refused);
                    tracing::warn!("simulated host {}: {reason}; it stops", self.name);
                    return;
                }
                SessionEnd::Lost {
                    reason,
                    welcomed,
                    held_elsewhere,
                    pushback,
                } => {
                    tracing::debug!("simulated host {}: {reason}", self.name);
                    if !held_elsewhere {
                        self.coordinator = self.coordinator.wrapping_add(1);
                    }
                    if welcomed {
                        backoff.reset();
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.after(held_elsewhere, pushback)) => {}
                        _ = fleet.shutdown.cancelled() => return,
                    }
                }
            }
        }
    }

    fn hello(&self, fleet: &Fleet) -> v1::Hello {
        let (running_job_id, running_attempt_id) = self
            .job
            .as_ref()
            .map(|j| (j.job_id.clone(), j.attempt_id.clone()))
            .unwrap_or_default();
        v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            enrollment_token: fleet.token.expose().to_string(),
            credential: session::exposed(self.credential.current()),
            proposed_credential: session::exposed(self.credential.proposed()),
            facts: Some(self.facts.clone()),
            capabilities: Some(v1::Capabilities {
                paths: vec!["accelerated".into(), "software".into()],
                max_threads: self.profile.template.cores,
                agent_version: env!("CARGO_PKG_VERSION").to_string(),
            }),
            labels: self.labels.clone(),
            name: self.name.clone(),
            running_job_id,
            running_attempt_id,
            spooled_job_ids: self
                .outbox
                .iter()
                .take(wire::MAX_SPOOLED_JOB_IDS)
                .map(|p| p.job_id.clone())
                .collect(),
        }
    }

    /// One session, from dialling to its end.
    async fn session(&mut self, fleet: &Fleet) -> SessionEnd {
        let stats = &fleet.stats;
        let opened = tokio::select! {
            // Boxed: dialling is the largest step, and the host's task would keep its size for the whole session.
            opened = Box::pin(self.handshake(fleet)) => opened,
            _ = fleet.shutdown.cancelled() => return SessionEnd::Shutdown,
        };
        let (tx, mut inbound, mut heartbeat) = match opened {
            Ok(parts) => parts,
            Err(end) => {
                if let SessionEnd::Lost { reason, .. } = &end {
                    stats.error(reason);
                }
                return end;
            }
        };
        stats.connected();
        let _connected = Connected(stats);
        let closed = || lost("the stream to the coordinator closed", true);
        let now = Instant::now();
        for pending in &mut self.outbox {
            if tx.send(session::message(pending.body.clone())).await.is_err() {
                return closed();
            }
            pending.sent_at = Some(now);
        }
        // The first heartbeat anywhere in the first interval, so a fleet that connected at once spreads out.
        let mut next_heartbeat = now + heartbeat.mul_f64(self.rng.unit());
        let mut seq = 0u64;
        let mut drop_at: Option<Instant> = None;
        loop {
            let job_done = self.job.as_ref().map(|j| j.done_at);
            let sent = tokio::select! {
                _ = fleet.shutdown.cancelled() => return SessionEnd::Shutdown,
                received = inbound.message() => match received {
                    Ok(Some(v1::CoordinatorMessage { body: Some(coordinator_message::Body::Welcome(w)) })) => {
                        // Re-paced: only the heartbeat interval changes.
                        if w.heartbeat_interval_ms != 0 {
                            let every = session::heartbeat_interval(w.heartbeat_interval_ms);
                            next_heartbeat = session::repaced(Instant::now(), next_heartbeat, heartbeat, every);
                            heartbeat = every;
                            stats.bump(|s| &s.repaced);
                        }
                        Ok(())
                    }
                    Ok(Some(m)) => match self.handle(fleet, m, &mut drop_at) {
                        Some(body) => tx.send(session::message(body)).await,
                        None => Ok(()),
                    },
                    Ok(None) => return lost("the coordinator ended the session", true),
                    Err(status) => {
                        let end = session::classify(&status, true);
                        if let SessionEnd::Lost { reason, .. } = &end {
                            stats.error(reason);
                        }
                        return end;
                    }
                },
                _ = sleep_until(job_done) => {
                    self.finish_job(fleet);
                    let last = self.outbox.last_mut().expect("just added");
                    last.sent_at = Some(Instant::now());
                    tx.send(session::message(last.body.clone())).await
                }
                _ = sleep_until(drop_at) => {
                    stats.bump(|s| &s.disconnects);
                    return lost("simulated disconnect (--disconnect-prob)", true);
                }
                _ = tokio::time::sleep_until(next_heartbeat) => {
                    stats.heartbeat_sent(next_heartbeat.elapsed());
                    seq += 1;
                    // From now, not from the last deadline: a host held up sends one, not a burst.
                    next_heartbeat = Instant::now() + heartbeat.mul_f64(self.rng.range(0.8, 1.0));
                    tx.send(session::message(Body::Heartbeat(v1::Heartbeat { seq }))).await
                }
            };
            if sent.is_err() {
                stats.error("the stream to the coordinator closed");
                return closed();
            }
        }
    }

    /// Dial, `Hello`, `Welcome` (its credential kept): the sender, the inbound stream and the heartbeat interval.
    async fn handshake(
        &mut self,
        fleet: &Fleet,
    ) -> Result<(session::Outgoing, Streaming<v1::CoordinatorMessage>, Duration), SessionEnd> {
        let coordinator = &fleet.coordinators[self.coordinator % fleet.coordinators.len()];
        let channel = session::open_channel(coordinator, fleet.local_address(self.index)).await?;
        let mut client = AgentServiceClient::new(channel);
        // A job that ended while disconnected is an outcome to report, not a running job.
        if self.job.as_ref().is_some_and(|j| j.done_at <= Instant::now()) {
            self.finish_job(fleet);
        }
        let (tx, rx) = session::outgoing(OUTBOUND_QUEUE);
        tx.send(session::message(Body::Hello(self.hello(fleet))))
            .await
            .map_err(|_| lost("session closed before Hello", false))?;
        let opened = tokio::time::timeout(HANDSHAKE_TIMEOUT, client.session(rx))
            .await
            .map_err(|_| lost("no answer to the session request", false))?;
        let mut inbound = opened.map_err(|s| session::classify(&s, false))?.into_inner();
        let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, inbound.message())
            .await
            .map_err(|_| lost("no Welcome from the coordinator", false))?
            .map_err(|s| session::classify(&s, false))?;
        let welcome = match first.and_then(|m| m.body) {
            Some(coordinator_message::Body::Welcome(w)) => w,
            Some(_) => return Err(lost("expected Welcome", false)),
            None => return Err(lost("the coordinator closed the session before Welcome", false)),
        };
        if !welcome.credential.is_empty() {
            self.keep_credential(&welcome.credential).await?;
        }
        Ok((tx, inbound, session::heartbeat_interval(welcome.heartbeat_interval_ms)))
    }

    async fn keep_credential(&mut self, credential: &str) -> Result<(), SessionEnd> {
        if !session::well_formed_credential(credential) {
            return Err(lost("the coordinator sent a malformed host credential", false));
        }
        let (mut held, value) = (self.credential.clone(), credential.to_string());
        let stored = tokio::task::spawn_blocking(move || held.welcomed(&value).map(|()| held)).await;
        match stored.map_err(std::io::Error::other).and_then(|r| r) {
            Ok(held) => self.credential = held,
            Err(e) => return Err(SessionEnd::Rejected(format!("cannot store the host credential: {e}"))),
        }
        Ok(())
    }

    /// The answer to a coordinator message, if any.
    fn handle(&mut self, fleet: &Fleet, m: v1::CoordinatorMessage, drop_at: &mut Option<Instant>) -> Option<Body> {
        match m.body? {
            coordinator_message::Body::RunJob(run) => self.run_job(fleet, run, drop_at),
            coordinator_message::Body::CancelJob(cancel) => {
                let running = self.job.as_ref()?;
                let matches = running.job_id == cancel.job_id
                    && (cancel.attempt_id.is_empty() || running.attempt_id == cancel.attempt_id);
                if !matches {
                    return None;
                }
                let job = self.job.take()?;
                let reason = wire::truncate(cancel.reason, 1024);
                Some(self.spool(fleet, job.job_id, job.attempt_id, format!("cancelled: {reason}")))
            }
            coordinator_message::Body::Ping(ping) => Some(Body::Heartbeat(v1::Heartbeat { seq: ping.seq })),
            coordinator_message::Body::ResultAck(ack) => {
                let at = self.outbox.iter().position(|p| {
                    p.job_id == ack.job_id && (ack.attempt_id.is_empty() || p.attempt_id == ack.attempt_id)
                })?;
                let pending = self.outbox.remove(at);
                let sent = pending.sent_at.map(|t| t.elapsed()).unwrap_or_default();
                fleet.stats.acked(sent, !ack.rejected.is_empty());
                None
            }
            // Its heartbeat interval is taken in the session loop.
            coordinator_message::Body::Welcome(_) => None,
        }
    }

    fn run_job(&mut self, fleet: &Fleet, run: v1::RunJob, drop_at: &mut Option<Instant>) -> Option<Body> {
        let refuse = |error: String, busy: bool| {
            Body::JobFailed(v1::JobFailed {
                job_id: wire::truncate(run.job_id.clone(), wire::MAX_JOB_ID_LEN),
                error,
                busy,
                attempt_id: wire::truncate(run.attempt_id.clone(), wire::MAX_JOB_ID_LEN),
            })
        };
        if let Err(e) = wire::validate_job_id("run_job.job_id", &run.job_id) {
            return Some(refuse(e.to_string(), false));
        }
        if let Some(current) = &self.job {
            if current.job_id == run.job_id && current.attempt_id == run.attempt_id {
                return Some(Body::JobAccepted(v1::JobAccepted {
                    job_id: run.job_id,
                    attempt_id: run.attempt_id,
                }));
            }
            fleet.stats.bump(|s| &s.busy);
            return Some(refuse(format!("agent busy with job {}", current.job_id), true));
        }
        if let Some(done) = self
            .outbox
            .iter_mut()
            .find(|p| p.job_id == run.job_id && p.attempt_id == run.attempt_id)
        {
            done.sent_at = Some(Instant::now());
            return Some(done.body.clone());
        }
        let spec = run
            .spec
            .as_ref()
            .ok_or_else(|| "spec: missing".to_string())
            .and_then(|s| JobSpec::try_from(s).map_err(|e| e.to_string()));
        let spec = match spec {
            Ok(spec) => spec,
            Err(why) => {
                let (job_id, attempt_id) = (run.job_id.clone(), run.attempt_id.clone());
                return Some(self.spool(fleet, job_id, attempt_id, format!("invalid job: {why}")));
            }
        };
        let b = fleet.behaviour;
        let mut delay = b.job_delay.mul_f64(self.rng.range(0.5, 1.5));
        if self.rng.chance(b.slow_prob) {
            delay = delay.mul_f64(SLOW_FACTOR);
        }
        let now = Instant::now();
        if self.rng.chance(b.disconnect_prob) {
            *drop_at = Some(now + delay.mul_f64(self.rng.range(0.2, 0.8)));
        }
        fleet.stats.bump(|s| &s.jobs);
        self.job = Some(Running {
            job_id: run.job_id.clone(),
            attempt_id: run.attempt_id.clone(),
            spec,
            done_at: now + delay,
            fails: self.rng.chance(b.fail_prob),
        });
        Some(Body::JobAccepted(v1::JobAccepted {
            job_id: run.job_id,
            attempt_id: run.attempt_id,
        }))
    }

    /// The running job is over: its outcome joins the outbox.
    fn finish_job(&mut self, fleet: &Fleet) {
        let Some(job) = self.job.take() else { return };
        if job.fails {
            self.spool(
                fleet,
                job.job_id,
                job.attempt_id,
                "simulated failure (--fail-prob)".into(),
            );
            return;
        }
        let measurement = figures::measure(&self.profile, &job.spec, &mut self.rng);
        let body = match v1::Measurement::try_from(&measurement) {
            Ok(m) => {
                fleet.stats.bump(|s| &s.results);
                Body::JobResult(v1::JobResult {
                    job_id: job.job_id.clone(),
                    measurement: Some(m),
                    attempt_id: job.attempt_id.clone(),
                })
            }
            Err(e) => {
                fleet.stats.bump(|s| &s.failures);
                Body::JobFailed(v1::JobFailed {
                    job_id: job.job_id.clone(),
                    error: format!("the measurement cannot be sent: {e}"),
                    busy: false,
                    attempt_id: job.attempt_id.clone(),
                })
            }
        };
        self.outbox.push(Pending {
            job_id: job.job_id,
            attempt_id: job.attempt_id,
            body,
            sent_at: None,
        });
    }

    /// A failure outcome: spooled, counted, and the message to send.
    fn spool(&mut self, fleet: &Fleet, job_id: String, attempt_id: String, error: String) -> Body {
        fleet.stats.bump(|s| &s.failures);
        let body = Body::JobFailed(v1::JobFailed {
            job_id: job_id.clone(),
            error: wire::truncate(error, wire::MAX_ERROR_LEN),
            busy: false,
            attempt_id: attempt_id.clone(),
        });
        self.outbox.push(Pending {
            job_id,
            attempt_id,
            body: body.clone(),
            sent_at: Some(Instant::now()),
        });
        body
    }
}

/// Counts a welcomed session out when it ends, however it ends.
struct Connected<'a>(&'a Stats);

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0.disconnected();
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
