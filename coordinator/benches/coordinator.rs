//! Benchmark of the coordinator (`deploy/bench-coordinator.sh`, which builds the
//! release agent first; `cargo bench -p cipherfleet-coordinator --bench coordinator`
//! needs `target/release/cipherfleet-agent` from `deploy/build.sh --release`).
//!
//! The coordinator runs in this process, on a private PostgreSQL cluster in a
//! temporary directory that is stopped and removed at the end, panics included.
//!
//! 1. Ingest rate: simulated hosts (raw gRPC sessions in this process) answer
//!    every job at once with a valid measurement of that job, made from one real
//!    measurement taken at start. Results stored per second, the round trip of
//!    one result (`JobResult` sent → `ResultAck` received) and the dispatch of
//!    the next job (`ResultAck` → `RunJob`); afterwards every job must have
//!    exactly one stored result.
//! 2. Overhead: the end-to-end time of a `quick` campaign on one real local
//!    agent against `cipherfleet-agent bench --suite quick` run directly,
//!    alternating. Target: the coordinator adds under 10 %. The jobs' timestamps
//!    then show where a campaign's time goes per point.

use std::future::Future;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cipherfleet_agent::algorithm;
use cipherfleet_agent::measurement::Measurement;
use cipherfleet_agent::probe::HostFacts;
use cipherfleet_agent::spec::{JobSpec, Suite};
use cipherfleet_agent::stats;
use cipherfleet_coordinator::auth::Token;
use cipherfleet_coordinator::db;
use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::server::{self, App};
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::admin_service_client::AdminServiceClient;
use cipherfleet_proto::v1::agent_service_client::AgentServiceClient;
use cipherfleet_proto::v1::{
    self, AgentMessage, agent_message, coordinator_message::Body, start_campaign_request::Points,
};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

const AGENT_TOKEN: &str = "bench-agent-token-0123456789abcdef";
const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";
/// Agents send a heartbeat this often; a session silent for three is lost.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// Simulated hosts in the ingest part, each with its own session.
const SIM_HOSTS: usize = 8;
/// Every algorithm at these sizes, both directions: a few hundred jobs per host.
const SIM_SIZES: [u64; 8] = [11, 18, 16, 64, 256, 1024, 8192, 16384];
/// Requested seconds of the simulated jobs (answered at once, never measured).
const SIM_SECONDS: f64 = 0.1;
/// Campaign / direct runs of the `quick` suite, alternating.
const ROUNDS: usize = 2;
/// The real agent's host name.
const LOCAL_AGENT: &str = "bench-local";
/// Coordinator's overhead on a `quick` campaign that still counts as fine.
const TARGET_OVERHEAD: f64 = 0.10;

fn main() {
    // The coordinator's own warnings (refused results, lost sessions) show up on stderr.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .init();
    let agent = agent_binary();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = TempDir::new("bench");
    let cluster = runtime
        .block_on(PrivateCluster::start(&dir.path().join("postgres")))
        .unwrap_or_else(|e| panic!("starting a private PostgreSQL cluster: {e}"));
    // Whatever happens in the bench (a panic, Ctrl-C), the cluster is stopped
    // before this process exits: a leaked postgres would outlive it.
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(async {
            tokio::select! {
                () = bench(cluster.url(), dir.path(), &agent) => true,
                Ok(()) = tokio::signal::ctrl_c() => false,
            }
        })
    }));
    // Dropping what still runs (coordinator, simulated hosts, the agent, which is
    // killed) before the database goes away spares their errors about it.
    runtime.shutdown_timeout(Duration::from_secs(5));
    let stopper = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = stopper.block_on(cluster.stop()) {
        eprintln!("stopping the private PostgreSQL cluster: {e}");
    }
    drop(dir);
    match outcome {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("interrupted");
            std::process::exit(130);
        }
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// The agent built by `deploy/build.sh --release`, next to this bench's deps dir.
fn agent_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("bench binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("cipherfleet-agent");
    assert!(
        bin.is_file(),
        "{} is missing: run deploy/build.sh --release (or deploy/bench-coordinator.sh)",
        bin.display()
    );
    bin
}

