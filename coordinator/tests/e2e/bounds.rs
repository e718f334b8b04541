//! The coordinator never waits on one agent: an agent that stops reading its
//! stream (a raw gRPC client that sends `Hello`, floods, and never reads)
//! delays neither another host's job, nor a cancel, nor a shutdown. And the
//! small per-session buffers still carry the largest message an agent may send.

use std::time::Duration;

use cipherfleet_core::wire;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{
    self, AgentMessage, agent_message, agent_service_client::AgentServiceClient, coordinator_message,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Endpoint;

use crate::app::{AGENT_TOKEN, App, admin_with_token, matrix, spawn_app};
use crate::identity::keep_alive;
use crate::rejections::{hello, one_point, open};

/// Starts a campaign of one short point on the host named `host`.
async fn start_on(app: &App, host: &str) -> String {
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(matrix(
            &["aes-128-gcm"],
            &[1024],
            0.2,
        ))),
        hosts: Some(v1::HostSelector {
            host_names: vec![host.into()],
            ..Default::default()
        }),
        started_by: "e2e".into(),
        name: format!("on {host}"),
        ..Default::default()
    };
    app.admin()
        .await
        .start_campaign(request)
        .await
        .unwrap()
        .into_inner()
        .campaign_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_stops_reading_delays_neither_another_hosts_job_nor_a_cancel_nor_shutdown() {
    let mut app = spawn_app().await;
    app.spawn_agent("bounds-live", &[]);

    // The stalled agent: a tiny receive window, and its stream is never read.
    let channel = Endpoint::from_shared(app.url())
        .unwrap()
        .initial_stream_window_size(Some(1024))
        .initial_connection_window_size(Some(1024))
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel::<AgentMessage>(64);
    tx.send(hello("bounds-stalled", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    let unread = AgentServiceClient::new(channel)
        .session(ReceiverStream::new(rx))
        .await
        .expect("the session opens");
    app.wait_online(2).await;

    // A job for it (the RunJob sits unread), then a flood of results for jobs it
    // does not have: each is answered, and nothing is read, so the answers pile up.
    let stalled_campaign = start_on(&app, "bounds-stalled").await;
    let flood = tokio::spawn(async move {
        for _ in 0..6000 {
            let body = agent_message::Body::JobResult(v1::JobResult {
                job_id: uuid::Uuid::new_v4().to_string(),
                measurement: Some(v1::Measurement::default()),
                attempt_id: uuid::Uuid::new_v4().to_string(),
            });
            if tx.send(AgentMessage { body: Some(body) }).await.is_err() {
                break;
            }
        }
        tx
    });
    // However far the flood got, nothing below may wait on the stalled agent.
    let _tx = tokio::time::timeout(Duration::from_secs(60), flood).await;

    let cancelled = tokio::time::timeout(
        Duration::from_secs(10),
        app.admin().await.cancel_campaign(v1::CancelCampaignRequest {
            campaign_id: stalled_campaign.clone(),
            reason: "stalled".into(),
        }),
    )
    .await
    .expect("the cancel does not wait on the stalled agent");
    cancelled.expect("the campaign is cancelled");

    let live = start_on(&app, "bounds-live").await;
    let status = app.wait_finished(&live, Duration::from_secs(60)).await;
    assert_eq!(status.overall.unwrap().done, 1, "{:?}", status.failures);

    // The stalled session was ended (too many messages, or a full queue): bounded.
    app.wait_host("bounds-stalled", false).await;

    // Shutdown does not wait for the unread stream either.
    let exit = app.stop_coordinator(Duration::from_secs(30));
    assert!(exit.is_some(), "the coordinator did not stop within 30 s of SIGTERM");
    drop(unread);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaigns_skip_offline_hosts_unless_asked_and_queued_jobs_expire_with_the_reason() {
    let mut app = spawn_app().await;
    let agent = app.spawn_agent("bounds-gone", &[]);
    app.wait_online(1).await;
    app.kill_agent(agent);
    app.wait_host("bounds-gone", false).await;
    let mut admin = app.admin().await;

    let request = |include_offline, queued_ttl_seconds| v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(matrix(
            &["aes-128-gcm"],
            &[16],
            0.1,
        ))),
        include_offline,
        queued_ttl_seconds,
        ..Default::default()
    };
    let refused = admin.start_campaign(request(false, 0.0)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains("none of them online") && refused.message().contains("--include-offline"),
        "{refused:?}"
    );
    let bad_ttl = admin.start_campaign(request(true, -5.0)).await.unwrap_err();
    assert!(bad_ttl.message().starts_with("queued_ttl_seconds:"), "{bad_ttl:?}");

    // Queued for the host that is gone; it does not come back within a second.
    let started = admin.start_campaign(request(true, 1.0)).await.unwrap().into_inner();
    assert_eq!(started.jobs_created, 1);
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(30)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32);
    let failure = &status.failures[0];
    assert_eq!(failure.host_name, "bounds-gone");
    assert!(failure.error.contains("time to live of 1 s"), "{failure:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_token_attempts_are_rate_limited_per_peer_address() {
    let app = spawn_app().await;
    for attempt in 0..10 {
        let mut wrong = admin_with_token(&app.url(), "not-the-admin-token-0000").await;
        let err = wrong.list_hosts(v1::ListHostsRequest::default()).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated, "attempt {attempt}: {err:?}");
    }
    // This address has used its allowance of admin tokens: refused before the token
    // is looked at, whichever admin token (agents are not: guard/auth.rs).
    let mut wrong = admin_with_token(&app.url(), "not-the-admin-token-0000").await;
    let err = wrong.list_hosts(v1::ListHostsRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("too many failed token attempts"), "{err:?}");
    let err = app
        .admin()
        .await
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    let mut client = AgentServiceClient::new(crate::app::connect(&app.url()).await);
    let (tx, rx) = mpsc::channel(1);
    tx.send(hello("bounds-after", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    // An enrollment token is another secret: its own allowance at this address is whole.
    let admitted = client.session(ReceiverStream::new(rx)).await;
    assert!(admitted.is_ok(), "{admitted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_lists_come_in_pages_and_the_cli_follows_them() {
    let app = spawn_app().await;
    sqlx::query(
        "INSERT INTO hosts (name) SELECT format('page-%s', lpad(i::text, 4, '0')) FROM generate_series(1, 1203) i",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let mut admin = app.admin().await;
    let page = |page_size, page_token: &str| v1::ListHostsRequest {
        page_size,
        page_token: page_token.into(),
        ..Default::default()
    };
    let first = admin.list_hosts(page(1000, "")).await.unwrap().into_inner();
    assert_eq!(first.hosts.len(), 1000);
    assert_eq!(first.next_page_token, "page-1000");
    let last = admin
        .list_hosts(page(1000, &first.next_page_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(last.hosts.len(), 203);
    assert_eq!(last.hosts[0].name, "page-1001");
    assert!(last.next_page_token.is_empty(), "the last page says so");
    let default = admin.list_hosts(page(0, "")).await.unwrap().into_inner();
    assert_eq!(default.hosts.len(), 500, "500 a page unless asked");
    let err = admin.list_hosts(page(1001, "")).await.unwrap_err();
    assert!(err.message().starts_with("page_size:"), "{err:?}");

    let (code, hosts, err) = crate::campaigns::operator(&app, &["hosts"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 1203, "every page");
    assert!(names.windows(2).all(|w| w[0] < w[1]), "in order, none twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_as_large_as_an_agent_may_send_passes_the_small_buffers_and_windows() {
    let app = spawn_app().await;
    let mut raw = open(&app, hello("raw-large", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    let coordinator_message::Body::Welcome(_) = raw.next().await else {
        panic!("a Welcome")
    };
    let _beat = keep_alive(&raw);
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
        ..Default::default()
    };
    app.admin().await.start_campaign(request).await.unwrap();
    let coordinator_message::Body::RunJob(run) = raw.next().await else {
        panic!("a RunJob")
    };
    // The largest result an agent may send: one a protocol version behind
    // carries the most samples a measurement may have as typed doubles beside
    // a measurement_json at its limit, about 770 KiB, far past the codec's
    // first buffer and the HTTP/2 windows, under the coordinator's 1 MiB
    // message limit. A measurement_json of that size stands in for both.
    let pad = "x".repeat(wire::MAX_MEASUREMENT_JSON_LEN + 8 * wire::MAX_SAMPLES);
    let measurement_json = format!("{{\"pad\":\"{pad}\"}}");
    let sent = measurement_json.len();
    raw.send(agent_message::Body::JobResult(v1::JobResult {
        job_id: run.job_id.clone(),
        measurement: Some(v1::Measurement { measurement_json }),
        attempt_id: run.attempt_id.clone(),
    }))
    .await;
    // It arrived whole: the coordinator read and judged all of it (too long a measurement_json).
    let coordinator_message::Body::ResultAck(ack) = raw.next().await else {
        panic!("an ack")
    };
    assert_eq!((&ack.job_id, &ack.attempt_id), (&run.job_id, &run.attempt_id));
    assert!(
        ack.rejected.contains("measurement_json") && ack.rejected.contains(&format!("{sent} bytes is too long")),
        "{ack:?}"
    );
}
