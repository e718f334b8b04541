//! The five-host fleet of `deploy/fleet.sh`, end to end: a bridge, a network
//! namespace per host, the static agents of `dist/` (two of them under
//! `qemu-x86_64-static`, one under `qemu-aarch64-static`, the old-kernel one
//! also under the ENOSYS filter when `deploy/enosys/` has it), the coordinator
//! on the bridge's address over TLS. One campaign on all five; meanwhile
//! arm64's link goes down and comes back, and x86-aesni's agent is SIGKILLed
//! and restarted (a second `fleet.sh up`). Then, through the API, the database
//! and headless Chromium: every job done with exactly one result, each host's
//! findings and facts as its CPU and build dictate, the emulated hosts marked
//! and out of the capacity figures. `fleet.sh down` runs whatever happened.
//!
//! Needs root and network namespaces, else it skips loudly (fails with
//! `CIPHERFLEET_REQUIRE_NETNS` or `CI` set, as `deploy/test.sh` sets it); and
//! the static agents of `deploy/build-static.sh` and qemu-user, else it skips
//! (fails with `CIPHERFLEET_REQUIRE_STATIC` or `CI`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cipherfleet_proto::v1;
use serde_json::{Value, json};

use crate::app::{App, TempDir, matrix, spawn_app, wait_for};
use crate::browser::{Problems, Screenshots, texts, visit};
use crate::chromium::Browser;

const HOSTS: [&str; 5] = ["x86-aesni", "x86-no-aesni", "x86-old-kernel", "arm64", "x86-soft-build"];
const EMULATED: [&str; 3] = ["x86-no-aesni", "x86-old-kernel", "arm64"];
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
    bridge_ip: String,
    dir: PathBuf,
    /// Holds `dir`; dropped after `down`.
    _tmp: TempDir,
}

