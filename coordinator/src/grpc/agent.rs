//! `AgentService.Session`: one bidirectional stream per agent.
//!
//! The first message must be `Hello` (protocol version, credential or token,
//! facts). A host is who holds its credential ([`store::identity`]): a `Hello` for
//! an enrolled name without it is refused with `PERMISSION_DENIED` before
//! anything of the host is touched, and a host has at most one live session
//! in the cluster, held through its lease (a second one, here or on another
//! coordinator, is refused with `ALREADY_EXISTS`). The reply is `Welcome`
//! (with the host's credential when it was just enrolled, or enrolled again
//! after a lost `Welcome`), then `RunJob`s one
//! at a time, each a new attempt. Every later message is validated; only the
//! current attempt's outcome counts ([`crate::domain::attempt`]); outcomes are
//! acknowledged with `ResultAck` (refused or ignored ones with the reason in
//! the same message). A session that sends nothing for three heartbeat
//! intervals is lost: its running job goes back to the queue (unless the
//! coordinator itself fell behind reading it: [`silence`]).
//!
//! The handshake, up to `Welcome`, is [`hello`]'s: done before the agent
//! stops waiting for its answer, and in two round trips to the database for
//! a known host whose hello changes nothing stored.
//!
//! Bounds: a session slot comes before the hello is read ([`super::limits`]),
//! the failed-authentication limit before each secret of the hello is checked
//! ([`crate::guard::auth`]), a turn at the database before the hello's database work
//! ([`super::turns`]); what the coordinator sends goes through a bounded queue
//! that nobody waits on ([`crate::scheduler::outbound`]); what the agent sends is
//! rate-limited per session.

use std::sync::Arc;
use std::time::Duration;

use cipherfleet_core::measurement::{self, Figures, Measurement};
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;
use cipherfleet_proto::v1::agent_service_server::AgentService;
use cipherfleet_proto::v1::{self, AgentMessage, agent_message, coordinator_message::Body};
use sqlx::PgPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use uuid::Uuid;

use super::rate;
use super::turns::Turns;
use crate::domain::attempt;
use crate::domain::auth::Token;
use crate::findings::Deriver;
use crate::guard::auth::FailedAuth;
use crate::ingest::{Ingest, Next, Recorded};
use crate::scheduler::Scheduler;
use crate::scheduler::outbound::{Outbound, OutboundStream};
use crate::seen::LastSeen;
use crate::store;
use crate::watch::verify::VerifyOnChange;

mod hello;
pub mod pace;
mod silence;

/// Heartbeat intervals without any message after which an agent is lost.
const MISSED_HEARTBEATS: u32 = 3;
/// How much of an unauthenticated name reaches the log.
const LOGGED_NAME_LEN: usize = 64;

pub struct AgentSvc {
    pub pool: PgPool,
    pub scheduler: Arc<Scheduler>,
    /// Where results and job starts are handed over, to be stored in batches.
    pub ingest: Ingest,
    /// Hosts heard from, written to the database in batches.
    pub last_seen: Arc<LastSeen>,
    pub token: Token,
    /// The heartbeat interval each `Welcome` tells ([`pace`]).
    pub heartbeat: Arc<pace::Pacer>,
    pub shutdown: CancellationToken,
    /// Told about every stored result; derives findings off this path.
    pub findings: Arc<Deriver>,
    /// Verification campaigns when a host's facts change ([`crate::watch::verify`]).
    pub verify: VerifyOnChange,
    /// Sessions open or waiting for their hello ([`super::limits::Caps::sessions`]).
    pub sessions: Arc<Semaphore>,
    /// Turns for the database work of a handshake ([`super::turns`]).
    pub handshakes: Arc<Turns>,
    /// Failed secrets, counted per kind ([`crate::guard::auth`]); shared with the admin API and the report.
    pub failed_auth: Arc<FailedAuth>,
    /// `--client-ca`: a `Hello` name must be a name of the session's client certificate.
    pub client_certs: bool,
}

