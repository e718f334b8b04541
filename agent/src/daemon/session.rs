//! One connected session: dial, `Hello` → `Welcome`, re-send the spool, then
//! serve the coordinator's messages until the stream ends or shutdown is done.
//!
//! Protocol, agent side:
//! - `Hello` presents the host credential when there is one, the enrollment
//!   token (which admits a host that has none) and the agent's own proposal
//!   for its credential, stored in the state directory before the first
//!   `Hello` ([`super::credential`]); a credential in `Welcome` is stored
//!   before anything else happens;
//! - after `Welcome`, every spooled outcome is re-sent, oldest first;
//! - every job message names the job's attempt (`RunJob.attempt_id`);
//! - `RunJob`: a bad spec is answered `JobFailed` (spooled); when idle the job
//!   starts and `JobAccepted` goes out; the same attempt again is re-accepted;
//!   another job, or another attempt of the running one, while busy gets
//!   `JobFailed "agent busy with job X"` (not spooled, `busy` set; so is the
//!   refusal while shutting down); an attempt whose outcome is still spooled
//!   gets that outcome again, while a new attempt of a spooled job runs afresh;
//! - `CancelJob` kills the worker: `JobFailed "cancelled: <reason>"` (spooled);
//! - `ResultAck` deletes the spooled outcome of that attempt (a `rejected` one is logged first);
//! - `Ping{seq}` is answered `Heartbeat{seq}`; `Heartbeat`s with a counter go
//!   out every `heartbeat_interval_ms`.

use std::collections::HashSet;
use std::time::Duration;

use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::agent_service_client::AgentServiceClient;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};
use tracing::{debug, info, warn};

use super::Context;
use super::config::CoordinatorUrl;
use super::executor::StartError;
use super::spool::{Outcome, OutcomeResult};
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::token::Secret;
use cipherfleet_core::wire;

use crate::{probe, worker};

/// Longest wait for the TCP connection, for the TLS handshake, and then for
/// `Welcome`: the protocol's answer timeout, which the coordinator counts on.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = cipherfleet_proto::ANSWER_TIMEOUT;
/// Heartbeat interval when the coordinator sends 0.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);
/// On shutdown, how long to wait for the coordinator to acknowledge what was just sent.
const ACK_WAIT: Duration = Duration::from_secs(3);
/// Messages queued for the coordinator before sending waits.
const OUTBOUND_QUEUE: usize = 64;

/// How a session ended.
pub(crate) enum SessionEnd {
    /// Shutdown was requested and finished while connected.
    Shutdown,
    /// The coordinator refused this agent; retrying would not help.
    Rejected(String),
    /// Connecting failed or the session broke; try again. `welcomed`: the handshake had succeeded.
    /// `held_elsewhere`: the coordinator answered, but another session holds the host (`ALREADY_EXISTS`,
    /// e.g. the lease of a coordinator that died and has not expired yet), or it is busy admitting
    /// others: retry the same coordinator rather than the next, which may be the dead one.
    /// `pushback`: when the coordinator said to come back (busy, or the other session's lease ends
    /// then; [`pushback`]).
    Lost {
        reason: String,
        welcomed: bool,
        held_elsewhere: bool,
        pushback: Option<Duration>,
    },
}

pub(crate) fn lost(reason: impl Into<String>, welcomed: bool) -> SessionEnd {
    SessionEnd::Lost {
        reason: reason.into(),
        welcomed,
        held_elsewhere: false,
        pushback: None,
    }
}

/// The metadata key of a refusal's time to come back, in milliseconds (gRPC's retry pushback; the
/// coordinator sets it when it is too busy admitting other agents to admit this one now).
const PUSHBACK_KEY: &str = "grpc-retry-pushback-ms";
/// The longest time to come back honoured (the backoff's own ceiling).
const MAX_PUSHBACK: Duration = super::backoff::CAP;

/// The time to come back a refusal names, if any (at most [`MAX_PUSHBACK`]).
pub(crate) fn pushback(status: &Status) -> Option<Duration> {
    let ms: u64 = status
        .metadata()
        .get(PUSHBACK_KEY)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_millis(ms).min(MAX_PUSHBACK))
}

