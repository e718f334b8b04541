//! A session's handshake, from its first message to `Welcome`, done before
//! the agent stops waiting for the answer ([`super::super::deadline`]).
//!
//! The common case is a known host reconnecting (a coordinator restart, a
//! failover, a network cut) with the facts, labels and paths it had: it costs
//! two round trips to the database, a read that admits it
//! ([`store::identity::lookup`]: its credential checked against the stored hash)
//! and the start of its session ([`store::sessions::start`]: its lease, its
//! session row and the job its agent still runs, in one transaction). Any
//! other hello, an enrollment or one that changes what is stored, is admitted
//! by [`store::identity::admit`] and stores its changes after its session starts.
//!
//! The host's session slot on this coordinator comes before anything of the
//! host changes, then its lease in the cluster: a second session must not
//! re-queue the first one's job or overwrite its labels. A handshake dropped
//! half-way (its agent gave up and reset the stream) gives both back
//! ([`Handshaking`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use cipherfleet_core::wire;
use cipherfleet_proto::v1::{self, AgentMessage, agent_message, coordinator_message::Body};
use rustls_pki_types::CertificateDer;
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_stream::{Stream, StreamExt};
use tonic::Status;
use uuid::Uuid;

use super::{AgentSvc, LOGGED_NAME_LEN, Session, truncate};
use crate::cluster::{self, Holding};
use crate::domain::credential::NewCredential;
use crate::domain::facts::NormalisedFacts;
use crate::domain::labels::Labels;
use crate::grpc::capabilities;
use crate::grpc::db_status;
use crate::grpc::turns::PUSHBACK_KEY;
use crate::guard::auth::SecretKind;
use crate::scheduler::Scheduler;
use crate::scheduler::outbound::{Outbound, OutboundStream};
use crate::store;
use crate::store::identity::{Admission, Enrollment, Refusal};
use crate::tls::client_cert;
use crate::watch::verify;

/// How long a new stream may take to say hello (less when its agent's answer is due sooner).
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A host held by another coordinator's live lease is told to come back when
/// that lease ends, plus a random part of this, so the hosts of a coordinator
/// that died (whose leases end together) come back spread out.
const HELD_SPREAD: Duration = Duration::from_secs(4);
/// A host whose lease is held by a coordinator that missed a renewal (likely
/// gone) is told to come back within this …
const SILENT_BACK: Duration = Duration::from_secs(1);
/// … plus a random part of this: soon, since a restarted successor ends the
/// dead one's leases at its start, but spread, since all its hosts ask at once.
const SILENT_SPREAD: Duration = Duration::from_secs(1);

/// What a `Hello` says, checked, before any of it is stored.
struct Said {
    facts: serde_json::Value,
    normalised: NormalisedFacts,
    labels: Labels,
}