async fn bench(db_url: &str, dir: &Path, agent: &Path) {
    let pool = db::connect(db_url)
        .await
        .expect("connecting to the private cluster and migrating");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding 127.0.0.1:0");
    let url = format!("http://{}", listener.local_addr().expect("bound address"));
    let app = App {
        pool: pool.clone(),
        agent_token: Token::from_secret(AGENT_TOKEN),
        admin_token: Token::from_secret(ADMIN_TOKEN),
        heartbeat: HEARTBEAT,
    };
    let shutdown = CancellationToken::new();
    let coordinator = tokio::spawn(server::run(app, listener, None, shutdown.clone()));

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "cipherfleet coordinator benchmark: {cores} cores, shared with other work and noisy; every figure is from one run"
    );
    let template = real_measurement(agent).await;
    ingest(&url, &pool, &template).await;
    overhead(&url, &pool, dir, agent).await;

    shutdown.cancel();
    match tokio::time::timeout(Duration::from_secs(10), coordinator).await {
        Ok(joined) => joined
            .expect("the coordinator task panicked")
            .expect("the coordinator failed"),
        Err(_) => panic!("timed out after 10 s waiting for the coordinator to shut down"),
    }
    pool.close().await;
}

/// One real `cipherfleet.measurement/1` object from the release agent; the
/// simulated hosts send copies of it, relabelled for each job.
async fn real_measurement(agent: &Path) -> Measurement {
    let mut cmd = tokio::process::Command::new(agent);
    cmd.args([
        "bench",
        "-a",
        "aes-128-gcm",
        "--size",
        "1k",
        "--seconds",
        "0.05",
        "--format",
        "json",
    ]);
    let out = run_with_timeout(cmd, "a single-point `cipherfleet-agent bench`", Duration::from_secs(30)).await;
    let stdout = String::from_utf8(out.stdout).expect("bench output is UTF-8");
    let line = stdout.lines().next().expect("bench printed one JSON line");
    let m: Measurement = serde_json::from_str(line).unwrap_or_else(|e| panic!("not a measurement ({e}): {line}"));
    assert!(m.host.is_some(), "the measurement carries no host facts: {line}");
    m
}

/// The template measurement, made to be of `spec`: the fields the coordinator
/// checks against the job are rewritten, then it is converted the way the agent does.
fn measurement_of(template: &Measurement, spec: &JobSpec) -> v1::Measurement {
    let m = Measurement {
        algorithm: spec.algorithm,
        direction: spec.direction,
        size_bytes: spec.size_bytes,
        threads: spec.threads,
        concurrency: spec.concurrency,
        key_mode: spec.key_mode,
        path_requested: spec.path,
        seconds_requested: spec.seconds,
        ..template.clone()
    };
    v1::Measurement::try_from(&m).unwrap_or_else(|e| panic!("converting the measurement of {}: {e}", spec.label()))
}

// ---------------------------------------------------------------- ingest rate

/// What one simulated host saw.
struct HostReport {
    first_job: Instant,
    last_ack: Instant,
    /// `JobResult` sent → `ResultAck` received, per result.
    round_trips: Vec<Duration>,
    /// `ResultAck` received → next `RunJob` received: the coordinator's dispatch.
    dispatches: Vec<Duration>,
}

