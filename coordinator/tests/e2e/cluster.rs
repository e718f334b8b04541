//! Two coordinators on one PostgreSQL (issue 12): any coordinator accepts any
//! agent, a campaign started through one reaches the agents of the other, and
//! losing either one (SIGKILL, mid-campaign) loses and duplicates nothing —
//! its agents move to the survivor, which finishes the campaign.

use std::time::{Duration, Instant};

use crate::app::{App, matrix, spawn_app, wait_for};

/// Agents per coordinator.
const AGENTS_EACH: usize = 2;

/// Coordinators holding live leases, and how many hosts each.
async fn lease_holders(app: &App) -> Vec<i64> {
    sqlx::query_scalar("SELECT count(*) FROM host_leases WHERE expires_at > now() GROUP BY coordinator ORDER BY 1")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

/// Starts a second coordinator on `first`'s database and agents that know both,
/// half of them dialling each first; returns the second.
async fn two_coordinators_with_agents(first: &mut App) -> App {
    let mut second = App::with_database(first.pool.clone(), first.db_url.clone()).await;
    for i in 0..AGENTS_EACH {
        let to_first = first
            .agent_command(&format!("e2e-cluster-a{i}"))
            .args(["--coordinator", &second.url()])
            .spawn()
            .unwrap();
        first.track_agent(to_first);
        let to_second = second
            .agent_command(&format!("e2e-cluster-b{i}"))
            .args(["--coordinator", &first.url()])
            .spawn()
            .unwrap();
        second.track_agent(to_second);
    }
    // Online is cluster-wide: either coordinator lists all of them.
    first.wait_online(2 * AGENTS_EACH).await;
    second.wait_online(2 * AGENTS_EACH).await;
    assert_eq!(
        lease_holders(first).await,
        [AGENTS_EACH as i64, AGENTS_EACH as i64],
        "each coordinator serves the agents that dialled it first"
    );
    second
}

/// A campaign started through the first coordinator; once jobs run on the
/// agents of both, one of them is SIGKILLed, and the other finishes the
/// campaign with exactly one result per job.
async fn serve_one_campaign_losing_a_coordinator(kill_the_one_it_started_on: bool) {
    let mut first = spawn_app().await;
    let mut second = two_coordinators_with_agents(&mut first).await;
    let campaign = first
        .start_campaign(
            "cluster",
            matrix(&["aes-128-gcm", "chacha20-poly1305", "aes-256-ctr"], &[256, 2048], 0.4),
        )
        .await;
    let id: i64 = campaign.parse().unwrap();
    // Dispatch reached the agents of both: a job of each group (a…, b…) has started.
    wait_for(
        "a job of each coordinator's agents to start",
        Duration::from_secs(30),
        || async {
            let groups: i64 = sqlx::query_scalar(
                "SELECT count(DISTINCT substr(h.name, 13, 1)) FROM jobs j JOIN hosts h ON h.id = j.host_id \
             WHERE j.campaign_id = $1 AND j.started_at IS NOT NULL",
            )
            .bind(id)
            .fetch_one(&first.pool)
            .await
            .ok()?;
            (groups == 2).then_some(())
        },
    )
    .await;

    let (lost, survivor) = match kill_the_one_it_started_on {
        true => (&mut first, &second),
        false => (&mut second, &first),
    };
    let killed = Instant::now();
    lost.kill_coordinator();
    // Its agents reconnect to the survivor once their leases expire (three heartbeats).
    wait_for(
        "every agent on the surviving coordinator",
        Duration::from_secs(30),
        || async { (lease_holders(survivor).await == [2 * AGENTS_EACH as i64]).then_some(()) },
    )
    .await;
    let moved = killed.elapsed();
    eprintln!("every agent on the surviving coordinator {moved:?} after the kill");
    assert!(moved < Duration::from_secs(30), "agents took {moved:?} to move");

    let status = survivor.wait_finished(&campaign, Duration::from_secs(120)).await;
    let overall = status.overall.unwrap();
    assert_eq!(
        (overall.done, overall.failed),
        (6 * 2 * AGENTS_EACH as u32, 0),
        "{:?}",
        status.failures
    );
    for (job, n) in survivor.result_counts(&campaign).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_coordinator_cluster_survives_losing_the_coordinator_a_campaign_was_started_on() {
    serve_one_campaign_losing_a_coordinator(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_coordinator_cluster_survives_losing_the_other_coordinator() {
    serve_one_campaign_losing_a_coordinator(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retiring_a_host_through_one_coordinator_ends_its_session_on_the_other() {
    let first = spawn_app().await;
    let second = App::with_database(first.pool.clone(), first.db_url.clone()).await;
    // Connected to the second coordinator only.
    let mut agent = KillOnDrop(second.agent_command("e2e-cluster-retired").spawn().unwrap());
    first.wait_host("e2e-cluster-retired", true).await;

    let retired = first
        .admin()
        .await
        .retire_host(cipherfleet_proto::v1::RetireHostRequest {
            name: "e2e-cluster-retired".into(),
        })
        .await
        .expect("retired")
        .into_inner();
    assert!(
        retired.session_ended,
        "the live session on the other coordinator was found"
    );
    // Its coordinator ends the session at its next renewal; the agent's next hello is
    // refused as retired, and it exits with the status of a refusal.
    let status = wait_for("the retired host's agent to exit", Duration::from_secs(30), || {
        let exited = agent.0.try_wait().unwrap();
        async move { exited }
    })
    .await;
    assert_eq!(status.code(), Some(3), "{status:?}");
    first.wait_host("e2e-cluster-retired", false).await;
}

/// An agent the test waits on itself, killed if the test ends first.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
