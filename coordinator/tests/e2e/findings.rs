//! Findings end to end: four real agents, each on its own network namespace
//! (a host of its own, as far as the network goes) — a native agent, the
//! same agent's software build, the agent on an emulated CPU without AES-NI
//! (`qemu-x86_64-static -cpu Nehalem`, labelled emulated) and one on an
//! emulated Westmere without PCLMULQDQ (no label: its facts say it is
//! emulated). After a small campaign the coordinator must have found
//! `software-build` and `cpu-lacks` where they belong and nothing of the
//! kind on the native host; what ran must be named truthfully (`partial`
//! where AES had hardware and GHASH or SHA-256 had not, every backend `soft`
//! in the software build, Poly1305 included); `check` and `/metrics` must say
//! the same.
//!
//! Needs root (network namespaces) and x86-64, else it says so loudly and
//! skips; and `qemu-x86_64-static` and the software sibling from
//! `deploy/build.sh`, whose absence also skips unless `CIPHERFLEET_REQUIRE_SOFT`
//! is set (as `deploy/test.sh` does, after building both): then it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cipherfleet_coordinator::store::findings::{self, Finding, Severity};
use serde_json::json;

use crate::app::{ADMIN_TOKEN, App, agent_binary, kernel_aes_generic_here, spawn_app, wait_for};

const NEHALEM: &str = "qemu-x86_64-static -cpu Nehalem";
/// AES-NI without CLMUL, AVX or SHA-NI: GCM and CBC-HMAC run partly in software.
const WESTMERE_NO_CLMUL: &str = "qemu-x86_64-static -cpu Westmere,-pclmulqdq";

/// A network namespace joined to the root namespace by a veth pair on its own
/// /30. Deleted on drop, whatever the test did.
struct Netns {
    name: String,
    root_if: String,
    /// The root namespace's side: where the coordinator is reached from inside.
    root_ip: String,
}

impl Netns {
    /// Namespace `index` of this test process; names carry the pid, so two test
    /// runs on one machine never collide.
    fn create(index: u32) -> Netns {
        let pid = std::process::id();
        let net = format!("10.{}.{}", 200 + (pid >> 8) % 50, pid & 0xff);
        let ns = Netns {
            name: format!("cf-e2e-{pid}-{index}"),
            root_if: format!("cf{pid}{index}r"),
            root_ip: format!("{net}.{}", 4 * index + 1),
        };
        let ns_if = format!("cf{pid}{index}n");
        let ns_ip = format!("{net}.{}", 4 * index + 2);
        ip(&["netns", "add", &ns.name]);
        ip(&["link", "add", &ns.root_if, "type", "veth", "peer", "name", &ns_if]);
        ip(&["link", "set", &ns_if, "netns", &ns.name]);
        ip(&["addr", "add", &format!("{}/30", ns.root_ip), "dev", &ns.root_if]);
        ip(&["link", "set", &ns.root_if, "up"]);
        let inside = |args: &[&str]| ip(&[&["netns", "exec", &ns.name, "ip"], args].concat());
        inside(&["addr", "add", &format!("{ns_ip}/30"), "dev", &ns_if]);
        inside(&["link", "set", &ns_if, "up"]);
        inside(&["link", "set", "lo", "up"]);
        ns
    }

