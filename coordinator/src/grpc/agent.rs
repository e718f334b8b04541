//! `AgentService.Session`: one bidirectional stream per agent.
//!
//! The first message must be `Hello` (protocol version, token, facts); the
//! reply is `Welcome`, then `RunJob`s one at a time. Every later message is
//! validated; outcomes are stored idempotently and acknowledged with
//! `ResultAck` (or refused for good, with the reason, in the same message).
//! A session that sends nothing for three heartbeat intervals is lost: its
//! running job goes back to the queue.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cipherfleet_core::measurement::{self, Figures, Measurement};
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::agent_service_server::AgentService;
use cipherfleet_proto::v1::{self, AgentMessage, CoordinatorMessage, agent_message, coordinator_message::Body};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};
use uuid::Uuid;

use super::db_status;
use crate::auth::Token;
use crate::db;
use crate::db::hosts::Labels;
use crate::findings::Deriver;
use crate::scheduler::Scheduler;

/// How long a new stream may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Heartbeat intervals without any message after which an agent is lost.
const MISSED_HEARTBEATS: u32 = 3;

pub struct AgentSvc {
    pub scheduler: Arc<Scheduler>,
    pub token: Token,
    pub heartbeat: Duration,
    pub shutdown: CancellationToken,
    /// Told about every stored result; derives findings off this path.
    pub findings: Arc<Deriver>,
}

#[tonic::async_trait]
impl AgentService for AgentSvc {
    type SessionStream = ReceiverStream<Result<CoordinatorMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let peer = request.remote_addr();
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(HELLO_TIMEOUT, inbound.message())
            .await
            .map_err(|_| Status::deadline_exceeded("no hello within 10 s"))??
            .ok_or_else(|| Status::cancelled("stream closed before hello"))?;
        let Some(agent_message::Body::Hello(hello)) = first.body else {
            return Err(Status::invalid_argument("the first message of a session must be hello"));
        };
        if hello.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "agent speaks protocol version {}, this coordinator speaks version {PROTOCOL_VERSION}; upgrade the older side",
                hello.protocol_version
            )));
        }
        if !self.token.matches(hello.enrollment_token.as_bytes()) {
            tracing::warn!(peer = ?peer, name = ?hello.name, "hello with a wrong enrollment token");
            return Err(Status::unauthenticated("invalid enrollment token"));
        }
        wire::validate_hello(&hello).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let accepted = self.welcome(&hello, peer).await?;

        let (tx, rx) = mpsc::channel(64);
        let welcome = v1::Welcome {
            agent_id: accepted.host_id.to_string(),
            heartbeat_interval_ms: self.heartbeat.as_millis() as u32,
        };
        tx.send(Ok(CoordinatorMessage {
            body: Some(Body::Welcome(welcome)),
        }))
        .await
        .map_err(|_| Status::cancelled("agent went away"))?;
        let generation = self.scheduler.connect(accepted.host_id, tx.clone());
        if accepted.facts_changed {
            self.findings.facts_changed();
        }
        tracing::info!(host = accepted.host_id, name = ?hello.name, peer = ?peer, facts_changed = accepted.facts_changed, "agent connected");

        let session = Session {
            scheduler: self.scheduler.clone(),
            host_id: accepted.host_id,
            session_id: accepted.session_id,
            generation,
            tx,
            silence: self.heartbeat * MISSED_HEARTBEATS,
            shutdown: self.shutdown.clone(),
            dispatch_on_connect: !accepted.holds_jobs,
            findings: self.findings.clone(),
        };
        tokio::spawn(session.run(inbound));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

struct Accepted {
    host_id: i64,
    session_id: i64,
    facts_changed: bool,
    /// The agent runs a job or has spooled outcomes: dispatch waits for its
    /// next outcome, so a spooled job is not handed out again meanwhile.
    holds_jobs: bool,
}

