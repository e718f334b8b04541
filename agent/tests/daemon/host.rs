//! The session engine's seam ([`session::Host`]) with a fake host in this
//! process, driven through a real gRPC session against the scripted
//! coordinator: what the engine asks of a host and tells it, the same for
//! the daemon's workers and the simulator's timers.

use std::io;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cipherfleet_agent::session::{
    self, CoordinatorUrl, Ended, Event, Happening, Host, HostCredential, Outcome, Presence, StartRefusal,
};
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::token::Secret;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::helpers::{Admission, Coordinator, Logged, STEP, TOKEN, first_attempt, job_failed, short_job};

const CREDENTIAL: &str = "feedc0defeedc0defeedc0defeedc0defeedc0defeedc0defeedc0defeedc0de";

/// What the fake host holds and saw, shared with the test.
#[derive(Default)]
struct State {
    running: Option<(String, String)>,
    spool: Vec<Outcome>,
    /// `start` calls: job id and the coordinator's time limit.
    started: Vec<(String, Option<Duration>)>,
    /// `heartbeat_gap` calls: the interval asked for, and whether it was the first.
    gaps: Vec<(Duration, bool)>,
    /// Events, heartbeats left out.
    events: Vec<String>,
}

/// A host whose jobs end when the test says; `DRAINS` as the host declares it.
struct FakeHost<const DRAINS: bool> {
    state: Arc<Mutex<State>>,
    happenings: mpsc::UnboundedReceiver<Happening>,
    /// Told of every event noted.
    noted: Arc<Notify>,
}

impl<const D: bool> Host for FakeHost<D> {
    const DRAINS: bool = D;

    fn presence(&mut self) -> Presence {
        let state = lock(&self.state);
        Presence {
            facts: v1::HostFacts {
                hostname: "fake-machine".into(),
                ..Default::default()
            },
            paths: vec!["accelerated".into()],
            max_threads: 3,
            running: state.running.clone(),
            spooled: state.spool.iter().map(|o| o.job_id.clone()).collect(),
        }
    }

    fn running(&self) -> Option<(String, String)> {
        lock(&self.state).running.clone()
    }

    fn start(
        &mut self,
        job_id: &str,
        attempt_id: &str,
        _spec: JobSpec,
        time_limit: Option<Duration>,
    ) -> Result<(), StartRefusal> {
        if let Some(why) = job_id.strip_prefix("over-") {
            return Err(StartRefusal::Refused(format!("{why} past this host's ceiling")));
        }
        if job_id.starts_with("later-") {
            return Err(StartRefusal::NotStarted {
                error: "cannot record the job".into(),
                busy: true,
            });
        }
        let mut state = lock(&self.state);
        state.started.push((job_id.to_string(), time_limit));
        state.running = Some((job_id.to_string(), attempt_id.to_string()));
        Ok(())
    }

    fn cancel(&mut self, job_id: Option<&str>, _attempt_id: Option<&str>, _error: String) -> bool {
        lock(&self.state)
            .running
            .as_ref()
            .is_some_and(|(id, _)| job_id == Some(id))
    }

    async fn next(&mut self) -> Happening {
        match self.happenings.recv().await {
            Some(happening) => happening,
            None => std::future::pending().await,
        }
    }

    fn ready(&mut self) -> Option<Outcome> {
        match self.happenings.try_recv() {
            Ok(Happening::Finished(outcome)) => Some(outcome),
            _ => None,
        }
    }

    fn spooled(&self) -> io::Result<Vec<Outcome>> {
        Ok(lock(&self.state).spool.clone())
    }

    fn spooled_attempt(&self, job_id: &str, attempt_id: &str) -> Option<Outcome> {
        let state = lock(&self.state);
        state
            .spool
            .iter()
            .find(|o| o.job_id == job_id && o.attempt_id == attempt_id)
            .cloned()
    }

    fn spool(&mut self, outcome: &Outcome) -> io::Result<()> {
        lock(&self.state).spool.push(outcome.clone());
        Ok(())
    }

