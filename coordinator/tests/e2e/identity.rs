//! Who a host is: the enrollment token admits a new host only, which enrolls
//! with the credential its agent proposed (again, if the `Welcome` was lost);
//! a name is never taken over by whoever claims it, a host has
//! one live session, and only the current attempt of a job counts. Real
//! agents, raw gRPC clients for the attacker, the operator's CLI.

use std::process::{Command, Output};
use std::time::Duration;

use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{self, AgentMessage, agent_message, coordinator_message};
use tonic::Code;
use uuid::Uuid;

use crate::app::{ADMIN_TOKEN, AGENT_TOKEN, App, matrix, spawn_app, wait_for};
use crate::rejections::{RawAgent, hello, one_point, open};

/// The credential the coordinator issued to agent `name`, from its state directory.
fn credential_of(app: &App, name: &str) -> Option<String> {
    let bytes = std::fs::read(app.state_dir(name).join("credential")).ok()?;
    let stored: serde_json::Value = serde_json::from_slice(&bytes).expect("a credential file is JSON");
    assert_eq!(stored["host"], name, "issued to this host");
    // Only `proposed` until a Welcome confirmed it.
    stored["credential"].as_str().map(str::to_string)
}

/// The credential agent `name` proposes at its next enrollment, from its state directory.
pub(crate) fn proposal_in(state_dir: &std::path::Path) -> Option<String> {
    let bytes = std::fs::read(state_dir.join("credential")).ok()?;
    let stored: serde_json::Value = serde_json::from_slice(&bytes).expect("a credential file is JSON");
    stored["proposed"].as_str().map(str::to_string)
}

/// A `Hello` for `name` with the enrollment token, proposing `proposal` as its credential.
pub(crate) fn hello_proposing(name: &str, proposal: &str) -> AgentMessage {
    let mut message = hello(name, AGENT_TOKEN, PROTOCOL_VERSION);
    if let Some(agent_message::Body::Hello(h)) = &mut message.body {
        h.proposed_credential = proposal.to_string();
    }
    message
}

/// Enrolls `name` with `proposal` and drops the session without a look at
/// the `Welcome`: what a coordinator sees of an agent that died, or timed out,
/// between its `Hello` and the `Welcome`.
pub(crate) async fn enroll_and_lose_the_welcome(app: &App, name: &str, proposal: &str) {
    let raw = open(app, hello_proposing(name, proposal))
        .await
        .expect("the enrollment is admitted");
    drop(raw);
}

/// A `Hello` for `name` with `token` and `credential` (either may be empty).
fn hello_with(name: &str, token: &str, credential: &str) -> AgentMessage {
    let mut message = hello(name, token, PROTOCOL_VERSION);
    if let Some(agent_message::Body::Hello(h)) = &mut message.body {
        h.credential = credential.to_string();
        h.labels = vec![v1::Label {
            key: "owned".into(),
            value: "by-the-impostor".into(),
        }];
    }
    message
}

/// What a refused session must leave alone: the host's id, labels and open sessions.
async fn host_state(app: &App, name: &str) -> (i64, serde_json::Value, Vec<i64>) {
    let (id, labels): (i64, serde_json::Value) = sqlx::query_as("SELECT id, labels FROM hosts WHERE name = $1")
        .bind(name)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let open: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM agent_sessions WHERE host_id = $1 AND disconnected_at IS NULL ORDER BY id")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    (id, labels, open)
}

/// Whether host `name` is online, per the admin API; `None` if it is unknown.
async fn online(app: &App, name: &str) -> Option<bool> {
    let hosts = app
        .admin()
        .await
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .ok()?
        .into_inner()
        .hosts;
    hosts.into_iter().find(|h| h.name == name).map(|h| h.online)
}

async fn wait_online_state(app: &App, name: &str, want: bool) {
    wait_for(
        &format!("{name} online={want}"),
        Duration::from_secs(60),
        || async move { (online(app, name).await == Some(want)).then_some(()) },
    )
    .await;
}