impl AgentSvc {
    /// Stores the host, its facts and the session; adopts jobs the agent still holds.
    async fn welcome(&self, hello: &v1::Hello, peer: Option<SocketAddr>) -> Result<Accepted, Status> {
        let pool = self.scheduler.pool();
        let facts_json = hello.facts.as_ref().map(|f| f.facts_json.as_str()).unwrap_or("");
        let facts: serde_json::Value = serde_json::from_str(facts_json)
            .ok()
            .filter(serde_json::Value::is_object)
            .ok_or_else(|| Status::invalid_argument("hello.facts.facts_json: not a JSON object of probe facts"))?;
        let labels: Labels = hello.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect();
        let up = db::hosts::upsert_host_with_facts(pool, &hello.name, Some(&labels), &facts)
            .await
            .map_err(db_status)?;
        let agent_version = hello.capabilities.as_ref().map(|c| c.agent_version.as_str());
        let session_id = db::sessions::open(
            pool,
            up.host_id,
            Some(up.snapshot_id),
            peer.map(|p| p.to_string()).as_deref(),
            agent_version,
        )
        .await
        .map_err(db_status)?;
        // The job the agent is still running stays with it: re-dispatching it
        // would run a benchmark twice, or two at once. An agent running nothing
        // lost whatever this host had running (it restarted, or this coordinator
        // did and never saw the session end): back to the queue.
        if let Ok(job_id) = Uuid::parse_str(&hello.running_job_id) {
            db::jobs::adopt(pool, job_id, up.host_id).await.map_err(db_status)?;
        } else {
            let lost = db::jobs::requeue_lost(pool, up.host_id).await.map_err(db_status)?;
            if !lost.requeued.is_empty() || !lost.failed.is_empty() {
                tracing::info!(host = up.host_id, requeued = ?lost.requeued, failed = ?lost.failed, "jobs the agent no longer runs");
            }
        }
        Ok(Accepted {
            host_id: up.host_id,
            session_id,
            facts_changed: up.facts_changed,
            holds_jobs: !hello.running_job_id.is_empty() || !hello.spooled_job_ids.is_empty(),
        })
    }
}

/// One connected agent: reads its messages until it leaves.
struct Session {
    scheduler: Arc<Scheduler>,
    host_id: i64,
    session_id: i64,
    generation: u64,
    tx: mpsc::Sender<Result<CoordinatorMessage, Status>>,
    silence: Duration,
    shutdown: CancellationToken,
    dispatch_on_connect: bool,
    findings: Arc<Deriver>,
}

/// Why a session ended.
enum End {
    Closed,
    Lost(&'static str),
    Refused(Status),
    Shutdown,
}

impl Session {
    /// `inbound` is the session's `Streaming`, or in tests any stream of messages.
    async fn run(self, mut inbound: impl Stream<Item = Result<AgentMessage, Status>> + Unpin) {
        if self.dispatch_on_connect
            && let Err(e) = self.scheduler.dispatch(self.host_id).await
        {
            tracing::warn!(host = self.host_id, error = %e, "dispatch on connect failed");
        }
        let end = loop {
            let next = tokio::select! {
                _ = self.shutdown.cancelled() => break End::Shutdown,
                next = tokio::time::timeout(self.silence, inbound.next()) => next,
            };
            let message = match next {
                Err(_) => break End::Lost("no heartbeat for three intervals"),
                // The agent hung up (a stop, a restart, a network cut): its job, if any, is lost
                // all the same, but this is no silence worth a warning.
                Ok(Some(Err(status))) => {
                    tracing::debug!(host = self.host_id, status = ?status, "session stream ended with an error");
                    break End::Closed;
                }
                Ok(None) => break End::Closed,
                Ok(Some(Ok(m))) => m,
            };
            if let Err(status) = self.handle(message).await {
                break End::Refused(status);
            }
        };
        self.finish(end).await;
    }

    async fn finish(self, end: End) {
        let pool = self.scheduler.pool();
        match &end {
            End::Refused(status) => {
                tracing::warn!(host = self.host_id, status = ?status, "session ended by the coordinator");
                let _ = self.tx.send(Err(status.clone())).await;
            }
            End::Lost(why) => tracing::warn!(host = self.host_id, why, "agent lost"),
            End::Closed => tracing::info!(host = self.host_id, "agent disconnected"),
            End::Shutdown => {}
        }
        let current = self.scheduler.disconnect(self.host_id, self.generation);
        // On shutdown the agent keeps running its job and reports it to the next
        // coordinator; otherwise the job goes back to the queue (or fails after
        // its last attempt).
        if current && !matches!(end, End::Shutdown) {
            match db::jobs::requeue_lost(pool, self.host_id).await {
                Ok(r) if !r.requeued.is_empty() || !r.failed.is_empty() => {
                    tracing::info!(host = self.host_id, requeued = ?r.requeued, failed = ?r.failed, "jobs of a lost agent")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(host = self.host_id, error = %e, "could not re-queue the jobs of a lost agent")
                }
            }
        }
        if let Err(e) = db::sessions::close(pool, self.session_id).await {
            tracing::debug!(error = %e, "closing the session row");
        }
    }

    async fn send(&self, body: Body) -> Result<(), Status> {
        self.tx
            .send(Ok(CoordinatorMessage { body: Some(body) }))
            .await
            .map_err(|_| Status::cancelled("agent went away"))
    }

    async fn ack(&self, job_id: &str, rejected: Option<String>) -> Result<(), Status> {
        self.send(Body::ResultAck(v1::ResultAck {
            job_id: job_id.to_string(),
            rejected: rejected.unwrap_or_default(),
        }))
        .await
    }