impl AgentSvc {
    /// Reads the `Hello` from `inbound`, admits its host and starts its
    /// session, for an answer due by `answer_by`: the session to run (on the
    /// rest of `inbound`) and the stream to the agent, `Welcome` queued first.
    pub(super) async fn handshake<S>(
        &self,
        inbound: &mut S,
        answer_by: Instant,
        peer: Option<SocketAddr>,
        peer_certs: Option<&[CertificateDer<'static>]>,
    ) -> Result<(Session, OutboundStream), Status>
    where
        S: Stream<Item = Result<AgentMessage, Status>> + Unpin,
    {
        let hello_by = answer_by.min(Instant::now() + HELLO_TIMEOUT);
        let first = tokio::time::timeout_at(hello_by, inbound.next())
            .await
            .map_err(|_| Status::deadline_exceeded("no hello in time"))?
            .ok_or_else(|| Status::cancelled("stream closed before hello"))??;
        let Some(agent_message::Body::Hello(hello)) = first.body else {
            return Err(Status::invalid_argument("the first message of a session must be hello"));
        };
        // Agents one version behind are served: the fleet upgrades its coordinator first.
        if let Err(refused) = cipherfleet_proto::check_agent_version(hello.protocol_version) {
            return Err(Status::failed_precondition(refused.to_string()));
        }
        wire::validate_hello(&hello).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let peer_ip = peer.map(|p| p.ip());
        // What the hello proves is checked lazily, each secret under its own limit: a host
        // presenting its credential needs no token, and its token is then never looked at.
        let mut token = TokenCheck::new(&hello.enrollment_token);
        if hello.credential.is_empty() && !token.proved(self, peer_ip)? {
            let name = truncate(&hello.name, LOGGED_NAME_LEN);
            tracing::warn!(peer = ?peer, name = ?name, "hello with a wrong enrollment token");
            return Err(Status::unauthenticated("invalid enrollment token"));
        }
        // Under mutual TLS the certificate names the host; the credential is still checked below.
        if self.client_certs
            && let Err(mismatch) = client_cert::check_host_name(peer_certs, &hello.name)
        {
            let name = truncate(&hello.name, LOGGED_NAME_LEN);
            tracing::warn!(
                peer = ?peer, name = ?name, reason = mismatch.reason(), certificate_names = mismatch.expected(),
                "hello refused: not the client certificate's host"
            );
            return Err(Status::permission_denied(mismatch.to_string()));
        }
        let said = said(&hello)?;
        // The credential's check, limited by its host name's failures alone.
        let credential = if hello.credential.is_empty() {
            None
        } else {
            Some(
                self.failed_auth
                    .attempt(SecretKind::HostCredential, peer_ip, &hello.name)
                    .inspect_err(|limited| {
                        let name = truncate(&hello.name, LOGGED_NAME_LEN);
                        tracing::warn!(peer = ?peer, name = ?name, %limited, "hello refused before its credential was checked");
                    })?,
            )
        };
        // A turn for the database work, held until the session is welcomed; refused
        // with a time to come back when none is free in time for the agent.
        let turn = self.handshakes.take_before(answer_by).await?;
        let pool = &self.pool;
        // The database steps below are boxed: a future's size is that of its
        // largest step, and this one is alive from the first byte of every
        // session, also while thousands wait for their turn in a connect storm.
        let found = Box::pin(store::identity::lookup(pool, &hello.name, self.scheduler.holder().id))
            .await
            .map_err(db_status)?;
        // The credential the agent is to store, when this hello enrolls the host.
        let (host_id, unchanged, issued) = match found {
            Some(known) if known.admits(&hello.credential) => {
                if let Some(attempt) = credential {
                    attempt.judge(true);
                }
                if let Some(ms) = known.held_elsewhere_ms {
                    let lease_left = Duration::from_millis(ms.max(0) as u64);
                    Box::pin(self.wait_for_holder(known.host_id, &hello.name, peer, lease_left)).await?;
                }
                let unchanged = known.labels.0 == said.labels
                    && known.facts_hash.as_deref() == Some(&said.normalised.hash[..])
                    && capabilities::as_stored(&hello, known.paths.as_deref());
                (known.host_id, unchanged, None)
            }
            _ => {
                // Not a known host with its credential: enrolling needs the token (looked at
                // only now), unless the host holds the credential it proposes already.
                let token_ok = token.proved(self, peer_ip)?;
                let enrolled = Box::pin(self.enroll(&hello, token_ok, peer)).await;
                if let Some(attempt) = credential {
                    // A refusal, not a database error, says the credential was wrong.
                    let refused = enrolled.as_ref().is_err_and(|s| {
                        matches!(s.code(), tonic::Code::PermissionDenied | tonic::Code::Unauthenticated)
                    });
                    attempt.judge(!refused);
                }
                let (host_id, issued) = enrolled?;
                (host_id, false, issued)
            }
        };

        // The host's one session slot, before anything of it changes.
        let (tx, rx) = Outbound::channel();
        let reservation = self
            .scheduler
            .reserve(host_id, tx.clone())
            .map_err(|_| second_session(&hello.name, host_id, peer))?;
        let generation = reservation.generation;
        let mut pending = Handshaking::new(self.pool.clone(), self.scheduler.clone(), host_id, generation);
        // Then the cluster's: a session of the host on another coordinator holds its lease.
        let peer_address = peer.map(|p| p.to_string());
        let running = Uuid::parse_str(&hello.running_job_id)
            .ok()
            .zip(Uuid::parse_str(&hello.running_attempt_id).ok());
        let spooled: Vec<Uuid> = hello
            .spooled_job_ids
            .iter()
            .filter_map(|id| Uuid::parse_str(id).ok())
            .collect();
        let opening = store::sessions::Opening {
            welcomed: unchanged,
            peer_address: peer_address.as_deref(),
            agent_version: hello.capabilities.as_ref().map(|c| c.agent_version.as_str()),
            running,
            spooled: &spooled,
        };
        let started = Box::pin(self.scheduler.start_session(host_id, generation, opening))
            .await
            .map_err(db_status)?
            .ok_or_else(|| second_session(&hello.name, host_id, peer))?;
        pending.started(started.session_id);
        let lost = &started.lost;
        if !lost.requeued.is_empty() || !lost.failed.is_empty() {
            tracing::info!(host = host_id, requeued = ?lost.requeued, failed = ?lost.failed, "jobs the agent no longer runs");
        }
        self.last_seen.mark(host_id);
        let (facts_changed, paths_changed) = if unchanged {
            (false, None)
        } else {
            Box::pin(self.store(&hello, host_id, started.session_id, &said)).await?
        };

        let heartbeat = self.heartbeat.interval(self.scheduler.sessions());
        let welcome = v1::Welcome {
            agent_id: host_id.to_string(),
            heartbeat_interval_ms: heartbeat.as_millis() as u32,
            credential: issued.unwrap_or_default(),
        };
        // Queued before the session is activated, so no `RunJob` can precede it.
        tx.try_send(Body::Welcome(welcome)).map_err(|e| e.status())?;
        if unchanged {
            // Its lease was welcomed as it was taken.
            self.scheduler.activate(host_id, generation);
        } else {
            Box::pin(self.scheduler.welcome(host_id, generation))
                .await
                .map_err(db_status)?;
        }
        if facts_changed {
            self.findings.facts_changed();
        }
        let mut verifying = false;
        if facts_changed || paths_changed.is_some() {
            // Queued before the session's first dispatch, which then hands it out.
            match Box::pin(verify::on_hello(pool, &self.verify, host_id, paths_changed.as_ref())).await {
                Ok(queued) => verifying = queued.is_some(),
                Err(e) => tracing::warn!(host = host_id, error = %e, "queueing a verification campaign"),
            }
        }
        drop(turn);
        tracing::info!(host = host_id, name = ?hello.name, peer = ?peer, facts_changed, "agent connected");

        let holds_jobs = !hello.running_job_id.is_empty() || !hello.spooled_job_ids.is_empty();
        let session = Session {
            pool: self.pool.clone(),
            scheduler: self.scheduler.clone(),
            ingest: self.ingest.clone(),
            last_seen: self.last_seen.clone(),
            host_id,
            session_id: started.session_id,
            generation,
            tx,
            heartbeat,
            pace: self.heartbeat.subscribe(),
            shutdown: self.shutdown.clone(),
            ended: reservation.ended,
            // The agent runs a job or has spooled outcomes: dispatch waits for its
            // next outcome, so a spooled job is not handed out again meanwhile. Nor
            // is there a dispatch without work: jobs queued since the session
            // started are handed out by the wake-up of their queueing, or at
            // the latest by its 5 s poll ([`crate::cluster::wake`]).
            dispatch_on_connect: !holds_jobs && (started.queued_work || verifying),
            findings: self.findings.clone(),
            snapshot: tokio::sync::OnceCell::new(),
        };
        // Nothing is awaited from here until the session's task runs it.
        pending.done();
        Ok((session, rx))
    }
}

/// What `hello` says of its host, checked: its facts (a JSON object of probe
/// facts, and their hash) and its labels.
fn said(hello: &v1::Hello) -> Result<Said, Status> {
    let facts_json = hello.facts.as_ref().map(|f| f.facts_json.as_str()).unwrap_or("");
    let facts: serde_json::Value = serde_json::from_str(facts_json)
        .ok()
        .filter(serde_json::Value::is_object)
        .ok_or_else(|| Status::invalid_argument("hello.facts.facts_json: not a JSON object of probe facts"))?;
    Ok(Said {
        normalised: NormalisedFacts::new(&facts),
        facts,
        labels: hello.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect(),
    })
}

impl AgentSvc {
    /// Admits a `Hello` that is not a known host presenting its credential
    /// ([`store::identity::admit`]): the host's id, and the credential its
    /// `Welcome` carries when it enrolled.
    async fn enroll(
        &self,
        hello: &v1::Hello,
        token_ok: bool,
        peer: Option<SocketAddr>,
    ) -> Result<(i64, Option<String>), Status> {
        // What the host enrolls with if it enrolls: the agent's own proposal (its form
        // checked by `validate_hello`), else one drawn here for an agent that proposes none.
        let new_credential = match NewCredential::proposed(&hello.proposed_credential) {
            Some(proposed) => proposed,
            None => NewCredential::generate()
                .map_err(|e| Status::internal(format!("cannot draw a host credential from the OS: {e}")))?,
        };
        let admission = store::identity::admit(&self.pool, &hello.name, &hello.credential, token_ok, &new_credential)
            .await
            .map_err(db_status)?
            .map_err(|refusal| refused(refusal, &hello.name, peer, token_ok))?;
        let host_id = admission.host_id();
        let how = match admission {
            Admission::Known { .. } => return Ok((host_id, None)),
            Admission::Enrolled { how, .. } => how,
        };
        match how {
            Enrollment::Claimed => tracing::warn!(
                host = host_id, name = ?hello.name, peer = ?peer,
                "host had no credential (enrolled before credentials existed, or reset by an operator): \
                 claimed by this agent with the enrollment token and a new credential"
            ),
            Enrollment::New => tracing::info!(host = host_id, name = ?hello.name, peer = ?peer, "new host enrolled"),
            Enrollment::Repeated => tracing::info!(
                host = host_id, name = ?hello.name, peer = ?peer,
                "host enrolled again with the credential it proposed (the Welcome of its enrollment was lost)"
            ),
        }
        Ok((host_id, Some(new_credential.secret().to_string())))
    }

