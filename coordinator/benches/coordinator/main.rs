//! Benchmark of the coordinator (`deploy/bench-coordinator.sh`, which builds the
//! release agent first; `cargo bench -p cipherfleet-coordinator --bench coordinator`
//! needs `target/release/cipherfleet-agent` from `deploy/build.sh --release`).
//!
//! The coordinator runs in this process, on a private PostgreSQL cluster in a
//! temporary directory that is stopped and removed at the end, panics included.
//!
//! 1. Ingest rate (`ingest.rs`): simulated hosts (raw gRPC sessions in this process) answer
//!    every job at once with a valid measurement of that job, made from one real
//!    measurement taken at start. Results stored per second, the round trip of
//!    one result (`JobResult` sent → `ResultAck` received) and the dispatch of
//!    the next job (`ResultAck` → `RunJob`); afterwards every job must have
//!    exactly one stored result.
//! 2. Overhead (`overhead.rs`): the end-to-end time of a `quick` campaign on one real local
//!    agent against `cipherfleet-agent bench --suite quick` run directly,
//!    alternating. Target: the coordinator adds under 10 %. The jobs' timestamps
//!    then show where a campaign's time goes per point.
//! 3. Document (`document.rs`): the session's CPU a result for the real
//!    measurement's document: parsing and checking it, then storing it once.
//! 4. Refusal (`refusal.rs`): a 10^7-point matrix is refused in milliseconds and
//!    the coordinator's resident set does not grow. Alone, without the release
//!    agent: `cargo bench -p cipherfleet-coordinator --bench coordinator -- refusal`.
//!
//! `-- ingest` runs the ingest and document parts alone; `CIPHERFLEET_BENCH_HOSTS=N` simulates N hosts
//! instead of 8, and `CIPHERFLEET_BENCH_SIZES=N` gives each the first N of the 8 sizes.

#[path = "../support/mod.rs"]
mod support;

mod document;
mod ingest;
mod overhead;
mod refusal;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cipherfleet_coordinator::domain::auth::Token;
use cipherfleet_coordinator::grpc::agent::pace::Pace;
use cipherfleet_coordinator::server::{self, App};
use cipherfleet_coordinator::store;
use cipherfleet_coordinator::watch::verify::VerifyOnChange;
use cipherfleet_proto::v1::admin_service_client::AdminServiceClient;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::document::document;
use crate::ingest::{ingest, real_measurement};
use crate::overhead::overhead;
use crate::refusal::refusal;

// The coordinator runs in this process: with the allocator of its release
// binary (src/main.rs), so that its CPU figures are the binary's.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const AGENT_TOKEN: &str = "bench-agent-token-0123456789abcdef";
const ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef";
/// Agents send a heartbeat this often; a session silent for three is lost.
const HEARTBEAT: Duration = Duration::from_secs(5);

fn main() {
    // The coordinator's own warnings (refused results, lost sessions) show up on stderr.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .init();
    // `-- refusal`: only the refusal figures, which need no agent; `-- ingest`: only the ingest rate.
    let part = if std::env::args().any(|a| a == "refusal") {
        Part::Refusal
    } else if std::env::args().any(|a| a == "ingest") {
        Part::Ingest
    } else {
        Part::All
    };
    let agent = (part != Part::Refusal).then(agent_binary);
    support::with_private_cluster("bench", async |cluster, dir| {
        bench(cluster.url(), dir, part, agent.as_deref()).await
    });
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

/// Which parts of the benchmark run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    All,
    Refusal,
    Ingest,
}

async fn bench(db_url: &str, dir: &Path, part: Part, agent: Option<&Path>) {
    let pool = store::connect(db_url)
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
        heartbeat: Pace::fixed(HEARTBEAT),
        // The bench times its own campaign: no verification campaigns beside it.
        watch: server::Watch {
            verify: VerifyOnChange {
                enabled: false,
                ..VerifyOnChange::default()
            },
            webhook: None,
        },
        ingest: Default::default(),
        // Nothing in a fresh database is old enough to fold; no pass beside the bench.
        retention: cipherfleet_coordinator::retention::Retention::FOREVER,
    };
    let shutdown = CancellationToken::new();
    let coordinator = tokio::spawn(server::run(app, listener, None, shutdown.clone()));

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "cipherfleet coordinator benchmark: {cores} cores, shared with other work and noisy; every figure is from one run"
    );
    if part != Part::Ingest {
        refusal(&url).await;
    }
    if let Some(agent) = agent {
        let template = real_measurement(agent).await;
        document(&template);
        ingest(&url, &pool, &template).await;
        if part == Part::All {
            overhead(&url, &pool, dir, agent).await;
        }
    }

    shutdown.cancel();
    match tokio::time::timeout(Duration::from_secs(10), coordinator).await {
        Ok(joined) => joined
            .expect("the coordinator task panicked")
            .expect("the coordinator failed"),
        Err(_) => panic!("timed out after 10 s waiting for the coordinator to shut down"),
    }
    pool.close().await;
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
