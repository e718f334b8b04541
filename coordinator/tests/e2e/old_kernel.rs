//! The emulated fleet's old-kernel host does the daemon's whole job cycle: the static
//! x86-64 agent under `deploy/enosys/run-under-3.10` (ENOSYS for every system call added
//! after Linux 3.10) and `qemu-x86_64-static -cpu Westmere -r 3.10.0-1160.el7.x86_64`
//! enrolls over TLS, takes a campaign's jobs on both paths (workers and the software sibling
//! inherit the filter) and sends their results; the coordinator stores one per job, and
//! the host's kernel as 3.10. `deploy/enosys/check.sh` checks the rest under the filter.
//!
//! Needs x86-64, `qemu-x86_64-static`, Debian's python3-seccomp and the static agent that
//! `deploy/build-static.sh` leaves in `dist/x86_64-unknown-linux-musl/`; skips loudly
//! without them, unless `CIPHERFLEET_REQUIRE_STATIC` is set (the test command sets it).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use cipherfleet_proto::v1;

use crate::app::{both_paths, matrix, spawn_app};

const OLD_KERNEL: &str = "3.10.0-1160.el7.x86_64";
const WESTMERE: [&str; 5] = ["qemu-x86_64-static", "-cpu", "Westmere", "-r", OLD_KERNEL];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The helper and the static agent, or why this machine cannot run the test.
fn old_kernel_host() -> Result<(PathBuf, PathBuf), String> {
    if std::env::consts::ARCH != "x86_64" {
        return Err("not x86-64: the old-kernel host is an emulated x86-64 Westmere".into());
    }
    let agent = repo().join("dist/x86_64-unknown-linux-musl/cipherfleet-agent");
    if !agent.is_file() || !agent.with_file_name("cipherfleet-agent-soft").is_file() {
        return Err(format!(
            "{} (and -soft) not built: run deploy/build-static.sh",
            agent.display()
        ));
    }
    let helper = repo().join("deploy/enosys/run-under-3.10");
    let qemu = Command::new(&helper).args(WESTMERE).arg("--version").output();
    match qemu {
        Ok(o) if o.status.success() => Ok((helper, agent)),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(format!("{}: {e}", helper.display())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_a_3_10_kernel_without_the_newer_system_calls_completes_its_jobs() {
    let (helper, agent) = match old_kernel_host() {
        Ok(found) => found,
        Err(why) => {
            assert!(std::env::var_os("CIPHERFLEET_REQUIRE_STATIC").is_none(), "{why}");
            eprintln!("\n!!! SKIPPED the old-kernel job cycle: {why}\n");
            return;
        }
    };
    // Over TLS, as the fleet runs: rustls and ring need random bytes without getrandom(2).
    let mut app = spawn_app().await;
    app.kill_coordinator();
    app.use_self_signed(&[]);
    app.start_coordinator("127.0.0.1:0".parse().unwrap());
    let ca = app.ca().unwrap();
    // `agent run …` for this coordinator, started as `helper qemu… agent run …`.
    let mut run = app.agent_command_with(&agent, "old-kernel");
    run.arg("--ca-cert").arg(&ca);
    let child = Command::new(helper)
        .args(WESTMERE)
        .arg(run.get_program())
        .args(run.get_args())
        .envs(run.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("CIPHERFLEET_WORKER_PREFIX", WESTMERE.join(" "))
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the agent under the filter and qemu");
    app.track_agent(child);
    app.wait_online(1).await;

    let points = v1::Matrix {
        paths: both_paths(),
        ..matrix(&["aes-128-ctr"], &[1024], 0.05)
    };
    let id = app.run_campaign("old kernel", points).await;
    let overall = app.status(&id).await.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (2, 0));
    let counts: Vec<i64> = app.result_counts(&id).await.into_iter().map(|(_, n)| n).collect();
    assert_eq!(counts, [1, 1], "one result per job");

    let used: Vec<String> = sqlx::query_scalar(
        "SELECT r.path_used FROM results r JOIN jobs j ON j.id = r.job_id WHERE j.campaign_id = $1 ORDER BY r.path",
    )
    .bind(id.parse::<i64>().unwrap())
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        used,
        ["accelerated", "software"],
        "AES-NI on Westmere; the sibling in software"
    );
    // As operators see it (`hosts`).
    let hosts = app
        .admin()
        .await
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let kernels: Vec<(&str, &str)> = hosts
        .hosts
        .iter()
        .map(|h| (h.name.as_str(), h.kernel_release.as_str()))
        .collect();
    assert_eq!(kernels, [("old-kernel", OLD_KERNEL)]);
}