/// `cipherfleet-coordinator ARGS --coordinator <app>` with the admin token.
fn cli(app: &App, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(args)
        .args(["--coordinator", &app.url()])
        .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("running the coordinator's CLI")
}

/// Keeps a raw session alive (the e2e coordinator wants a heartbeat every 0.5 s).
pub(crate) fn keep_alive(raw: &RawAgent) -> tokio::task::JoinHandle<()> {
    let tx = raw.tx.clone();
    tokio::spawn(async move {
        for seq in 1.. {
            let beat = AgentMessage {
                body: Some(agent_message::Body::Heartbeat(v1::Heartbeat { seq })),
            };
            if tx.send(beat).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

async fn job_row(app: &App, job_id: &str) -> (String, Option<Uuid>, Option<String>) {
    sqlx::query_as("SELECT status, attempt_id, error FROM jobs WHERE id = $1::uuid")
        .bind(job_id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

async fn results_of(app: &App, job_id: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM results WHERE job_id = $1::uuid")
        .bind(job_id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Waits until the agent has started the campaign's only job; returns its id and attempt.
async fn started_job(app: &App, campaign: &str) -> (Uuid, Uuid) {
    let campaign: i64 = campaign.parse().unwrap();
    wait_for("the job to start", Duration::from_secs(60), || async move {
        sqlx::query_as::<_, (Uuid, Uuid)>(
            "SELECT id, attempt_id FROM jobs WHERE campaign_id = $1 AND status = 'running' AND started_at IS NOT NULL",
        )
        .bind(campaign)
        .fetch_optional(&app.pool)
        .await
        .unwrap()
    })
    .await
}

async fn make_overdue(app: &App, job: Uuid) {
    sqlx::query("UPDATE jobs SET deadline = now() - interval '1 second' WHERE id = $1")
        .bind(job)
        .execute(&app.pool)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_with_the_enrollment_token_and_a_victims_name_is_refused_and_the_victim_is_untouched() {
    let mut app = spawn_app().await;
    app.spawn_agent("victim", &["--label", "rack=b7"]);
    app.wait_online(1).await;
    let before = host_state(&app, "victim").await;
    let campaign = app.start_matrix(&["aes-128-gcm"], &[1024, 4096], 0.2).await;

    for impostor in [
        hello_with("victim", AGENT_TOKEN, ""),
        hello_with("victim", AGENT_TOKEN, &"0".repeat(64)),
    ] {
        let err = open(&app, impostor).await.err().expect("the impostor is refused");
        assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
        let message = err.message();
        assert!(
            message.contains("\"victim\"")
                && message.contains("cipherfleet-coordinator hosts reset-credential victim")
                && message.contains("--name"),
            "names the host and what to do: {message}"
        );
    }

    // Nothing of the victim changed: labels, its one session, its campaign.
    assert_eq!(host_state(&app, "victim").await, before);
    assert_eq!(before.1["rack"], "b7");
    assert_eq!(online(&app, "victim").await, Some(true));
    let status = app.wait_completed(&campaign, Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 2);
    assert_eq!(host_state(&app, "victim").await, before, "one session throughout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_credential_cannot_be_used_while_its_agent_is_connected() {
    let mut app = spawn_app().await;
    let agent = app.spawn_agent("twin", &[]);
    app.wait_online(1).await;
    let credential = credential_of(&app, "twin").expect("the agent stored its credential");
    assert_eq!(credential.len(), 64);
    let before = host_state(&app, "twin").await;

    // A clone with the copied credential: refused while the real agent is connected.
    let err = open(&app, hello_with("twin", AGENT_TOKEN, &credential))
        .await
        .err()
        .expect("a second session is refused");
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    assert!(
        err.message().contains("another instance") && err.message().contains("--name"),
        "{}",
        err.message()
    );
    assert_eq!(host_state(&app, "twin").await, before, "no flapping, no relabelling");
    app.run_campaign("after a clone knocked", matrix(&["aes-128-gcm"], &[1024], 0.1))
        .await;

    // Once the agent is gone, its credential alone (no enrollment token) is the host.
    app.kill_agent(agent);
    wait_online_state(&app, "twin", false).await;
    let mut raw = open(&app, hello_with("twin", "", &credential))
        .await
        .expect("the credential admits the host");
    let coordinator_message::Body::Welcome(welcome) = raw.next().await else {
        panic!("a Welcome")
    };
    assert_eq!(welcome.agent_id, before.0.to_string());
    assert!(
        welcome.credential.is_empty(),
        "a known host is issued no new credential"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_outcome_of_attempt_1_is_ignored_after_attempt_2_is_dispatched() {
    let app = spawn_app().await;
    let mut raw = open(&app, hello("raw-slow", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    let coordinator_message::Body::Welcome(welcome) = raw.next().await else {
        panic!("a Welcome")
    };
    assert_eq!(welcome.credential.len(), 64, "a new host is issued a credential");
    let _beat = keep_alive(&raw);
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        ..Default::default()
    };
    app.admin().await.start_campaign(request).await.unwrap();
    let coordinator_message::Body::RunJob(first) = raw.next().await else {
        panic!("a RunJob")
    };
    assert!(Uuid::parse_str(&first.attempt_id).is_ok(), "{first:?}");
    raw.send(agent_message::Body::JobAccepted(v1::JobAccepted {
        job_id: first.job_id.clone(),
        attempt_id: first.attempt_id.clone(),
    }))
    .await;

    // Past its time limit: the sweep stops attempt 1 and dispatches attempt 2.
    let job: Uuid = first.job_id.parse().unwrap();
    wait_for("JobAccepted to be stored", Duration::from_secs(10), || async {
        let started: Option<chrono::DateTime<chrono::Utc>> =
            sqlx::query_scalar("SELECT started_at FROM jobs WHERE id = $1")
                .bind(job)
                .fetch_one(&app.pool)
                .await
                .unwrap();
        started.map(|_| ())
    })
    .await;
    make_overdue(&app, job).await;
    let coordinator_message::Body::CancelJob(cancel) = raw.next().await else {
        panic!("a CancelJob")
    };
    assert_eq!((&cancel.job_id, &cancel.attempt_id), (&first.job_id, &first.attempt_id));
    let coordinator_message::Body::RunJob(second) = raw.next().await else {
        panic!("the retry")
    };
    assert_eq!(second.job_id, first.job_id);
    assert_ne!(second.attempt_id, first.attempt_id, "a retry is a new attempt");

    // Attempt 1's late outcomes are acknowledged and ignored.
    let late = [
        agent_message::Body::JobFailed(v1::JobFailed {
            job_id: first.job_id.clone(),
            error: "cancelled: the job exceeded its time limit".into(),
            busy: false,
            attempt_id: first.attempt_id.clone(),
        }),
        agent_message::Body::JobResult(v1::JobResult {
            job_id: first.job_id.clone(),
            measurement: Some(crate::rejections::result_of(&first, 100.0)),
            attempt_id: first.attempt_id.clone(),
        }),
    ];
    for outcome in late {
        raw.send(outcome).await;
        let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
            panic!("an ack")
        };
        assert_eq!((&ack.job_id, &ack.attempt_id), (&first.job_id, &first.attempt_id));
        assert!(ack.rejected.contains("earlier attempt"), "{ack:?}");
        let (status, attempt, error) = job_row(&app, &first.job_id).await;
        assert_eq!((status.as_str(), error), ("running", None), "attempt 2 runs on");
        assert_eq!(attempt.map(|a| a.to_string()), Some(second.attempt_id.clone()));
    }

    // Attempt 2's outcome counts; a result arriving after it cannot flip the job to done.
    raw.send(agent_message::Body::JobFailed(v1::JobFailed {
        job_id: second.job_id.clone(),
        error: "self-test failed: aes-128-gcm".into(),
        busy: false,
        attempt_id: second.attempt_id.clone(),
    }))
    .await;
    let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
        panic!("an ack")
    };
    assert!(ack.rejected.is_empty(), "stored: {ack:?}");
    raw.send(agent_message::Body::JobResult(v1::JobResult {
        job_id: second.job_id.clone(),
        measurement: Some(v1::Measurement::default()),
        attempt_id: second.attempt_id.clone(),
    }))
    .await;
    let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
        panic!("an ack")
    };
    assert!(ack.rejected.contains("already failed"), "{ack:?}");
    let (status, _, error) = job_row(&app, &first.job_id).await;
    assert_eq!(
        (status.as_str(), error.as_deref()),
        ("failed", Some("self-test failed: aes-128-gcm"))
    );
    assert_eq!(results_of(&app, &first.job_id).await, 0);

    // A failure for a job that does not exist is refused, not acknowledged as stored.
    let unknown = Uuid::new_v4().to_string();
    raw.send(agent_message::Body::JobFailed(v1::JobFailed {
        job_id: unknown.clone(),
        error: "x".into(),
        busy: false,
        attempt_id: Uuid::new_v4().to_string(),
    }))
    .await;
    let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
        panic!("an ack")
    };
    assert_eq!(ack.job_id, unknown);
    assert!(ack.rejected.contains("does not exist"), "{ack:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_time_limit_is_retried_for_real() {
    let mut app = spawn_app().await;
    app.spawn_agent("retry", &[]);
    app.wait_online(1).await;
    let campaign = app
        .start_campaign("retry", matrix(&["aes-128-gcm"], &[1024], 2.0))
        .await;
    let (job, attempt) = started_job(&app, &campaign).await;
    make_overdue(&app, job).await;

    // Attempt 1 is killed; its "cancelled" outcome must not fail the retry,
    // which runs afresh and measures.
    let status = app.wait_completed(&campaign, Duration::from_secs(120)).await;
    let counts = status.overall.unwrap();
    assert_eq!((counts.done, counts.failed), (1, 0), "{:?}", status.failures);
    let (status, now, _) = job_row(&app, &job.to_string()).await;
    assert_eq!(status, "done");
    assert_ne!(now, Some(attempt), "the result is a later attempt's");
    assert_eq!(results_of(&app, &job.to_string()).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_credential_and_retire_work_through_the_cli() {
    let mut app = spawn_app().await;
    app.spawn_agent("ops-a", &[]);
    app.spawn_agent("ops-b", &[]);
    app.wait_online(2).await;
    let old = credential_of(&app, "ops-a").expect("enrolled");

    // Reset: the session ends, the agent enrolls again with the token, the old credential is dead.
    let out = cli(&app, &["hosts", "reset-credential", "ops-a"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("credential reset"), "{stdout}");
    wait_for("ops-a to enroll again", Duration::from_secs(60), || async {
        let renewed = credential_of(&app, "ops-a").is_some_and(|c| c != old);
        (renewed && online(&app, "ops-a").await == Some(true)).then_some(())
    })
    .await;
    let err = open(&app, hello_with("ops-a", "", &old)).await.err().expect("refused");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    // Retire: offline for good, listed as retired, refused, never selected.
    let out = cli(&app, &["hosts", "retire", "ops-a"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("retired"), "{stdout}");
    wait_online_state(&app, "ops-a", false).await;
    let out = cli(&app, &["hosts", "--format", "json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let retired: Vec<(String, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap().to_string(), h["retired"].as_bool().unwrap()))
        .collect();
    assert_eq!(retired, [("ops-a".to_string(), true), ("ops-b".to_string(), false)]);
    let err = open(&app, hello("ops-a", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("retired"), "{}", err.message());
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        ..Default::default()
    };
    let started = app.admin().await.start_campaign(request).await.unwrap().into_inner();
    assert_eq!(started.jobs_created, 1, "only ops-b is selected");
    let page = app.get("/hosts").await;
    assert!(
        page.body.contains("ops-a") && page.body.contains(">retired<"),
        "{}",
        page.body
    );

    let out = cli(&app, &["hosts", "retire", "nobody"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no host is named \"nobody\""), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restarted_with_the_same_state_dir_is_the_same_host() {
    let mut app = spawn_app().await;
    let first = app.spawn_agent("again", &[]);
    app.wait_online(1).await;
    let (id, labels, _) = host_state(&app, "again").await;
    let credential = credential_of(&app, "again").expect("enrolled");
    app.kill_agent(first);
    wait_online_state(&app, "again", false).await;

    app.spawn_agent("again", &[]);
    wait_online_state(&app, "again", true).await;
    let (id_after, labels_after, open) = host_state(&app, "again").await;
    assert_eq!((id_after, labels_after), (id, labels));
    assert_eq!(open.len(), 1);
    assert_eq!(credential_of(&app, "again"), Some(credential), "no new enrollment");
    let hosts: i64 = sqlx::query_scalar("SELECT count(*) FROM hosts")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(hosts, 1);
    app.run_campaign("after the restart", matrix(&["aes-128-gcm"], &[1024], 0.1))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enrollment_whose_welcome_was_lost_is_admitted_again_with_the_same_proposal() {
    let app = spawn_app().await;
    let proposal = "c4".repeat(32);
    let mut raw = open(&app, hello_proposing("lost", &proposal)).await.expect("enrolled");
    let coordinator_message::Body::Welcome(first) = raw.next().await else {
        panic!("a Welcome")
    };
    assert_eq!(first.credential, proposal, "the proposal is the host's credential");
    drop(raw);

    // The agent never got that Welcome: the same Hello again is admitted and told again
    // (once the first session is seen gone: until then it is refused as ALREADY_EXISTS).
    let mut again = wait_for("the second enrollment", Duration::from_secs(30), || async {
        open(&app, hello_proposing("lost", &proposal)).await.ok()
    })
    .await;
    let coordinator_message::Body::Welcome(second) = again.next().await else {
        panic!("a Welcome")
    };
    assert_eq!((second.agent_id, second.credential), (first.agent_id, proposal.clone()));
    drop(again);

    // Another agent's proposal for the name is refused; the proposal itself is the credential.
    let err = open(&app, hello_proposing("lost", &"4c".repeat(32)))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    let mut known = wait_for("the credential to admit the host", Duration::from_secs(30), || async {
        open(&app, hello_with("lost", "", &proposal)).await.ok()
    })
    .await;
    let coordinator_message::Body::Welcome(welcome) = known.next().await else {
        panic!("a Welcome")
    };
    assert!(welcome.credential.is_empty(), "nothing new to store");

    // A proposal not of a credential's form is refused, naming the field.
    let err = open(&app, hello_proposing("weak", "password1234"))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("hello.proposed_credential"), "{}", err.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_died_between_hello_and_welcome_comes_back_as_its_host() {
    let mut app = spawn_app().await;
    let addr = app.grpc;
    // With the coordinator down, the agent stores the credential it will propose before dialling.
    app.kill_coordinator();
    let first = app.spawn_agent("phoenix", &[]);
    let state = app.state_dir("phoenix");
    let proposal = wait_for("the agent to store its proposal", Duration::from_secs(30), || {
        let state = state.clone();
        async move { proposal_in(&state) }
    })
    .await;
    app.kill_agent(first);

    // Its Hello reached the coordinator, which enrolled the host; the agent died before the Welcome.
    app.start_coordinator(addr);
    enroll_and_lose_the_welcome(&app, "phoenix", &proposal).await;

    // Restarted, it presents the same proposal and is the host, not a refused stranger.
    let again = app.spawn_agent("phoenix", &[]);
    app.wait_host("phoenix", true).await;
    // The agent stores the confirmed credential after its Welcome, which may follow the host
    // being online by a moment.
    let confirmed = wait_for(
        "the agent to store its confirmed credential",
        Duration::from_secs(30),
        || async { credential_of(&app, "phoenix") },
    )
    .await;
    assert_eq!(confirmed, proposal);
    let next = proposal_in(&state).expect("a fresh proposal for a later enrollment");
    assert_ne!(next, proposal);
    let hosts: i64 = sqlx::query_scalar("SELECT count(*) FROM hosts WHERE name = 'phoenix'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(hosts, 1);
    app.run_campaign("after the lost Welcome", matrix(&["aes-128-gcm"], &[1024], 0.1))
        .await;
    app.kill_agent(again);
}
