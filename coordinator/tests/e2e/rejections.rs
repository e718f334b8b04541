//! Bad input gets a clear error that names the problem: wrong tokens, an old
//! protocol, a foreign job's result, invalid measurements and campaign specs.
//! The misbehaving "agents" here are raw gRPC clients.

use std::time::Duration;

use cipherfleet_core::path::Path;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{
    self, AgentMessage, CoordinatorMessage, agent_message, agent_service_client::AgentServiceClient,
    coordinator_message,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

use crate::app::{AGENT_TOKEN, App, admin_with_token, connect, spawn_app};

/// A hand-driven agent session.
pub(crate) struct RawAgent {
    pub(crate) tx: mpsc::Sender<AgentMessage>,
    pub(crate) rx: tonic::Streaming<CoordinatorMessage>,
}

fn facts_json(name: &str) -> String {
    serde_json::json!({
        "schema_version": 1, "hostname": name, "arch": "x86_64", "kernel_release": "6.1.0",
        "cpu": {"vendor": "GenuineIntel", "model_name": "Test CPU", "family": 6, "model": 85, "stepping": 7, "logical_cores": 2},
        "features": {"source": "cpuid", "checked": ["aes"], "advertised": ["aes"], "usable": ["aes"]},
        "build": {"flavour": "accelerated"}
    })
    .to_string()
}

pub(crate) fn hello(name: &str, token: &str, version: u32) -> AgentMessage {
    AgentMessage {
        body: Some(agent_message::Body::Hello(v1::Hello {
            protocol_version: version,
            enrollment_token: token.into(),
            facts: Some(v1::HostFacts {
                facts_json: facts_json(name),
                hostname: name.into(),
                arch: "x86_64".into(),
                build_flavour: "accelerated".into(),
                ..Default::default()
            }),
            capabilities: Some(v1::Capabilities {
                paths: vec!["accelerated".into()],
                max_threads: 2,
                agent_version: "test".into(),
            }),
            labels: vec![],
            name: name.into(),
            running_job_id: String::new(),
            spooled_job_ids: vec![],
            credential: String::new(),
            running_attempt_id: String::new(),
            proposed_credential: String::new(),
        })),
    }
}

/// A matrix of one valid point: aes-128-gcm, 16 B, encrypt, 0.1 s.
pub(crate) fn one_point() -> v1::Matrix {
    crate::app::matrix(&["aes-128-gcm"], &[16], 0.1)
}

/// A successful measurement of `run`'s point at `throughput_mb_s`, as an agent sends it.
pub(crate) fn result_of(run: &v1::RunJob, throughput_mb_s: f64) -> v1::Measurement {
    let spec = JobSpec::try_from(run.spec.as_ref().expect("a spec")).expect("a valid spec");
    let m = crate::db_helpers::measurement(&spec, Path::Accelerated, throughput_mb_s);
    v1::Measurement::try_from(&m).expect("a successful measurement converts")
}

pub(crate) async fn open(app: &App, first: AgentMessage) -> Result<RawAgent, tonic::Status> {
    let mut client = AgentServiceClient::new(connect(&app.url()).await);
    let (tx, rx) = mpsc::channel(16);
    tx.send(first).await.unwrap();
    let response = client.session(ReceiverStream::new(rx)).await?;
    Ok(RawAgent {
        tx,
        rx: response.into_inner(),
    })
}

impl RawAgent {
    pub(crate) async fn next(&mut self) -> coordinator_message::Body {
        let m = tokio::time::timeout(Duration::from_secs(20), self.rx.message())
            .await
            .expect("a coordinator message in time")
            .expect("stream ok")
            .expect("stream open");
        m.body.expect("a body")
    }

    pub(crate) async fn send(&self, body: agent_message::Body) {
        self.tx.send(AgentMessage { body: Some(body) }).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_enrollment_token_is_unauthenticated_and_the_agent_stops_retrying() {
    let mut app = spawn_app().await;
    let err = open(&app, hello("raw-1", "not-the-token-at-all", PROTOCOL_VERSION))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");

    // The real agent says why and exits instead of retrying forever.
    std::fs::write(app.dir.path().join("wrong.token"), "wrong-token-0123456789").unwrap();
    let out = std::process::Command::new(crate::app::agent_binary())
        .args(["run", "--coordinator", &app.url(), "--name", "raw-wrong"])
        .arg("--token-file")
        .arg(app.dir.path().join("wrong.token"))
        .arg("--state-dir")
        .arg(app.state_dir("raw-wrong"))
        .arg("--spool-dir")
        .arg(app.dir.path().join("spool-wrong"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("token"), "{stderr}");
    assert!(
        !stderr.contains("wrong-token-0123456789"),
        "the token must never be logged: {stderr}"
    );
    let _ = &mut app;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_protocol_version_names_both_versions() {
    let app = spawn_app().await;
    let err = open(&app, hello("raw-2", AGENT_TOKEN, 99))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("99") && err.message().contains(&PROTOCOL_VERSION.to_string()),
        "{err:?}"
    );
    assert!(err.message().ends_with("upgrade the coordinator"), "{err:?}");
}

/// A coordinator serves agents one protocol version behind its own, so a
/// fleet upgrades its coordinator first: such an agent is welcomed and its
/// results stored (the typed figures it also sends are skipped when decoding,
/// `cipherfleet_proto`'s tests; its JSON is what this test sends). An agent
/// two versions behind is refused, told which side to upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_one_protocol_version_behind_is_served_and_an_older_one_is_refused() {
    let app = spawn_app().await;
    let mut behind = open(&app, hello("raw-behind", AGENT_TOKEN, PROTOCOL_VERSION - 1))
        .await
        .expect("one version behind is served");
    assert!(matches!(behind.next().await, coordinator_message::Body::Welcome(_)));
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        ..Default::default()
    };
    app.admin().await.start_campaign(request).await.unwrap();
    let coordinator_message::Body::RunJob(run) = behind.next().await else {
        panic!("a job")
    };
    behind
        .send(agent_message::Body::JobResult(v1::JobResult {
            job_id: run.job_id.clone(),
            measurement: Some(result_of(&run, 1234.5)),
            attempt_id: run.attempt_id.clone(),
        }))
        .await;
    let coordinator_message::Body::ResultAck(ack) = behind.next().await else {
        panic!("an ack")
    };
    assert!(ack.rejected.is_empty(), "stored: {ack:?}");
    let stored: f64 = sqlx::query_scalar("SELECT throughput_mb_s FROM results")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored, 1234.5);

    let older = PROTOCOL_VERSION - 2;
    let err = open(&app, hello("raw-older", AGENT_TOKEN, older))
        .await
        .err()
        .expect("two versions behind is refused");
    assert_eq!(err.code(), Code::FailedPrecondition);
    let both = format!("agent speaks protocol version {older}, this coordinator speaks version {PROTOCOL_VERSION}");
    assert!(err.message().starts_with(&both), "{err:?}");
    assert!(err.message().ends_with("upgrade the agent"), "{err:?}");
    let hosts: Vec<String> = sqlx::query_scalar("SELECT name FROM hosts ORDER BY name")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(hosts, ["raw-behind"], "nothing stored of the refused agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_message_must_be_hello() {
    let app = spawn_app().await;
    let heartbeat = AgentMessage {
        body: Some(agent_message::Body::Heartbeat(v1::Heartbeat { seq: 1 })),
    };
    let err = open(&app, heartbeat).await.err().expect("refused");
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = open(&app, AgentMessage { body: None }).await.err().expect("refused");
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_jobs_result_and_an_invalid_measurement_are_refused_by_name() {
    let app = spawn_app().await;
    let mut a = open(&app, hello("raw-a", AGENT_TOKEN, PROTOCOL_VERSION)).await.unwrap();
    assert!(matches!(a.next().await, coordinator_message::Body::Welcome(_)));
    let mut b = open(&app, hello("raw-b", AGENT_TOKEN, PROTOCOL_VERSION)).await.unwrap();
    assert!(matches!(b.next().await, coordinator_message::Body::Welcome(_)));
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        hosts: None,
        started_by: "e2e".into(),
        name: String::new(),
        ..Default::default()
    };
    app.admin().await.start_campaign(request).await.unwrap();
    let coordinator_message::Body::RunJob(job_a) = a.next().await else {
        panic!("a gets a job")
    };
    let coordinator_message::Body::RunJob(job_b) = b.next().await else {
        panic!("b gets a job")
    };

    // b reports a result for a's job: refused, and the session stays usable.
    b.send(agent_message::Body::JobResult(v1::JobResult {
        job_id: job_a.job_id.clone(),
        measurement: Some(result_of(&job_a, 100.0)),
        attempt_id: job_a.attempt_id.clone(),
    }))
    .await;
    let coordinator_message::Body::ResultAck(ack) = b.next().await else {
        panic!("an ack")
    };
    assert_eq!(ack.job_id, job_a.job_id);
    assert!(ack.rejected.contains("not assigned to this host"), "{ack:?}");

    // b's own job with a negative throughput: refused by name, job failed with the reason.
    b.send(agent_message::Body::JobResult(v1::JobResult {
        job_id: job_b.job_id.clone(),
        measurement: Some(result_of(&job_b, -5.0)),
        attempt_id: job_b.attempt_id.clone(),
    }))
    .await;
    let coordinator_message::Body::ResultAck(ack) = b.next().await else {
        panic!("an ack")
    };
    assert!(
        ack.rejected.contains("invalid measurement") && ack.rejected.contains("throughput"),
        "{ack:?}"
    );
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, error FROM jobs WHERE id = $1::uuid")
            .bind(&job_b.job_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(status, "failed");
    assert!(error.unwrap().contains("throughput"));
    let results: i64 = sqlx::query_scalar("SELECT count(*) FROM results")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(results, 0);

    // A malformed job id ends the session with INVALID_ARGUMENT.
    a.send(agent_message::Body::JobAccepted(v1::JobAccepted {
        job_id: "<script>".into(),
        attempt_id: job_a.attempt_id.clone(),
    }))
    .await;
    let end = tokio::time::timeout(Duration::from_secs(10), a.rx.message())
        .await
        .unwrap();
    let status = end.expect_err("the session ends with an error");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("job_id"), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_campaigns_are_rejected_before_any_job_exists() {
    let app = spawn_app().await;
    let a = open(&app, hello("raw-c", AGENT_TOKEN, PROTOCOL_VERSION)).await.unwrap();
    let mut admin = app.admin().await;
    let matrix = |f: &dyn Fn(&mut v1::Matrix)| {
        let mut m = one_point();
        f(&mut m);
        v1::StartCampaignRequest {
            points: Some(v1::start_campaign_request::Points::Matrix(m)),
            hosts: None,
            started_by: "e2e".into(),
            name: String::new(),
            ..Default::default()
        }
    };
    let cases: Vec<(v1::StartCampaignRequest, &str)> = vec![
        (matrix(&|m| m.sizes = vec![0]), "matrix.sizes"),
        (
            matrix(&|m| m.algorithms = vec!["aes-512-gcm".into()]),
            "matrix.algorithms",
        ),
        (matrix(&|m| m.threads = vec![0]), "matrix.threads"),
        (matrix(&|m| m.seconds = -1.0), "matrix.seconds"),
        (matrix(&|m| m.directions = vec![0]), "matrix.directions"),
        (matrix(&|m| m.sizes.clear()), "matrix.sizes"),
        // 10^7 points: a thousand sizes and a thousand thread counts, refused
        // from the list lengths before a point is built.
        (
            matrix(&|m| {
                m.algorithms = (0..10).map(|_| "aes-128-gcm".to_string()).collect();
                m.sizes = (1..=1000).collect();
                m.threads = (1..=1000).collect();
            }),
            "matrix.sizes: 1000 values is too many; at most 64",
        ),
        // Within every list's bound, but 27 × 64 × 64 points on each host.
        (
            matrix(&|m| {
                m.algorithms = [
                    "aes-128-ecb",
                    "aes-192-ecb",
                    "aes-256-ecb",
                    "aes-128-cbc",
                    "aes-192-cbc",
                    "aes-256-cbc",
                    "aes-128-ctr",
                    "aes-192-ctr",
                    "aes-256-ctr",
                    "aes-128-gcm",
                    "aes-192-gcm",
                    "aes-256-gcm",
                    "aes-128-ccm",
                    "aes-192-ccm",
                    "aes-256-ccm",
                    "aes-128-ocb",
                    "aes-192-ocb",
                    "aes-256-ocb",
                    "aes-128-cbc-hmac-sha256",
                    "aes-256-cbc-hmac-sha256",
                    "chacha20",
                    "chacha20-poly1305",
                    "xchacha20-poly1305",
                    "des-ecb",
                    "des-cbc",
                    "des-ede3-ecb",
                    "des-ede3-cbc",
                ]
                .map(String::from)
                .to_vec();
                m.sizes = (1..=64).collect();
                m.threads = (1..=64).collect();
            }),
            "110592 points; at most 100000 per host",
        ),
        (
            v1::StartCampaignRequest {
                points: Some(v1::start_campaign_request::Points::Suite("huge".into())),
                ..matrix(&|_| {})
            },
            "suite",
        ),
        (
            v1::StartCampaignRequest {
                hosts: Some(v1::HostSelector {
                    arch: vec!["riscv64".into()],
                    ..Default::default()
                }),
                ..matrix(&|_| {})
            },
            "selector matches none",
        ),
    ];
    for (request, needle) in cases {
        let err = admin.start_campaign(request).await.expect_err(needle);
        assert_eq!(err.code(), Code::InvalidArgument, "{needle}: {err:?}");
        assert!(err.message().contains(needle), "{needle}: {}", err.message());
    }
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(jobs, 0);

    let mut wrong = admin_with_token(&app.url(), "not-the-admin-token").await;
    let err = wrong
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::Unauthenticated);
    drop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_not_buffered() {
    let app = spawn_app().await;
    let mut big = hello("raw-big", AGENT_TOKEN, PROTOCOL_VERSION);
    if let Some(agent_message::Body::Hello(h)) = &mut big.body {
        // Twice the coordinator's 1 MiB limit, in a field the agent would keep small.
        h.facts.as_mut().unwrap().facts_json = format!("{{\"pad\":\"{}\"}}", "x".repeat(2 << 20));
    }
    let err = open(&app, big).await.err().expect("refused");
    assert!(
        matches!(
            err.code(),
            Code::OutOfRange | Code::ResourceExhausted | Code::InvalidArgument
        ),
        "{err:?}"
    );
    let hosts: i64 = sqlx::query_scalar("SELECT count(*) FROM hosts")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(hosts, 0, "nothing stored from a refused hello");
}