async fn ingest(url: &str, pool: &PgPool, template: &Measurement) {
    let per_host = algorithm::ALL.len() * SIM_SIZES.len() * 2;
    println!();
    println!(
        "ingest: {SIM_HOSTS} simulated hosts (in this process), {per_host} jobs each ({} algorithms × {} sizes × 2 directions), \
         every job answered at once with a valid measurement",
        algorithm::ALL.len(),
        SIM_SIZES.len()
    );
    let facts = template.host.as_ref().expect("checked in real_measurement");
    let template = Arc::new(template.clone());
    let mut hosts = Vec::new();
    for i in 0..SIM_HOSTS {
        let host = SimHost::open(url, &format!("sim-{i:02}"), facts, &template.agent_version).await;
        hosts.push(tokio::spawn(host.answer_jobs(per_host, template.clone())));
    }

    let mut admin = admin(url).await;
    let matrix = v1::Matrix {
        algorithms: algorithm::ALL.iter().map(|a| a.name().to_string()).collect(),
        sizes: SIM_SIZES.to_vec(),
        directions: vec![v1::Direction::Encrypt as i32, v1::Direction::Decrypt as i32],
        threads: vec![1],
        concurrency: None,
        key_modes: vec![v1::KeyMode::Static as i32],
        paths: vec![v1::Path::Accelerated as i32],
        seconds: SIM_SECONDS,
    };
    let request = v1::StartCampaignRequest {
        points: Some(Points::Matrix(matrix)),
        hosts: Some(v1::HostSelector {
            labels: vec![v1::Label {
                key: "simulated".into(),
                value: "true".into(),
            }],
            ..Default::default()
        }),
        started_by: "bench".into(),
        name: "ingest benchmark".into(),
    };
    let creating = Instant::now();
    let started = admin
        .start_campaign(request)
        .await
        .expect("starting the ingest campaign")
        .into_inner();
    let creation = creating.elapsed();
    let jobs = started.jobs_created as usize;
    assert_eq!(jobs, per_host * SIM_HOSTS, "jobs created for {SIM_HOSTS} hosts");
    println!(
        "  campaign created: {jobs} jobs in {} (StartCampaign, dispatch to every host included)",
        ms(creation)
    );

    let mut reports = Vec::new();
    for host in hosts {
        match tokio::time::timeout(Duration::from_secs(120), host).await {
            Ok(report) => reports.push(report.expect("a simulated host panicked")),
            Err(_) => panic!("timed out after 120 s waiting for the simulated hosts' results to be acknowledged"),
        }
    }
    let first = reports.iter().map(|r| r.first_job).min().expect("hosts");
    let last = reports.iter().map(|r| r.last_ack).max().expect("hosts");
    let window = last - first;
    let millis = |d: &Duration| d.as_secs_f64() * 1e3;
    let round_trips: Vec<f64> = reports.iter().flat_map(|r| &r.round_trips).map(millis).collect();
    let dispatches: Vec<f64> = reports.iter().flat_map(|r| &r.dispatches).map(millis).collect();
    println!(
        "  results stored: {} in {:.2} s = {:.0} results/s (first RunJob received to last ResultAck)",
        round_trips.len(),
        window.as_secs_f64(),
        round_trips.len() as f64 / window.as_secs_f64()
    );
    let pct = |values: &[f64], p| stats::percentile(values, p).expect("timings");
    println!(
        "  round trip JobResult → ResultAck: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms \
         (the JobAccepted sent just before is handled first and counts)",
        pct(&round_trips, 50.0),
        pct(&round_trips, 99.0),
        pct(&round_trips, 100.0)
    );
    println!(
        "  dispatch ResultAck → next RunJob: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        pct(&dispatches, 50.0),
        pct(&dispatches, 99.0),
        pct(&dispatches, 100.0)
    );

    // Every job has exactly one stored result: none lost, none twice.
    let campaign: i64 = started.campaign_id.parse().expect("campaign id");
    let (rows, distinct): (i64, i64) = sqlx::query_as("SELECT count(*), count(DISTINCT job_id) FROM results")
        .fetch_one(pool)
        .await
        .expect("counting results");
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE campaign_id = $1 AND status = 'done'")
        .bind(campaign)
        .fetch_one(pool)
        .await
        .expect("counting done jobs");
    let status = admin
        .campaign_status(v1::CampaignStatusRequest {
            campaign_id: started.campaign_id.clone(),
        })
        .await
        .expect("campaign status")
        .into_inner();
    let jobs = jobs as i64;
    assert!(
        rows == jobs && distinct == jobs && done == jobs,
        "{jobs} jobs, but {rows} result rows for {distinct} jobs and {done} jobs done"
    );
    assert_eq!(
        status.state,
        v1::CampaignState::Completed as i32,
        "the ingest campaign is complete: {status:?}"
    );
    println!("  check: {rows} result rows = {jobs} jobs, each once; {done} jobs done; campaign completed");
}

/// A hand-driven agent session, as the real agent would hold it.
struct SimHost {
    name: String,
    tx: mpsc::Sender<AgentMessage>,
    rx: tonic::Streaming<v1::CoordinatorMessage>,
}

impl SimHost {
    /// Says hello with this machine's real facts under another name, labelled `simulated=true`.
    async fn open(url: &str, name: &str, facts: &HostFacts, agent_version: &str) -> SimHost {
        let mut facts = facts.clone();
        facts.hostname = Some(name.to_string());
        let hello = v1::Hello {
            protocol_version: PROTOCOL_VERSION,
            enrollment_token: AGENT_TOKEN.into(),
            facts: Some(v1::HostFacts::from(&facts)),
            capabilities: Some(v1::Capabilities {
                paths: vec!["accelerated".into()],
                max_threads: 2,
                agent_version: agent_version.into(),
            }),
            labels: vec![v1::Label {
                key: "simulated".into(),
                value: "true".into(),
            }],
            name: name.into(),
            running_job_id: String::new(),
            spooled_job_ids: vec![],
        };
        let (tx, rx) = mpsc::channel(16);
        tx.send(AgentMessage {
            body: Some(agent_message::Body::Hello(hello)),
        })
        .await
        .expect("queueing hello");
        let mut client = AgentServiceClient::new(connect(url).await);
        let response = client
            .session(ReceiverStream::new(rx))
            .await
            .unwrap_or_else(|e| panic!("{name}: hello refused: {e}"));
        let mut host = SimHost {
            name: name.into(),
            tx,
            rx: response.into_inner(),
        };
        match host.next("Welcome").await {
            Body::Welcome(_) => host,
            other => panic!("{name}: expected Welcome, got {other:?}"),
        }
    }