#[tonic::async_trait]
impl AgentService for AgentSvc {
    type SessionStream = OutboundStream;

    async fn session(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let answer_by = super::deadline::answer_by(request.metadata(), Instant::now());
        let peer = request.remote_addr();
        let permit = self.pre_auth()?;
        let peer_certs = request.peer_certs();
        let mut inbound = request.into_inner();
        let (session, rx) = self
            .handshake(&mut inbound, answer_by, peer, peer_certs.as_deref().map(Vec::as_slice))
            .await?;
        tokio::spawn(async move {
            let _slot = permit;
            session.run(inbound).await
        });
        Ok(Response::new(rx))
    }
}

impl AgentSvc {
    /// What holds before a stream is read: a free session slot, kept for the
    /// session's life. (Failed secrets are limited where each is checked, by
    /// its own kind and key, in [`hello`]: one kind's failures at an address
    /// never hold back the others.)
    fn pre_auth(&self) -> Result<OwnedSemaphorePermit, Status> {
        self.sessions.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(
                "the coordinator serves as many agent sessions as it may (serve --max-sessions); retry later",
            )
        })
    }
}

/// One connected agent: reads its messages until it leaves.
struct Session {
    pool: PgPool,
    scheduler: Arc<Scheduler>,
    ingest: Ingest,
    last_seen: Arc<LastSeen>,
    host_id: i64,
    session_id: i64,
    generation: u64,
    tx: Outbound,
    /// The interval its `Welcome` told; silence is judged by three of the longest told.
    heartbeat: Duration,
    /// Changes of the coordinator's interval, each told to the agent ([`pace::Pacer`]).
    pace: tokio::sync::watch::Receiver<Duration>,
    shutdown: CancellationToken,
    /// Cancelled by [`Scheduler::end_session`] (credential reset, retirement).
    ended: CancellationToken,
    dispatch_on_connect: bool,
    findings: Arc<Deriver>,
    /// The host's current snapshot, read at the session's first result: its
    /// measurements are stored without the facts it holds
    /// ([`store::results::Checked::stored_once`]). Facts change only at a
    /// hello, which starts another session.
    snapshot: tokio::sync::OnceCell<Option<store::snapshots::CurrentFacts>>,
}

