//! Overhead: the end-to-end time of a `quick` campaign on one real local agent
//! against `cipherfleet-agent bench --suite quick` run directly, alternating.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cipherfleet_core::spec::Suite;
use cipherfleet_core::stats;
use cipherfleet_proto::v1::{self, start_campaign_request::Points};
use sqlx::PgPool;

use crate::{AGENT_TOKEN, Admin, admin, run_with_timeout, wait_for};

/// Campaign / direct runs of the `quick` suite, alternating.
const ROUNDS: usize = 2;
/// The real agent's host name.
const LOCAL_AGENT: &str = "bench-local";
/// Coordinator's overhead on a `quick` campaign that still counts as fine.
const TARGET_OVERHEAD: f64 = 0.10;

pub async fn overhead(url: &str, pool: &PgPool, dir: &Path, agent_bin: &Path) {
    let points = Suite::Quick.expand(1);
    let measuring: f64 = points.iter().map(|p| p.seconds + p.warmup_seconds()).sum();
    println!();
    println!(
        "overhead: `quick` campaign ({} points) on one local agent vs `cipherfleet-agent bench --suite quick` run directly, \
         alternating, {ROUNDS} rounds",
        points.len()
    );
    println!(
        "  measuring time of either: {measuring:.2} s (seconds + warm-up summed over the points); \
         the rest is fixed costs (process starts, self-tests, dispatch)"
    );

    let token_file = dir.join("agent.token");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&token_file)
        .expect("creating the agent's token file");
    file.write_all(AGENT_TOKEN.as_bytes())
        .expect("writing the agent's token file");
    drop(file);
    // Dropped on a panic: the agent is killed with it.
    let mut agent = tokio::process::Command::new(agent_bin)
        .args(["run", "--coordinator", url, "--name", LOCAL_AGENT, "--token-file"])
        .arg(&token_file)
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .env("CIPHERFLEET_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("starting the agent");

    let mut admin = admin(url).await;
    let selector = v1::HostSelector {
        host_names: vec![LOCAL_AGENT.into()],
        ..Default::default()
    };
    wait_for(
        &format!("{LOCAL_AGENT} to come online"),
        Duration::from_secs(30),
        || {
            let (mut admin, selector) = (admin.clone(), selector.clone());
            async move {
                let hosts = admin
                    .list_hosts(v1::ListHostsRequest {
                        selector: Some(selector),
                        ..Default::default()
                    })
                    .await
                    .ok()?
                    .into_inner()
                    .hosts;
                hosts.iter().any(|h| h.online).then_some(())
            }
        },
    )
    .await;

    let (mut campaign, mut direct, mut campaign_ids) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let (id, a) = campaign_time(&mut admin, &selector, points.len()).await;
        campaign_ids.push(id);
        let b = direct_time(agent_bin).await;
        println!(
            "  round {round}: campaign {:.2} s   direct {:.2} s",
            a.as_secs_f64(),
            b.as_secs_f64()
        );
        campaign.push(a.as_secs_f64());
        direct.push(b.as_secs_f64());
    }
    let (a, b) = (
        stats::median(&campaign).expect("rounds"),
        stats::median(&direct).expect("rounds"),
    );
    let overhead = (a - b) / b;
    println!(
        "  median: campaign {a:.2} s, direct {b:.2} s; fixed costs beyond measuring: campaign {:.2} s, direct {:.2} s",
        a - measuring,
        b - measuring
    );
    println!(
        "  coordinator overhead: {:+.1} % ({:+.0} ms per point), target < {:.0} %: {}",
        overhead * 100.0,
        (a - b) * 1e3 / points.len() as f64,
        TARGET_OVERHEAD * 100.0,
        if overhead < TARGET_OVERHEAD { "ok" } else { "ABOVE" }
    );
    print_breakdown(pool, &campaign_ids, measuring / points.len() as f64).await;

    stop_agent(&mut agent).await;
}

