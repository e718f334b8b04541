//! Start and stop: refused agents exit 3 at once, signals stop cleanly.

use std::time::{Duration, Instant};

use cipherfleet_proto::v1::agent_message;
use tonic::Status;

use crate::helpers::{Admission, Agent, Coordinator, STEP, TOKEN, job_failed, long_job};

#[tokio::test]
async fn unauthenticated_agent_exits_with_status_3_without_retrying() {
    let coordinator = Coordinator::start(Admission::Reject(Status::unauthenticated("unknown token"))).await;
    let mut agent = Agent::start("unauthenticated", &coordinator, &[]);
    let started = Instant::now();
    assert_eq!(agent.exit_code(STEP).await, 3);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(coordinator.attempts(), 1, "no retry");
    let log = agent.log();
    assert!(log.contains("coordinator rejected the enrollment token"), "{log}");
    assert!(!log.contains(TOKEN), "the token is never logged:\n{log}");
}

#[tokio::test]
async fn unsupported_protocol_version_exits_with_status_3() {
    let status = Status::failed_precondition("protocol version 1 not supported; this coordinator speaks 2");
    let coordinator = Coordinator::start(Admission::Reject(status)).await;
    let mut agent = Agent::start("protocol", &coordinator, &[]);
    assert_eq!(agent.exit_code(STEP).await, 3);
    assert!(agent.log().contains("this coordinator speaks 2"), "{}", agent.log());
}

#[tokio::test]
async fn sigterm_while_idle_exits_0() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let mut agent = Agent::start("sigterm-idle", &coordinator, &[]);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;
    session.sync(&agent).await;
    agent.terminate();
    assert_eq!(agent.exit_code(STEP).await, 0);
}

#[tokio::test]
async fn sighup_and_sigint_stop_it_as_sigterm_does() {
    for (name, signal) in [("sighup", libc::SIGHUP), ("sigint", libc::SIGINT)] {
        let mut coordinator = Coordinator::start(Admission::Accept).await;
        let mut agent = Agent::start(name, &coordinator, &["--grace", "1"]);
        let mut session = coordinator.next_session(&agent).await;
        session.welcome(60_000).await;
        session.run_job("long-1", long_job()).await;
        assert!(matches!(
            session.next(STEP, &agent).await,
            agent_message::Body::JobAccepted(_)
        ));
        agent.signal(signal);
        let failed = job_failed(session.next(STEP, &agent).await, "long-1");
        assert_eq!(failed.error, "agent shutting down", "{name}");
        session.ack("long-1").await;
        assert_eq!(agent.exit_code(STEP).await, 0, "{name}");
        assert!(
            agent.log().contains(&format!("{}: shutting down", name.to_uppercase())),
            "{}",
            agent.log()
        );
    }
}

#[tokio::test]
async fn sigterm_during_a_job_reports_it_failed_after_the_grace_period() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let mut agent = Agent::start("sigterm-job", &coordinator, &["--grace", "1"]);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;
    session.run_job("long-1", long_job()).await;
    assert!(matches!(
        session.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));

    agent.terminate();
    let failed = job_failed(session.next(STEP, &agent).await, "long-1");
    assert_eq!(failed.error, "agent shutting down");
    session.ack("long-1").await;
    assert_eq!(agent.exit_code(STEP).await, 0);
    assert!(agent.spooled().is_empty(), "acknowledged before exit");
}

#[tokio::test]
async fn an_agent_that_cannot_connect_says_so_once_and_no_session_lost() {
    let mut agent = Agent::start_unreachable("unreachable");
    let started = Instant::now();
    while !agent.log().contains("retrying in") && started.elapsed() < STEP {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    agent.terminate();
    assert_eq!(agent.exit_code(STEP).await, 0);
    let log = agent.log();
    let line = log
        .lines()
        .find(|l| l.contains("retrying in"))
        .unwrap_or_else(|| panic!("no retry line:\n{log}"));
    assert!(
        line.contains("cannot connect: transport error: tcp connect error: "),
        "{line}"
    );
    assert_eq!(line.matches("tcp connect error").count(), 1, "{line}");
    assert!(!log.contains("session lost"), "no session was ever had:\n{log}");
}

#[tokio::test]
async fn missing_token_is_a_usage_error() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cipherfleet-agent"))
        .args(["run", "--coordinator", "http://127.0.0.1:9"])
        .env_remove("CIPHERFLEET_TOKEN")
        .output()
        .expect("the agent runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--token-file") && stderr.contains("CIPHERFLEET_TOKEN"),
        "{stderr}"
    );

    let http_with_ca = std::process::Command::new(env!("CARGO_BIN_EXE_cipherfleet-agent"))
        .args(["run", "--coordinator", "http://127.0.0.1:9", "--ca-cert", "ca.pem"])
        .env("CIPHERFLEET_TOKEN", "t")
        .output()
        .expect("the agent runs");
    assert_eq!(http_with_ca.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&http_with_ca.stderr);
    assert!(stderr.contains("--ca-cert") && stderr.contains("https://"), "{stderr}");
}
