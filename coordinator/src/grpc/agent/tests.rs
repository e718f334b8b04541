//! Unit tests of the agent session without a database: outcome decoding, silence, floods, full
//! queues, refusals before hello.

use cipherfleet_core::measurement::{Latency, LatencyMethod, SampleKind, WorkerReport};
use cipherfleet_core::path::{Backends, Flavour};
use cipherfleet_core::spec::Suite;
use std::net::SocketAddr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

use super::*;
use crate::guard::auth::{FAILED_BURST, SecretKind};
use crate::store::leases::Holder;

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
    let (scheduler, _, session, mut outbound, agent, inbound) = session_without_database().await;
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
    assert!(outbound.next().await.is_none(), "the agent's stream is closed");
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_that_fell_behind_does_not_hold_the_silence_against_its_agents() {
    let silence = HEARTBEAT * MISSED_HEARTBEATS;
    let behind = Duration::from_secs(5);
    // A session whose coordinator stalls past the silence: the clock jumps, its timers fire late.
    let stalled = || async {
        let (scheduler, _, session, outbound, agent, inbound) = session_without_database().await;
        let start = Instant::now();
        let ended = tokio::spawn(session.run(ReceiverStream::new(inbound)));
        tokio::task::yield_now().await;
        tokio::time::advance(silence + behind).await;
        tokio::task::yield_now().await;
        assert!(scheduler.is_online(HOST), "lost for the coordinator's own stall");
        (scheduler, start, ended, agent, outbound)
    };

    // The agent's message read after the stall keeps it.
    let (_, start, ended, agent, _outbound) = stalled().await;
    agent.send(progress()).await.unwrap();
    ended.await.unwrap();
    assert_eq!(
        start.elapsed(),
        silence + behind + silence,
        "lost a silence after the message"
    );

    // No message after the stall: lost once the excuse (twice the stall) ran out.
    let (scheduler, start, ended, _agent, _outbound) = stalled().await;
    ended.await.unwrap();
    assert_eq!(start.elapsed(), silence + behind + behind * 2);
    assert!(!scheduler.is_online(HOST));
}

/// A session of [`HOST`] on a closed pool, its outbound stream and the agent's sending end.
async fn session_without_database() -> (
    Arc<Scheduler>,
    Arc<LastSeen>,
    Session,
    OutboundStream,
    mpsc::Sender<Result<AgentMessage, Status>>,
    mpsc::Receiver<Result<AgentMessage, Status>>,
) {
    let pool = PgPoolOptions::new().connect_lazy_with(PgConnectOptions::new());
    pool.close().await;
    let scheduler = Arc::new(Scheduler::new(pool.clone(), Holder::this_process()));
    let last_seen = Arc::new(LastSeen::default());
    let (tx, outbound) = Outbound::channel();
    let reservation = scheduler.connect(HOST, tx.clone()).unwrap();
    assert!(
        scheduler.reserve(HOST, tx.clone()).is_err(),
        "a second session of the host is refused while the first lives"
    );
    let (agent, inbound) = mpsc::channel(8);
    let session = Session {
        pool: pool.clone(),
        scheduler: scheduler.clone(),
        ingest: Ingest::start(&pool, Default::default()),
        last_seen: last_seen.clone(),
        host_id: HOST,
        session_id: 1,
        generation: reservation.generation,
        tx,
        heartbeat: HEARTBEAT,
        pace: tokio::sync::watch::channel(HEARTBEAT).1,
        shutdown: CancellationToken::new(),
        ended: reservation.ended,
        dispatch_on_connect: false,
        findings: Deriver::new(),
        snapshot: tokio::sync::OnceCell::new(),
    };
    (scheduler, last_seen, session, outbound, agent, inbound)
}