/// Why a session ended.
enum End {
    Closed,
    Lost(&'static str),
    Refused(Status),
    /// Ended by an operator's command; the agent was told why.
    Ended,
    Shutdown,
}

impl End {
    /// The agent keeps its running job: the coordinator stops, or its own
    /// database failed (`db_status`'s codes), which is no attempt of the job.
    fn keeps_jobs(&self) -> bool {
        match self {
            // The session is no longer the host's: its job is adopted by the
            // agent's next session or retried at its deadline.
            End::Shutdown | End::Ended => true,
            End::Refused(status) => matches!(status.code(), tonic::Code::Unavailable | tonic::Code::Internal),
            End::Closed | End::Lost(_) => false,
        }
    }
}

/// Whether a stream error is a message the agent sent that cannot be read:
/// over [`super::MAX_MESSAGE_BYTES`] (tonic's `OUT_OF_RANGE`) or not decodable
/// (`INVALID_ARGUMENT`, [`cipherfleet_proto::codec`]), rather than the agent
/// going away (a reset stream or connection).
fn unreadable(status: &Status) -> bool {
    matches!(status.code(), tonic::Code::OutOfRange | tonic::Code::InvalidArgument)
}

/// The refusal of an agent that sends faster than [`rate::SESSION_PER_SECOND`].
fn too_many_messages() -> Status {
    Status::resource_exhausted(format!(
        "more than {} messages a second (bursts of {}): the session is closed",
        rate::SESSION_PER_SECOND,
        rate::SESSION_BURST
    ))
}

impl Session {
    /// `inbound` is the session's `Streaming`, or in tests any stream of messages.
    async fn run(self, mut inbound: impl Stream<Item = Result<AgentMessage, Status>> + Unpin) {
        // What the session awaits besides reading its agent is boxed, for as long
        // as it runs: a future is as large as its largest step, and storing a
        // result (`handle`) inline would bloat every idle session's task
        // (docs/performance.md, "Coordinator queries and sessions").
        if self.dispatch_on_connect
            && let Err(e) = Box::pin(self.scheduler.dispatch(self.host_id)).await
        {
            tracing::warn!(host = self.host_id, error = %e, "dispatch on connect failed");
        }
        let mut allowance = rate::session_allowance();
        let end = {
            // Made once for the session, not once a message: a heartbeat then
            // registers no waiter on the cluster-wide shutdown token and no timer.
            let shutdown = self.shutdown.cancelled();
            let ended = self.ended.cancelled();
            let full = self.tx.ended();
            // Re-armed only when it fires: until then a message just notes the time.
            let mut heard = Instant::now();
            // Silence is judged by three of the longest interval told.
            let (mut told, mut longest) = (self.heartbeat, self.heartbeat);
            let silent = tokio::time::sleep_until(heard + longest * MISSED_HEARTBEATS);
            let mut repaced = Box::pin(pace::changed(self.pace.clone()));
            tokio::pin!(shutdown, ended, full, silent);
            loop {
                let next = tokio::select! {
                    // In this order: a message waiting to be read is read before the silence is judged.
                    biased;
                    _ = &mut shutdown => break End::Shutdown,
                    _ = &mut ended => break End::Ended,
                    // The agent does not read what we send: end it rather than wait on it.
                    _ = &mut full => break End::Refused(crate::scheduler::outbound::NotSent::Full.status()),
                    next = inbound.next() => next,
                    (rx, every) = &mut repaced => {
                        repaced = Box::pin(pace::changed(rx));
                        // Not sent (the agent does not read): it keeps the interval it has.
                        if every != told && self.tx.try_send(Body::Welcome(v1::Welcome {
                            heartbeat_interval_ms: every.as_millis().try_into().unwrap_or(u32::MAX),
                            ..Default::default()
                        })).is_ok() {
                            told = every;
                            // A longer silence only: the timer, when it fires, waits the rest.
                            longest = longest.max(every);
                        }
                        continue;
                    }
                    () = &mut silent => {
                        match silence::judge(Instant::now(), heard, silent.deadline(), longest * MISSED_HEARTBEATS) {
                            silence::Verdict::Wait(at) | silence::Verdict::Excused(at) => {
                                silent.as_mut().reset(at);
                                continue;
                            }
                            silence::Verdict::Lost => break End::Lost("no heartbeat for three intervals"),
                        }
                    }
                };
                let message = match next {
                    // A message over the size limit or one that does not decode: the
                    // agent's mistake, answered with what was wrong (not an "OK" end).
                    Some(Err(status)) if unreadable(&status) => {
                        break End::Refused(Status::new(
                            status.code(),
                            format!("a message the coordinator cannot read: {}", status.message()),
                        ));
                    }
                    // The agent hung up (a stop, a restart, a network cut): its job, if any, is lost
                    // all the same, but this is no silence worth a warning.
                    Some(Err(status)) => {
                        tracing::debug!(host = self.host_id, status = ?status, "session stream ended with an error");
                        break End::Closed;
                    }
                    None => break End::Closed,
                    Some(Ok(m)) => m,
                };
                heard = Instant::now();
                if !allowance.take_at(heard) {
                    break End::Refused(too_many_messages());
                }
                self.last_seen.mark(self.host_id);
                if let Some(agent_message::Body::Heartbeat(_)) = message.body {
                    continue;
                }
                if let Err(status) = Box::pin(self.handle(message)).await {
                    break End::Refused(status);
                }
                // Time spent here (waiting for the ingest queue or the database) is not the agent's silence.
                heard = Instant::now();
            }
        };
        Box::pin(self.finish(end)).await;
    }