/// An error status from the coordinator: a refusal ends the agent, anything
/// else reconnects. `FAILED_PRECONDITION` is the protocol-version refusal only
/// before `Welcome`; after it, the version was accepted and it is an ordinary error.
pub(crate) fn classify(status: &Status, welcomed: bool) -> SessionEnd {
    match status.code() {
        Code::Unauthenticated => SessionEnd::Rejected(format!(
            "coordinator rejected the enrollment token ({:?})",
            status.message()
        )),
        Code::FailedPrecondition if !welcomed => SessionEnd::Rejected(format!(
            "coordinator refused the session (this agent speaks protocol version {PROTOCOL_VERSION}): {:?}",
            status.message()
        )),
        // The host's name is enrolled under another credential, or retired.
        Code::PermissionDenied => SessionEnd::Rejected(format!("coordinator refused this host: {}", status.message())),
        // Waited out: after a crash the coordinator may not have noticed the old session end yet
        // (it may say when the dead one's lease ends).
        Code::AlreadyExists if !welcomed => SessionEnd::Lost {
            reason: format!(
                "another instance of this host is running (the coordinator has a live session for it): {}",
                status.message()
            ),
            welcomed: false,
            held_elsewhere: true,
            pushback: pushback(status),
        },
        // Busy admitting a herd: it spreads the refused ones over the time it needs for them.
        Code::Unavailable if !welcomed && pushback(status).is_some() => SessionEnd::Lost {
            reason: format!("the coordinator is busy: {}", status.message()),
            welcomed: false,
            held_elsewhere: true,
            pushback: pushback(status),
        },
        code => {
            let mut reason = format!("{code:?}: {:?}", status.message());
            // "transport error" alone says nothing of what broke (e.g. the connection, closed by a
            // coordinator that requires a client certificate this agent has not).
            if let Some(source) = std::error::Error::source(status) {
                reason.push_str(": ");
                reason.push_str(&cipherfleet_proto::client::error_chain(source));
            }
            lost(reason, welcomed)
        }
    }
}

/// Connects, runs one session to its end and says how it ended.
pub(super) async fn run(
    ctx: &Context,
    coordinator: &CoordinatorUrl,
    done: &mut mpsc::UnboundedReceiver<Outcome>,
) -> SessionEnd {
    // Until `Welcome` nothing is in flight, so shutdown abandons the attempt;
    // after it, `serve` drains instead.
    let handshake = tokio::select! {
        parts = handshake(ctx, coordinator) => parts,
        _ = ctx.shutdown.cancelled() => return lost("shutdown requested while connecting", false),
    };
    let (session, welcome, inbound) = match handshake {
        Ok(parts) => parts,
        Err(end) => return end,
    };
    info!(
        "connected to {} as agent {:?} (heartbeat every {} ms)",
        coordinator.url, welcome.agent_id, welcome.heartbeat_interval_ms
    );
    session
        .serve(ctx, done, inbound, heartbeat_interval(welcome.heartbeat_interval_ms))
        .await
}

/// The next heartbeat's time once the interval goes from `old` to `new` at
/// `now`: the time left until `next` scales with it, so a fleet re-paced at
/// once stays as spread out as it was.
pub(crate) fn repaced(now: Instant, next: Instant, old: Duration, new: Duration) -> Instant {
    now + next
        .saturating_duration_since(now)
        .mul_f64(new.as_secs_f64() / old.as_secs_f64())
}

pub(crate) fn heartbeat_interval(ms: u32) -> Duration {
    match ms {
        0 => DEFAULT_HEARTBEAT,
        ms => Duration::from_millis(ms.into()).max(Duration::from_millis(100)),
    }
}

/// Dials the coordinator: one connection of its own, HTTP/2 keep-alive, TLS
/// when its URL is https://, from `local_address` when given (else the one
/// the kernel picks). `run` and every simulated host connect this way.
pub(crate) async fn open_channel(
    coordinator: &CoordinatorUrl,
    local_address: Option<std::net::IpAddr>,
) -> Result<Channel, SessionEnd> {
    let endpoint = Endpoint::from_shared(coordinator.url.clone())
        .map_err(|e| SessionEnd::Rejected(format!("invalid coordinator URL: {e}")))?
        .local_address(local_address)
        .connect_timeout(HANDSHAKE_TIMEOUT)
        .tcp_nodelay(true)
        // HTTP/2 pings find a dead peer on an idle connection (a half-open TCP
        // session would otherwise look healthy until the next heartbeat fails).
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);
    let endpoint = match &coordinator.tls {
        Some(tls) => endpoint
            .tls_config(tls.clone().timeout(HANDSHAKE_TIMEOUT))
            .map_err(|e| {
                lost(
                    format!("cannot set up TLS: {}", cipherfleet_proto::client::error_chain(&e)),
                    false,
                )
            })?,
        None => endpoint,
    };
    endpoint.connect().await.map_err(|e| {
        let mut reason = format!("cannot connect: {}", cipherfleet_proto::client::error_chain(&e));
        if reason.contains("invalid peer certificate") {
            reason.push_str(
                " (the coordinator's certificate must be signed by --ca-cert, or by a CA in the system's \
                     store without it, and name the URL's host)",
            );
        }
        lost(reason, false)
    })
}