    /// `program args…` run inside this namespace.
    fn command(&self, program: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting one end of the pair deletes both.
        let _ = Command::new("ip").args(["link", "del", &self.root_if]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces left by an earlier run that was killed (its pid is gone).
fn remove_stale_namespaces() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name.strip_prefix("cf-e2e-").and_then(|r| r.split('-').next()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// Why this machine cannot run the test at all (skipped), if it cannot.
fn unsuitable_machine() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: network namespaces need root (CI runs the tests as root)");
    }
    if std::env::consts::ARCH != "x86_64" {
        return Some("not x86-64: the emulated host is an x86-64 CPU without AES-NI");
    }
    None
}

/// What the test needs that an installation step provides, if anything is missing.
fn missing_prerequisite(soft: &Path) -> Option<String> {
    if !soft.is_file() {
        return Some(format!("{} is missing: run deploy/build.sh", soft.display()));
    }
    if !Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success()) {
        return Some("ip (iproute2) is missing: run deploy/install-deps.sh".into());
    }
    let qemu = Command::new("qemu-x86_64-static").arg("--version").output();
    if !qemu.is_ok_and(|o| o.status.success()) {
        return Some("qemu-x86_64-static is missing: run deploy/install-deps.sh".into());
    }
    None
}

/// Starts an agent inside `ns`, talking to the coordinator at `url`.
fn spawn_in(app: &mut App, ns: &Netns, url: &str, name: &str, program: &[&str], extra_env: &[(&str, &str)]) {
    let dir = app.dir.path().to_path_buf();
    let mut command = ns.command(program);
    command
        .args(["run", "--coordinator", url, "--name", name, "--label", "suite=e2e"])
        .arg("--ca-cert")
        .arg(app.ca().expect("the coordinator serves TLS"))
        .arg("--token-file")
        .arg(dir.join("agent.token"))
        .arg("--state-dir")
        .arg(app.state_dir(name))
        .arg("--spool-dir")
        .arg(dir.join(format!("spool-{name}")))
        .env("CIPHERFLEET_LOG", "error")
        .stdin(Stdio::null());
    for (k, v) in extra_env {
        command.env(k, v);
    }
    if name.contains("nehalem") {
        command.args(["--label", "emulated=qemu-nehalem"]);
    }
    let child = command.spawn().expect("starting an agent in its namespace");
    app.track_agent(child);
}

/// Runs `cipherfleet-coordinator check` against the app; returns (exit code, JSON).
pub(crate) fn check(app: &App, extra: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(["check", "--coordinator", &app.url(), "--format", "json"])
        .args(
            app.ca()
                .map(|ca| ["--ca-cert".into(), ca.into_os_string()])
                .into_iter()
                .flatten(),
        )
        .args(extra)
        .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("running check");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

/// The value of one sample line of a Prometheus text page.
pub(crate) fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in\n{metrics}"))
        .parse()
        .unwrap()
}

/// The subjects of `host`'s open findings of `reason`, sorted.
fn subjects<'a>(open: &'a [Finding], host: &str, reason: &str) -> Vec<&'a str> {
    let mut s: Vec<&str> = open
        .iter()
        .filter(|f| f.host_name == host && f.reason == reason)
        .map(|f| f.subject.as_str())
        .collect();
    s.sort_unstable();
    s
}