    async fn finish(self, end: End) {
        let pool = &self.pool;
        match &end {
            End::Refused(status) => {
                tracing::warn!(host = self.host_id, status = ?status, "session ended by the coordinator");
                self.tx.try_close_with(status.clone());
            }
            End::Lost(why) => tracing::warn!(host = self.host_id, why, "agent lost"),
            End::Closed => tracing::info!(host = self.host_id, "agent disconnected"),
            End::Ended => tracing::info!(host = self.host_id, "session ended by an operator"),
            End::Shutdown => {}
        }
        // After `End::Ended` the session is no longer the host's: a job it ran
        // is adopted by the agent's next session or retried at its deadline.
        let current = self.scheduler.disconnect(self.host_id, self.generation);
        // On shutdown the agent keeps running its job and reports it to the next
        // coordinator, and so it does when our database failed (not the agent's
        // fault, so no attempt of its job); otherwise the job goes back to the
        // queue (or fails after its last attempt).
        if current && !end.keeps_jobs() {
            match store::jobs::requeue_lost(pool, self.host_id).await {
                Ok(r) if !r.requeued.is_empty() || !r.failed.is_empty() => {
                    tracing::info!(host = self.host_id, requeued = ?r.requeued, failed = ?r.failed, "jobs of a lost agent")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(host = self.host_id, error = %e, "could not re-queue the jobs of a lost agent")
                }
            }
        }
        // After the re-queue: the host's next session, here or elsewhere, then
        // finds its jobs as this one left them.
        self.scheduler.release_lease(self.host_id, self.generation).await;
        if let Err(e) = store::sessions::close(pool, self.session_id).await {
            tracing::debug!(error = %e, "closing the session row");
        }
    }

    /// Queues a message for the agent without waiting; a full queue ends the session.
    async fn send(&self, body: Body) -> Result<(), Status> {
        self.tx.try_send(body).map_err(|e| e.status())
    }

    async fn ack(&self, job_id: &str, attempt_id: &str, rejected: Option<String>) -> Result<(), Status> {
        self.send(Body::ResultAck(v1::ResultAck {
            job_id: job_id.to_string(),
            rejected: rejected.unwrap_or_default(),
            attempt_id: attempt_id.to_string(),
        }))
        .await
    }

