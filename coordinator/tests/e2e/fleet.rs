//! The fleet of `deploy/fleet.sh`, end to end: a bridge; a network namespace
//! per process host with the static agents of `dist/` (two of them under
//! `qemu-x86_64-static`, one under `qemu-aarch64-static`, the old-kernel one
//! also under the ENOSYS filter when `deploy/enosys/` has it); two VM hosts
//! booting Debian's kernel under `qemu-system-x86_64` (TCG), one with
//! `modprobe.blacklist=aesni_intel`, one with `noxsave` whose agent
//! `install-agent.sh` installed inside it; the coordinator on the bridge's
//! address over TLS. One campaign on every host; meanwhile arm64's and
//! x86-noxsave's links go down and come back, x86-aesni's agent and
//! x86-kernel-generic's whole VM are SIGKILLed and restarted (a second
//! `fleet.sh up`; the VM keeps its identity on its disk). Then, through the
//! API, the database, `fleet.sh status` and headless Chromium: every job done
//! with exactly one result, each host's findings and facts as its CPU, kernel
//! and build dictate, the emulated hosts marked and out of the capacity
//! figures. `fleet.sh down` runs whatever happened.
//!
//! Needs root and network namespaces, else it skips loudly (fails with
//! `CIPHERFLEET_REQUIRE_NETNS` or `CI` set, as `deploy/test.sh` sets it); the
//! static agents of `deploy/build-static.sh` and qemu-user, else it skips
//! (fails with `CIPHERFLEET_REQUIRE_STATIC` or `CI`); qemu-system, busybox-static,
//! kmod and Debian's kernel (`deploy/install-deps.sh`), else it runs without
//! the VM hosts, loudly (fails with `CIPHERFLEET_REQUIRE_VM` or `CI`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cipherfleet_proto::v1;
use serde_json::{Value, json};

use crate::app::{App, TempDir, matrix, spawn_app, wait_for};
use crate::browser::{Problems, Screenshots, texts, visit};
use crate::chromium::Browser;