#[tokio::test(start_paused = true)]
async fn an_agent_that_floods_the_coordinator_is_cut_off_with_the_reason() {
    let (scheduler, last_seen, session, mut outbound, agent, inbound) = session_without_database().await;
    let ended = tokio::spawn(session.run(ReceiverStream::new(inbound)));
    // Its whole burst is served (the clock stands still: nothing refills) …
    for _ in 0..rate::SESSION_BURST {
        agent.send(progress()).await.unwrap();
    }
    tokio::task::yield_now().await;
    assert!(scheduler.is_online(HOST), "cut off within its burst");
    // … and the next message ends the session.
    let _ = agent.send(progress()).await;
    ended.await.unwrap();
    assert!(!scheduler.is_online(HOST));
    let status = outbound.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("messages a second"), "{status:?}");
    assert_eq!(last_seen.pending(), 1, "its messages marked it seen, once");
}

#[tokio::test(start_paused = true)]
async fn an_agent_that_does_not_read_is_disconnected_and_nobody_waits_on_it() {
    let (scheduler, _, session, mut outbound, _agent, inbound) = session_without_database().await;
    let ended = tokio::spawn(session.run(ReceiverStream::new(inbound)));
    let running: Vec<(Uuid, i64)> = (0..crate::scheduler::outbound::OUTBOUND_QUEUE + 1)
        .map(|_| (Uuid::new_v4(), HOST))
        .collect();
    // One cancel per message: more than its queue holds. Returns at once.
    scheduler.cancel_running(&running, "campaign cancelled");
    tokio::time::timeout(Duration::from_secs(1), ended)
        .await
        .expect("the session ends as soon as its queue overflows")
        .unwrap();
    assert!(!scheduler.is_online(HOST));
    assert!(
        !scheduler.send(HOST, Body::Ping(v1::Ping { seq: 1 })),
        "nothing more is queued"
    );
    let status = outbound.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(outbound.next().await.is_none(), "what was queued is dropped");
}

/// The agent service on a pool that never connects, with one session slot and one handshake turn.
fn service_without_database() -> AgentSvc {
    let pool = PgPoolOptions::new().connect_lazy_with(PgConnectOptions::new());
    let scheduler = Arc::new(Scheduler::new(pool.clone(), Holder::this_process()));
    let ingest = Ingest::start(&pool, Default::default());
    AgentSvc {
        handshakes: crate::grpc::turns::Turns::new(1, ingest.precedence()),
        pool,
        scheduler,
        ingest,
        last_seen: Arc::default(),
        token: Token::from_secret(TOKEN),
        heartbeat: super::pace::Pacer::new(super::pace::Pace::fixed(HEARTBEAT)),
        shutdown: CancellationToken::new(),
        findings: Deriver::new(),
        verify: VerifyOnChange::default(),
        sessions: Arc::new(Semaphore::new(1)),
        failed_auth: Arc::new(FailedAuth::default()),
        client_certs: false,
    }
}

const TOKEN: &str = "agent-token-0123456789";

/// A well-formed `Hello` of a new host with the right enrollment token.
fn hello() -> Result<AgentMessage, Status> {
    let facts = cipherfleet_core::facts::HostFacts::unknown("x86_64", Flavour::Accelerated);
    Ok(AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: cipherfleet_proto::PROTOCOL_VERSION,
            enrollment_token: TOKEN.into(),
            facts: Some(v1::HostFacts::from(&facts)),
            capabilities: Some(v1::Capabilities {
                paths: vec!["accelerated".into()],
                max_threads: 2,
                agent_version: "0.1.0".into(),
            }),
            name: "host-a".into(),
            ..Default::default()
        })),
    })
}

