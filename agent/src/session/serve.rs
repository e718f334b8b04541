//! One session from dialling to its end: the spool re-sent after `Welcome`,
//! then the coordinator's messages, the host's finished jobs and the
//! heartbeats until the stream ends or shutdown is done.

use std::collections::{HashMap, HashSet};
use std::pin::pin;

use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tokio::time::Instant;
use tonic::Streaming;
use tracing::{debug, info, warn};

use super::connect::{self, CoordinatorUrl, Opened, Outgoing, SessionEnd, classify, lost, message};
use super::credential::HostCredential;
use super::heartbeat::{Pacing, heartbeat_interval};
use super::{ACK_WAIT, Agent, Event, Happening, Host, Outcome, OutcomeResult, StartRefusal};

/// Connects to `coordinator`, runs one session to its end and says how it ended.
pub(super) async fn session<H: Host>(
    agent: &Agent<'_>,
    credential: &mut HostCredential,
    host: &mut H,
    coordinator: &CoordinatorUrl,
) -> SessionEnd {
    // Until `Welcome` nothing is in flight, so shutdown abandons the attempt;
    // after it, a host that drains finishes its job first.
    let opened = tokio::select! {
        // Boxed: dialling is the largest step, and a simulated host's task would keep its size for the whole session.
        opened = Box::pin(connect::handshake(agent, credential, host, coordinator)) => opened,
        _ = agent.shutdown.cancelled() => return SessionEnd::Shutdown,
    };
    let Opened { tx, welcome, inbound } = match opened {
        Ok(opened) => opened,
        Err(end) => {
            if let SessionEnd::Lost { reason, .. } = &end {
                host.note(Event::Broken(reason));
            }
            return end;
        }
    };
    host.note(Event::Welcomed {
        coordinator: &coordinator.url,
        welcome: &welcome,
    });
    let session = Session {
        tx,
        sent: HashSet::new(),
        unacked: HashMap::new(),
        draining: false,
        repaced: None,
    };
    let end = session
        .serve(agent, host, inbound, heartbeat_interval(welcome.heartbeat_interval_ms))
        .await;
    host.note(Event::Closed);
    end
}

/// A connected, welcomed session.
struct Session {
    tx: Outgoing,
    /// Outcomes re-sent from the spool in this session (job id, finish time)
    /// that the host has not handed over yet: one both spooled and waiting in
    /// the host goes out once. A re-run of the same job id has another finish
    /// time and still goes out.
    sent: HashSet<(String, u64)>,
    /// Sent and not yet acknowledged: job id → when last sent.
    unacked: HashMap<String, Instant>,
    /// Shutdown requested: no new jobs; end once the running one is reported.
    draining: bool,
    /// A later `Welcome` told a new heartbeat interval, not yet in use.
    repaced: Option<std::time::Duration>,
}

/// The stream to the coordinator is gone.
struct Closed;