async fn handshake(
    ctx: &Context,
    coordinator: &CoordinatorUrl,
) -> Result<(Session, v1::Welcome, Streaming<v1::CoordinatorMessage>), SessionEnd> {
    let channel = open_channel(coordinator, None).await?;
    let mut client = AgentServiceClient::new(channel);

    let (tx, rx) = outgoing(OUTBOUND_QUEUE);
    let hello = hello(ctx);
    debug!("hello: {hello:?}");
    tx.send(message(agent_message::Body::Hello(hello)))
        .await
        .map_err(|_| lost("session closed before Hello", false))?;
    let opened = tokio::time::timeout(HANDSHAKE_TIMEOUT, client.session(rx))
        .await
        .map_err(|_| lost("no answer to the session request", false))?;
    let mut inbound = opened.map_err(|status| classify(&status, false))?.into_inner();
    let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, inbound.message())
        .await
        .map_err(|_| lost("no Welcome in time", false))?
        .map_err(|status| classify(&status, false))?;
    let welcome = match first.and_then(|m| m.body) {
        Some(coordinator_message::Body::Welcome(w)) => w,
        Some(other) => return Err(lost(format!("expected Welcome, got {other:?}"), false)),
        None => return Err(lost("the coordinator closed the session before Welcome", false)),
    };
    if !welcome.credential.is_empty() {
        keep_credential(ctx, &welcome.credential)?;
    }
    let session = Session {
        tx,
        sent: HashSet::new(),
        unacked: HashSet::new(),
        draining: false,
        repaced: None,
    };
    Ok((session, welcome, inbound))
}

/// Stores the credential `Welcome` confirmed (this agent's proposal, or one an
/// older coordinator issued): without it the host could not prove who it is
/// next time, so failing to store it ends the agent.
fn keep_credential(ctx: &Context, credential: &str) -> Result<(), SessionEnd> {
    if !well_formed_credential(credential) {
        return Err(lost("the coordinator sent a malformed host credential", false));
    }
    let mut held = ctx.credential.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = held.path().unwrap_or_default();
    if let Err(e) = held.welcomed(credential) {
        return Err(SessionEnd::Rejected(format!(
            "cannot store the host credential in {}: {e}. The coordinator enrolled this host, but \
             the agent could not prove it next time: fix the state directory (--state-dir), then have \
             an operator run `cipherfleet-coordinator hosts reset-credential {}`",
            path.display(),
            ctx.config.name
        )));
    }
    info!(
        "enrolled as host {:?}; its credential is in {}",
        ctx.config.name,
        path.display()
    );
    Ok(())
}

/// Whether a credential from `Welcome` can be stored and presented again.
pub(crate) fn well_formed_credential(credential: &str) -> bool {
    credential.len() <= wire::MAX_CREDENTIAL_LEN && credential.bytes().all(|b| b.is_ascii_graphic())
}

/// The `Hello` for this session: facts probed now, and what is running or spooled.
fn hello(ctx: &Context) -> v1::Hello {
    let paths = [Path::Accelerated, Path::Software]
        .into_iter()
        .filter(|p| worker::daemon_binary_for(*p).is_ok())
        .map(|p| p.as_str().to_string())
        .collect();
    let spooled = ctx.spool.list().unwrap_or_else(|e| {
        warn!("cannot read the spool: {e}");
        Vec::new()
    });
    let (running_job_id, running_attempt_id) = ctx.executor.running_attempt().unwrap_or_default();
    let (credential, proposed_credential) = {
        let held = ctx.credential.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (exposed(held.current()), exposed(held.proposed()))
    };
    v1::Hello {
        protocol_version: PROTOCOL_VERSION,
        enrollment_token: ctx.config.token.expose().to_string(),
        credential,
        proposed_credential,
        facts: Some(v1::HostFacts::from(&probe::probe())),
        capabilities: Some(v1::Capabilities {
            paths,
            max_threads: ctx.config.ceilings.max_threads,
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
        }),
        labels: ctx.config.labels.clone(),
        name: ctx.config.name.clone(),
        running_job_id,
        running_attempt_id,
        spooled_job_ids: spooled
            .into_iter()
            .take(wire::MAX_SPOOLED_JOB_IDS)
            .map(|o| o.job_id)
            .collect(),
    }
}