    async fn next(&mut self, what: &str) -> Body {
        let message = tokio::time::timeout(Duration::from_secs(60), self.rx.message())
            .await
            .unwrap_or_else(|_| panic!("{}: timed out after 60 s waiting for {what}", self.name))
            .unwrap_or_else(|e| panic!("{}: session failed waiting for {what}: {e}", self.name))
            .unwrap_or_else(|| panic!("{}: session closed waiting for {what}", self.name));
        message
            .body
            .unwrap_or_else(|| panic!("{}: a message without a body while waiting for {what}", self.name))
    }

    async fn send(&self, body: agent_message::Body) {
        self.tx
            .send(AgentMessage { body: Some(body) })
            .await
            .unwrap_or_else(|_| panic!("{}: session closed", self.name));
    }

    /// Answers `jobs` jobs: JobAccepted and JobResult at once, then waits for the ack.
    async fn answer_jobs(mut self, jobs: usize, template: Arc<Measurement>) -> HostReport {
        let mut first_job = None;
        let mut round_trips = Vec::with_capacity(jobs);
        let mut dispatches = Vec::with_capacity(jobs);
        let mut last_ack = None;
        while round_trips.len() < jobs {
            let run = match self.next("a RunJob").await {
                Body::RunJob(run) => run,
                other => panic!("{}: expected a RunJob, got {other:?}", self.name),
            };
            let received = Instant::now();
            first_job.get_or_insert(received);
            if let Some(acked) = last_ack {
                dispatches.push(received - acked);
            }
            let wire_spec = run
                .spec
                .as_ref()
                .unwrap_or_else(|| panic!("{}: RunJob without a spec", self.name));
            let spec =
                JobSpec::try_from(wire_spec).unwrap_or_else(|e| panic!("{}: invalid RunJob spec: {e}", self.name));
            let measurement = measurement_of(&template, &spec);
            self.send(agent_message::Body::JobAccepted(v1::JobAccepted {
                job_id: run.job_id.clone(),
            }))
            .await;
            let sent = Instant::now();
            let result = v1::JobResult {
                job_id: run.job_id.clone(),
                measurement: Some(measurement),
            };
            self.send(agent_message::Body::JobResult(result)).await;
            match self.next("a ResultAck").await {
                Body::ResultAck(ack) if ack.job_id == run.job_id => {
                    // A refused result means this bench sends something wrong.
                    assert!(
                        ack.rejected.is_empty(),
                        "{}: result of {} refused: {}",
                        self.name,
                        spec.label(),
                        ack.rejected
                    );
                }
                other => panic!("{}: expected the ResultAck of {}, got {other:?}", self.name, run.job_id),
            }
            let acked = Instant::now();
            round_trips.push(acked - sent);
            last_ack = Some(acked);
        }
        HostReport {
            first_job: first_job.expect("at least one job"),
            last_ack: last_ack.expect("at least one ack"),
            round_trips,
            dispatches,
        }
    }
}

// ---------------------------------------------------------------- overhead

async fn overhead(url: &str, pool: &PgPool, dir: &Path, agent_bin: &Path) {
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

// ---------------------------------------------------------------- helpers

/// Runs `cmd` (stdout captured, stderr shown on failure), panicking after `limit`.
async fn run_with_timeout(mut cmd: tokio::process::Command, what: &str, limit: Duration) -> std::process::Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?} waiting for {what}"))
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} exited with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

type Admin = AdminServiceClient<InterceptedService<Channel, Bearer>>;

/// Adds the admin token to every request.
#[derive(Clone)]
struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}

async fn admin(url: &str) -> Admin {
    let bearer = format!("Bearer {ADMIN_TOKEN}").parse().expect("an ASCII token");
    AdminServiceClient::with_interceptor(connect(url).await, Bearer(bearer))
}

async fn connect(url: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(url.to_string())
        .expect("a valid URL")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connecting to the coordinator at {url}: {e}"))
}

/// Polls `check` every 100 ms until it yields a value; panics after `limit`.
async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("cipherfleet-{what}-{}-{nanos:08x}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating a temporary directory");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
