//! `cipherfleet-sim`: simulated hosts enroll like real agents (one
//! connection and credential each), run a campaign to the end with exactly
//! one result per job, report what their templates' hardware would run, carry
//! the `simulated` label, and come back as the same hosts after a restart,
//! even when the `Welcome` of their enrollment was lost; past the
//! coordinator's heartbeat rate they adopt the interval of a second `Welcome`.

use std::process::{Command, Stdio};
use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::{App, sim_binary, spawn_app, spawn_app_with, wait_for};
use crate::identity::{enroll_and_lose_the_welcome, proposal_in};

const HOSTS: usize = 20;

fn start_simulator(app: &mut App) -> usize {
    start_simulator_with(app, &[])
}

fn start_simulator_with(app: &mut App, extra: &[&str]) -> usize {
    let child = Command::new(sim_binary())
        .args([
            "--coordinator",
            &app.url(),
            "--count",
            &HOSTS.to_string(),
            "--name-prefix",
            "e2e-sim-",
            "--job-delay",
            "20ms",
            "--ramp",
            "1s",
            "--progress",
            "0",
        ])
        .arg("--token-file")
        .arg(app.dir.path().join("agent.token"))
        .arg("--state-dir")
        .arg(app.dir.path().join("sim-state"))
        .args(extra)
        .env("CIPHERFLEET_LOG", "error")
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the simulator");
    app.track_agent(child)
}