    async fn handle(&self, message: AgentMessage) -> Result<(), Status> {
        use agent_message::Body as In;
        let pool = &self.pool;
        match message.body {
            None => Err(Status::invalid_argument("empty message (no known body)")),
            Some(In::Hello(_)) => Err(Status::invalid_argument("hello may only open a session")),
            // Seen already (`run` marks every message, and answers heartbeats itself).
            Some(In::Heartbeat(_)) => Ok(()),
            Some(In::JobAccepted(a)) => {
                let job_id = parse_job_id(&a.job_id)?;
                if let Some(attempt) = parse_attempt("job_accepted.attempt_id", &a.attempt_id)? {
                    // Stored with the next batch, before this job's result.
                    self.ingest.started(job_id, self.host_id, attempt).await?;
                }
                Ok(())
            }
            Some(In::JobProgress(p)) => {
                parse_job_id(&p.job_id)?;
                Ok(())
            }
            Some(In::JobFailed(f)) => {
                let job_id = parse_job_id(&f.job_id)?;
                if f.error.len() > wire::MAX_ERROR_LEN {
                    return Err(Status::invalid_argument(format!(
                        "job_failed.error: longer than {} bytes",
                        wire::MAX_ERROR_LEN
                    )));
                }
                let attempt = parse_attempt("job_failed.attempt_id", &f.attempt_id)?;
                if f.busy {
                    // Not an attempt; the agent's outstanding outcome will trigger the next dispatch.
                    if let Some(attempt) = attempt {
                        Box::pin(store::jobs::release(pool, job_id, self.host_id, attempt))
                            .await
                            .map_err(super::db_status)?;
                    }
                    return Ok(());
                }
                // Free text from the agent's worker (its stderr): kept, with
                // what the database cannot hold replaced, and said so.
                let error = wire::storable_text(&f.error);
                let rejected = match self.fail(job_id, attempt, &error).await {
                    // Whatever else the database refuses of the report, the job
                    // still ends, failed with why, and the report is answered:
                    // an agent must not resend one it cannot fix for ever.
                    Err(e) if e.is_bad_input() => {
                        let why = e.refused_value().unwrap_or_default();
                        tracing::warn!(host = self.host_id, job = %job_id, why, "a failure report the database refuses");
                        let error = format!("failed; the agent's report of why could not be stored ({why})");
                        self.fail(job_id, attempt, &error).await
                    }
                    other => other,
                }
                .map_err(super::db_status)?;
                self.ack(&f.job_id, &f.attempt_id, rejected).await?;
                Box::pin(self.scheduler.dispatch(self.host_id))
                    .await
                    .map_err(super::db_status)
            }
            Some(In::JobResult(r)) => {
                let job_id = parse_job_id(&r.job_id)?;
                let attempt = parse_attempt("job_result.attempt_id", &r.attempt_id)?;
                let Some(m) = r.measurement else {
                    return Err(Status::invalid_argument("job_result.measurement: missing"));
                };
                // Waits for the batch with the measurement moved into it, and the
                // database steps after it boxed: the thousands of sessions that
                // wait at once under ingest hold only what the batch needs.
                let (judged, next) = self.record(job_id, attempt, m).await?;
                if let Err(status) = self.ack(&r.job_id, &r.attempt_id, judged.err()).await {
                    if let Next::Job(job) = next {
                        Box::pin(self.scheduler.hand_back(&job)).await;
                    }
                    return Err(status);
                }
                // The next job was claimed with the result's batch; only if
                // that claim failed is it tried again on its own.
                match next {
                    Next::Job(job) => Box::pin(self.scheduler.hand_over(*job)).await,
                    Next::Idle => Ok(()),
                    Next::Unknown => Box::pin(self.scheduler.dispatch(self.host_id)).await,
                }
                .map_err(super::db_status)
            }
        }
    }

    /// Fails attempt `attempt` of `job_id` with `error`, as its agent
    /// reported: why the report is ignored or refused for good, if it is.
    async fn fail(&self, job_id: Uuid, attempt: Option<Uuid>, error: &str) -> Result<Option<String>, store::Error> {
        match Box::pin(store::jobs::fail_attempt(
            &self.pool,
            job_id,
            self.host_id,
            attempt,
            error,
        ))
        .await
        {
            Ok(Ok(())) => Ok(None),
            Ok(Err(ignored)) => {
                tracing::info!(host = self.host_id, job = %job_id, attempt = ?attempt, %ignored, "failure report ignored");
                Ok(Some(ignored.to_string()))
            }
            Err(store::Error::UnknownJob(_)) => Ok(Some(format!("job {job_id} does not exist"))),
            Err(store::Error::JobOfAnotherHost { .. }) => {
                Ok(Some(format!("job {job_id} is not assigned to this host")))
            }
            Err(e) => Err(e),
        }
    }

    /// The host's current snapshot ([`Session::snapshot`]). Unreadable (the
    /// database away for a moment), the session's documents are stored whole.
    async fn current_facts(&self) -> Option<&store::snapshots::CurrentFacts> {
        self.snapshot
            .get_or_init(|| async {
                store::snapshots::current(&self.pool, self.host_id)
                    .await
                    .inspect_err(|e| {
                        tracing::warn!(host = self.host_id, error = %e, "reading the host's snapshot: its results keep their host facts")
                    })
                    .ok()
                    .flatten()
            })
            .await
            .as_ref()
    }

