use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::spawn_app;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_registers_and_a_quick_campaign_completes_with_real_results() {
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-quick", &[]);
    app.wait_online(1).await;

    let mut admin = app.admin().await;
    let hosts = admin
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .hosts;
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].name, "e2e-quick");
    assert_eq!(hosts[0].arch, std::env::consts::ARCH);
    assert!(hosts[0].labels.iter().any(|l| l.key == "suite" && l.value == "e2e"));

    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Suite("quick".into())),
        hosts: Some(v1::HostSelector {
            host_names: vec!["e2e-quick".into()],
            ..Default::default()
        }),
        started_by: "e2e".into(),
        name: String::new(),
    };
    let started = admin.start_campaign(request).await.unwrap().into_inner();
    assert_eq!(started.jobs_created, 18, "the quick suite has 18 points");

    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(240)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32, "{status:?}");
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (18, 0), "{:?}", status.failures);

    // One result per job, with measured figures and the facts snapshot attached.
    let counts = app.result_counts(&started.campaign_id).await;
    assert!(counts.iter().all(|(_, n)| *n == 1), "{counts:?}");
    let rows: Vec<(String, f64, i64, Option<i64>, String)> = sqlx::query_as(
        "SELECT algorithm, throughput_mb_s, latency_p99_ns, snapshot_id, path_used FROM results ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 18);
    for (alg, mb_s, p99, snapshot, path_used) in &rows {
        assert!(*mb_s > 0.0 && *p99 > 0, "{alg}: {mb_s} MB/s, p99 {p99}");
        assert!(snapshot.is_some(), "{alg}: result tied to a facts snapshot");
        if alg == "des-ede3-cbc" {
            assert_eq!(path_used, "software");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_one_host_never_overlap_and_two_hosts_share_a_campaign() {
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-a", &[]);
    app.spawn_agent("e2e-b", &[]);
    app.wait_online(2).await;
    let id = app
        .start_matrix(&["aes-128-gcm", "chacha20-poly1305"], &[64, 1024], 0.05)
        .await;
    let status = app.wait_finished(&id, Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 8);
    assert_eq!(status.hosts.len(), 2);
    // Per host, no two jobs' run intervals overlap.
    let spans: Vec<(i64, chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT host_id, started_at, finished_at FROM jobs WHERE campaign_id = $1 ORDER BY host_id, started_at",
    )
    .bind(id.parse::<i64>().unwrap())
    .fetch_all(&app.pool)
    .await
    .unwrap();
    for w in spans.windows(2) {
        if w[0].0 == w[1].0 {
            assert!(w[0].2 <= w[1].1, "jobs overlapped on host {}: {w:?}", w[0].0);
        }
    }
}
