//! The paths an agent advertises: a real agent started from a directory
//! without its software-build sibling offers the accelerated path alone, so a
//! campaign on both paths sends it only accelerated jobs, counts the software
//! points as skipped (not failed) and completes. Given the sibling and
//! restarted, the same host runs software-path points too. The second half
//! needs `cipherfleet-agent-soft` from `deploy/build.sh`; without it, it is
//! skipped loudly (a failure with `CIPHERFLEET_REQUIRE_SOFT` set).

use std::path::PathBuf;
use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::{App, agent_binary, both_paths, matrix, spawn_app, wait_for};

const HOST: &str = "e2e-no-sibling";

/// The paths the coordinator stored for `HOST`, once it has any.
async fn stored_paths(app: &App) -> Option<Vec<String>> {
    sqlx::query_scalar("SELECT paths FROM hosts WHERE name = $1")
        .bind(HOST)
        .fetch_optional(&app.pool)
        .await
        .unwrap()
        .flatten()
}

/// A copy of the agent binary alone in a directory of the app's: no sibling beside it.
fn lone_agent(app: &App) -> PathBuf {
    let dir = app.dir.path().join("lone");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("cipherfleet-agent");
    std::fs::copy(agent_binary(), &copy).expect("copying the agent binary");
    copy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_its_software_sibling_gets_only_accelerated_jobs_and_its_campaign_completes() {
    let mut app = spawn_app().await;
    let lone = lone_agent(&app);
    let agent = app.spawn_agent_build(&lone, HOST, &[]);
    app.wait_online(1).await;
    assert_eq!(stored_paths(&app).await, Some(vec!["accelerated".to_string()]));

    // Two algorithms on both paths: four points, two of which the host cannot run.
    let points = v1::Matrix {
        paths: both_paths(),
        ..matrix(&["aes-128-gcm", "chacha20-poly1305"], &[1024], 0.25)
    };
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(points.clone())),
        started_by: "e2e".into(),
        name: "both paths".into(),
        ..Default::default()
    };
    let started = app.admin().await.start_campaign(request).await.unwrap().into_inner();
    assert_eq!((started.jobs_created, started.points_skipped), (2, 2));
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(120)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32, "{status:?}");
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (2, 0), "{:?}", status.failures);
    assert_eq!(status.points_skipped, 2);
    let [skipped] = status.skipped.as_slice() else {
        panic!("one row of skipped points: {:?}", status.skipped);
    };
    assert_eq!(
        (skipped.host_name.as_str(), skipped.path, skipped.points),
        (HOST, v1::Path::Software as i32, 2)
    );
    assert!(skipped.reason.contains("cipherfleet-agent-soft"), "{}", skipped.reason);
    let id: i64 = started.campaign_id.parse().unwrap();
    let paths: Vec<String> = sqlx::query_scalar("SELECT path FROM jobs WHERE campaign_id = $1")
        .bind(id)
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(paths, ["accelerated", "accelerated"], "no software job was made");
    assert!(
        app.result_counts(&started.campaign_id)
            .await
            .iter()
            .all(|(_, n)| *n == 1)
    );

    // The campaign page and its table say so, as skipped, not failed.
    let page = app.get(&format!("/campaigns/{id}")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"skipped\""), "{}", page.body);
    assert!(
        page.body.contains("No job has failed."),
        "skipped points are no failures"
    );
    let csv = app.get(&format!("/api/v1/campaigns/{id}/skipped?format=csv")).await;
    assert_eq!(csv.status, 200);
    // A path row leaves the provider column empty.
    assert!(csv.body.contains("software,,1,2,"), "{}", csv.body);
    assert_eq!(app.get("/api/v1/campaigns/999999/skipped").await.status, 404);

    // The sibling installed later: after a restart the host offers both paths and runs both.
    let soft = agent_binary().with_file_name("cipherfleet-agent-soft");
    if !soft.is_file() {
        assert!(
            std::env::var_os("CIPHERFLEET_REQUIRE_SOFT").is_none(),
            "CIPHERFLEET_REQUIRE_SOFT is set but {} is missing: run deploy/build.sh",
            soft.display()
        );
        eprintln!(
            "\n!!! SKIPPED the sibling half: {} is missing (deploy/build.sh)\n",
            soft.display()
        );
        return;
    }
    app.kill_agent(agent);
    std::fs::copy(&soft, lone.with_file_name("cipherfleet-agent-soft")).expect("copying the sibling");
    app.spawn_agent_build(&lone, HOST, &[]);
    wait_for("the host to offer both paths", Duration::from_secs(30), || async {
        let paths = stored_paths(&app).await?;
        (paths == ["accelerated", "software"]).then_some(())
    })
    .await;
    app.wait_host(HOST, true).await;
    let status = app.status(&app.run_campaign("both paths again", points).await).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, status.points_skipped), (4, 0), "{status:?}");
}
