//! The agent's own ceilings on pushed jobs: threads, seconds, memory, and the
//! priority its workers run at.

use cipherfleet_proto::v1::{self, agent_message};

use crate::helpers::{Admission, Agent, Coordinator, JOB, STEP, job_failed, short_job};

#[tokio::test]
async fn jobs_past_the_agents_ceilings_fail_with_the_reason_and_nothing_runs() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let flags = ["--max-threads", "2", "--max-seconds", "5", "--max-memory", "1MiB"];
    let agent = Agent::start("ceilings", &coordinator, &flags);
    let mut session = coordinator.next_session(&agent).await;
    let caps = session.hello.capabilities.clone().expect("capabilities");
    assert_eq!(caps.max_threads, 2, "Hello advertises --max-threads");
    session.welcome(10_000).await;

    let cases = [
        (
            "too-many-threads",
            v1::JobSpec {
                threads: 3,
                ..short_job()
            },
            "threads: 3 asked",
            "--max-threads",
        ),
        (
            "too-long",
            v1::JobSpec {
                seconds: 10.0,
                ..short_job()
            },
            "seconds: 10 asked",
            "--max-seconds",
        ),
        (
            "too-big",
            v1::JobSpec {
                size_bytes: 1 << 20,
                ..short_job()
            },
            "memory: the job needs about 3 MiB",
            "--max-memory",
        ),
    ];
    for (job_id, spec, field, flag) in cases {
        session.run_job(job_id, spec).await;
        let failed = job_failed(session.next(STEP, &agent).await, job_id);
        assert!(
            failed.error.starts_with("refused by this agent: ") && failed.error.contains(field),
            "{failed:?}"
        );
        assert!(failed.error.contains(flag), "{failed:?}");
        assert!(!failed.busy, "an outcome of the job, not a busy refusal");
        assert!(
            agent.spooled().contains(&job_id.to_string()),
            "spooled like any outcome"
        );
        session.ack(job_id).await;
    }
    // Within the ceilings a job runs as usual.
    session.run_job("fits", short_job()).await;
    assert!(matches!(
        session.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));
    match session.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) => assert_eq!(r.job_id, "fits"),
        other => panic!("expected a result, got {other:?}"),
    }
}

#[tokio::test]
async fn workers_run_at_the_configured_niceness() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("nice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A worker prefix that notes the niceness it runs at, then becomes the worker.
    let script = dir.join("note-nice.sh");
    std::fs::write(&script, "#!/bin/sh\nnice > \"$0.nice\"\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let prefix = script.to_str().unwrap();
    let agent = Agent::start_with_env(
        "nice",
        &coordinator,
        &["--nice", "17"],
        &[("CIPHERFLEET_WORKER_PREFIX", prefix)],
    );
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(10_000).await;
    session.run_job("nice-1", short_job()).await;
    assert!(matches!(
        session.next(STEP, &agent).await,
        agent_message::Body::JobAccepted(_)
    ));
    match session.next(JOB, &agent).await {
        agent_message::Body::JobResult(r) => assert_eq!(r.job_id, "nice-1"),
        other => panic!("expected a result, got {other:?}; log:\n{}", agent.log()),
    }
    // SAFETY: getpriority(2) has no preconditions.
    let ours = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let noted = std::fs::read_to_string(dir.join("note-nice.sh.nice")).expect("the prefix ran");
    assert_eq!(noted.trim(), ours.max(17).to_string(), "the worker's niceness");
    let _ = std::fs::remove_dir_all(&dir);
}