#[tokio::test(start_paused = true)]
async fn a_hello_that_gets_no_turn_in_time_is_refused_with_a_time_to_come_back_before_its_agent_gives_up() {
    let svc = service_without_database();
    // Every turn at the database is taken (by a handshake that will not end soon).
    let held = svc
        .handshakes
        .take_before(Instant::now() + Duration::from_secs(600))
        .await
        .unwrap();
    let (agent, inbound) = mpsc::channel(1);
    agent.send(hello()).await.unwrap();
    let mut inbound = ReceiverStream::new(inbound);
    // The agent waits 5 s for its answer (its `grpc-timeout`).
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert("grpc-timeout", "5S".parse().unwrap());
    let start = Instant::now();
    let answer_by = super::super::deadline::answer_by(&metadata, start);
    let refused = svc
        .handshake(&mut inbound, answer_by, None, None)
        .await
        .err()
        .expect("no turn");
    assert!(start.elapsed() > Duration::ZERO, "it waited for a turn");
    assert!(
        start.elapsed() < Duration::from_secs(5) - super::super::deadline::SLACK,
        "refused before the agent gives up, with time for the answer to travel: {:?}",
        start.elapsed()
    );
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.metadata().get(super::super::turns::PUSHBACK_KEY).is_some(),
        "{refused:?}"
    );
    drop(held);
}

#[tokio::test]
async fn no_session_slot_is_refused_before_hello() {
    let svc = service_without_database();
    let slot = svc.pre_auth().expect("a free slot");
    let full = svc.pre_auth().unwrap_err();
    assert_eq!(full.code(), tonic::Code::ResourceExhausted);
    assert!(full.message().contains("agent sessions"), "{full:?}");
    drop(slot);
    assert!(svc.pre_auth().is_ok());
}

/// `hello` from `peer` with `token` and no credential, answered without the database.
async fn hello_from(svc: &AgentSvc, peer: SocketAddr, token: &str) -> Status {
    let mut message = hello().unwrap();
    if let Some(agent_message::Body::Hello(h)) = message.body.as_mut() {
        h.enrollment_token = token.into();
    }
    let (agent, inbound) = mpsc::channel(1);
    agent.send(Ok(message)).await.unwrap();
    let answer_by = Instant::now() + Duration::from_secs(20);
    svc.handshake(&mut ReceiverStream::new(inbound), answer_by, Some(peer), None)
        .await
        .err()
        .expect("refused before the database")
}

#[tokio::test]
async fn wrong_enrollment_tokens_from_an_address_hold_back_only_that_token_from_it() {
    let svc = service_without_database();
    let peer: SocketAddr = "192.0.2.9:4000".parse().unwrap();
    for _ in 0..FAILED_BURST {
        let refused = hello_from(&svc, peer, "not-the-token-0123456789").await;
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    }
    let refused = hello_from(&svc, peer, "not-the-token-0123456789").await;
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("enrollment token"), "{refused:?}");
    assert!(
        refused.metadata().get(super::super::turns::PUSHBACK_KEY).is_some(),
        "{refused:?}"
    );
    // The right token from there is not looked at either, while another address is.
    let refused = hello_from(&svc, peer, TOKEN).await;
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    let other: SocketAddr = "192.0.2.10:4000".parse().unwrap();
    assert_eq!(
        hello_from(&svc, other, "not-the-token-0123456789").await.code(),
        tonic::Code::Unauthenticated
    );
    // Nor do the admin token's failures at that address count against a hello.
    for _ in 0..2 * FAILED_BURST {
        let attempt = svc
            .failed_auth
            .attempt(SecretKind::AdminToken, Some(other.ip()), "")
            .ok();
        attempt.map(|a| a.judge(false));
    }
    assert_eq!(
        hello_from(&svc, other, "not-the-token-0123456789").await.code(),
        tonic::Code::Unauthenticated
    );
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
    let m = Measurement::ok(&spec, report, None);
    assert_eq!(what_ran(m), Ok((spec, PathUsed::Partial, figures())));
}

#[test]
fn a_failed_measurement_has_no_figures_to_store() {
    let spec = Suite::Quick.expand(1)[0].clone();
    let failed = Measurement::failed(&spec, "self-test failed".into(), None);
    let err = what_ran(failed).unwrap_err();
    assert!(err.contains("not a successful measurement"), "{err}");
}