/// A secret as a `Hello` field: empty when there is none.
pub(crate) fn exposed(secret: Option<&Secret>) -> String {
    secret.map(|s| s.expose().to_string()).unwrap_or_default()
}

/// One message for the coordinator, boxed for the session's queue ([`Outgoing`]).
pub(crate) fn message(body: agent_message::Body) -> Box<v1::AgentMessage> {
    Box::new(v1::AgentMessage { body: Some(body) })
}

/// The sending half of a session's queue to the coordinator. It holds boxes:
/// tokio allocates a channel's slots 32 at a time, the first block when the
/// channel is made, and an `AgentMessage` is 504 bytes (its `Hello`), so a
/// queue of whole messages held 16 KiB in every session, a simulator's
/// thousands of hosts included, before anything was sent.
pub(crate) type Outgoing = mpsc::Sender<Box<v1::AgentMessage>>;

/// A session's queue to the coordinator: the sender, and the stream the
/// session call reads.
pub(crate) fn outgoing(capacity: usize) -> (Outgoing, impl Stream<Item = v1::AgentMessage> + Send + 'static) {
    let (tx, rx) = mpsc::channel(capacity);
    (tx, ReceiverStream::new(rx).map(|boxed: Box<v1::AgentMessage>| *boxed))
}

/// A connected, welcomed session.
struct Session {
    tx: Outgoing,
    /// Outcomes sent in this session (job id, finish time), so one that is both
    /// spooled and queued in the channel is sent once; a re-run of the same job
    /// id has another finish time and still goes out.
    sent: HashSet<(String, u64)>,
    /// Sent and not yet acknowledged.
    unacked: HashSet<String>,
    /// Shutdown requested: no new jobs; end once the running one is reported.
    draining: bool,
    /// A later `Welcome` told a new heartbeat interval, not yet in use.
    repaced: Option<Duration>,
}

/// The stream to the coordinator is gone.
struct Closed;

