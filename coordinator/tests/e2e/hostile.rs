//! Hostile and faulty input. Text the database cannot store (a NUL) is
//! refused with its field named, or, in free text such as a worker's stderr,
//! made storable, so no host is stuck re-sending one message; figures no
//! machine produces are refused; a message the coordinator cannot read ends
//! its session saying why. The faulty agents are a real agent with a worker
//! that misbehaves, or raw gRPC clients.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cipherfleet_core::measurement::Figures;
use cipherfleet_core::path::Path as CryptoPath;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::codec::LeanCodec;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

use crate::app::{AGENT_TOKEN, App, connect, spawn_app};
use crate::identity::keep_alive;
use crate::rejections::{RawAgent, hello, one_point, open};

/// A stand-in for the worker (`CIPHERFLEET_WORKER_PREFIX`) that writes a NUL
/// and a byte that is not UTF-8 to its stderr, and fails.
fn nul_writing_worker(dir: &Path) -> PathBuf {
    let script = dir.join("nul-worker.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf 'worker crashed: bad\\000byte \\377\\n' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

/// Found: such an agent's `JobFailed` was answered `UNAVAILABLE`, never
/// acknowledged, and re-sent on every reconnect (350 session drops a minute),
/// and its campaign never ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_writes_a_nul_to_stderr_fails_its_jobs_and_its_host_moves_on() {
    let mut app = spawn_app().await;
    let worker = nul_writing_worker(app.dir.path());
    let agent = app
        .agent_command("e2e-nul")
        .env("CIPHERFLEET_WORKER_PREFIX", &worker)
        .spawn()
        .expect("starting an agent");
    app.track_agent(agent);
    app.wait_online(1).await;
    let campaign = app.start_matrix(&["aes-128-gcm"], &[16, 64], 0.1).await;
    let status = app.wait_finished(&campaign, Duration::from_secs(60)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (0, 2), "{:?}", status.failures);
    for failure in &status.failures {
        let error = &failure.error;
        assert!(
            error.contains("bad\u{FFFD}byte") && error.contains(wire::NUL_REPLACED) && error.contains("not UTF-8"),
            "the stored error says what was replaced: {error:?}"
        );
    }
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_sessions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 1, "the agent was sent away and came back");
    let spooled = std::fs::read_dir(app.spool_dir("e2e-nul"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("outcome-"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(spooled, 0, "every failure report was acknowledged");
}

/// A raw agent's session, welcomed and kept alive, with the one job of a
/// campaign of [`one_point`] on it.
async fn raw_agent_with_a_job(app: &App, name: &str) -> (RawAgent, tokio::task::JoinHandle<()>, v1::RunJob) {
    let mut raw = open(app, hello(name, AGENT_TOKEN, PROTOCOL_VERSION)).await.unwrap();
    let coordinator_message::Body::Welcome(_) = raw.next().await else {
        panic!("a Welcome")
    };
    let beat = keep_alive(&raw);
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        hosts: Some(v1::HostSelector {
            host_names: vec![name.into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    app.admin().await.start_campaign(request).await.unwrap();
    let coordinator_message::Body::RunJob(run) = raw.next().await else {
        panic!("a RunJob")
    };
    (raw, beat, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_from_an_agent_is_refused_by_field_in_a_hello_and_kept_replaced_in_a_failure() {
    let app = spawn_app().await;
    // In the facts' JSON, which the typed checks do not read: stored as jsonb, it cannot hold \u0000.
    let mut poisoned = hello("raw-nul", AGENT_TOKEN, PROTOCOL_VERSION);
    if let Some(agent_message::Body::Hello(h)) = &mut poisoned.body {
        let facts = &mut h.facts.as_mut().unwrap().facts_json;
        assert!(facts.contains("\"6.1.0\""), "{facts}");
        *facts = facts.replace("\"6.1.0\"", "\"6.1.0\\u0000\"");
    }
    let err = open(&app, poisoned).await.err().expect("refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().starts_with("hello.facts.facts_json.kernel_release:"),
        "{err:?}"
    );

    // A failure report whose error holds a NUL fails the job with the text
    // kept, is acknowledged, and the session goes on.
    let (mut raw, _beat, run) = raw_agent_with_a_job(&app, "raw-nul").await;
    raw.send(agent_message::Body::JobFailed(v1::JobFailed {
        job_id: run.job_id.clone(),
        error: "self-test failed: got \0\0 from the worker".into(),
        busy: false,
        attempt_id: run.attempt_id.clone(),
    }))
    .await;
    let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
        panic!("an ack")
    };
    assert_eq!((&ack.job_id, ack.rejected.as_str()), (&run.job_id, ""), "{ack:?}");
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, error FROM jobs WHERE id = $1::uuid")
            .bind(&run.job_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(status, "failed");
    assert_eq!(
        error.as_deref(),
        Some(
            format!(
                "self-test failed: got \u{FFFD}\u{FFFD} from the worker{}",
                wire::NUL_REPLACED
            )
            .as_str()
        )
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    app.wait_host("raw-nul", true).await;
    drop(raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_from_an_operator_is_refused_naming_the_field() {
    let app = spawn_app().await;
    // A host the campaigns select, so that they reach the database.
    let mut raw = open(&app, hello("raw-operated", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    let coordinator_message::Body::Welcome(_) = raw.next().await else {
        panic!("a Welcome")
    };
    let _beat = keep_alive(&raw);
    let mut admin = app.admin().await;
    let start = |name: &str, hosts: Option<v1::HostSelector>| v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        name: name.into(),
        hosts,
        include_offline: true,
        ..Default::default()
    };
    let refusals = [
        admin.start_campaign(start("nightly\0", None)).await.map(drop),
        admin
            .start_campaign(start(
                "nightly",
                Some(v1::HostSelector {
                    arch: vec!["x86_64\0".into()],
                    ..Default::default()
                }),
            ))
            .await
            .map(drop),
        admin
            .cancel_campaign(v1::CancelCampaignRequest {
                campaign_id: "1".into(),
                reason: "\0".into(),
            })
            .await
            .map(drop),
        admin
            .retire_host(v1::RetireHostRequest { name: "bench\0".into() })
            .await
            .map(drop),
    ];
    let fields = ["name:", "hosts.arch[0]:", "reason:", "name:"];
    for (refused, field) in refusals.into_iter().zip(fields) {
        let status = refused.expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().starts_with(field) && status.message().contains("NUL"),
            "{status:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_a_report_filter_is_a_bad_request_naming_the_parameter() {
    let app = spawn_app().await;
    for (path, parameter) in [
        ("/hosts?label=%00", "label="),
        ("/hosts?arch=%00", "arch="),
        ("/hosts?cpu=Xeon%00", "cpu="),
        ("/hosts?kernel=6.1%00", "kernel="),
        ("/api/v1/hosts?label=rack%3D%00", "label="),
        ("/api/v1/hosts?arch=%00", "arch="),
        ("/api/v1/hosts?cpu=%00", "cpu="),
        ("/api/v1/hosts?kernel=%00&format=csv", "kernel="),
        ("/fallback?label=%00", "label="),
        ("/providers?size=%00", "size="),
        ("/hosts/bench%0001", "the path"),
    ] {
        let answer = app.get(path).await;
        assert_eq!(answer.status, 400, "{path}: {}", answer.body);
        assert!(
            answer.body.contains(parameter) && answer.body.contains("NUL"),
            "{path}: {}",
            answer.body
        );
        if path.starts_with("/api/") {
            let json: serde_json::Value = serde_json::from_str(&answer.body).expect("a JSON error");
            assert!(json["error"].as_str().unwrap().starts_with(parameter), "{json}");
        }
    }
    assert_eq!(app.get("/hosts?label=rack%3Db7").await.status, 200);
}

/// A successful measurement of `run`'s point with `edit` applied to its figures.
fn measurement_of(run: &v1::RunJob, edit: impl FnOnce(&mut Figures)) -> v1::Measurement {
    let spec = JobSpec::try_from(run.spec.as_ref().expect("a spec")).expect("a valid spec");
    let mut m = crate::db_helpers::measurement(&spec, CryptoPath::Accelerated, 100.0);
    edit(m.figures.as_mut().unwrap());
    v1::Measurement::try_from(&m).expect("a successful measurement converts")
}

/// Found stored: 1e300 MB/s, latencies of 2^64 − 1 ns (kept as 2^63 − 1),
/// `bytes_processed` of 2^64 − 1; the report then ranked and coloured by them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_no_machine_produces_are_refused_naming_the_figure() {
    let app = spawn_app().await;
    type Edit = fn(&mut Figures);
    let cases: [(Edit, &str); 3] = [
        (
            |f| {
                f.throughput_mb_s = 1e300;
                f.sample_throughputs_mb_s = vec![1e300; 3];
            },
            "measurement.measurement_json.throughput_mb_s",
        ),
        (
            |f| {
                let l = &mut f.latency_ns;
                (l.p50, l.p90, l.p99, l.p999, l.max) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX);
            },
            "measurement.measurement_json.latency_ns.p50",
        ),
        (
            |f| f.bytes_processed = u64::MAX,
            "measurement.measurement_json.bytes_processed",
        ),
    ];
    for (i, (edit, field)) in cases.into_iter().enumerate() {
        let (mut raw, beat, run) = raw_agent_with_a_job(&app, &format!("raw-implausible-{i}")).await;
        raw.send(agent_message::Body::JobResult(v1::JobResult {
            job_id: run.job_id.clone(),
            measurement: Some(measurement_of(&run, edit)),
            attempt_id: run.attempt_id.clone(),
        }))
        .await;
        let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
            panic!("an ack")
        };
        assert!(ack.rejected.contains(field), "{field}: {ack:?}");
        let (status, error): (String, Option<String>) =
            sqlx::query_as("SELECT status, error FROM jobs WHERE id = $1::uuid")
                .bind(&run.job_id)
                .fetch_one(&app.pool)
                .await
                .unwrap();
        assert_eq!(status, "failed", "{field}");
        assert!(error.unwrap().contains(field), "{field}");
        beat.abort();
    }
    let results: i64 = sqlx::query_scalar("SELECT count(*) FROM results")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(results, 0, "nothing implausible stored");
}

/// `JobFailed` with its error as raw bytes: what a client that does not
/// check its strings sends. The same field numbers as `v1::AgentMessage`.
#[derive(Clone, PartialEq, prost::Message)]
struct RawMessage {
    #[prost(message, optional, tag = "1")]
    hello: Option<v1::Hello>,
    #[prost(message, optional, tag = "6")]
    job_failed: Option<RawJobFailed>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawJobFailed {
    #[prost(string, tag = "1")]
    job_id: String,
    #[prost(bytes = "vec", tag = "2")]
    error: Vec<u8>,
}

/// How a session opened by `first` (its `Hello`) ends after `then`, sent once welcomed.
async fn end_after(app: &App, first: RawMessage, then: RawMessage) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(connect(&app.url()).await);
    grpc.ready().await.expect("the channel is ready");
    let (tx, rx) = mpsc::channel(4);
    tx.send(first).await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/cipherfleet.v1.AgentService/Session");
    let codec = LeanCodec::<RawMessage, v1::CoordinatorMessage>::default();
    let mut inbound = grpc
        .streaming(tonic::Request::new(ReceiverStream::new(rx)), path, codec)
        .await
        .expect("the session opens")
        .into_inner();
    let welcome = inbound.message().await.expect("a message").expect("the stream open");
    assert!(matches!(welcome.body, Some(coordinator_message::Body::Welcome(_))));
    tx.send(then).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match inbound.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return tonic::Status::ok("the stream ended with grpc-status OK"),
                Err(status) => return status,
            }
        }
    })
    .await
    .expect("the session ends in time");
    drop(tx);
    end
}

/// A message over the limit, or one that does not decode, in the middle of
/// a session ends it with the reason (it ended "OK", and silently, before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_the_coordinator_cannot_read_ends_the_session_saying_why() {
    let app = spawn_app().await;
    let said_hello = |name: &str| {
        let Some(agent_message::Body::Hello(h)) = hello(name, AGENT_TOKEN, PROTOCOL_VERSION).body else {
            unreachable!("a hello")
        };
        RawMessage {
            hello: Some(h),
            job_failed: None,
        }
    };
    let failed = |error: Vec<u8>| RawMessage {
        hello: None,
        job_failed: Some(RawJobFailed {
            job_id: uuid::Uuid::new_v4().to_string(),
            error,
        }),
    };

    // Twice the coordinator's 1 MiB message limit.
    let end = end_after(&app, said_hello("raw-big"), failed(vec![b'x'; 2 << 20])).await;
    assert_eq!(end.code(), Code::OutOfRange, "{end:?}");
    assert!(end.message().contains("too large"), "{end:?}");

    let end = end_after(&app, said_hello("raw-utf8"), failed(b"bad \xff byte".to_vec())).await;
    assert_eq!(end.code(), Code::InvalidArgument, "{end:?}");
    assert!(
        end.message().contains("JobFailed.error") && end.message().contains("UTF-8"),
        "{end:?}"
    );
}
