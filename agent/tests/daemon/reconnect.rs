//! Outcomes survive a lost session or a killed agent: spooled, listed in the
//! next Hello, re-sent.

use cipherfleet_proto::v1::agent_message;

use crate::helpers::{Admission, Agent, Coordinator, JOB, STEP, long_job, short_job};

#[tokio::test]
async fn unacknowledged_result_is_resent_after_the_agent_reconnects() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("reconnect", &coordinator, &[]);
    let mut first = coordinator.next_session(&agent).await;
    first.welcome(60_000).await;
    first.run_job("job-1", short_job()).await;
    assert!(matches!(
        first.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));
    let sent = match first.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) => r,
        other => panic!("expected JobResult, got {other:?}"),
    };
    // The coordinator goes away without acknowledging.
    drop(first);

    let mut second = coordinator.next_session(&agent).await;
    assert_eq!(second.hello.spooled_job_ids, ["job-1"]);
    assert!(second.hello.running_job_id.is_empty());
    second.welcome(60_000).await;
    match second.next(STEP, &agent).await {
        agent_message::Body::JobResult(r) => assert_eq!(r, sent, "the same outcome, unchanged"),
        other => panic!("expected the re-sent JobResult, got {other:?}"),
    }
    second.ack("job-1").await;
    second.sync(&agent).await;
    assert!(agent.spooled().is_empty());
}

#[tokio::test]
async fn a_job_keeps_running_across_a_lost_session() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("outlive", &coordinator, &[]);
    let mut first = coordinator.next_session(&agent).await;
    first.welcome(60_000).await;
    // Long enough (with its warm-up) to still be running when the agent reconnects.
    let spec = cipherfleet_proto::v1::JobSpec {
        seconds: 2.0,
        ..short_job()
    };
    first.run_job("job-1", spec).await;
    assert!(matches!(
        first.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));
    drop(first);

    let mut second = coordinator.next_session(&agent).await;
    assert_eq!(second.hello.running_job_id, "job-1", "{:?}", second.hello);
    second.welcome(60_000).await;
    match second.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) => assert_eq!(r.job_id, "job-1"),
        other => panic!("expected JobResult, got {other:?}"),
    }
}

#[tokio::test]
async fn a_job_interrupted_by_a_killed_agent_is_not_reported_after_restart() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let mut agent = Agent::start("killed", &coordinator, &[]);
    let mut first = coordinator.next_session(&agent).await;
    first.welcome(60_000).await;
    first.run_job("long-1", long_job()).await;
    assert!(matches!(
        first.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));

    agent.kill_and_restart(&coordinator).await;
    drop(first);
    let second = coordinator.next_session(&agent).await;
    // Nothing was measured: no outcome, no running job; the coordinator re-queues it.
    assert!(second.hello.spooled_job_ids.is_empty(), "{:?}", second.hello);
    assert!(second.hello.running_job_id.is_empty());
}