    fn unspool(&mut self, job_id: &str, attempt_id: &str) -> io::Result<bool> {
        let mut state = lock(&self.state);
        let before = state.spool.len();
        state
            .spool
            .retain(|o| !(o.job_id == job_id && o.attempt_id == attempt_id));
        Ok(state.spool.len() < before)
    }

    fn heartbeat_gap(&mut self, interval: Duration, first: bool) -> Duration {
        lock(&self.state).gaps.push((interval, first));
        interval
    }

    fn note(&mut self, event: Event<'_>) {
        let line = match event {
            Event::Heartbeat { .. } => return,
            Event::Welcomed { welcome, .. } => format!("welcomed every {} ms", welcome.heartbeat_interval_ms),
            Event::Busy { job_id, current, .. } => format!("{job_id} refused: busy with {current}"),
            Event::Acknowledged { ack, waited, unspooled } => format!(
                "acknowledged {} (unspooled {unspooled}, waited {})",
                ack.job_id,
                waited.is_some()
            ),
            Event::Reconnecting { reason, .. } => format!("reconnecting: {reason}"),
            Event::Closed => "closed".into(),
            other => format!("{other:?}"),
        };
        lock(&self.state).events.push(line);
        self.noted.notify_waiters();
    }
}

/// The test's side of the fake host, and the session engine running it.
struct InProcess {
    state: Arc<Mutex<State>>,
    happenings: mpsc::UnboundedSender<Happening>,
    noted: Arc<Notify>,
    shutdown: CancellationToken,
    run: JoinHandle<Ended>,
}

impl InProcess {
    /// Runs [`session::run`] on a fresh fake host against `coordinator`.
    fn start<const DRAINS: bool>(coordinator: &Coordinator) -> InProcess {
        let state = Arc::new(Mutex::new(State::default()));
        let (happenings, receiver) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        let noted = Arc::new(Notify::new());
        let mut host = FakeHost::<DRAINS> {
            state: state.clone(),
            happenings: receiver,
            noted: noted.clone(),
        };
        let coordinators = vec![CoordinatorUrl {
            url: coordinator.url(),
            tls: None,
        }];
        let stop = shutdown.clone();
        let run = tokio::spawn(async move {
            let (token, labels) = (
                Secret::new(TOKEN),
                [v1::Label {
                    key: "rack".into(),
                    value: "b7".into(),
                }],
            );
            let agent = session::Agent {
                name: "fake-host",
                labels: &labels,
                token: &token,
                coordinators: &coordinators,
                first: 0,
                local_address: None,
                shutdown: &stop,
            };
            let mut credential = HostCredential::in_memory();
            credential.prepare().expect("a proposal in memory");
            session::run(&agent, &mut credential, &mut host).await
        });
        InProcess {
            state,
            happenings,
            noted,
            shutdown,
            run,
        }
    }

    /// The running job ends with `outcome`: spooled, then handed over and no
    /// longer running under one lock, as the daemon's executor does (whoever
    /// sees the host idle can take the outcome at once).
    fn finish(&self, outcome: Outcome) {
        let mut state = lock(&self.state);
        state.spool.push(outcome.clone());
        self.happenings
            .send(Happening::Finished(outcome))
            .expect("the host is alive");
        state.running = None;
    }

