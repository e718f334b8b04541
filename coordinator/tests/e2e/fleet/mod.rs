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
//! figures. Then the `providers` suite on every host, each point measured or
//! skipped with its reason (`providers.rs`). Then the quickstart's flow: the
//! `tour` suite on every host and the report in Chromium as a new user first
//! meets it, every page and scenario view with its answer (or the command that
//! fills it), `/providers` with the providers campaign's figures, emulated
//! hosts never ranked. `fleet.sh down` runs whatever happened.
//!
//! Needs root and network namespaces, else it skips loudly (fails with
//! `CIPHERFLEET_REQUIRE_NETNS` or `CI` set, as `deploy/test.sh` sets it); the
//! static agents of `deploy/build-static.sh` and qemu-user, else it skips
//! (fails with `CIPHERFLEET_REQUIRE_STATIC` or `CI`); qemu-system, busybox-static,
//! kmod and Debian's kernel (`deploy/install-deps.sh`), else it runs without
//! the VM hosts, loudly (fails with `CIPHERFLEET_REQUIRE_VM` or `CI`).

mod harness;
mod pages;
mod providers;
mod vm;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cipherfleet_proto::v1;
use serde_json::Value;

use crate::app::{App, TempDir, kernel_aes_generic_here, matrix, spawn_app, wait_for};
use crate::browser::Screenshots;
use crate::chromium::Browser;

use harness::{Fleet, missing_prerequisite, missing_vm_prerequisite, remove_stale_fleets, skip, unsuitable_machine};
use pages::pages_show_the_fleet;
use vm::{vm_hosts_show_their_own_kernels, vm_kernels_measured_through_af_alg};

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
/// The scenario suites, each with its view at `/scenarios/NAME`.
const SCENARIOS: [&str; 5] = ["object-storage", "field-level", "legacy-migration", "modes", "fallback"];
/// Prefix of this test's namespaces; the rest is the test process's pid.
const NETNS_PREFIX: &str = "cf-fleet-";

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
    // x86-aesni runs on this machine's kernel: without aesni_intel its kernel AES is generic.
    let native: &[(&str, &str)] = if kernel_aes_generic_here() {
        &[("kernel-crypto-generic", "kernel-aes")]
    } else {
        &[]
    };
    assert_eq!(
        of("x86-aesni"),
        native,
        "the native host has no finding but its kernel's: {open:?}"
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

    // The providers suite on every host, the VMs' kernels through AF_ALG among it.
    let providers = providers::suite_on_every_host(&app, &fleet, &hosts).await;
    providers::openssl_with_and_without_aes_ni(&app, &providers).await;
    if vms {
        vm_kernels_measured_through_af_alg(&app, &providers).await;
    }

    // The quickstart's flow (deploy/quickstart.sh): the tour on every host, then the pages as a
    // new user first meets them, pictured (for docs/screenshots/ with CIPHERFLEET_SCREENSHOTS).
    let tour = tour(&app).await;
    // Emulated hosts' timings are not performance: their OpenSSL's two paths make no finding.
    let open = open_findings(&app).await;
    assert!(
        !open
            .iter()
            .any(|(h, r, _)| r == "openssl-no-acceleration" && EMULATED.contains(&h.as_str())),
        "{open:?}"
    );
    let shots = Screenshots::new(&app);
    if let Some(mut browser) = Browser::launch() {
        pages_show_the_fleet(&mut browser, &app, &fleet, &listed, &shots, &tour).await;
    }
}

/// Runs the `tour` suite on every host, as `deploy/quickstart.sh` does; returns its campaign.
async fn tour(app: &App) -> String {
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Suite("tour".into())),
        started_by: "quickstart".into(),
        name: "tour".into(),
        ..Default::default()
    };
    let id = app
        .admin()
        .await
        .start_campaign(request)
        .await
        .expect("the tour starts")
        .into_inner()
        .campaign_id;
    let started = Instant::now();
    app.wait_completed(&id, Duration::from_secs(900)).await;
    eprintln!("fleet: the tour took {:.1} s", started.elapsed().as_secs_f64());
    id
}