    async fn handle(&self, message: AgentMessage) -> Result<(), Status> {
        use agent_message::Body as In;
        let pool = self.scheduler.pool();
        match message.body {
            None => Err(Status::invalid_argument("empty message (no known body)")),
            Some(In::Hello(_)) => Err(Status::invalid_argument("hello may only open a session")),
            Some(In::Heartbeat(_)) => db::hosts::touch(pool, self.host_id).await.map_err(super::db_status),
            Some(In::JobAccepted(a)) => {
                let job_id = parse_job_id(&a.job_id)?;
                db::jobs::mark_started(pool, job_id, self.host_id)
                    .await
                    .map_err(super::db_status)?;
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
                if f.busy {
                    // Not an attempt; the agent's outstanding outcome will trigger the next dispatch.
                    db::jobs::release(pool, job_id, self.host_id)
                        .await
                        .map_err(super::db_status)?;
                    return Ok(());
                }
                match db::jobs::fail(pool, job_id, self.host_id, &f.error).await {
                    Ok(_) => {}
                    Err(db::Error::UnknownJob(_) | db::Error::JobOfAnotherHost { .. }) => {
                        return self
                            .ack(&f.job_id, Some(format!("job {job_id} is not assigned to this host")))
                            .await;
                    }
                    Err(e) => return Err(super::db_status(e)),
                }
                self.ack(&f.job_id, None).await?;
                self.scheduler.dispatch(self.host_id).await.map_err(super::db_status)
            }
            Some(In::JobResult(r)) => {
                let job_id = parse_job_id(&r.job_id)?;
                let Some(m) = r.measurement else {
                    return Err(Status::invalid_argument("job_result.measurement: missing"));
                };
                match self.record(job_id, &m).await? {
                    Ok(()) => self.ack(&r.job_id, None).await?,
                    Err(reason) => {
                        tracing::warn!(host = self.host_id, job = %job_id, reason = ?reason, "result refused");
                        self.ack(&r.job_id, Some(reason)).await?
                    }
                }
                self.scheduler.dispatch(self.host_id).await.map_err(super::db_status)
            }
        }
    }

