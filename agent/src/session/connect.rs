//! Opening a session: dial, `Hello` → `Welcome`, the credential `Welcome`
//! confirms stored; and how a refusal or a broken stream is judged.

use std::net::IpAddr;
use std::time::Duration;

use cipherfleet_core::token::Secret;
use cipherfleet_core::wire;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::agent_service_client::AgentServiceClient;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status, Streaming};
use tracing::debug;

use super::credential::HostCredential;
use super::{Agent, Event, Host, Presence};

/// Longest wait for the TCP connection, for the TLS handshake, and then for
/// `Welcome`: the protocol's answer timeout, which the coordinator counts on.
const HANDSHAKE_TIMEOUT: Duration = cipherfleet_proto::ANSWER_TIMEOUT;

/// One coordinator the agent may connect to.
#[derive(Debug, Clone)]
pub struct CoordinatorUrl {
    /// `http://host:port` or `https://host:port`.
    pub url: String,
    /// How to check an `https://` coordinator's certificate; `None` for `http://`.
    pub tls: Option<ClientTlsConfig>,
}

/// How a session ended.
#[derive(Debug)]
pub(crate) enum SessionEnd {
    /// Shutdown was requested (and, for a host that drains, finished while connected).
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
pub(crate) const PUSHBACK_KEY: &str = "grpc-retry-pushback-ms";
/// The longest time to come back honoured (the backoff's own ceiling).
pub(crate) const MAX_PUSHBACK: Duration = super::backoff::CAP;

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

/// Dials the coordinator: one connection of its own, HTTP/2 keep-alive, TLS
/// when its URL is https://, from `local_address` when given (else the one
/// the kernel picks).
async fn open_channel(coordinator: &CoordinatorUrl, local_address: Option<IpAddr>) -> Result<Channel, SessionEnd> {
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

/// A welcomed session's halves: the queue to the coordinator, its `Welcome`, the stream from it.
pub(super) struct Opened {
    pub tx: Outgoing,
    pub welcome: v1::Welcome,
    pub inbound: Streaming<v1::CoordinatorMessage>,
}

/// Dials `coordinator`, says `Hello` and waits for `Welcome`, storing the
/// credential it confirms before anything else happens.
pub(super) async fn handshake<H: Host>(
    agent: &Agent<'_>,
    credential: &mut HostCredential,
    host: &mut H,
    coordinator: &CoordinatorUrl,
) -> Result<Opened, SessionEnd> {
    let channel = open_channel(coordinator, agent.local_address).await?;
    let mut client = AgentServiceClient::new(channel);

    let (tx, rx) = outgoing(H::OUTBOUND_QUEUE);
    let hello = hello(agent, credential, host.presence());
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
        keep_credential(agent, credential, &welcome.credential).await?;
        host.note(Event::Enrolled {
            credential_file: credential.path().as_deref(),
        });
    }
    Ok(Opened { tx, welcome, inbound })
}

/// Stores the credential `Welcome` confirmed (this agent's proposal, or one an
/// older coordinator issued): without it the host could not prove who it is
/// next time, so failing to store it ends the agent. On a blocking thread: a
/// simulator enrolls thousands of hosts at once, each with an fsync.
async fn keep_credential(agent: &Agent<'_>, held: &mut HostCredential, credential: &str) -> Result<(), SessionEnd> {
    if !well_formed_credential(credential) {
        return Err(lost("the coordinator sent a malformed host credential", false));
    }
    let (mut updated, value) = (held.clone(), credential.to_string());
    let stored = tokio::task::spawn_blocking(move || updated.welcomed(&value).map(|()| updated)).await;
    match stored.map_err(std::io::Error::other).and_then(|r| r) {
        Ok(updated) => {
            *held = updated;
            Ok(())
        }
        Err(e) => Err(SessionEnd::Rejected(format!(
            "cannot store the host credential in {}: {e}. The coordinator enrolled this host, but \
             the agent could not prove it next time: fix the state directory (--state-dir), then have \
             an operator run `cipherfleet-coordinator hosts reset-credential {}`",
            held.path().unwrap_or_default().display(),
            agent.name
        ))),
    }
}

/// Whether a credential from `Welcome` can be stored and presented again.
fn well_formed_credential(credential: &str) -> bool {
    credential.len() <= wire::MAX_CREDENTIAL_LEN && credential.bytes().all(|b| b.is_ascii_graphic())
}

/// The `Hello` for this session: who the agent is, and what its host presents now.
fn hello(agent: &Agent<'_>, credential: &HostCredential, presence: Presence) -> v1::Hello {
    let (running_job_id, running_attempt_id) = presence.running.unwrap_or_default();
    v1::Hello {
        protocol_version: PROTOCOL_VERSION,
        enrollment_token: agent.token.expose().to_string(),
        credential: exposed(credential.current()),
        proposed_credential: exposed(credential.proposed()),
        facts: Some(presence.facts),
        capabilities: Some(v1::Capabilities {
            paths: presence.paths,
            max_threads: presence.max_threads,
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
        }),
        labels: agent.labels.to_vec(),
        name: agent.name.to_string(),
        running_job_id,
        running_attempt_id,
        spooled_job_ids: presence.spooled.into_iter().take(wire::MAX_SPOOLED_JOB_IDS).collect(),
    }
}

/// A secret as a `Hello` field: empty when there is none.
fn exposed(secret: Option<&Secret>) -> String {
    secret.map(|s| s.expose().to_string()).unwrap_or_default()
}

/// One message for the coordinator, boxed for the session's queue ([`Outgoing`]).
pub(super) fn message(body: agent_message::Body) -> Box<v1::AgentMessage> {
    Box::new(v1::AgentMessage { body: Some(body) })
}

/// The sending half of a session's queue to the coordinator. It holds boxes:
/// tokio allocates a channel's slots 32 at a time, the first block when the
/// channel is made, and an `AgentMessage` is as large as its largest body (the
/// `Hello`), so a queue of whole messages would hold that block in every
/// session, a simulator's thousands of hosts included, before anything was sent.
pub(super) type Outgoing = mpsc::Sender<Box<v1::AgentMessage>>;

/// A session's queue to the coordinator: the sender, and the stream the
/// session call reads.
fn outgoing(capacity: usize) -> (Outgoing, impl Stream<Item = v1::AgentMessage> + Send + 'static) {
    let (tx, rx) = mpsc::channel(capacity);
    (tx, ReceiverStream::new(rx).map(|boxed: Box<v1::AgentMessage>| *boxed))
}
