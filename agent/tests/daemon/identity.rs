//! Who the agent is to the coordinator: the credential it is issued and keeps,
//! refusals of its host name, and attempts of one job kept apart.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tonic::Status;

use crate::helpers::{Admission, Agent, Coordinator, JOB, STEP, job_failed, long_job, short_job};

const CREDENTIAL: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

#[tokio::test]
async fn an_issued_credential_is_stored_privately_and_presented_after_a_restart() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let mut agent = Agent::start("credential", &coordinator, &[]);
    let mut first = coordinator.next_session(&agent).await;
    assert!(first.hello.credential.is_empty(), "nothing issued yet");
    assert!(!first.hello.enrollment_token.is_empty(), "enrolls with the token");
    first.welcome_with_credential(60_000, CREDENTIAL).await;
    first.sync(&agent).await;
    let file = agent.state_dir().join("credential");
    let mode = std::fs::metadata(&file)
        .expect("the credential file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        !agent.log().contains(CREDENTIAL),
        "the credential is never logged:\n{}",
        agent.log()
    );

    agent.kill_and_restart(&coordinator).await;
    let second = coordinator.next_session(&agent).await;
    assert_eq!(second.hello.credential, CREDENTIAL, "the same host after a restart");
    assert_eq!(second.hello.name, "test-host");
}

#[tokio::test]
async fn a_refused_host_name_ends_the_agent_saying_what_to_do() {
    let why = "host \"test-host\" is enrolled with its own credential and this agent did not present it; \
               an operator runs `cipherfleet-coordinator hosts reset-credential test-host`";
    let coordinator = Coordinator::start(Admission::Reject(Status::permission_denied(why))).await;
    let mut agent = Agent::start("impostor", &coordinator, &[]);
    assert_eq!(agent.exit_code(STEP).await, 3);
    assert_eq!(coordinator.attempts(), 1, "no retry");
    let log = agent.log();
    assert!(
        log.contains("coordinator refused this host") && log.contains("reset-credential test-host"),
        "{log}"
    );
}

#[tokio::test]
async fn another_live_instance_of_the_host_is_waited_out_not_fatal() {
    let why = "host \"test-host\" already has a live session: another instance of this agent is running for it";
    let coordinator = Coordinator::start(Admission::Reject(Status::already_exists(why))).await;
    let agent = Agent::start("twin", &coordinator, &[]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while coordinator.attempts() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no retry:\n{}", agent.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        agent.log().contains("another instance of this host is running"),
        "{}",
        agent.log()
    );
}

#[tokio::test]
async fn another_attempt_of_a_job_is_a_new_run_not_the_old_one() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("attempts", &coordinator, &[]);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;
    let accepted = |body, attempt: &str| matches!(body, agent_message::Body::JobAccepted(a) if a.job_id == "job-1" && a.attempt_id == attempt);

    session.run_attempt("job-1", "a1", long_job()).await;
    assert!(accepted(session.next(STEP, &agent).await, "a1"));
    session.run_attempt("job-1", "a1", long_job()).await;
    assert!(
        accepted(session.next(STEP, &agent).await, "a1"),
        "the same attempt again: re-accepted"
    );
    // A retry while the first attempt still runs: busy, to be dispatched again.
    session.run_attempt("job-1", "a2", long_job()).await;
    let refused = job_failed(session.next(STEP, &agent).await, "job-1");
    assert!(refused.busy, "{refused:?}");
    assert_eq!(refused.attempt_id, "a2");

    // A cancel of another attempt leaves the running one alone.
    let cancel = |reason: &str, attempt: &str| {
        coordinator_message::Body::CancelJob(v1::CancelJob {
            job_id: "job-1".into(),
            reason: reason.into(),
            attempt_id: attempt.into(),
        })
    };
    session.send(cancel("of attempt 0", "a0")).await;
    session.send(cancel("time limit", "a1")).await;
    let cancelled = job_failed(session.next(STEP, &agent).await, "job-1");
    assert_eq!(
        (cancelled.error.as_str(), cancelled.attempt_id.as_str()),
        ("cancelled: time limit", "a1")
    );

    // Attempt 1's outcome stays spooled until its own ack; asked again, it is re-sent.
    session.ack_attempt("job-1", "a0").await;
    session.run_attempt("job-1", "a1", long_job()).await;
    let again = job_failed(session.next(STEP, &agent).await, "job-1");
    assert_eq!(again.attempt_id, "a1");
    assert_eq!(agent.spooled(), ["job-1"]);

    // Attempt 2 runs afresh and measures.
    session.run_attempt("job-1", "a2", short_job()).await;
    assert!(accepted(session.next(STEP, &agent).await, "a2"));
    match session.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) => assert_eq!((r.job_id.as_str(), r.attempt_id.as_str()), ("job-1", "a2")),
        other => panic!("expected attempt 2's JobResult, got {other:?}"),
    }
    session.ack_attempt("job-1", "a2").await;
    session.sync(&agent).await;
    assert!(agent.spooled().is_empty());
}