    /// Stores a result. The outer error ends the session (database away: the
    /// agent keeps its spooled copy and re-sends it); the inner one refuses
    /// this result for good, with the reason.
    async fn record(&self, job_id: Uuid, m: &v1::Measurement) -> Result<Result<(), String>, Status> {
        let pool = self.scheduler.pool();
        let job = match db::jobs::get(pool, job_id).await.map_err(super::db_status)? {
            Some(job) if job.host_id == self.host_id => job,
            _ => return Ok(Err(format!("job {job_id} is not assigned to this host"))),
        };
        let checked = serde_json::from_value::<JobSpec>(job.spec.clone())
            .map_err(|e| format!("stored spec unreadable: {e}"))
            .and_then(|spec| {
                wire::validate_measurement(m).map_err(|e| e.to_string())?;
                wire::check_measurement_matches(&spec, m).map_err(|e| e.to_string())
            })
            .and_then(|()| {
                let json: serde_json::Value =
                    serde_json::from_str(&m.measurement_json).map_err(|e| format!("measurement_json: {e}"))?;
                let (path_used, figures) = what_ran(&json)?;
                Ok((json, path_used, figures))
            });
        let (json, path_used, figures) = match checked {
            Ok(ok) => ok,
            Err(reason) => {
                // The job cannot succeed with this result; fail it with the reason so the campaign moves on.
                db::jobs::fail(pool, job_id, self.host_id, &format!("invalid measurement: {reason}"))
                    .await
                    .map_err(super::db_status)?;
                return Ok(Err(format!("invalid measurement: {reason}")));
            }
        };
        match db::results::record(pool, job_id, self.host_id, path_used, &figures, &json).await {
            Ok(outcome) => {
                tracing::debug!(host = self.host_id, job = %job_id, ?outcome, "result");
                if outcome == db::results::RecordOutcome::Inserted {
                    self.findings.result_stored(self.host_id, job.point.algorithm.name());
                }
                Ok(Ok(()))
            }
            Err(db::Error::Database(sqlx::Error::Database(e))) if e.is_check_violation() => {
                Ok(Err(format!("invalid measurement: {}", e.message())))
            }
            Err(e) => Err(super::db_status(e)),
        }
    }
}

/// The path that ran and the figures of a successful measurement: what
/// [`db::results::record`] stores in typed columns beside the raw object.
fn what_ran(json: &serde_json::Value) -> Result<(PathUsed, Figures), String> {
    let m = Measurement::deserialize(json).map_err(|e| format!("measurement_json: {e}"))?;
    match (m.status, m.path_used, m.figures) {
        (measurement::Status::Ok, Some(path_used), Some(figures)) => Ok((path_used, figures)),
        _ => Err("measurement_json: not a successful measurement (status ok, with path_used and figures)".into()),
    }
}

fn parse_job_id(s: &str) -> Result<Uuid, Status> {
    Uuid::parse_str(s).map_err(|_| Status::invalid_argument(format!("job_id: {:?} is not a job id", truncate(s, 64))))
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::measurement::{Latency, LatencyMethod, SampleKind, WorkerReport};
    use cipherfleet_core::path::{Backends, Flavour};
    use cipherfleet_core::spec::Suite;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    use tokio::time::Instant;

    use super::*;

    const HEARTBEAT: Duration = Duration::from_secs(10);
    const HOST: i64 = 7;

    /// A progress report: a message that needs no database.
    fn progress() -> Result<AgentMessage, Status> {
        Ok(AgentMessage {
            body: Some(agent_message::Body::JobProgress(v1::JobProgress {
                job_id: Uuid::nil().to_string(),
                ..Default::default()
            })),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_agent_is_lost_after_three_heartbeats_and_any_message_restarts_the_count() {
        // Nothing on this path needs the database: a closed pool makes sure
        // (re-queueing the lost host's jobs then fails, and is only logged).
        let pool = PgPoolOptions::new().connect_lazy_with(PgConnectOptions::new());
        pool.close().await;
        let scheduler = Arc::new(Scheduler::new(pool));
        let (tx, mut outbound) = mpsc::channel(8);
        let generation = scheduler.connect(HOST, tx.clone());
        let (agent, inbound) = mpsc::channel(8);
        let session = Session {
            scheduler: scheduler.clone(),
            host_id: HOST,
            session_id: 1,
            generation,
            tx,
            silence: HEARTBEAT * MISSED_HEARTBEATS,
            shutdown: CancellationToken::new(),
            dispatch_on_connect: false,
            findings: Deriver::new(),
        };
        let start = Instant::now();
        let ended = tokio::spawn(session.run(ReceiverStream::new(inbound)));

        let almost = HEARTBEAT * 3 - Duration::from_millis(1);
        tokio::time::sleep(almost).await;
        assert!(scheduler.is_online(HOST), "lost before three intervals");
        agent.send(progress()).await.unwrap();
        tokio::time::sleep(almost).await;
        assert!(scheduler.is_online(HOST), "the message did not restart the count");

        // Silent since: lost three intervals after its last message.
        ended.await.unwrap();
        assert_eq!(start.elapsed(), almost + HEARTBEAT * 3);
        assert!(!scheduler.is_online(HOST));
        assert!(outbound.recv().await.is_none(), "the agent's stream is closed");
    }

    fn figures() -> Figures {
        Figures {
            throughput_mb_s: 4012.5,
            ops_per_s: 244903.0,
            latency_ns: Latency {
                p50: 4000,
                p90: 4100,
                p99: 5000,
                p999: 9000,
                max: 20000,
            },
            latency_method: LatencyMethod::PerOp,
            batch_ops: 1,
            cv: Some(0.01),
            samples: 3,
            sample_seconds: 0.033,
            warmup_seconds: 0.25,
            elapsed_seconds: 1.0,
            operations: 244903,
            bytes_processed: 4012490752,
            cpu_user_seconds: 0.99,
            cpu_sys_seconds: 0.0,
            cpu_utilization: 0.99,
            key_setup_ns: 120.5,
            sample_throughputs_mb_s: vec![4000.0, 4012.5, 4020.0],
            latency_samples: 3000,
            throughput_batch_ops: 4096,
            sample_kind: SampleKind::Window,
            low_samples: true,
            all_running_bytes: 0,
            all_running_seconds: 0.0,
            objects: None,
            arrival_rate_per_s: None,
            memory: None,
        }
    }

    #[test]
    fn a_successful_measurement_gives_what_ran_and_its_figures() {
        let spec = Suite::Quick.expand(1)[0].clone();
        let report = WorkerReport {
            path_used: PathUsed::Partial,
            backends: Backends {
                aes: "aes-ni".into(),
                ..Backends::soft()
            },
            build_flavour: Flavour::Software,
            selftest_passed: 4,
            figures: figures(),
            harness: Default::default(),
        };
        let json = serde_json::to_value(Measurement::ok(&spec, report, None)).unwrap();
        assert_eq!(what_ran(&json), Ok((PathUsed::Partial, figures())));
    }

    #[test]
    fn a_failed_or_malformed_measurement_has_no_figures_to_store() {
        let spec = Suite::Quick.expand(1)[0].clone();
        let failed = serde_json::to_value(Measurement::failed(&spec, "self-test failed".into(), None)).unwrap();
        let err = what_ran(&failed).unwrap_err();
        assert!(err.contains("not a successful measurement"), "{err}");
        let err = what_ran(&serde_json::json!({"schema": "cipherfleet.measurement/1"})).unwrap_err();
        assert!(err.starts_with("measurement_json: missing field"), "{err}");
    }
}