    /// Stores the result of attempt `attempt` in the next ingest batch
    /// ([`crate::ingest`]), which judges it under its job's lock and claims
    /// the host's next job. The outer error ends the session (database away:
    /// the agent keeps its spooled copy and re-sends it); the inner one
    /// refuses or ignores this result for good, with the reason.
    async fn record(
        &self,
        job_id: Uuid,
        attempt: Option<Uuid>,
        m: v1::Measurement,
    ) -> Result<(Result<(), String>, Next), Status> {
        let mut measurement = checked(m);
        if let Ok(c) = measurement {
            measurement = Ok(c.stored_once(self.current_facts().await));
        }
        let item = store::results::NewResult {
            job_id,
            host_id: self.host_id,
            attempt,
            measurement,
        };
        let algorithm = item
            .measurement
            .as_ref()
            .ok()
            .and_then(|c| c.ran.as_ref())
            .map(|r| r.point.algorithm);
        let Recorded { outcome, next } = self.ingest.record(item).await?;
        let judged = match outcome {
            Ok(store::results::RecordOutcome::Ignored(ignored)) => {
                tracing::info!(host = self.host_id, job = %job_id, attempt = ?attempt, %ignored, "result ignored");
                Ok(Err(ignored.to_string()))
            }
            Ok(store::results::RecordOutcome::Invalid(reason)) => {
                // The job cannot succeed with this result: it failed with the reason, so the campaign moves on.
                tracing::warn!(host = self.host_id, job = %job_id, reason = ?reason, "result refused");
                Ok(Err(reason))
            }
            Ok(outcome) => {
                tracing::debug!(host = self.host_id, job = %job_id, ?outcome, "result");
                if let (store::results::RecordOutcome::Inserted, Some(algorithm)) = (outcome, algorithm) {
                    self.findings.result_stored(self.host_id, algorithm.name());
                }
                Ok(Ok(()))
            }
            Err(store::Error::UnknownJob(_) | store::Error::JobOfAnotherHost { .. }) => {
                tracing::warn!(host = self.host_id, job = %job_id, "result for a job not assigned to this host refused");
                Ok(Err(format!("job {job_id} is not assigned to this host")))
            }
            Err(e) => Err(super::db_status(e)),
        };
        match judged {
            Ok(judged) => Ok((judged, next)),
            Err(status) => {
                if let Next::Job(job) = next {
                    // The session ends without sending it: back to the queue.
                    Box::pin(self.scheduler.hand_back(&job)).await;
                }
                Err(status)
            }
        }
    }
}

/// What can be checked of a result without its job, here in the session
/// rather than in the batch: well-formed, successful, and what it measured
/// (checked against the job under its lock, [`store::results::record_batch`]).
/// Else why it cannot be stored.
fn checked(m: v1::Measurement) -> Result<store::results::Checked, String> {
    let parsed = wire::checked_measurement(&m).map_err(|e| e.to_string())?;
    let (ran, path_used, figures) = what_ran(parsed)?;
    Ok(store::results::Checked::new(
        Some(ran),
        path_used,
        figures,
        m.measurement_json,
    ))
}

/// The point a successful measurement says it measured, the path that ran
/// and its figures: what [`store::results::record_batch`] checks against the job
/// and stores in typed columns beside the raw object.
fn what_ran(m: Measurement) -> Result<(JobSpec, PathUsed, Figures), String> {
    let ran = m.spec();
    match (m.status, m.path_used, m.figures) {
        (measurement::Status::Ok, Some(path_used), Some(figures)) => Ok((ran, path_used, figures)),
        _ => Err("measurement_json: not a successful measurement (status ok, with path_used and figures)".into()),
    }
}

fn parse_job_id(s: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(s).map_err(|_| Status::invalid_argument(format!("job_id: {:?} is not a job id", truncate(s, 64))))
}

fn parse_attempt(field: &str, s: &str) -> Result<Option<Uuid>, Status> {
    attempt::parse(field, s).map_err(Status::invalid_argument)
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests;