/// The hosts that are processes in a namespace of their own.
const PROCESS_HOSTS: [&str; 5] = ["x86-aesni", "x86-no-aesni", "x86-old-kernel", "arm64", "x86-soft-build"];
/// The hosts that are virtual machines with a kernel of their own.
const VM_HOSTS: [&str; 2] = ["x86-kernel-generic", "x86-noxsave"];
/// Emulated CPUs: qemu-user, and the VMs under TCG (the test pins TCG).
const EMULATED: [&str; 5] = [
    "x86-no-aesni",
    "x86-old-kernel",
    "arm64",
    "x86-kernel-generic",
    "x86-noxsave",
];
const OLD_KERNEL: &str = "3.10.0-1160.el7.x86_64";
/// The README's wider matrix (`CIPHERFLEET_SCREENSHOTS`).
const SCREENSHOT_ALGORITHMS: &[&str] = &[
    "aes-128-gcm",
    "aes-256-gcm",
    "aes-128-cbc",
    "aes-128-ctr",
    "chacha20-poly1305",
];
/// The scenario suites, each with its view at `/scenarios/NAME`.
const SCENARIOS: [&str; 5] = ["object-storage", "field-level", "legacy-migration", "modes", "fallback"];
/// Prefix of this test's namespaces; the rest is the test process's pid.
const NETNS_PREFIX: &str = "cf-fleet-";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// One run of `deploy/fleet.sh` with names and a subnet of this process's own,
/// so two test runs (or a quickstart fleet) never meet. `down --purge` on drop.
struct Fleet {
    env: Vec<(&'static str, String)>,
    /// The hosts this run starts.
    hosts: Vec<&'static str>,
    bridge_ip: String,
    dir: PathBuf,
    /// Holds `dir`; dropped after `down`.
    _tmp: TempDir,
}

impl Fleet {
    fn for_pid(pid: u32, tmp: TempDir, vms: bool) -> Fleet {
        let net = format!("10.{}.{}", 150 + (pid >> 8) % 50, pid & 0xff);
        let dir = tmp.path().join("fleet");
        let mut hosts = PROCESS_HOSTS.to_vec();
        if vms {
            hosts.extend(VM_HOSTS);
        }
        let env = vec![
            ("CIPHERFLEET_FLEET_HOSTS", hosts.join(" ")),
            // The same CPU (QEMU's `max`) wherever the test runs, KVM or not.
            ("CIPHERFLEET_FLEET_VM_ACCEL", "tcg".into()),
            ("CIPHERFLEET_FLEET_DIR", dir.display().to_string()),
            ("CIPHERFLEET_FLEET_SUBNET", format!("{net}.0/24")),
            ("CIPHERFLEET_FLEET_BRIDGE", format!("cff{pid}")),
            ("CIPHERFLEET_FLEET_NETNS", format!("{NETNS_PREFIX}{pid}-")),
            ("CIPHERFLEET_FLEET_BIN", repo().join("dist").display().to_string()),
            // Workers at the default niceness get too little CPU on a busy machine to measure.
            ("CIPHERFLEET_FLEET_AGENT_ARGS", "--nice 0".into()),
        ];
        Fleet {
            env,
            hosts,
            bridge_ip: format!("{net}.1"),
            dir,
            _tmp: tmp,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(repo().join("deploy/fleet.sh"));
        c.args(args).envs(self.env.iter().map(|(k, v)| (*k, v.as_str())));
        c.env_remove("CIPHERFLEET_COORDINATOR")
            .env_remove("CIPHERFLEET_CA_CERT");
        c
    }

    /// `fleet.sh ARGS…`; panics with its output (and the agents' logs) when it fails.
    async fn run(&self, args: &[&str]) -> String {
        let out: Output = tokio::process::Command::from(self.command(args))
            .output()
            .await
            .expect("running deploy/fleet.sh");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "fleet.sh {}: {}\n{stdout}{}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        stdout
    }

    /// The agent's pid as `fleet.sh up` recorded it.
    fn pid(&self, host: &str) -> i32 {
        let path = self.dir.join("run").join(format!("{host}.pid"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .parse()
            .unwrap()
    }

    /// A host's log: the agent's, or a VM's console.
    fn log(&self, host: &str) -> String {
        let bytes = std::fs::read(self.dir.join("log").join(format!("{host}.log"))).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The kernel release a VM host's console says it booted last (`uname -r` in its init).
    fn booted_kernel(&self, host: &str) -> String {
        let log = self.log(host);
        log.lines()
            .filter(|l| l.contains("reached /init"))
            .filter_map(|l| l.strip_prefix("cipherfleet-vm: kernel ")?.split(' ').next())
            .next_back()
            .unwrap_or_else(|| panic!("{host}'s console names no kernel:\n{log}"))
            .to_string()
    }

    /// The end of every agent's log, for a failure message.
    fn logs(&self) -> String {
        self.hosts
            .iter()
            .map(|h| {
                let log = self.log(h);
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                format!(
                    "--- {h}.log (last lines)\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        match self.command(&["down", "--purge"]).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "fleet.sh down failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("fleet.sh down did not run: {e}"),
        }
    }
}

/// Fleets of earlier runs that were killed before their `down` (their pid is gone).
fn remove_stale_fleets() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix(NETNS_PREFIX)?.split('-').next()?.parse().ok()
        })
        .filter(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        kill_stale_vms(pid);
        drop(Fleet::for_pid(pid, TempDir::new("stale-fleet"), false));
    }
}

/// The VMs of a killed run: their pid files went with its directory, so they are
/// found by their tap on that run's bridge (`ifname=cff<pid>-N`).
fn kill_stale_vms(run: u32) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let tap = format!("ifname=cff{run}-");
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.starts_with("qemu-system-") && cmdline.contains(&tap) {
            // SAFETY: kill has no memory preconditions; the pid is a qemu of this test's own.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Why the test cannot run here (skipped, or failed where it is required).
fn unsuitable_machine() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: network namespaces and a bridge need root (CI runs the tests as root)".into());
    }
    let probe = format!("{NETNS_PREFIX}probe-{}", std::process::id());
    let made = Command::new("ip").args(["netns", "add", &probe]).output();
    match made {
        Ok(out) if out.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).status();
            None
        }
        Ok(out) => Some(format!(
            "no network namespaces here: ip netns add: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("no network namespaces here: ip (iproute2): {e}")),
    }
}

/// What an installation or build step provides, if missing.
fn missing_prerequisite() -> Option<String> {
    if std::env::consts::ARCH != "x86_64" {
        return Some("not x86-64: most of the fleet's hosts are x86-64".into());
    }
    let binaries = [
        "x86_64-unknown-linux-musl/cipherfleet-agent",
        "x86_64-unknown-linux-musl/cipherfleet-agent-soft",
        "aarch64-unknown-linux-musl/cipherfleet-agent",
    ];
    for bin in binaries {
        let path = repo().join("dist").join(bin);
        if !path.is_file() {
            return Some(format!("{} is missing: run deploy/build-static.sh", path.display()));
        }
    }
    for qemu in ["qemu-x86_64-static", "qemu-aarch64-static"] {
        if !Command::new(qemu)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(format!("{qemu} is missing: run deploy/install-deps.sh"));
        }
    }
    None
}

/// Why the VM hosts cannot run here: qemu-system, or what `deploy/vm/image.sh`
/// needs to make their boot files (it says which package is missing).
fn missing_vm_prerequisite() -> Option<String> {
    if !Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("qemu-system-x86_64 is missing: run deploy/install-deps.sh".into());
    }
    let image = Command::new(repo().join("deploy/vm/image.sh"))
        .args(["build", "amd64"])
        .env("CIPHERFLEET_FLEET_BIN", repo().join("dist"))
        .output();
    match image {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Some(format!("deploy/vm/image.sh did not run: {e}")),
    }
}

/// Skips (returns true) or, where the variables say the machine must run it, fails.
fn skip(why: &str, required_by: &[&str]) -> bool {
    for var in required_by {
        assert!(std::env::var_os(var).is_none(), "{var} is set but {why}");
    }
    eprintln!("\n!!! SKIPPED five_hosts_of_the_fleet_run_one_campaign_through_a_link_cut_and_an_agent_kill: {why}\n");
    true
}

/// Waits for a running job of the campaign on `host` (accepted by its agent);
/// on a timeout, says where every job stands and what the agents logged.
async fn running_job(app: &App, fleet: &Fleet, campaign: i64, host: &str) -> uuid::Uuid {
    let limit = Duration::from_secs(90);
    let what = format!("a running job on {host}");
    let found = wait_for(&what, limit * 2, || async {
        sqlx::query_scalar(
            "SELECT j.id FROM jobs j JOIN hosts h ON h.id = j.host_id \
             WHERE j.campaign_id = $1 AND h.name = $2 AND j.status = 'running' AND j.started_at IS NOT NULL \
             ORDER BY j.position LIMIT 1",
        )
        .bind(campaign)
        .bind(host)
        .fetch_optional(&app.pool)
        .await
        .ok()
        .flatten()
    });
    match tokio::time::timeout(limit, found).await {
        Ok(job) => job,
        Err(_) => panic!(
            "timed out after {limit:?} waiting for {what}\n{}\n{}",
            app.diagnosis(&campaign.to_string()).await,
            fleet.logs()
        ),
    }
}

async fn job_state(app: &App, job: uuid::Uuid) -> (String, i32, Option<DateTime<Utc>>) {
    sqlx::query_as("SELECT status, attempts, finished_at FROM jobs WHERE id = $1")
        .bind(job)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Open findings as (host, reason, subject).
async fn open_findings(app: &App) -> Vec<(String, String, String)> {
    sqlx::query_as(
        "SELECT h.name, f.reason, f.subject FROM findings f JOIN hosts h ON h.id = f.host_id \
         WHERE f.resolved_at IS NULL ORDER BY 1, 2, 3",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// The current facts' usable and advertised CPU features of `host`.
async fn features(app: &App, host: &str) -> (Vec<String>, Vec<String>) {
    sqlx::query_as(
        "SELECT s.features_usable, s.features_advertised FROM hosts h \
         JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id WHERE h.name = $1",
    )
    .bind(host)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

/// Waits until the coordinator lists every one of `hosts` online; says when
/// each first was, counted from `since` (for a VM: from qemu's start to an
/// agent online, its boot time).
async fn wait_all_online(app: &App, fleet: &Fleet, hosts: &[&str], since: Instant) -> Vec<(String, Duration)> {
    let limit = Duration::from_secs(120);
    let mut admin = app.admin().await;
    let mut first: Vec<(String, Duration)> = Vec::new();
    while first.len() < hosts.len() {
        assert!(
            since.elapsed() < limit,
            "only {first:?} of {hosts:?} online after {limit:?}\n{}",
            fleet.logs()
        );
        if let Ok(listed) = admin.list_hosts(v1::ListHostsRequest::default()).await {
            for h in listed.into_inner().hosts {
                if h.online && hosts.contains(&h.name.as_str()) && !first.iter().any(|(n, _)| *n == h.name) {
                    first.push((h.name, since.elapsed()));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    first
}

/// While `host` runs a job of the campaign, pulls its cable for longer than
/// three heartbeats (0.5 s each), then plugs it back. Returns the cut job and
/// when the link came back.
async fn cut_link(app: &App, fleet: &Fleet, campaign: i64, host: &str) -> (uuid::Uuid, DateTime<Utc>) {
    let mut tries = 0;
    let job = loop {
        let job = running_job(app, fleet, campaign, host).await;
        fleet.run(&["link", host, "down"]).await;
        // A result already on its way when the link went is committed by now.
        tokio::time::sleep(Duration::from_millis(300)).await;
        if job_state(app, job).await.0 == "running" {
            break job;
        }
        // It finished while `fleet.sh link` was starting: cut the next one.
        fleet.run(&["link", host, "up"]).await;
        tries += 1;
        assert!(tries < 3, "{host}'s jobs keep finishing before its link goes down");
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    fleet.run(&["link", host, "up"]).await;
    (job, Utc::now())
}

/// While `host` runs a job of the campaign, SIGKILLs what `fleet.sh up`
/// started for it (an agent, or a VM's qemu: a power cut) and waits for the
/// coordinator to re-queue the job.
async fn kill_host(app: &App, fleet: &Fleet, campaign: i64, host: &str) -> uuid::Uuid {
    let job = running_job(app, fleet, campaign, host).await;
    let pid = fleet.pid(host);
    // SAFETY: kill has no memory preconditions; the pid is the one `up` recorded.
    assert_eq!(
        unsafe { libc::kill(pid, libc::SIGKILL) },
        0,
        "SIGKILL to {host}'s {pid}"
    );
    wait_for(
        &format!("{host}'s job to be re-queued"),
        Duration::from_secs(30),
        || async {
            let (status, attempts, _) = job_state(app, job).await;
            (status != "running" || attempts > 0).then_some(())
        },
    )
    .await;
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_of_the_fleet_runs_one_campaign_through_link_cuts_and_kills() {
    if let Some(why) = unsuitable_machine()
        && skip(&why, &["CIPHERFLEET_REQUIRE_NETNS", "CI"])
    {
        return;
    }
    if let Some(why) = missing_prerequisite()
        && skip(&why, &["CIPHERFLEET_REQUIRE_STATIC", "CI"])
    {
        return;
    }
    let vms = match missing_vm_prerequisite() {
        None => true,
        Some(why) => {
            for var in ["CIPHERFLEET_REQUIRE_VM", "CI"] {
                assert!(std::env::var_os(var).is_none(), "{var} is set but {why}");
            }
            eprintln!("\n!!! the fleet test runs WITHOUT its VM hosts: {why}\n");
            false
        }
    };
    remove_stale_fleets();
    // Declared before the app: `down` runs after the coordinator is killed.
    let fleet = Fleet::for_pid(std::process::id(), TempDir::new("fleet"), vms);
    let hosts = fleet.hosts.clone();
    fleet.run(&["net"]).await;
    let mut app = spawn_app().await;
    // On the bridge's address only, over TLS with a certificate naming it.
    app.kill_coordinator();
    app.use_self_signed(std::slice::from_ref(&fleet.bridge_ip));
    app.start_coordinator(format!("{}:0", fleet.bridge_ip).parse().unwrap());
    let ca = app.ca().unwrap().display().to_string();
    let token = app.dir.path().join("agent.token").display().to_string();
    let url = app.url();
    assert!(url.contains(&fleet.bridge_ip), "{url}");
    let started = Instant::now();
    let up = fleet
        .run(&["up", "--coordinator", &url, "--ca-cert", &ca, "--token-file", &token])
        .await;
    for host in &hosts {
        assert!(up.contains(&format!("{host}: started")), "{up}");
    }
    let online = wait_all_online(&app, &fleet, &hosts, started).await;
    // The figures docs/performance.md records (run with --nocapture to see them).
    eprintln!(
        "fleet: every host online {:?} after `fleet.sh up` started: {online:?}",
        started.elapsed()
    );

    // Four points on the accelerated path (the quick suite's; a software-path point would need
    // arm64's software sibling too), a second of measuring each: long enough to catch a job running.
    let points = matrix(
        &["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305", "aes-128-cbc"],
        &[1024],
        1.0,
    );
    let campaign = app.start_campaign("fleet", points).await;
    let id: i64 = campaign.parse().unwrap();

    // At once, each while its host runs a job: x86-aesni's agent and x86-kernel-generic's VM
    // SIGKILLed, then restarted by a second `up`; arm64's and x86-noxsave's cables pulled, then back.
    let (killed_hosts, cut_hosts) = if vms {
        (vec!["x86-aesni", "x86-kernel-generic"], vec!["arm64", "x86-noxsave"])
    } else {
        (vec!["x86-aesni"], vec!["arm64"])
    };
    let kill = async {
        let jobs = if vms {
            let (a, b) = tokio::join!(
                kill_host(&app, &fleet, id, killed_hosts[0]),
                kill_host(&app, &fleet, id, killed_hosts[1])
            );
            vec![a, b]
        } else {
            vec![kill_host(&app, &fleet, id, killed_hosts[0]).await]
        };
        let restarted = Instant::now();
        let again = fleet.run(&["up"]).await;
        for host in &hosts {
            let expected = if killed_hosts.contains(host) {
                "started"
            } else {
                "running"
            };
            assert!(
                again.contains(&format!("{host}: {expected}")),
                "a second up restarts only the dead hosts: {again}"
            );
        }
        let back = wait_all_online(&app, &fleet, &killed_hosts, restarted).await;
        eprintln!("fleet: restarted {back:?} after the second `fleet.sh up`");
        jobs
    };
    let cut = async {
        if vms {
            let (a, b) = tokio::join!(
                cut_link(&app, &fleet, id, cut_hosts[0]),
                cut_link(&app, &fleet, id, cut_hosts[1])
            );
            vec![a, b]
        } else {
            vec![cut_link(&app, &fleet, id, cut_hosts[0]).await]
        }
    };
    let (killed, cuts) = tokio::join!(kill, cut);

    let status = app.wait_finished(&campaign, Duration::from_secs(300)).await;
    let overall = status.overall.unwrap();
    assert_eq!(
        (overall.done, overall.failed, status.state),
        (4 * hosts.len() as u32, 0, v1::CampaignState::Completed as i32),
        "{:?}\n{}\n{}",
        status.failures,
        app.diagnosis(&campaign).await,
        fleet.logs()
    );
    for host in status.hosts {
        assert_eq!(host.counts.unwrap().done, 4, "{} completed its 4 jobs", host.host_name);
    }
    for (job, n) in app.result_counts(&campaign).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
    for (host, (job, link_back)) in cut_hosts.iter().zip(cuts) {
        let (status, _, finished) = job_state(&app, job).await;
        assert_eq!(status, "done", "{host}'s cut job");
        assert!(
            finished.is_some_and(|f| f >= link_back),
            "{host}'s cut job completed after its link returned ({link_back}): {finished:?}"
        );
    }
    for (host, job) in killed_hosts.iter().zip(killed) {
        assert_eq!(job_state(&app, job).await.0, "done", "{host}'s killed job");
    }

    // What the fleet's CPUs, kernels and builds dictate.
    let open = wait_for("the findings of the campaign", Duration::from_secs(30), || async {
        let open = open_findings(&app).await;
        let has = |h: &str, r: &str| open.iter().any(|(host, reason, _)| host == h && reason == r);
        (has("x86-no-aesni", "cpu-lacks")
            && has("x86-soft-build", "software-build")
            && (!vms || has("x86-noxsave", "os-disabled")))
        .then_some(open)
    })
    .await;
    let of = |h: &str| -> Vec<(&str, &str)> {
        open.iter()
            .filter(|(host, ..)| host == h)
            .map(|(_, r, s)| (r.as_str(), s.as_str()))
            .collect()
    };
    assert!(of("x86-no-aesni").contains(&("cpu-lacks", "aes")), "{open:?}");
    assert!(
        of("x86-soft-build").iter().any(|(r, _)| *r == "software-build"),
        "{open:?}"
    );
    assert_eq!(
        of("x86-aesni"),
        [].as_slice(),
        "the native host has no finding: {open:?}"
    );

    let listed = app.get("/api/v1/hosts").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed: Vec<Value> = serde_json::from_str(&listed.body).unwrap();
    let row = |name: &str| -> &Value {
        listed
            .iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("{name} in /api/v1/hosts: {listed:?}"))
    };
    // One row per host: the restarted VM came back with the credential on its disk.
    let mut names: Vec<&str> = listed.iter().filter_map(|h| h["name"].as_str()).collect();
    names.sort_unstable();
    let mut expected = hosts.clone();
    expected.sort_unstable();
    assert_eq!(names, expected, "one host per fleet host, none enrolled twice");
    for host in &hosts {
        assert_eq!(row(host)["online"], true, "{host} is online again: {:?}", row(host));
        assert_eq!(
            row(host)["emulated"],
            EMULATED.contains(host),
            "{host} is marked emulated exactly when it is: {:?}",
            row(host)
        );
    }
    assert_eq!(row("x86-old-kernel")["kernel"], OLD_KERNEL);
    let (usable, advertised) = features(&app, "x86-old-kernel").await;
    assert!(
        !usable.iter().any(|f| f == "avx") && !advertised.iter().any(|f| f == "avx"),
        "{usable:?} {advertised:?}"
    );
    assert!(usable.iter().any(|f| f == "aes"), "Westmere has AES-NI: {usable:?}");
    assert_eq!(row("arm64")["arch"], "aarch64");
    let (usable, _) = features(&app, "arm64").await;
    assert!(
        usable.iter().any(|f| f == "aes"),
        "the Cortex-A72 has ARMv8 AES: {usable:?}"
    );
    assert_eq!(row("x86-no-aesni")["acceleration"], "software");
    assert_eq!(row("x86-aesni")["acceleration"], "accelerated");
    if vms {
        vm_hosts_show_their_own_kernels(&app, &fleet, &open, &|h| row(h)).await;
    }

    // The planner plans with the two real hosts alone, and says it left the emulated ones out.
    let capacity = app.get("/api/v1/capacity?algorithm=aes-128-gcm&size=1024").await;
    assert_eq!(capacity.status, 200, "{}", capacity.body);
    let capacity: Value = serde_json::from_str(&capacity.body).unwrap();
    let emulated = hosts.iter().filter(|h| EMULATED.contains(h)).count();
    assert_eq!(capacity["excluded_hosts"], emulated, "{capacity}");
    let rows = capacity["rows"].as_array().unwrap();
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["emulated"] == false),
        "{capacity}"
    );

    let shots = Screenshots::new(&app);
    let readme = if shots.for_readme {
        Some(readme_campaigns(&app).await)
    } else {
        None
    };
    if let Some(mut browser) = Browser::launch() {
        let last = readme.unwrap_or(campaign);
        pages_show_the_fleet(&mut browser, &app, &fleet, &listed, &shots, &last).await;
    }
}

/// What the VM hosts' own kernels make of them, today: each runs the kernel it
/// booted (not this machine's), x86-noxsave's XCR0 lacks AVX state so its
/// `os-disabled` finding comes from that kernel, x86-kernel-generic's kernel
/// serves `aes` from the generic driver while its userspace has AES-NI (each
/// VM's boot check, in `fleet.sh status`), the restarted VM enrolled once, and
/// x86-noxsave's agent is the one `install-agent.sh` installed inside it.
async fn vm_hosts_show_their_own_kernels<'a>(
    app: &App,
    fleet: &Fleet,
    open: &[(String, String, String)],
    row: &dyn Fn(&str) -> &'a Value,
) {
    let ours = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for host in VM_HOSTS {
        let booted = fleet.booted_kernel(host);
        assert_ne!(booted, ours.trim(), "{host} boots Debian's kernel, not this machine's");
        assert_eq!(row(host)["kernel"], booted.as_str(), "{host}'s facts: {:?}", row(host));
        assert_eq!(row(host)["arch"], "x86_64");
    }
    let findings = |h: &str| -> Vec<(&str, &str)> {
        open.iter()
            .filter(|(host, ..)| host == h)
            .map(|(_, r, s)| (r.as_str(), s.as_str()))
            .collect()
    };
    assert!(
        findings("x86-noxsave").contains(&("os-disabled", "avx-state")),
        "{open:?}"
    );
    let (usable, advertised) = features(app, "x86-noxsave").await;
    assert!(
        advertised.iter().any(|f| f == "avx") && !usable.iter().any(|f| f == "avx"),
        "noxsave: CPUID has AVX, XCR0 not: {usable:?} {advertised:?}"
    );
    assert!(usable.iter().any(|f| f == "aes"), "{usable:?}");
    let (usable, _) = features(app, "x86-kernel-generic").await;
    for f in ["aes", "pclmulqdq", "avx"] {
        assert!(
            usable.iter().any(|u| u == f),
            "x86-kernel-generic's userspace has {f}: {usable:?}"
        );
    }
    assert!(
        !findings("x86-kernel-generic")
            .iter()
            .any(|(r, _)| ["cpu-lacks", "os-disabled", "hypervisor-masks"].contains(r)),
        "x86-kernel-generic's CPU and XCR0 are whole: {open:?}"
    );
    assert_eq!(row("x86-kernel-generic")["acceleration"], "accelerated");

    // Each VM's own check of /proc/crypto at boot, as `fleet.sh status` reports it.
    let status = fleet.run(&["status"]).await;
    let check = |host: &str| {
        status
            .lines()
            .find(|l| l.starts_with(host) && l.contains("kernel aes:"))
            .unwrap_or_else(|| panic!("no kernel aes line for {host}: {status}"))
            .to_string()
    };
    let generic = check("x86-kernel-generic");
    assert!(
        generic.contains("driver aes-generic (generic), expected generic: ok"),
        "{generic}"
    );
    let accelerated = check("x86-noxsave");
    assert!(
        accelerated.contains("driver aes-aesni (accelerated), expected accelerated: ok"),
        "{accelerated}"
    );
    let console = fleet.log("x86-kernel-generic");
    assert!(
        console.contains("modules after ") && !console.contains(" aesni_intel "),
        "the blacklisted driver stays out: {console}"
    );
    for module in ["af_alg", "algif_skcipher", "algif_aead"] {
        assert!(
            console.contains(&format!(" {module} ")),
            "{module} is loaded: {console}"
        );
    }
    // The SIGKILLed VM booted twice and enrolled once: its second boot found its credential.
    assert_eq!(console.matches("reached /init").count(), 2, "{console}");
    assert_eq!(console.matches("no host credential yet").count(), 1, "{console}");

    // deploy/install-agent.sh inside x86-noxsave, on its non-systemd path.
    let console = fleet.log("x86-noxsave");
    for said in [
        "install-agent: systemd is not running here: skipped systemctl restart cipherfleet-agent.service",
        "install-agent: installed for",
        "starting the installed agent as cipherfleet-agent",
    ] {
        assert!(console.contains(said), "x86-noxsave's console says {said:?}: {console}");
    }
}

/// For the README's pictures (`CIPHERFLEET_SCREENSHOTS`, deploy/screenshots.sh):
/// a wider matrix on every host (accelerated path), and the scenario suites on the two real
/// ones (the scenario views leave emulated hosts out). Returns the last campaign.
async fn readme_campaigns(app: &App) -> String {
    // The accelerated path (software-path points on arm64 would need its sibling); the
    // fallback scenario measures both paths on the real hosts.
    let wide = matrix(SCREENSHOT_ALGORITHMS, &[16, 1024, 16 * 1024], 0.25);
    let mut last = app.run_campaign("fleet matrix", wide).await;
    for suite in SCENARIOS {
        let request = v1::StartCampaignRequest {
            points: Some(v1::start_campaign_request::Points::Suite(suite.into())),
            hosts: Some(v1::HostSelector {
                host_names: vec!["x86-aesni".into(), "x86-soft-build".into()],
                ..Default::default()
            }),
            started_by: "screenshots".into(),
            name: format!("scenario {suite}"),
            ..Default::default()
        };
        last = app
            .admin()
            .await
            .start_campaign(request)
            .await
            .expect("campaign starts")
            .into_inner()
            .campaign_id;
    }
    // The queue runs campaigns oldest first: the last one ends last.
    let status = app.wait_finished(&last, Duration::from_secs(900)).await;
    assert_eq!(
        status.state,
        v1::CampaignState::Completed as i32,
        "{:?}",
        status.failures
    );
    last
}

/// The report in Chromium: every page loads clean (no script error, no CSP
/// violation), the overview and hosts list name every host, each host's page
/// its facts, features, emulation badge and findings.
async fn pages_show_the_fleet(
    browser: &mut Browser,
    app: &App,
    fleet: &Fleet,
    hosts: &[Value],
    shots: &Screenshots,
    campaign: &str,
) {
    let base = format!("http://{}", app.http);
    let mut p = Problems::default();
    if let Some(page) = visit(browser, &base, "/", "overview", shots, &mut p) {
        for host in &fleet.hosts {
            p.check(page.shows(host), format!("/: names {host}"));
        }
    }
    if let Some(page) = visit(browser, &base, "/hosts", "hosts", shots, &mut p) {
        for host in &fleet.hosts {
            p.check(page.shows(host), format!("/hosts: lists {host}"));
        }
    }
    for &host in &fleet.hosts {
        let id = hosts.iter().find(|h| h["name"] == host).unwrap()["id"].clone();
        let path = format!("/hosts/{id}");
        let Some(page) = visit(browser, &base, &path, &format!("host-{host}"), shots, &mut p) else {
            continue;
        };
        let badge = browser.eval("!!document.querySelector('h1 .badge.emulated')");
        p.check(
            badge == json!(EMULATED.contains(&host)),
            format!("{path}: {host} has the emulated badge exactly when emulated: {badge}"),
        );
        let feature = |browser: &mut Browser, name: &str| {
            browser.eval(&format!(
                "Array.from(document.querySelectorAll('table.features tr[data-feature={}] td'), td => td.textContent.trim())",
                json!(name)
            ))
        };
        match host {
            "x86-old-kernel" => {
                p.check(page.shows(OLD_KERNEL), format!("{path}: shows kernel {OLD_KERNEL}"));
                let avx = feature(browser, "avx");
                p.check(avx == json!(["avx", "no", "no"]), format!("{path}: AVX absent: {avx}"));
            }
            "arm64" => {
                p.check(page.shows("aarch64"), format!("{path}: shows aarch64"));
                let aes = feature(browser, "aes");
                p.check(
                    aes == json!(["aes", "yes", "yes"]),
                    format!("{path}: AES usable: {aes}"),
                );
            }
            "x86-no-aesni" => {
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("cpu-lacks"),
                    format!("{path}: a cpu-lacks finding: {reasons}"),
                );
            }
            "x86-soft-build" => {
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("software-build"),
                    format!("{path}: a software-build finding: {reasons}"),
                );
            }
            "x86-noxsave" => {
                let kernel = fleet.booted_kernel(host);
                p.check(page.shows(&kernel), format!("{path}: shows kernel {kernel}"));
                let avx = feature(browser, "avx");
                p.check(
                    avx == json!(["avx", "yes", "advertised but not usable"]),
                    format!("{path}: AVX advertised, not enabled: {avx}"),
                );
                let reasons = browser.eval(&texts("table.findings tbody tr"));
                p.check(
                    reasons.to_string().contains("os-disabled"),
                    format!("{path}: an os-disabled finding: {reasons}"),
                );
            }
            "x86-kernel-generic" => {
                let kernel = fleet.booted_kernel(host);
                p.check(page.shows(&kernel), format!("{path}: shows kernel {kernel}"));
                let aes = feature(browser, "aes");
                p.check(
                    aes == json!(["aes", "yes", "yes"]),
                    format!("{path}: AES-NI usable in userspace: {aes}"),
                );
            }
            _ => p.check(
                page.shows("No findings"),
                format!("{path}: the native host has no finding"),
            ),
        }
    }
    if let Some(page) = visit(browser, &base, "/fallback", "fallback", shots, &mut p) {
        for host in ["x86-no-aesni", "x86-soft-build"] {
            p.check(page.shows(host), format!("/fallback: names {host}"));
        }
    }
    let aesni = hosts.iter().find(|h| h["name"] == "x86-aesni").unwrap()["id"].clone();
    let rest = [
        (
            "/compare?rows=hosts&size=16384&threads=1&direction=encrypt&path=accelerated".to_string(),
            "compare".to_string(),
        ),
        (format!("/modes?host={aesni}"), "modes".into()),
        ("/capacity?algorithm=aes-128-gcm&size=1024".into(), "capacity".into()),
        ("/campaigns".into(), "campaigns".into()),
        (format!("/campaigns/{campaign}"), "campaign".into()),
        ("/scenarios".into(), "scenarios".into()),
    ]
    .into_iter()
    .chain(
        SCENARIOS
            .iter()
            .map(|s| (format!("/scenarios/{s}"), format!("scenario-{s}"))),
    );
    for (path, name) in rest {
        visit(browser, &base, &path, &name, shots, &mut p);
    }
    p.assert_none();
}