fn of_host<'a>(open: &'a [Finding], host: &str) -> Vec<&'a str> {
    open.iter()
        .filter(|f| f.host_name == host)
        .map(|f| f.reason.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_software_build_and_emulated_hosts_get_their_findings() {
    let agent = agent_binary();
    let soft: PathBuf = agent.with_file_name("cipherfleet-agent-soft");
    if let Some(why) = unsuitable_machine() {
        eprintln!("\n!!! SKIPPED native_software_build_and_emulated_hosts_get_their_findings: {why}\n");
        return;
    }
    if let Some(why) = missing_prerequisite(&soft) {
        assert!(
            std::env::var_os("CIPHERFLEET_REQUIRE_SOFT").is_none(),
            "CIPHERFLEET_REQUIRE_SOFT is set but {why}"
        );
        eprintln!("\n!!! SKIPPED native_software_build_and_emulated_hosts_get_their_findings: {why}\n");
        return;
    }
    remove_stale_namespaces();
    // Declared before the app: dropped after it, once its agents are killed.
    let namespaces: Vec<Netns> = (0..4).map(Netns::create).collect();
    let mut app = spawn_app().await;
    // Reachable from the namespaces: every address, on a fresh port, over TLS
    // (plain gRPC off loopback is refused) with a certificate naming the
    // addresses the namespaces dial.
    app.kill_coordinator();
    app.use_self_signed(&namespaces.iter().map(|ns| ns.root_ip.clone()).collect::<Vec<_>>());
    app.start_coordinator("0.0.0.0:0".parse().unwrap());
    let url = |ns: &Netns| format!("https://{}:{}", ns.root_ip, app.grpc.port());
    let (native_url, soft_url, nehalem_url, westmere_url) = (
        url(&namespaces[0]),
        url(&namespaces[1]),
        url(&namespaces[2]),
        url(&namespaces[3]),
    );

    let agent_path = agent.to_str().unwrap();
    spawn_in(&mut app, &namespaces[0], &native_url, "e2e-native", &[agent_path], &[]);
    spawn_in(
        &mut app,
        &namespaces[1],
        &soft_url,
        "e2e-soft",
        &[soft.to_str().unwrap()],
        &[],
    );
    let emulated: Vec<&str> = NEHALEM.split(' ').chain([agent_path]).collect();
    spawn_in(
        &mut app,
        &namespaces[2],
        &nehalem_url,
        "e2e-nehalem",
        &emulated,
        &[("CIPHERFLEET_WORKER_PREFIX", NEHALEM)],
    );
    // Without CIPHERFLEET_WORKER_PREFIX the workers would run on the real CPU.
    let westmere: Vec<&str> = WESTMERE_NO_CLMUL.split(' ').chain([agent_path]).collect();
    spawn_in(
        &mut app,
        &namespaces[3],
        &westmere_url,
        "e2e-westmere",
        &westmere,
        &[("CIPHERFLEET_WORKER_PREFIX", WESTMERE_NO_CLMUL)],
    );
    app.wait_online(4).await;

    let algorithms = ["aes-128-gcm", "aes-128-cbc-hmac-sha256", "chacha20-poly1305"];
    let id = app.start_matrix(&algorithms, &[1024], 0.05).await;
    let status = app.wait_finished(&id, Duration::from_secs(180)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (12, 0), "{:?}", status.failures);

    // What ran, as each worker detected it.
    let ran = |host: &'static str, algorithm: &'static str| {
        let pool = app.pool.clone();
        async move {
            let (path_used, backends): (String, serde_json::Value) = sqlx::query_as(
                "SELECT r.path_used, r.measurement->'backends' FROM results r JOIN hosts h ON h.id = r.host_id \
                 WHERE h.name = $1 AND r.algorithm = $2",
            )
            .bind(host)
            .bind(algorithm)
            .fetch_one(&pool)
            .await
            .unwrap();
            (path_used, backends)
        }
    };
    let (gcm, backends) = ran("e2e-westmere", "aes-128-gcm").await;
    assert_eq!(gcm, "partial", "AES-NI with GHASH in software: {backends}");
    assert_eq!(
        (&backends["aes"], &backends["ghash"]),
        (&json!("aes-ni"), &json!("soft"))
    );
    let (hmac, backends) = ran("e2e-westmere", "aes-128-cbc-hmac-sha256").await;
    assert_eq!(hmac, "partial", "AES-NI with SHA-256 in software: {backends}");
    let (chacha, backends) = ran("e2e-soft", "chacha20-poly1305").await;
    assert_eq!(chacha, "software", "{backends}");
    for primitive in ["aes", "ghash", "chacha20", "poly1305", "sha256"] {
        assert_eq!(
            backends[primitive], "soft",
            "the software build's {primitive}: {backends}"
        );
    }

    // The campaign's end triggers a fleet pass; wait for what it should find.
    let open = wait_for(
        "findings of the soft and emulated hosts",
        Duration::from_secs(20),
        || {
            let pool = app.pool.clone();
            async move {
                let open = findings::list_open(&pool).await.ok()?;
                let done = of_host(&open, "e2e-soft").contains(&"software-build")
                    && of_host(&open, "e2e-nehalem").contains(&"cpu-lacks")
                    && of_host(&open, "e2e-westmere").contains(&"cpu-lacks");
                done.then_some(open)
            }
        },
    )
    .await;
    // This machine's kernel: without aesni_intel every native host's kernel AES is generic.
    let kernel_generic: &[&str] = if kernel_aes_generic_here() {
        &["kernel-crypto-generic"]
    } else {
        &[]
    };
    let mut soft = of_host(&open, "e2e-soft");
    soft.sort_unstable();
    assert_eq!(soft, [kernel_generic, &["software-build"]].concat(), "{open:#?}");
    // One finding per missing flag: AES, and GHASH's PCLMULQDQ and AVX.
    assert_eq!(
        subjects(&open, "e2e-nehalem", "cpu-lacks"),
        ["aes", "avx", "pclmulqdq"],
        "{open:#?}"
    );
    assert_eq!(
        subjects(&open, "e2e-westmere", "cpu-lacks"),
        ["avx", "pclmulqdq"],
        "{open:#?}"
    );
    assert!(
        of_host(&open, "e2e-westmere").iter().all(|r| *r == "cpu-lacks"),
        "{open:#?}"
    );
    let native = of_host(&open, "e2e-native");
    assert!(
        !native.contains(&"software-build") && !native.contains(&"cpu-lacks"),
        "the native host runs AES in hardware: {open:#?}"
    );
    assert_eq!(
        native.contains(&"kernel-crypto-generic"),
        !kernel_generic.is_empty(),
        "this machine's kernel AES is generic: {}; {open:#?}",
        kernel_aes_generic_here()
    );
    if let Some(kernel) = open
        .iter()
        .find(|f| f.host_name == "e2e-native" && f.reason == "kernel-crypto-generic")
    {
        assert_eq!(kernel.subject, "kernel-aes");
        assert!(
            kernel.summary.contains("aesni_intel") && kernel.summary.contains("dm-crypt"),
            "the module to load and what runs slow: {}",
            kernel.summary
        );
    }
    // The emulated hosts run on this machine's kernel: its drivers are not theirs to be blamed for.
    for emulated in ["e2e-nehalem", "e2e-westmere"] {
        assert!(
            !of_host(&open, emulated).contains(&"kernel-crypto-generic"),
            "{emulated}: {open:#?}"
        );
    }
    let nehalem = open
        .iter()
        .find(|f| f.host_name == "e2e-nehalem" && f.subject == "aes")
        .unwrap();
    assert_eq!(nehalem.evidence["emulated"], true, "emulated timings are marked");
    assert!(nehalem.summary.contains("emulated"), "{}", nehalem.summary);
    let clmul = open
        .iter()
        .find(|f| f.host_name == "e2e-westmere" && f.subject == "pclmulqdq")
        .unwrap();
    assert_eq!(
        clmul.evidence["emulated"], true,
        "no label: the facts show the emulator"
    );
    assert!(clmul.summary.contains("GHASH"), "{}", clmul.summary);
    let worst = open.iter().map(|f| f.severity).max().unwrap();
    assert_eq!(worst, Severity::Warning, "{open:#?}");

    // `check`: fails at the default severity, passes above what was found.
    let (code, listed) = check(&app, &[]);
    assert_eq!(code, 1, "{listed}");
    let listed = listed.as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|f| f["host_name"] == "e2e-soft" && f["reason"] == "software-build" && f["severity"] == "warning"),
        "{listed:?}"
    );
    assert!(listed.iter().all(|f| f["evidence"].is_object()), "{listed:?}");
    let (code, listed) = check(&app, &["--min-severity", "critical"]);
    assert_eq!((code, listed), (0, serde_json::json!([])));
    // Not asked at all (a wrong token): 2, so cron tells it from "findings open".
    let refused = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(["check", "--coordinator", &app.url()])
        .arg("--ca-cert")
        .arg(app.ca().expect("the coordinator serves TLS"))
        .env("CIPHERFLEET_ADMIN_TOKEN", "wrong-admin-token-0123")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("invalid admin token"));

    // `/metrics` counts the same.
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let m = &metrics.body;
    assert_eq!(sample(m, "cipherfleet_hosts"), 4.0);
    assert_eq!(sample(m, "cipherfleet_hosts_online"), 4.0);
    assert_eq!(sample(m, "cipherfleet_hosts_by_acceleration{status=\"software\"}"), 2.0);
    assert_eq!(sample(m, "cipherfleet_hosts_by_acceleration{status=\"partial\"}"), 1.0);
    assert_eq!(
        sample(m, "cipherfleet_hosts_with_findings{reason=\"software-build\"}"),
        1.0
    );
    assert_eq!(sample(m, "cipherfleet_hosts_with_findings{reason=\"cpu-lacks\"}"), 2.0);
    assert_eq!(
        sample(
            m,
            "cipherfleet_findings_open{reason=\"cpu-lacks\",severity=\"warning\"}"
        ),
        5.0
    );
    assert_eq!(
        sample(
            m,
            "cipherfleet_findings_open{reason=\"software-build\",severity=\"warning\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            m,
            "cipherfleet_findings_open{reason=\"hypervisor-masks\",severity=\"critical\"}"
        ),
        0.0
    );
    assert_eq!(sample(m, "cipherfleet_jobs{status=\"done\"}"), 12.0);
    assert_eq!(sample(m, "cipherfleet_jobs{status=\"queued\"}"), 0.0);
    assert_eq!(sample(m, "cipherfleet_results_ingested_total"), 12.0);

    // The fallback page names the partial path and the flag that explains it.
    let page = app.get("/fallback?size=1024").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("status-partial\">partial</span>"), "{}", page.body);
    assert!(
        page.body.contains("the accelerated request ran partly in software"),
        "{}",
        page.body
    );
}