impl Session {
    async fn serve(
        mut self,
        ctx: &Context,
        done: &mut mpsc::UnboundedReceiver<Outcome>,
        mut inbound: Streaming<v1::CoordinatorMessage>,
        mut heartbeat: Duration,
    ) -> SessionEnd {
        let closed = || lost("the stream to the coordinator closed", true);
        match ctx.spool.list() {
            Ok(outcomes) => {
                if !outcomes.is_empty() {
                    info!("re-sending {} spooled outcome(s)", outcomes.len());
                }
                for outcome in outcomes {
                    if self.deliver(&outcome).await.is_err() {
                        return closed();
                    }
                }
            }
            Err(e) => warn!("cannot read the spool: {e}"),
        }
        let mut last_beat = Instant::now();
        let mut ticks = tokio::time::interval_at(last_beat + heartbeat, heartbeat);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut seq = 0u64;
        loop {
            if self.draining && ctx.executor.running().is_none() {
                return self.finish(ctx, done, &mut inbound).await;
            }
            let step = tokio::select! {
                _ = ctx.shutdown.cancelled(), if !self.draining => {
                    self.draining = true;
                    if let Some(job) = ctx.executor.running() {
                        info!("shutting down: no new jobs; waiting up to {:?} for job {job:?}", ctx.config.grace);
                    }
                    Ok(())
                }
                received = inbound.message() => match received {
                    Ok(Some(m)) => self.handle(ctx, m).await,
                    Ok(None) => return lost("the coordinator ended the session", true),
                    Err(status) => return classify(&status, true),
                },
                Some(outcome) = done.recv() => {
                    if self.sent.contains(&outcome.key()) {
                        Ok(())
                    } else {
                        self.deliver(&outcome).await
                    }
                }
                beat = ticks.tick() => {
                    last_beat = beat;
                    seq += 1;
                    self.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq })).await
                }
            };
            if step.is_err() {
                return closed();
            }
            if let Some(every) = self.repaced.take() {
                ticks =
                    tokio::time::interval_at(repaced(Instant::now(), last_beat + heartbeat, heartbeat, every), every);
                ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
                heartbeat = every;
            }
        }
    }

    async fn handle(&mut self, ctx: &Context, m: v1::CoordinatorMessage) -> Result<(), Closed> {
        match m.body {
            Some(coordinator_message::Body::RunJob(run)) => self.run_job(ctx, run).await,
            Some(coordinator_message::Body::CancelJob(cancel)) => {
                // Echoed in the error text: keep it short and on one line.
                let reason: String = wire::truncate(cancel.reason, 1024)
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                let attempt = Some(cancel.attempt_id.as_str()).filter(|a| !a.is_empty());
                if ctx
                    .executor
                    .cancel(Some(&cancel.job_id), attempt, format!("cancelled: {reason}"))
                {
                    info!("job {:?}: cancelled by the coordinator ({reason:?})", cancel.job_id);
                } else {
                    info!("CancelJob for job {:?}, which is not running; ignored", cancel.job_id);
                }
                Ok(())
            }
            Some(coordinator_message::Body::Ping(ping)) => {
                self.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq: ping.seq }))
                    .await
            }
            Some(coordinator_message::Body::ResultAck(ack)) => {
                self.unacked.remove(&ack.job_id);
                if !ack.rejected.is_empty() {
                    // Refused for good: re-sending would not help, so it is dropped all the same.
                    warn!(
                        "job {:?}: the coordinator refused its outcome: {:?}",
                        ack.job_id, ack.rejected
                    );
                }
                match ctx.spool.remove(&ack.job_id, &ack.attempt_id) {
                    Ok(true) => debug!("job {:?}: acknowledged, removed from the spool", ack.job_id),
                    Ok(false) => debug!("ResultAck for job {:?}, which is not spooled", ack.job_id),
                    Err(e) => warn!("job {:?}: cannot remove from the spool: {e}", ack.job_id),
                }
                Ok(())
            }
            Some(coordinator_message::Body::Welcome(w)) => {
                // The coordinator's fleet grew or shrank: only the interval changes.
                if w.heartbeat_interval_ms == 0 {
                    debug!("a second Welcome without a heartbeat interval; nothing changes");
                } else {
                    let every = heartbeat_interval(w.heartbeat_interval_ms);
                    info!(
                        "the coordinator asks for a heartbeat every {} ms from now on",
                        every.as_millis()
                    );
                    self.repaced = Some(every);
                }
                Ok(())
            }
            None => {
                warn!("ignoring a message with no body (a newer coordinator?)");
                Ok(())
            }
        }
    }

    async fn run_job(&mut self, ctx: &Context, run: v1::RunJob) -> Result<(), Closed> {
        let job_id = run.job_id;
        let attempt_id = run.attempt_id;
        // Answers that are not outcomes of the job: not spooled. `busy`: not an
        // attempt, the coordinator queues the job again.
        let refuse = |error: String, busy: bool| {
            agent_message::Body::JobFailed(v1::JobFailed {
                job_id: wire::truncate(job_id.clone(), wire::MAX_JOB_ID_LEN),
                error,
                busy,
                attempt_id: wire::truncate(attempt_id.clone(), wire::MAX_JOB_ID_LEN),
            })
        };
        let valid = wire::validate_job_id("run_job.job_id", &job_id).and_then(|()| {
            if attempt_id.is_empty() {
                Ok(())
            } else {
                wire::validate_job_id("run_job.attempt_id", &attempt_id)
            }
        });
        if let Err(e) = valid {
            warn!("refusing RunJob: {e}");
            return self.send(refuse(e.to_string(), false)).await;
        }
        if self.draining {
            return self.send(refuse("agent shutting down".into(), true)).await;
        }
        match ctx.executor.running_attempt() {
            Some((current, attempt)) if current == job_id && attempt == attempt_id => {
                return self
                    .send(agent_message::Body::JobAccepted(v1::JobAccepted { job_id, attempt_id }))
                    .await;
            }
            // Another attempt of the running job (the coordinator timed it out
            // and tries again): it runs afresh once the old attempt has ended.
            Some((current, _)) => {
                warn!("RunJob {job_id:?} (attempt {attempt_id:?}) while busy with {current:?}; refused");
                return self.send(refuse(format!("agent busy with job {current}"), true)).await;
            }
            None => {}
        }
        if let Some(outcome) = ctx.spool.read(&job_id).filter(|o| o.attempt_id == attempt_id) {
            info!("job {job_id:?} (attempt {attempt_id:?}) already finished; re-sending its outcome");
            return self.deliver(&outcome).await;
        }
        let spec = run
            .spec
            .as_ref()
            .ok_or_else(|| wire::WireError {
                field: "spec".into(),
                message: "missing".into(),
            })
            .and_then(JobSpec::try_from);
        let spec = match spec {
            Ok(spec) => spec,
            Err(e) => {
                warn!("job {job_id:?}: invalid spec: {e}");
                return self
                    .fail_unstarted(ctx, job_id, attempt_id, format!("invalid job: {e}"))
                    .await;
            }
        };
        if let Some(why) = ctx.config.ceilings.refusal(&spec) {
            warn!("job {job_id:?}: refused: {why}");
            return self
                .fail_unstarted(ctx, job_id, attempt_id, format!("refused by this agent: {why}"))
                .await;
        }
        let requested = (run.time_limit_ms > 0).then(|| Duration::from_millis(run.time_limit_ms.into()));
        let limit = Some(ctx.config.ceilings.time_limit(&spec, requested));
        match ctx.executor.start(job_id.clone(), attempt_id.clone(), spec, limit) {
            Ok(()) => {
                self.send(agent_message::Body::JobAccepted(v1::JobAccepted { job_id, attempt_id }))
                    .await
            }
            Err(e) => {
                warn!("job {job_id:?}: not started: {e}");
                let busy = matches!(e, StartError::Busy(_));
                self.send(refuse(e.to_string(), busy)).await
            }
        }
    }

    /// A job that cannot start (an invalid spec, past a ceiling) fails for good:
    /// the outcome is spooled and sent like any other.
    async fn fail_unstarted(
        &mut self,
        ctx: &Context,
        job_id: String,
        attempt_id: String,
        error: String,
    ) -> Result<(), Closed> {
        let outcome = Outcome::failed(job_id, attempt_id, error);
        if let Err(e) = ctx.spool.write(&outcome) {
            warn!("cannot spool the outcome of job {:?}: {e}", outcome.job_id);
        }
        self.deliver(&outcome).await
    }

    /// Sends an outcome as `JobResult` or `JobFailed`.
    async fn deliver(&mut self, outcome: &Outcome) -> Result<(), Closed> {
        let job_id = outcome.job_id.clone();
        let body = match &outcome.result {
            OutcomeResult::Measured(m) => match v1::Measurement::try_from(m.as_ref()) {
                Ok(measurement) => agent_message::Body::JobResult(v1::JobResult {
                    job_id: job_id.clone(),
                    measurement: Some(measurement),
                    attempt_id: outcome.attempt_id.clone(),
                }),
                Err(e) => agent_message::Body::JobFailed(v1::JobFailed {
                    job_id: job_id.clone(),
                    error: format!("the measurement cannot be sent: {e}"),
                    busy: false,
                    attempt_id: outcome.attempt_id.clone(),
                }),
            },
            OutcomeResult::Failed(error) => agent_message::Body::JobFailed(v1::JobFailed {
                job_id: job_id.clone(),
                error: wire::truncate(error.clone(), wire::MAX_ERROR_LEN),
                busy: false,
                attempt_id: outcome.attempt_id.clone(),
            }),
        };
        self.send(body).await?;
        self.sent.insert(outcome.key());
        self.unacked.insert(job_id);
        Ok(())
    }

    async fn send(&self, body: agent_message::Body) -> Result<(), Closed> {
        self.tx.send(message(body)).await.map_err(|_| Closed)
    }

    /// Shutdown with nothing running: report what is left, give the
    /// coordinator a moment to acknowledge, and close our side of the stream.
    async fn finish(
        mut self,
        ctx: &Context,
        done: &mut mpsc::UnboundedReceiver<Outcome>,
        inbound: &mut Streaming<v1::CoordinatorMessage>,
    ) -> SessionEnd {
        while let Ok(outcome) = done.try_recv() {
            if !self.sent.contains(&outcome.key()) && self.deliver(&outcome).await.is_err() {
                return SessionEnd::Shutdown;
            }
        }
        let deadline = Instant::now() + ACK_WAIT;
        while !self.unacked.is_empty() {
            match tokio::time::timeout_at(deadline, inbound.message()).await {
                Ok(Ok(Some(m))) => {
                    if self.handle(ctx, m).await.is_err() {
                        break;
                    }
                }
                _ => break,
            }
        }
        if !self.unacked.is_empty() {
            info!(
                "{} outcome(s) not yet acknowledged stay in the spool for the next start",
                self.unacked.len()
            );
        }
        SessionEnd::Shutdown
    }
}

#[cfg(test)]
mod tests;