    /// Stores what a hello changes, once its session started: labels and
    /// facts (a new snapshot when they differ, which the session then
    /// names), and the paths it advertises. Returns whether the facts
    /// changed, and how the paths did ([`verify::paths_change`]).
    async fn store(
        &self,
        hello: &v1::Hello,
        host_id: i64,
        session_id: i64,
        said: &Said,
    ) -> Result<(bool, Option<serde_json::Value>), Status> {
        let pool = &self.pool;
        let up = store::hosts::upsert_host_with_facts(pool, &hello.name, Some(&said.labels), &said.facts)
            .await
            .map_err(db_status)?;
        debug_assert_eq!(up.host_id, host_id, "the admitted host");
        if up.facts_changed {
            store::sessions::set_snapshot(pool, session_id, up.snapshot_id)
                .await
                .map_err(db_status)?;
        }
        let paths_changed = capabilities::advertised(pool, hello, host_id).await?;
        if up.facts_changed {
            capabilities::providers_advertised(pool, hello, host_id, &said.facts).await?;
        }
        Ok((up.facts_changed, paths_changed))
    }
}

/// The answer to a refused `Hello`: names the host and what to do. Logged
/// with the name cut short, since it comes from whoever connected. Until the
/// caller proved the enrollment token (`token_ok`) it is one answer for every
/// name, enrolled, retired or unknown: host names cannot be enumerated.
fn refused(refusal: Refusal, name: &str, peer: Option<SocketAddr>, token_ok: bool) -> Status {
    tracing::warn!(peer = ?peer, name = ?truncate(name, LOGGED_NAME_LEN), ?refusal, "hello refused");
    if !token_ok {
        return Status::permission_denied(format!(
            "host {name:?} was not admitted: the credential presented is not its credential and no valid \
             enrollment token came with it. If this is that host, run the agent with its state directory (the \
             credential file in it); if its credential is lost, an operator runs \
             `cipherfleet-coordinator hosts reset-credential {name}` and the agent enrolls again with the \
             enrollment token; a new host enrolls with the enrollment token"
        ));
    }
    match refusal {
        Refusal::BadToken => Status::unauthenticated("invalid enrollment token"),
        Refusal::WrongCredential => Status::permission_denied(format!(
            "host {name:?} is enrolled with its own credential and this agent did not present it. \
             If this is that host, run the agent with its state directory (the credential file in it); \
             if the credential is lost, an operator runs `cipherfleet-coordinator hosts reset-credential {name}`. \
             If this is another machine, give its agent its own --name"
        )),
        Refusal::Retired => Status::permission_denied(format!(
            "host {name:?} was retired by an operator and is not admitted again; \
             to enroll this machine as a new host, give its agent another --name"
        )),
    }
}

/// A hello's enrollment token, checked at most once and only when what the
/// hello asks for needs it, under the limit of failed enrollment tokens from
/// its address ([`SecretKind::EnrollmentToken`]).
struct TokenCheck<'h> {
    presented: &'h str,
    proved: Option<bool>,
}

