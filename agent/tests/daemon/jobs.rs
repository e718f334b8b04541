//! Jobs over a session: hello, accept, measure, report, acknowledge, cancel.

use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};

use crate::helpers::{
    Admission, Agent, Coordinator, JOB, STEP, TOKEN, first_attempt, job_failed, long_job, require_soft_sibling,
    short_job,
};

#[tokio::test]
async fn job_is_accepted_measured_reported_and_unspooled_after_ack() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("job", &coordinator, &["--label", "class=storage"]);
    let mut session = coordinator.next_session(&agent).await;

    let hello = &session.hello;
    assert_eq!(hello.protocol_version, PROTOCOL_VERSION);
    assert_eq!(hello.enrollment_token, TOKEN);
    assert_eq!(hello.name, "test-host");
    let labels: Vec<(&str, &str)> = hello
        .labels
        .iter()
        .map(|l| (l.key.as_str(), l.value.as_str()))
        .collect();
    assert_eq!(labels, [("rack", "b7"), ("class", "storage")]);
    let caps = hello.capabilities.as_ref().expect("capabilities");
    assert!(caps.paths.iter().any(|p| p == "accelerated"), "{caps:?}");
    assert!(caps.max_threads >= 1);
    assert_eq!(caps.agent_version, env!("CARGO_PKG_VERSION"));
    assert!(hello.running_job_id.is_empty() && hello.spooled_job_ids.is_empty());
    wire::validate_hello(hello).expect("the agent's Hello passes the coordinator's checks");
    assert!(!agent.log().contains(TOKEN), "the token is never logged");

    // Periodic heartbeats count up from 1.
    session.welcome(100).await;
    for want in 1..=2 {
        match session.next_any(STEP, &agent).await {
            agent_message::Body::Heartbeat(h) => assert_eq!(h.seq, want),
            other => panic!("expected a heartbeat, got {other:?}"),
        }
    }

    session.run_job("job-1", short_job()).await;
    assert_eq!(
        session.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(v1::JobAccepted {
            job_id: "job-1".into(),
            attempt_id: first_attempt("job-1"),
        })
    );
    let measurement = match session.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) if r.job_id == "job-1" => r.measurement.expect("a measurement"),
        other => panic!("expected JobResult for job-1, got {other:?}"),
    };
    let checked = wire::checked_measurement(&measurement).expect("a valid measurement");
    let figures = checked.figures.as_ref().expect("figures");
    assert!(figures.throughput_mb_s > 0.0 && figures.samples > 0, "{checked:?}");
    let spec = JobSpec::try_from(&short_job()).unwrap();
    wire::check_measurement_matches(&spec, &measurement).expect("the measurement is of the job");
    let json: serde_json::Value = serde_json::from_str(&measurement.measurement_json).unwrap();
    assert_eq!(
        json["host"]["arch"],
        std::env::consts::ARCH,
        "host facts travel with it"
    );

    assert_eq!(agent.spooled(), ["job-1"], "kept until acknowledged");
    session.ack("job-1").await;
    session.sync(&agent).await;
    assert!(agent.spooled().is_empty(), "dropped after the ack");
}

/// The coordinator's fleet grew: a second `Welcome` in the session tells a
/// new heartbeat interval, which the agent uses from then on (told a minute,
/// no heartbeat would come within a step), counting on from the last one.
#[tokio::test]
async fn a_second_welcome_changes_the_heartbeat_interval() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("repaced", &coordinator, &[]);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;
    session.sync(&agent).await;
    session
        .send(coordinator_message::Body::Welcome(v1::Welcome {
            heartbeat_interval_ms: 100,
            ..Default::default()
        }))
        .await;
    for want in 1..=3 {
        match session.next_any(STEP, &agent).await {
            agent_message::Body::Heartbeat(h) => assert_eq!(h.seq, want),
            other => panic!("expected a heartbeat, got {other:?}"),
        }
    }
    assert!(agent.log().contains("heartbeat every 100 ms"), "{}", agent.log());
}

#[tokio::test]
async fn invalid_spec_is_reported_failed_naming_the_field_and_spooled() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("invalid", &coordinator, &[]);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;

    let spec = v1::JobSpec {
        algorithm: "aes-512-gcm".into(),
        ..short_job()
    };
    session.run_job("bad-1", spec).await;
    let failed = job_failed(session.next(STEP, &agent).await, "bad-1");
    assert!(failed.error.contains("spec.algorithm"), "{}", failed.error);
    assert!(!failed.busy);
    assert_eq!(agent.spooled(), ["bad-1"]);
    session.ack("bad-1").await;
    session.sync(&agent).await;
    assert!(agent.spooled().is_empty());
}

#[tokio::test]
async fn cancel_kills_a_long_job_and_a_busy_agent_refuses_another() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("cancel", &coordinator, &[]);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;

    session.run_job("long-1", long_job()).await;
    assert!(matches!(session.next(STEP, &agent).await, agent_message::Body::JobAccepted(a) if a.job_id == "long-1"));

    // Another job while busy: refused, marked busy, not spooled.
    session.run_job("other-2", short_job()).await;
    let refused = job_failed(session.next(STEP, &agent).await, "other-2");
    assert_eq!(refused.error, "agent busy with job long-1");
    assert!(refused.busy);
    // The running job sent again: accepted again, not started twice.
    session.run_job("long-1", long_job()).await;
    assert!(matches!(session.next(STEP, &agent).await, agent_message::Body::JobAccepted(a) if a.job_id == "long-1"));

    let started = std::time::Instant::now();
    session
        .send(coordinator_message::Body::CancelJob(v1::CancelJob {
            job_id: "long-1".into(),
            reason: "campaign cancelled".into(),
            attempt_id: String::new(),
        }))
        .await;
    let cancelled = job_failed(session.next(STEP, &agent).await, "long-1");
    assert_eq!(cancelled.error, "cancelled: campaign cancelled");
    assert!(started.elapsed().as_secs() < 5, "took {:?}", started.elapsed());
    assert_eq!(
        agent.spooled(),
        ["long-1"],
        "a cancellation is an outcome, spooled like any"
    );

    // Idle again: the next job runs.
    session.run_job("other-3", short_job()).await;
    assert!(matches!(session.next(STEP, &agent).await, agent_message::Body::JobAccepted(a) if a.job_id == "other-3"));
}

#[tokio::test]
async fn software_path_runs_in_the_soft_sibling() {
    if !require_soft_sibling() {
        return;
    }
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = Agent::start("software", &coordinator, &[]);
    let mut session = coordinator.next_session(&agent).await;
    let paths = &session.hello.capabilities.as_ref().unwrap().paths;
    assert_eq!(paths, &["accelerated", "software"]);
    session.welcome(60_000).await;
    let spec = v1::JobSpec {
        path: v1::Path::Software as i32,
        ..short_job()
    };
    session.run_job("soft-1", spec).await;
    assert!(matches!(
        session.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));
    let measurement = match session.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) => r.measurement.expect("a measurement"),
        other => panic!("expected JobResult, got {other:?}"),
    };
    let json: serde_json::Value = serde_json::from_str(&measurement.measurement_json).unwrap();
    assert_eq!(json["path_used"], "software");
    assert_eq!(json["build_flavour"], "software");
}