    /// Waits until the session has told the host `event`.
    async fn noted(&self, event: &str) {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let mut next = pin!(self.noted.notified());
            // Listening before looking: an event noted in between is not missed.
            next.as_mut().enable();
            if self.state().events.iter().any(|e| e == event) {
                return;
            }
            if tokio::time::timeout_at(deadline, next).await.is_err() {
                panic!("never noted {event}: {}", self.log());
            }
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// How the engine ended, within a step.
    async fn ended(self) -> Ended {
        match tokio::time::timeout(STEP, self.run).await {
            Ok(Ok(ended)) => ended,
            Ok(Err(e)) => panic!("the session engine panicked: {e}"),
            Err(_) => panic!("the session engine still runs after {STEP:?}"),
        }
    }
}

impl Logged for InProcess {
    fn log(&self) -> String {
        format!("events: {:#?}", self.state().events)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accepted(body: agent_message::Body, job_id: &str) {
    assert_eq!(
        body,
        agent_message::Body::JobAccepted(v1::JobAccepted {
            job_id: job_id.into(),
            attempt_id: first_attempt(job_id),
        })
    );
}

#[tokio::test]
async fn the_host_runs_the_job_and_its_outcome_leaves_the_spool_when_acknowledged() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = InProcess::start::<true>(&coordinator);
    let mut session = coordinator.next_session(&agent).await;
    let hello = &session.hello;
    assert_eq!(
        (hello.name.as_str(), hello.enrollment_token.as_str()),
        ("fake-host", TOKEN)
    );
    assert_eq!(hello.facts.as_ref().map(|f| f.hostname.as_str()), Some("fake-machine"));
    let caps = hello.capabilities.as_ref().expect("capabilities");
    assert_eq!(
        (caps.paths.as_slice(), caps.max_threads),
        (&["accelerated".to_string()][..], 3)
    );
    assert!(hello.credential.is_empty() && !hello.proposed_credential.is_empty());

    session.welcome(60_000).await;
    session
        .send(coordinator_message::Body::RunJob(v1::RunJob {
            job_id: "job-1".into(),
            spec: Some(short_job()),
            time_limit_ms: 2_500,
            attempt_id: first_attempt("job-1"),
        }))
        .await;
    accepted(session.next(STEP, &agent).await, "job-1");
    assert_eq!(
        agent.state().started,
        [("job-1".to_string(), Some(Duration::from_millis(2_500)))]
    );

    // Busy: the host is not asked, the coordinator is told to queue it again.
    session.run_job("job-2", short_job()).await;
    let refused = job_failed(session.next(STEP, &agent).await, "job-2");
    assert_eq!(
        (refused.error.as_str(), refused.busy),
        ("agent busy with job job-1", true)
    );

    agent.finish(Outcome::failed("job-1".into(), first_attempt("job-1"), "worker died"));
    let failed = job_failed(session.next(STEP, &agent).await, "job-1");
    assert_eq!((failed.error.as_str(), failed.busy), ("worker died", false));
    session.ack("job-1").await;
    session.sync(&agent).await;
    let state = agent.state();
    assert!(state.spool.is_empty(), "{:?}", state.spool);
    assert_eq!(state.started.len(), 1, "started once");
    for event in [
        "job-2 refused: busy with job-1",
        "acknowledged job-1 (unspooled true, waited true)",
    ] {
        assert!(state.events.iter().any(|e| e == event), "{event}: {:?}", state.events);
    }
}

#[tokio::test]
async fn a_job_the_host_refuses_fails_for_good_or_is_queued_again() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = InProcess::start::<true>(&coordinator);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;

    session.run_job("over-threads", short_job()).await;
    let refused = job_failed(session.next(STEP, &agent).await, "over-threads");
    assert_eq!(
        (refused.error.as_str(), refused.busy),
        ("refused by this agent: threads past this host's ceiling", false)
    );
    session.run_job("later-1", short_job()).await;
    let later = job_failed(session.next(STEP, &agent).await, "later-1");
    assert_eq!((later.error.as_str(), later.busy), ("cannot record the job", true));
    session.sync(&agent).await;
    let spooled: Vec<String> = agent.state().spool.iter().map(|o| o.job_id.clone()).collect();
    assert_eq!(
        spooled,
        ["over-threads"],
        "an outcome is spooled, a refusal to start now is not"
    );
}

#[tokio::test]
async fn a_host_that_drops_its_session_is_welcomed_again_with_its_credential_and_spool() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = InProcess::start::<true>(&coordinator);
    let mut first = coordinator.next_session(&agent).await;
    first.welcome_with_credential(60_000, CREDENTIAL).await;
    first.run_job("job-1", short_job()).await;
    accepted(first.next(STEP, &agent).await, "job-1");
    agent
        .state()
        .spool
        .push(Outcome::failed("old-1".into(), "old-1-a".into(), "from before"));
    agent
        .happenings
        .send(Happening::Disconnect("fake disconnect"))
        .expect("the host is alive");