/// Starts a `quick` campaign on the local agent and times it until it is
/// completed (polled every 100 ms); returns its id and the time.
async fn campaign_time(admin: &mut Admin, selector: &v1::HostSelector, expected_jobs: usize) -> (i64, Duration) {
    let request = v1::StartCampaignRequest {
        points: Some(Points::Suite("quick".into())),
        hosts: Some(selector.clone()),
        started_by: "bench".into(),
        name: "overhead benchmark".into(),
        ..Default::default()
    };
    let start = Instant::now();
    let started = admin
        .start_campaign(request)
        .await
        .expect("starting a quick campaign")
        .into_inner();
    assert_eq!(
        started.jobs_created as usize, expected_jobs,
        "jobs of a quick campaign on one host"
    );
    let id = started.campaign_id.clone();
    let status = wait_for("the quick campaign to complete", Duration::from_secs(90), || {
        let (mut admin, id) = (admin.clone(), id.clone());
        async move {
            let s = admin
                .campaign_status(v1::CampaignStatusRequest { campaign_id: id })
                .await
                .ok()?
                .into_inner();
            (s.state != v1::CampaignState::Running as i32).then_some(s)
        }
    })
    .await;
    let elapsed = start.elapsed();
    let done = status.overall.as_ref().map_or(0, |c| c.done) as usize;
    assert!(
        status.state == v1::CampaignState::Completed as i32 && done == expected_jobs && status.failures.is_empty(),
        "the quick campaign did not complete cleanly: {status:?}"
    );
    (started.campaign_id.parse().expect("campaign id"), elapsed)
}

/// Where a campaign's time goes per point, from the jobs' timestamps (the
/// database's clock at the start of each transaction), medians over `campaigns`.
async fn print_breakdown(pool: &PgPool, campaigns: &[i64], measuring_per_point: f64) {
    let (to_accepted, to_stored, to_next, wall): (f64, f64, f64, f64) = sqlx::query_as(
        "WITH j AS ( \
             SELECT campaign_id, assigned_at, started_at, finished_at, \
                    lead(assigned_at) OVER (PARTITION BY campaign_id ORDER BY position) AS next_assigned \
             FROM jobs WHERE campaign_id = ANY($1)) \
         SELECT \
             percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - assigned_at)::float8), \
             percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)::float8), \
             percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM next_assigned - finished_at)::float8), \
             (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at)::float8) \
              FROM campaigns WHERE id = ANY($1)) \
         FROM j",
    )
    .bind(campaigns)
    .fetch_one(pool)
    .await
    .expect("reading the campaigns' job timestamps");
    println!(
        "  per point in a campaign (medians, database clock): assigned → accepted {:.1} ms, \
         accepted → result stored {:.1} ms (of which {:.0} ms measuring), stored → next assigned {:.1} ms; \
         campaign created → finished {wall:.2} s",
        to_accepted * 1e3,
        to_stored * 1e3,
        measuring_per_point * 1e3,
        to_next * 1e3
    );
}

/// Times `cipherfleet-agent bench --suite quick --format json > /dev/null`.
async fn direct_time(agent_bin: &Path) -> Duration {
    let mut cmd = tokio::process::Command::new(agent_bin);
    cmd.args(["bench", "--suite", "quick", "--format", "json"]);
    let start = Instant::now();
    run_with_timeout(cmd, "`cipherfleet-agent bench --suite quick`", Duration::from_secs(90)).await;
    start.elapsed()
}

/// SIGTERM (the agent is idle, so it leaves at once), SIGKILL if it does not.
async fn stop_agent(agent: &mut tokio::process::Child) {
    if let Some(pid) = agent.id() {
        // SAFETY: kill(2) on the pid of a child not yet reaped: it cannot be another process.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    match tokio::time::timeout(Duration::from_secs(15), agent.wait()).await {
        Ok(status) => {
            let status = status.expect("waiting for the agent");
            assert!(status.success(), "the agent exited with {status} after SIGTERM");
        }
        Err(_) => {
            agent.kill().await.expect("killing the agent");
            panic!("the agent did not exit within 15 s of SIGTERM");
        }
    }
}
