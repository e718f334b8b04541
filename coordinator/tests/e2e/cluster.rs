//! Two coordinators on one PostgreSQL (issue 12): any coordinator accepts any
//! agent, a campaign started through one reaches the agents of the other, and
//! losing either one (SIGKILL, mid-campaign) loses and duplicates nothing —
//! its agents move to the survivor, which finishes the campaign. A cancel
//! through one stops the jobs running on the other's agents, and a coordinator
//! restarted after SIGKILL takes its dead predecessor's leases over at once.

use std::time::{Duration, Instant};

use cipherfleet_proto::v1;

use crate::app::{App, matrix, spawn_app, spawn_app_with, wait_for};

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
        .retire_host(v1::RetireHostRequest {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_through_one_coordinator_stops_the_jobs_running_on_the_others_agents() {
    let first = spawn_app().await;
    let mut second = App::with_database(first.pool.clone(), first.db_url.clone()).await;
    // Connected to the second coordinator only.
    let agent = second.agent_command("e2e-cluster-cancel").spawn().unwrap();
    second.track_agent(agent);
    first.wait_host("e2e-cluster-cancel", true).await;
    // Three points of 20 s each: one runs, two wait.
    let campaign = first
        .start_campaign(
            "cluster-cancel",
            matrix(&["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"], &[1024], 20.0),
        )
        .await;
    let job = first.wait_job_started(&campaign).await;
    let cancelled = first.cancel(&campaign, "e2e across coordinators").await;
    assert_eq!(cancelled.jobs_cancelled, 2, "the two queued jobs");
    // The second coordinator heard of it and told its agent, which stopped the job
    // well before its 20 s were up and reported it failed with the operator's reason.
    let (status, error): (String, Option<String>) =
        wait_for("the running job to be stopped", Duration::from_secs(12), || async {
            let row: (String, Option<String>) = sqlx::query_as("SELECT status, error FROM jobs WHERE id = $1")
                .bind(job)
                .fetch_one(&first.pool)
                .await
                .ok()?;
            (row.0 != "running").then_some(row)
        })
        .await;
    assert_eq!(status, "failed", "{error:?}");
    let error = error.unwrap_or_default();
    assert!(
        error.contains("cancelled: campaign cancelled: e2e across coordinators"),
        "{error}"
    );
    let results: i64 = sqlx::query_scalar("SELECT count(*) FROM results WHERE job_id = $1")
        .bind(job)
        .fetch_one(&first.pool)
        .await
        .unwrap();
    assert_eq!(results, 0, "the stopped job stored nothing");
}

/// The host's lease: its coordinator and when it was taken.
async fn lease_of(app: &App, host: &str) -> Option<(uuid::Uuid, chrono::DateTime<chrono::Utc>)> {
    sqlx::query_as(
        "SELECT l.coordinator, l.acquired_at FROM host_leases l JOIN hosts h ON h.id = l.host_id \
         WHERE h.name = $1 AND l.expires_at > now() AND l.welcomed",
    )
    .bind(host)
    .fetch_optional(&app.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_restarted_after_sigkill_takes_over_its_predecessors_leases_at_once() {
    // Leases live three 10 s heartbeats: waited out, the agent would be back
    // 20 to 30 s after the kill.
    let mut app = spawn_app_with(&["--verify-on-change=false", "--heartbeat-seconds", "10"]).await;
    app.spawn_agent("e2e-cluster-restart", &[]);
    app.wait_online(1).await;
    let (before, _) = lease_of(&app, "e2e-cluster-restart").await.expect("a live lease");
    let addr = app.grpc;
    app.kill_coordinator();
    let killed = Instant::now();
    app.start_coordinator(addr);
    let (after, taken_at) = wait_for(
        "the agent back on the restarted coordinator",
        Duration::from_secs(15),
        || async { lease_of(&app, "e2e-cluster-restart").await.filter(|l| l.0 != before) },
    )
    .await;
    eprintln!("the agent was back {:?} after the kill", killed.elapsed());
    let registered: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM coordinators")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(registered, [after], "the dead predecessor is forgotten");

    // A coordinator starting beside a live one leaves its leases alone.
    let other = App::with_database(app.pool.clone(), app.db_url.clone()).await;
    other.wait_online(1).await;
    assert_eq!(
        lease_of(&app, "e2e-cluster-restart").await,
        Some((after, taken_at)),
        "the live coordinator's lease is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_killed_and_restarted_has_its_agents_back_at_once_though_they_asked_the_other_first() {
    // Leases live three 5 s heartbeats: waited out (as a refusal's pushback used to
    // say), the agents would be back 15 to 19 s after the kill.
    let args = ["--verify-on-change=false", "--heartbeat-seconds", "5"];
    let mut first = spawn_app_with(&args).await;
    let second = App::with_database_and(first.pool.clone(), first.db_url.clone(), &args).await;
    for i in 0..AGENTS_EACH {
        // The killed coordinator first, the other next: they ask the other while the first restarts.
        let agent = first
            .agent_command(&format!("e2e-cluster-back{i}"))
            .args(["--coordinator", &second.url()])
            .spawn()
            .unwrap();
        first.track_agent(agent);
    }
    first.wait_online(AGENTS_EACH).await;
    let before: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT DISTINCT coordinator FROM host_leases WHERE expires_at > now()")
            .fetch_all(&first.pool)
            .await
            .unwrap();
    assert_eq!(before.len(), 1, "all on the first coordinator");
    let addr = first.grpc;
    first.kill_coordinator();
    let killed = Instant::now();
    first.start_coordinator(addr);
    wait_for("every agent back", Duration::from_secs(30), || async {
        let back: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM host_leases WHERE expires_at > now() AND welcomed AND coordinator <> $1",
        )
        .bind(before[0])
        .fetch_one(&first.pool)
        .await
        .ok()?;
        (back == AGENTS_EACH as i64).then_some(())
    })
    .await;
    let back = killed.elapsed();
    eprintln!("every agent back {back:?} after the kill");
    assert!(back < Duration::from_secs(8), "agents took {back:?} to come back");
}

/// An agent the test waits on itself, killed if the test ends first.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