impl<'h> TokenCheck<'h> {
    fn new(presented: &'h str) -> TokenCheck<'h> {
        TokenCheck {
            presented,
            proved: None,
        }
    }

    /// Whether the token is right; `RESOURCE_EXHAUSTED` when its address failed it
    /// too often lately (it is then not looked at). An empty token proves nothing
    /// and counts nothing.
    fn proved(&mut self, svc: &AgentSvc, peer: Option<IpAddr>) -> Result<bool, Status> {
        if let Some(proved) = self.proved {
            return Ok(proved);
        }
        let proved = !self.presented.is_empty() && {
            let attempt = svc
                .failed_auth
                .attempt(SecretKind::EnrollmentToken, peer, "")
                .inspect_err(
                    |limited| tracing::warn!(peer = ?peer, %limited, "hello refused before its token was checked"),
                )?;
            attempt.judge(svc.token.matches(self.presented.as_bytes()))
        };
        self.proved = Some(proved);
        Ok(proved)
    }
}

/// The refusal of a second live session of a host (`ALREADY_EXISTS`).
fn second_session(name: &str, host_id: i64, peer: Option<SocketAddr>) -> Status {
    tracing::warn!(host = host_id, name = ?name, peer = ?peer, "second session of a host refused");
    Status::already_exists(format!(
        "host {name:?} already has a live session: another instance of this agent is running for it \
         (or the coordinator that served it died, and its lease expires within a few heartbeats). \
         A cloned machine must run with its own --name and without the credential file copied \
         into its state directory"
    ))
}

impl AgentSvc {
    /// A known host whose live lease another coordinator holds for `lease_left`
    /// still: `Ok` when that one turns out dead on this machine (its leases are
    /// ended, [`cluster::judge_holder`]) or its lease is gone, else the refusal
    /// with when to come back: when the lease ends, or soon when its holder
    /// missed a renewal (it is likely gone, and a restarted successor would end
    /// its leases at start: the agent should not wait them out).
    async fn wait_for_holder(
        &self,
        host_id: i64,
        name: &str,
        peer: Option<SocketAddr>,
        lease_left: Duration,
    ) -> Result<(), Status> {
        let holding = cluster::judge_holder(&self.pool, self.scheduler.holder(), host_id, self.heartbeat.base())
            .await
            .map_err(db_status)?;
        match holding {
            Holding::Free | Holding::Dead => Ok(()),
            Holding::Silent => Err(held_elsewhere(
                name,
                peer,
                lease_left,
                lease_left.min(SILENT_BACK),
                SILENT_SPREAD,
            )),
            Holding::Live => Err(held_elsewhere(name, peer, lease_left, lease_left, HELD_SPREAD)),
        }
    }
}

/// [`second_session`] for a host whose lease another coordinator holds for
/// `lease_left` still: come back in `back`, plus a random part of `spread`.
fn held_elsewhere(
    name: &str,
    peer: Option<SocketAddr>,
    lease_left: Duration,
    back: Duration,
    spread: Duration,
) -> Status {
    let random = getrandom::u64().unwrap_or(u64::MAX / 2);
    let spread = (u128::from(random) * spread.as_millis()) / u128::from(u64::MAX);
    let back = back.as_millis() + spread;
    tracing::debug!(name = ?truncate(name, LOGGED_NAME_LEN), peer = ?peer, back_ms = %back, "host held by another coordinator");
    let mut status = Status::already_exists(format!(
        "host {name:?} has a live session on another coordinator (or the one that served it died, and its \
         lease ends in {} ms); retry in {back} ms. A cloned machine must run with its own --name and \
         without the credential file copied into its state directory",
        lease_left.as_millis()
    ));
    if let Ok(value) = back.to_string().parse() {
        status.metadata_mut().insert(PUSHBACK_KEY, value);
    }
    status
}

/// A session between its reservation and its `Welcome`. Dropped before it is
/// [`Handshaking::done`] (an error, or the handshake itself dropped when its
/// agent gave up and reset the stream), it gives back what the session took:
/// its slot here, and its lease and session row once it started. The agent's
/// jobs stay as the start left them: it reports its running job again in its
/// next hello.
struct Handshaking {
    pool: PgPool,
    scheduler: Arc<Scheduler>,
    host_id: i64,
    generation: u64,
    /// The session row, once the session started (and took its lease).
    session_id: Option<i64>,
    done: bool,
}

impl Handshaking {
    fn new(pool: PgPool, scheduler: Arc<Scheduler>, host_id: i64, generation: u64) -> Handshaking {
        Handshaking {
            pool,
            scheduler,
            host_id,
            generation,
            session_id: None,
            done: false,
        }
    }

    fn started(&mut self, session_id: i64) {
        self.session_id = Some(session_id);
    }

    /// The session is welcomed and active: it keeps what it took.
    fn done(&mut self) {
        self.done = true;
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.scheduler.disconnect(self.host_id, self.generation);
        let Some(session_id) = self.session_id else {
            return;
        };
        let (pool, scheduler, host_id, generation) =
            (self.pool.clone(), self.scheduler.clone(), self.host_id, self.generation);
        // Dropped inside a handshake's task: the runtime is there, unless it is shutting down,
        // when the lease is given back at shutdown (or expires) and the sweep closes the row.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                scheduler.release_lease(host_id, generation).await;
                if let Err(e) = store::sessions::close(&pool, session_id).await {
                    tracing::debug!(error = %e, "closing the session row of an abandoned handshake");
                }
            });
        }
    }
}
