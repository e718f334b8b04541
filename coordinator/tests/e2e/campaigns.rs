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
        ..Default::default()
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

/// Runs an operator command of the coordinator binary against `app`.
pub(crate) fn operator(app: &crate::app::App, args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(args)
        .args(["--coordinator", &app.url(), "--format", "json"])
        .env("CIPHERFLEET_ADMIN_TOKEN", crate::app::ADMIN_TOKEN)
        .output()
        .expect("the coordinator binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_cli_starts_watches_and_lists() {
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-cli", &["--label", "rack=b7"]);
    app.wait_online(1).await;

    let (code, hosts, err) = operator(&app, &["hosts"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(hosts[0]["name"], "e2e-cli");
    assert_eq!(hosts[0]["online"], true);
    assert_eq!(hosts[0]["labels"]["rack"], "b7");
    assert!(
        ["accelerated", "partial", "software"].contains(&hosts[0]["acceleration"].as_str().unwrap()),
        "{hosts}"
    );

    let (code, none, err) = operator(&app, &["campaign", "start", "--suite", "quick", "--select", "rack=b9"]);
    assert_eq!(code, 1, "a selector matching no host is an error");
    assert!(err.contains("matches none"), "{err}");
    assert!(none.is_null());

    let (code, started, err) = operator(&app, &["campaign", "start", "--suite", "quick", "--select", "rack=b7"]);
    assert_eq!(code, 0, "{err}");
    let id = started["campaign_id"].as_str().unwrap().to_string();
    assert_eq!(started["jobs_created"], 18);
    let (code, status, err) = operator(&app, &["campaign", "status", &id]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(status["campaign_id"], id.as_str());
    assert_eq!(status["hosts"][0]["host_name"], "e2e-cli");

    let (code, cancelled, err) = operator(&app, &["campaign", "cancel", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(cancelled["jobs_cancelled"].as_u64().unwrap() >= 16, "{cancelled}");
    let (code, _, err) = operator(&app, &["campaign", "cancel", &id]);
    assert_eq!(code, 1);
    assert!(err.contains("already cancelled"), "{err}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(["hosts", "--coordinator", &app.url()])
        .env("CIPHERFLEET_ADMIN_TOKEN", "wrong-admin-token-0123")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid admin token"));
}