async fn list_hosts(app: &App) -> Vec<v1::Host> {
    app.admin()
        .await
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .hosts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_simulated_hosts_finish_a_quick_campaign_with_one_result_per_job() {
    let mut app = spawn_app().await;
    let sim = start_simulator(&mut app);
    app.wait_online(HOSTS).await;

    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Suite("quick".into())),
        started_by: "e2e".into(),
        ..Default::default()
    };
    let started = app.admin().await.start_campaign(request).await.unwrap().into_inner();
    assert_eq!(
        started.jobs_created as usize,
        18 * HOSTS,
        "the quick suite on every host"
    );
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(180)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32, "{status:?}");
    let overall = status.overall.unwrap();
    assert_eq!(
        (overall.done as usize, overall.failed),
        (18 * HOSTS, 0),
        "{:?}",
        status.failures
    );
    let counts = app.result_counts(&started.campaign_id).await;
    assert_eq!(counts.len(), 18 * HOSTS);
    assert!(counts.iter().all(|(_, n)| *n == 1), "{counts:?}");

    let hosts = list_hosts(&app).await;
    assert_eq!(hosts.len(), HOSTS);
    let label = |h: &v1::Host, key: &str| h.labels.iter().find(|l| l.key == key).map(|l| l.value.clone());
    for h in &hosts {
        assert_eq!(label(h, "simulated").as_deref(), Some("true"), "{}", h.name);
        assert!(label(h, "sim-template").is_some(), "{}", h.name);
    }
    let archs: std::collections::BTreeSet<&str> = hosts.iter().map(|h| h.arch.as_str()).collect();
    assert_eq!(archs, ["aarch64", "x86_64"].into(), "x86 and ARM templates");

    // What ran follows each template's hardware: AES in software without AES-NI, GHASH in
    // software without AVX, everything accelerated on a modern Xeon.
    let path_of = async |template: &str, algorithm: &str| -> Vec<String> {
        sqlx::query_scalar(
            "SELECT DISTINCT r.path_used FROM results r JOIN jobs j ON j.id = r.job_id JOIN hosts h ON h.id = r.host_id \
             WHERE h.labels->>'sim-template' = $1 AND r.algorithm = $2 AND j.spec->>'path' = 'accelerated'",
        )
        .bind(template)
        .bind(algorithm)
        .fetch_all(&app.pool)
        .await
        .unwrap()
    };
    assert_eq!(path_of("xeon-x5570", "aes-256-gcm").await, ["software"]);
    assert_eq!(path_of("xeon-x5670", "aes-256-gcm").await, ["partial"]);
    assert_eq!(path_of("cortex-a72", "aes-256-gcm").await, ["software"]);
    assert_eq!(path_of("xeon-gold-6130", "aes-256-gcm").await, ["accelerated"]);

    // A restarted simulator presents the stored credentials: the same hosts, none refused.
    app.kill_agent(sim);
    app.wait_host("e2e-sim-00000", false).await;
    start_simulator(&mut app);
    app.wait_online(HOSTS).await;
    let again = list_hosts(&app).await;
    assert_eq!(again.len(), HOSTS, "no new hosts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_hosts_whose_enrollment_welcome_was_lost_are_all_admitted() {
    let mut app = spawn_app().await;
    let addr = app.grpc;
    // Coordinator down: each simulated host stores its proposal before it dials.
    app.kill_coordinator();
    let sim = start_simulator(&mut app);
    let names: Vec<String> = (0..HOSTS).map(|i| format!("e2e-sim-{i:05}")).collect();
    let state = app.dir.path().join("sim-state");
    let proposals: Vec<String> = wait_for("every proposal stored", Duration::from_secs(30), || {
        let found: Option<Vec<String>> = names.iter().map(|n| proposal_in(&state.join(n))).collect();
        async move { found }
    })
    .await;
    app.kill_agent(sim);

    // Every enrollment reached the coordinator and every Welcome was lost.
    app.start_coordinator(addr);
    for (name, proposal) in names.iter().zip(&proposals) {
        enroll_and_lose_the_welcome(&app, name, proposal).await;
    }
    start_simulator(&mut app);
    app.wait_online(HOSTS).await;
    assert_eq!(list_hosts(&app).await.len(), HOSTS, "no host enrolled twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_hosts_dial_from_the_local_addresses_given_in_turn() {
    // Every 127.0.0.0/8 address is loopback on Linux: each is a source address of its own,
    // with ephemeral ports of its own (how one machine holds 50,000 connections to one port).
    let mut app = spawn_app().await;
    start_simulator_with(&mut app, &["--local-address", "127.0.0.2,127.0.0.3"]);
    app.wait_online(HOSTS).await;
    let by_source: Vec<(String, i64)> = sqlx::query_as(
        "SELECT split_part(peer_address, ':', 1), count(DISTINCT host_id) FROM agent_sessions \
         GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let half = (HOSTS / 2) as i64;
    assert_eq!(
        by_source,
        [("127.0.0.2".to_string(), half), ("127.0.0.3".to_string(), half)],
        "host i dials from the (i mod 2)-th address"
    );

    // An address this machine does not have is a usage error, not 20 failing hosts.
    let refused = Command::new(sim_binary())
        .args([
            "--coordinator",
            &app.url(),
            "--count",
            "2",
            "--local-address",
            "192.0.2.1",
        ])
        .arg("--token-file")
        .arg(app.dir.path().join("agent.token"))
        .output()
        .expect("running the simulator");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--local-address") && stderr.contains("192.0.2.1"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_herd_reconnecting_after_a_coordinator_restart_comes_back_spread_over_its_jitter_window() {
    let mut app = spawn_app().await;
    start_simulator(&mut app);
    app.wait_online(HOSTS).await;
    let addr = app.grpc;
    // Every host loses its session at the same moment and retries with its own
    // backoff (full jitter) while the coordinator is away.
    app.kill_coordinator();
    tokio::time::sleep(Duration::from_secs(3)).await;
    app.start_coordinator(addr);
    let restarted: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT now()").fetch_one(&app.pool).await.unwrap();
    app.wait_online(HOSTS).await;
    // Each host's first session after the restart, in seconds from the first one.
    let back: Vec<f64> = sqlx::query_scalar(
        "SELECT extract(epoch FROM min(connected_at) - min(min(connected_at)) OVER ())::float8 \
         FROM agent_sessions WHERE connected_at > $1 GROUP BY host_id ORDER BY 1",
    )
    .bind(restarted)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(back.len(), HOSTS, "every host came back");
    // Lock-step retries would bring them back within a few handshakes' time;
    // jittered ones over their backoff's window (seconds, 3 s after the loss).
    let span = back.last().copied().unwrap_or_default();
    assert!(span >= 1.0, "the herd came back within {span:.3} s: {back:?}");
    let busiest = (0..)
        .map(|i| f64::from(i) * 0.25)
        .take_while(|start| *start <= span)
        .map(|start| back.iter().filter(|t| **t >= start && **t < start + 0.25).count())
        .max()
        .unwrap_or_default();
    assert!(
        busiest <= HOSTS / 2,
        "{busiest} of {HOSTS} came back within one quarter second: {back:?}"
    );
}

/// One counter of the simulator's `--stats-file` line (`key=value …`).
fn stat(file: &std::path::Path, key: &str) -> Option<u64> {
    let line = std::fs::read_to_string(file).ok()?;
    crate::transport::field(&line, key)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_hosts_take_the_longer_interval_of_a_second_welcome() {
    // 20 hosts told every second would beat 20 times a second; at most 2 a
    // second means 10 s each. Those welcomed early, before the ramp is over, are
    // told less and re-paced by the coordinator's pacer (every 5 s) in a second
    // Welcome; had they ignored it, about 7 a second would come.
    let mut app = spawn_app_with(&["--heartbeat-seconds", "1", "--max-heartbeat-rate", "2"]).await;
    let stats = app.dir.path().join("sim.stats");
    let stats_arg = stats.to_str().expect("a UTF-8 path").to_string();
    start_simulator_with(&mut app, &["--stats-file", &stats_arg]);
    app.wait_online(HOSTS).await;
    wait_for("a simulated host re-paced", Duration::from_secs(30), || {
        let repaced = stat(&stats, "repaced").filter(|n| *n > 0);
        async move { repaced }
    })
    .await;
    // Settled: the pacer's next look changes nothing more than a fifth.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (t0, beats0) = (
        std::time::Instant::now(),
        stat(&stats, "heartbeats").expect("heartbeats counted"),
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    let beats1 = stat(&stats, "heartbeats").expect("heartbeats counted");
    let rate = (beats1 - beats0) as f64 / t0.elapsed().as_secs_f64();
    // 2/s paced (the simulator's jitter sends up to a quarter more, and the
    // stats file lags a second).
    assert!(rate < 4.5, "{rate:.1} heartbeats/s from {HOSTS} hosts paced to 2/s");
    assert!(rate > 0.5, "{rate:.1} heartbeats/s: the hosts stopped beating");
    // Nobody was judged silent meanwhile: one session per host.
    let sessions: Vec<i64> = sqlx::query_scalar("SELECT count(*) FROM agent_sessions GROUP BY host_id")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(sessions.len(), HOSTS);
    assert!(sessions.iter().all(|n| *n == 1), "a host reconnected: {sessions:?}");
}