    let mut second = coordinator.next_session(&agent).await;
    assert_eq!(second.hello.credential, CREDENTIAL, "the credential Welcome confirmed");
    assert_eq!(second.hello.running_job_id, "job-1", "the job outlives the session");
    assert_eq!(second.hello.spooled_job_ids, ["old-1"]);
    second.welcome(60_000).await;
    assert_eq!(
        job_failed(second.next(STEP, &agent).await, "old-1").error,
        "from before"
    );
    agent.finish(Outcome::failed("job-1".into(), first_attempt("job-1"), "done at last"));
    assert_eq!(
        job_failed(second.next(STEP, &agent).await, "job-1").error,
        "done at last"
    );
    second.sync(&agent).await;

    let events = agent.state().events.clone();
    let expected = [
        "Enrolled { credential_file: None }",
        "welcomed every 60000 ms",
        "closed",
        "reconnecting: fake disconnect",
        "welcomed every 60000 ms",
        "Resending(1)",
    ];
    assert_eq!(&events[..expected.len()], expected, "{events:?}");
}

#[tokio::test]
async fn a_second_welcome_re_paces_the_gaps_the_host_is_asked_for() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = InProcess::start::<true>(&coordinator);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(100).await;
    for want in 1..=2 {
        match session.next_any(STEP, &agent).await {
            agent_message::Body::Heartbeat(h) => assert_eq!(h.seq, want),
            other => panic!("expected a heartbeat, got {other:?}"),
        }
    }
    session
        .send(coordinator_message::Body::Welcome(v1::Welcome {
            heartbeat_interval_ms: 150,
            ..Default::default()
        }))
        .await;
    // Heartbeats sent before the new interval was taken go out before the answer to `sync`.
    session.sync(&agent).await;
    match session.next_any(STEP, &agent).await {
        agent_message::Body::Heartbeat(_) => {}
        other => panic!("expected a heartbeat, got {other:?}"),
    }
    let (every, later) = (Duration::from_millis(100), Duration::from_millis(150));
    let gaps = agent.state().gaps.clone();
    assert_eq!(&gaps[..3], [(every, true), (every, false), (every, false)], "{gaps:?}");
    assert_eq!(gaps.last(), Some(&(later, false)), "{gaps:?}");
    assert!(agent.state().events.contains(&"Repaced(150ms)".to_string()));
}

#[tokio::test]
async fn shutdown_waits_for_the_job_of_a_host_that_drains() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = InProcess::start::<true>(&coordinator);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;
    session.run_job("job-1", short_job()).await;
    accepted(session.next(STEP, &agent).await, "job-1");

    agent.shutdown.cancel();
    agent.noted("Draining { job_id: \"job-1\" }").await;
    session.run_job("job-2", short_job()).await;
    let refused = job_failed(session.next(STEP, &agent).await, "job-2");
    assert_eq!((refused.error.as_str(), refused.busy), ("agent shutting down", true));
    assert!(!agent.run.is_finished(), "still waiting for job-1");
    agent.finish(Outcome::failed(
        "job-1".into(),
        first_attempt("job-1"),
        "agent shutting down",
    ));
    job_failed(session.next(STEP, &agent).await, "job-1");
    session.ack("job-1").await;
    assert_eq!(agent.ended().await, Ended::Shutdown);
}

#[tokio::test]
async fn shutdown_ends_the_session_of_a_host_that_does_not_drain_at_once() {
    let mut coordinator = Coordinator::start(Admission::Accept).await;
    let agent = InProcess::start::<false>(&coordinator);
    let mut session = coordinator.next_session(&agent).await;
    session.welcome(60_000).await;
    session.run_job("job-1", short_job()).await;
    accepted(session.next(STEP, &agent).await, "job-1");

    agent.shutdown.cancel();
    let state = agent.state.clone();
    assert_eq!(agent.ended().await, Ended::Shutdown);
    assert_eq!(
        lock(&state).running.as_ref().map(|(job, _)| job.as_str()),
        Some("job-1"),
        "ended with its job still running"
    );
    assert_eq!(lock(&state).events.last().map(String::as_str), Some("closed"));
}