impl Session {
    async fn serve<H: Host>(
        mut self,
        agent: &Agent<'_>,
        host: &mut H,
        mut inbound: Streaming<v1::CoordinatorMessage>,
        interval: std::time::Duration,
    ) -> SessionEnd {
        let closed = |host: &mut H| {
            host.note(Event::Broken("the stream to the coordinator closed"));
            lost("the stream to the coordinator closed", true)
        };
        match host.spooled() {
            Ok(outcomes) => {
                if !outcomes.is_empty() {
                    host.note(Event::Resending(outcomes.len()));
                }
                for outcome in outcomes {
                    if self.deliver_spooled(&outcome).await.is_err() {
                        return closed(host);
                    }
                }
            }
            Err(e) => warn!("cannot read the spool: {e}"),
        }
        let now = Instant::now();
        let mut pacing = Pacing::new(interval, now, host.heartbeat_gap(interval, true));
        let mut beat = pin!(tokio::time::sleep_until(pacing.due));
        let mut seq = 0u64;
        loop {
            if self.draining && host.running().is_none() {
                return self.finish(host, &mut inbound).await;
            }
            let step = tokio::select! {
                _ = agent.shutdown.cancelled(), if !self.draining => {
                    if !H::DRAINS {
                        return SessionEnd::Shutdown;
                    }
                    self.draining = true;
                    if let Some((job_id, _)) = host.running() {
                        host.note(Event::Draining { job_id: &job_id });
                    }
                    Ok(())
                }
                received = inbound.message() => match received {
                    Ok(Some(m)) => self.handle(host, m).await,
                    Ok(None) => return lost("the coordinator ended the session", true),
                    Err(status) => {
                        let end = classify(&status, true);
                        if let SessionEnd::Lost { reason, .. } = &end {
                            host.note(Event::Broken(reason));
                        }
                        return end;
                    }
                },
                happening = host.next() => match happening {
                    Happening::Finished(outcome) => self.hand_over(&outcome).await,
                    Happening::Disconnect(reason) => return lost(reason, true),
                },
                () = &mut beat => {
                    let now = Instant::now();
                    host.note(Event::Heartbeat { late: now.saturating_duration_since(pacing.due) });
                    pacing.sent(now, host.heartbeat_gap(pacing.interval, false));
                    beat.as_mut().reset(pacing.due);
                    seq += 1;
                    self.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq })).await
                }
            };
            if step.is_err() {
                return closed(host);
            }
            if let Some(every) = self.repaced.take() {
                pacing.repace(Instant::now(), every);
                beat.as_mut().reset(pacing.due);
            }
        }
    }

    async fn handle<H: Host>(&mut self, host: &mut H, m: v1::CoordinatorMessage) -> Result<(), Closed> {
        match m.body {
            Some(coordinator_message::Body::RunJob(run)) => self.run_job(host, run).await,
            Some(coordinator_message::Body::CancelJob(cancel)) => {
                // Echoed in the error text: keep it short and on one line.
                let reason: String = wire::truncate(cancel.reason, 1024)
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                let attempt = Some(cancel.attempt_id.as_str()).filter(|a| !a.is_empty());
                let stopped = host.cancel(Some(&cancel.job_id), attempt, format!("cancelled: {reason}"));
                host.note(Event::Cancelled {
                    job_id: &cancel.job_id,
                    reason: &reason,
                    stopped,
                });
                Ok(())
            }
            Some(coordinator_message::Body::Ping(ping)) => {
                self.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq: ping.seq }))
                    .await
            }
            Some(coordinator_message::Body::ResultAck(ack)) => {
                let waited = self.unacked.remove(&ack.job_id).map(|sent| sent.elapsed());
                let unspooled = match host.unspool(&ack.job_id, &ack.attempt_id) {
                    Ok(true) => {
                        debug!("job {:?}: acknowledged, removed from the spool", ack.job_id);
                        true
                    }
                    Ok(false) => {
                        debug!("ResultAck for job {:?}, which is not spooled", ack.job_id);
                        false
                    }
                    Err(e) => {
                        warn!("job {:?}: cannot remove from the spool: {e}", ack.job_id);
                        false
                    }
                };
                host.note(Event::Acknowledged {
                    ack: &ack,
                    waited,
                    unspooled,
                });
                Ok(())
            }
            Some(coordinator_message::Body::Welcome(w)) => {
                // The coordinator's fleet grew or shrank: only the interval changes.
                if w.heartbeat_interval_ms == 0 {
                    debug!("a second Welcome without a heartbeat interval; nothing changes");
                } else {
                    let every = heartbeat_interval(w.heartbeat_interval_ms);
                    host.note(Event::Repaced(every));
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

    async fn run_job<H: Host>(&mut self, host: &mut H, run: v1::RunJob) -> Result<(), Closed> {
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
        match host.running() {
            Some((current, attempt)) if current == job_id && attempt == attempt_id => {
                return self
                    .send(agent_message::Body::JobAccepted(v1::JobAccepted { job_id, attempt_id }))
                    .await;
            }
            // Another attempt of the running job (the coordinator timed it out
            // and tries again): it runs afresh once the old attempt has ended.
            Some((current, _)) => {
                host.note(Event::Busy {
                    job_id: &job_id,
                    attempt_id: &attempt_id,
                    current: &current,
                });
                return self.send(refuse(format!("agent busy with job {current}"), true)).await;
            }
            None => {}
        }
        if let Some(outcome) = host.spooled_attempt(&job_id, &attempt_id) {
            host.note(Event::Redelivering {
                job_id: &job_id,
                attempt_id: &attempt_id,
            });
            return self.deliver_spooled(&outcome).await;
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
                    .fail_unstarted(host, job_id, attempt_id, format!("invalid job: {e}"))
                    .await;
            }
        };
        let time_limit = (run.time_limit_ms > 0).then(|| std::time::Duration::from_millis(run.time_limit_ms.into()));
        match host.start(&job_id, &attempt_id, spec, time_limit) {
            Ok(()) => {
                self.send(agent_message::Body::JobAccepted(v1::JobAccepted { job_id, attempt_id }))
                    .await
            }
            Err(StartRefusal::Refused(why)) => {
                self.fail_unstarted(host, job_id, attempt_id, format!("refused by this agent: {why}"))
                    .await
            }
            Err(StartRefusal::NotStarted { error, busy }) => {
                warn!("job {job_id:?}: not started: {error}");
                self.send(refuse(error, busy)).await
            }
        }
    }

    /// A job that cannot start (an invalid spec, past a ceiling) fails for good:
    /// the outcome is spooled and sent like any other.
    async fn fail_unstarted<H: Host>(
        &mut self,
        host: &mut H,
        job_id: String,
        attempt_id: String,
        error: String,
    ) -> Result<(), Closed> {
        let outcome = Outcome::failed(job_id, attempt_id, error);
        if let Err(e) = host.spool(&outcome) {
            warn!("cannot spool the outcome of job {:?}: {e}", outcome.job_id);
        }
        self.deliver(&outcome).await
    }

    /// An outcome the host handed over: sent unless this session already re-sent it from the spool.
    async fn hand_over(&mut self, outcome: &Outcome) -> Result<(), Closed> {
        if self.sent.remove(&outcome.key()) {
            return Ok(());
        }
        self.deliver(outcome).await
    }

    /// Sends an outcome read from the spool, which the host may still hand over.
    async fn deliver_spooled(&mut self, outcome: &Outcome) -> Result<(), Closed> {
        self.deliver(outcome).await?;
        self.sent.insert(outcome.key());
        Ok(())
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
        self.unacked.insert(job_id, Instant::now());
        Ok(())
    }

    async fn send(&self, body: agent_message::Body) -> Result<(), Closed> {
        self.tx.send(message(body)).await.map_err(|_| Closed)
    }

    /// Shutdown with nothing running: report what is left, give the
    /// coordinator a moment to acknowledge, and close our side of the stream.
    async fn finish<H: Host>(mut self, host: &mut H, inbound: &mut Streaming<v1::CoordinatorMessage>) -> SessionEnd {
        while let Some(outcome) = host.ready() {
            if self.hand_over(&outcome).await.is_err() {
                return SessionEnd::Shutdown;
            }
        }
        let deadline = Instant::now() + ACK_WAIT;
        while !self.unacked.is_empty() {
            match tokio::time::timeout_at(deadline, inbound.message()).await {
                Ok(Ok(Some(m))) => {
                    if self.handle(host, m).await.is_err() {
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
