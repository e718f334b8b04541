//! Ingest rate: simulated hosts (raw gRPC sessions in this process) answer
//! every job at once with a valid measurement of that job, made from one real
//! measurement taken at start.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cipherfleet_core::algorithm;
use cipherfleet_core::facts::HostFacts;
use cipherfleet_core::measurement::Measurement;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::stats;
use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::agent_service_client::AgentServiceClient;
use cipherfleet_proto::v1::{
    self, AgentMessage, agent_message, coordinator_message::Body, start_campaign_request::Points,
};
use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::{AGENT_TOKEN, admin, connect, ms, run_with_timeout};

/// Simulated hosts in the ingest part, each with its own session, unless
/// `CIPHERFLEET_BENCH_HOSTS` says how many.
const SIM_HOSTS: usize = 8;
/// Every algorithm at these sizes, both directions: a few hundred jobs per host.
/// `CIPHERFLEET_BENCH_SIZES=N` takes the first N (fewer jobs per host, for many hosts).
const SIM_SIZES: [u64; 8] = [11, 18, 16, 64, 256, 1024, 8192, 16384];

/// A count from the environment, or `default`.
fn from_env(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{name}={v:?}: not a positive count")),
        Err(_) => default,
    }
}
/// Requested seconds of the simulated jobs (answered at once, never measured).
const SIM_SECONDS: f64 = 0.1;

/// One real `cipherfleet.measurement/1` object from the release agent; the
/// simulated hosts send copies of it, relabelled for each job.
pub async fn real_measurement(agent: &Path) -> Measurement {
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
        algorithm: spec.point.algorithm,
        direction: spec.point.direction,
        size_bytes: spec.point.size_bytes,
        threads: spec.point.threads,
        concurrency: spec.point.concurrency,
        key_mode: spec.point.key_mode,
        path_requested: spec.point.path,
        seconds_requested: spec.seconds,
        ..template.clone()
    };
    v1::Measurement::try_from(&m).unwrap_or_else(|e| panic!("converting the measurement of {}: {e}", spec.label()))
}

/// What one simulated host saw.
struct HostReport {
    first_job: Instant,
    last_ack: Instant,
    /// `JobResult` sent → `ResultAck` received, per result.
    round_trips: Vec<Duration>,
    /// `ResultAck` received → next `RunJob` received: the coordinator's dispatch.
    dispatches: Vec<Duration>,
}

pub async fn ingest(url: &str, pool: &PgPool, template: &Measurement) {
    let sim_hosts = from_env("CIPHERFLEET_BENCH_HOSTS", SIM_HOSTS);
    let sizes = &SIM_SIZES[..from_env("CIPHERFLEET_BENCH_SIZES", SIM_SIZES.len()).min(SIM_SIZES.len())];
    let per_host = algorithm::ALL.len() * sizes.len() * 2;
    println!();
    println!(
        "ingest: {sim_hosts} simulated hosts (in this process), {per_host} jobs each ({} algorithms × {} sizes × 2 directions), \
         every job answered at once with a valid measurement",
        algorithm::ALL.len(),
        sizes.len()
    );
    let facts = template.host.as_ref().expect("checked in real_measurement");
    let template = Arc::new(template.clone());
    let mut hosts = Vec::new();
    for i in 0..sim_hosts {
        let host = SimHost::open(url, &format!("sim-{i:02}"), facts, &template.agent_version).await;
        hosts.push(tokio::spawn(host.answer_jobs(per_host, template.clone())));
    }

    let mut admin = admin(url).await;
    let matrix = v1::Matrix {
        algorithms: algorithm::ALL.iter().map(|a| a.name().to_string()).collect(),
        sizes: sizes.to_vec(),
        directions: vec![v1::Direction::Encrypt as i32, v1::Direction::Decrypt as i32],
        threads: vec![1],
        concurrency: None,
        key_modes: vec![v1::KeyMode::Static as i32],
        paths: vec![v1::Path::Accelerated as i32],
        nonces: vec![],
        seconds: SIM_SECONDS,
        providers: vec![],
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
        ..Default::default()
    };
    let creating = Instant::now();
    let started = admin
        .start_campaign(request)
        .await
        .expect("starting the ingest campaign")
        .into_inner();
    let creation = creating.elapsed();
    let jobs = started.jobs_created as usize;
    assert_eq!(jobs, per_host * sim_hosts, "jobs created for {sim_hosts} hosts");
    println!(
        "  campaign created: {jobs} jobs in {} (StartCampaign's answer)",
        ms(creation)
    );

    let mut reports = Vec::new();
    for host in hosts {
        match tokio::time::timeout(Duration::from_secs(600), host).await {
            Ok(report) => reports.push(report.expect("a simulated host panicked")),
            Err(_) => panic!("timed out after 600 s waiting for the simulated hosts' results to be acknowledged"),
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
            credential: String::new(),
            running_attempt_id: String::new(),
            // The coordinator makes a credential for a host that proposes none.
            proposed_credential: String::new(),
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

    /// The next message; heartbeats go out while it is awaited, as the agent
    /// sends them (with many hosts, the first wait long for the campaign).
    async fn next(&mut self, what: &str) -> Body {
        let waiting = tokio::time::Instant::now();
        let received = loop {
            tokio::select! {
                received = self.rx.message() => break received,
                () = tokio::time::sleep(Duration::from_secs(2)) => {
                    assert!(waiting.elapsed() < Duration::from_secs(60), "{}: timed out after 60 s waiting for {what}", self.name);
                    self.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq: 0 })).await;
                }
            }
        };
        let message = received
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
        // The next job may come before the last result's ack: the coordinator
        // may claim it as soon as the result is stored (a periodic dispatch).
        let mut early: Option<(v1::RunJob, Instant)> = None;
        while round_trips.len() < jobs {
            let (run, received) = match early.take() {
                Some(early) => early,
                None => match self.next("a RunJob").await {
                    Body::RunJob(run) => (run, Instant::now()),
                    other => panic!("{}: expected a RunJob, got {other:?}", self.name),
                },
            };
            first_job.get_or_insert(received);
            if let Some(acked) = last_ack {
                dispatches.push(received.saturating_duration_since(acked));
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
                attempt_id: run.attempt_id.clone(),
            }))
            .await;
            let sent = Instant::now();
            let result = v1::JobResult {
                job_id: run.job_id.clone(),
                measurement: Some(measurement),
                attempt_id: run.attempt_id.clone(),
            };
            self.send(agent_message::Body::JobResult(result)).await;
            loop {
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
                        break;
                    }
                    Body::RunJob(next) if early.is_none() => early = Some((next, Instant::now())),
                    other => panic!("{}: expected the ResultAck of {}, got {other:?}", self.name, run.job_id),
                }
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