impl Fleet {
    fn for_pid(pid: u32, tmp: TempDir) -> Fleet {
        let net = format!("10.{}.{}", 150 + (pid >> 8) % 50, pid & 0xff);
        let dir = tmp.path().join("fleet");
        let env = vec![
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

    /// The end of every agent's log, for a failure message.
    fn logs(&self) -> String {
        HOSTS
            .iter()
            .map(|h| {
                let log = std::fs::read_to_string(self.dir.join("log").join(format!("{h}.log"))).unwrap_or_default();
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
        drop(Fleet::for_pid(pid, TempDir::new("stale-fleet")));
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
        return Some("not x86-64: three of the five hosts are x86-64".into());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hosts_of_the_fleet_run_one_campaign_through_a_link_cut_and_an_agent_kill() {
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
    remove_stale_fleets();
    // Declared before the app: `down` runs after the coordinator is killed.
    let fleet = Fleet::for_pid(std::process::id(), TempDir::new("fleet"));
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
    let up = fleet
        .run(&["up", "--coordinator", &url, "--ca-cert", &ca, "--token-file", &token])
        .await;
    for host in HOSTS {
        assert!(up.contains(&format!("{host}: started")), "{up}");
    }
    app.wait_online(5).await;

    // Four points on the accelerated path (the quick suite's; a software-path point would need
    // arm64's software sibling too), a second of measuring each: long enough to catch a job running.
    let points = matrix(
        &["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305", "aes-128-cbc"],
        &[1024],
        1.0,
    );
    let campaign = app.start_campaign("fleet", points).await;
    let id: i64 = campaign.parse().unwrap();

    // At once, each while its host runs a job: x86-aesni's agent SIGKILLed, then restarted by a
    // second `up`; arm64's cable pulled for longer than three heartbeats (0.5 s each), then back.
    let kill = async {
        let job = running_job(&app, &fleet, id, "x86-aesni").await;
        let pid = fleet.pid("x86-aesni");
        // SAFETY: kill has no memory preconditions; the pid is the agent `up` recorded.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "SIGKILL to {pid}");
        wait_for("x86-aesni's job to be re-queued", Duration::from_secs(30), || async {
            let (status, attempts, _) = job_state(&app, job).await;
            (status != "running" || attempts > 0).then_some(())
        })
        .await;
        let again = fleet.run(&["up"]).await;
        assert!(again.contains("x86-aesni: started"), "{again}");
        for host in &HOSTS[1..] {
            assert!(
                again.contains(&format!("{host}: running")),
                "a second up restarts only the dead agent: {again}"
            );
        }
        job
    };
    let cut = async {
        let mut tries = 0;
        let job = loop {
            let job = running_job(&app, &fleet, id, "arm64").await;
            fleet.run(&["link", "arm64", "down"]).await;
            // A result already on its way when the link went is committed by now.
            tokio::time::sleep(Duration::from_millis(300)).await;
            if job_state(&app, job).await.0 == "running" {
                break job;
            }
            // It finished while `fleet.sh link` was starting: cut the next one.
            fleet.run(&["link", "arm64", "up"]).await;
            tries += 1;
            assert!(tries < 3, "arm64's jobs keep finishing before its link goes down");
        };
        tokio::time::sleep(Duration::from_secs(3)).await;
        fleet.run(&["link", "arm64", "up"]).await;
        (job, Utc::now())
    };
    let (killed, (cut, link_back)) = tokio::join!(kill, cut);

    let status = app.wait_finished(&campaign, Duration::from_secs(180)).await;
    let overall = status.overall.unwrap();
    assert_eq!(
        (overall.done, overall.failed, status.state),
        (20, 0, v1::CampaignState::Completed as i32),
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
    let (status, _, finished) = job_state(&app, cut).await;
    assert_eq!(status, "done");
    assert!(
        finished.is_some_and(|f| f >= link_back),
        "arm64's cut job completed after its link returned ({link_back}): {finished:?}"
    );
    assert_eq!(job_state(&app, killed).await.0, "done");

    // What the fleet's CPUs and builds dictate.
    let open = wait_for("the findings of the campaign", Duration::from_secs(30), || async {
        let open = open_findings(&app).await;
        let has = |h: &str, r: &str| open.iter().any(|(host, reason, _)| host == h && reason == r);
        (has("x86-no-aesni", "cpu-lacks") && has("x86-soft-build", "software-build")).then_some(open)
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

    let hosts = app.get("/api/v1/hosts").await;
    assert_eq!(hosts.status, 200, "{}", hosts.body);
    let hosts: Vec<Value> = serde_json::from_str(&hosts.body).unwrap();
    let row = |name: &str| -> &Value {
        hosts
            .iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("{name} in /api/v1/hosts: {hosts:?}"))
    };
    for host in HOSTS {
        assert_eq!(row(host)["online"], true, "{host} is online again: {:?}", row(host));
        assert_eq!(
            row(host)["emulated"],
            EMULATED.contains(&host),
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

    // The planner plans with the two real hosts alone, and says it left three out.
    let capacity = app.get("/api/v1/capacity?algorithm=aes-128-gcm&size=1024").await;
    assert_eq!(capacity.status, 200, "{}", capacity.body);
    let capacity: Value = serde_json::from_str(&capacity.body).unwrap();
    assert_eq!(capacity["excluded_hosts"], 3, "{capacity}");
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
        pages_show_the_fleet(&mut browser, &app, &hosts, &shots, &last).await;
    }
}

/// For the README's pictures (`CIPHERFLEET_SCREENSHOTS`, deploy/screenshots.sh):
/// a wider matrix on all five hosts (accelerated path), and the scenario suites on the two real
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
/// violation), the overview and hosts list name all five, each host's page
/// its facts, features, emulation badge and findings.
async fn pages_show_the_fleet(browser: &mut Browser, app: &App, hosts: &[Value], shots: &Screenshots, campaign: &str) {
    let base = format!("http://{}", app.http);
    let mut p = Problems::default();
    if let Some(page) = visit(browser, &base, "/", "overview", shots, &mut p) {
        for host in HOSTS {
            p.check(page.shows(host), format!("/: names {host}"));
        }
    }
    if let Some(page) = visit(browser, &base, "/hosts", "hosts", shots, &mut p) {
        for host in HOSTS {
            p.check(page.shows(host), format!("/hosts: lists {host}"));
        }
    }
    for host in HOSTS {
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
