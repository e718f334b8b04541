//! Idle sockets cannot exhaust the coordinator (`coordinator/src/guard/conn.rs`):
//! a few hundred connections that never send a request, on the report's port
//! and on plain gRPC, against a coordinator with small caps and short
//! timeouts. Meanwhile `/healthz`, `ListHosts` and a new agent's `Hello` are
//! answered, the coordinator's open files stay under its caps, and every idle
//! socket is closed once its first-request timeout has passed. Its memory is
//! in small pages (`coordinator/src/main.rs`), so that what it does not use it
//! does not hold. `deploy/bench-idle.sh` does the same with 20,000 sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cipherfleet_proto::v1;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::app::{App, spawn_app_with};
use crate::identity::hello_proposing;
use crate::rejections::open;

/// Idle sockets opened to each port.
const IDLE: usize = 300;
const GRPC_CAP: usize = 64;
const HTTP_CAP: usize = 32;

/// `n` connections to `addr` that send nothing.
pub(crate) async fn idle_sockets(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut sockets = Vec::with_capacity(n);
    for _ in 0..n {
        // Past the caps some are accepted and closed at once: they count as opened all the same.
        if let Ok(s) = TcpStream::connect(addr).await {
            sockets.push(s);
        }
    }
    sockets
}

/// How many of `sockets` the server has closed (a read ends or fails at once).
pub(crate) async fn closed(sockets: &mut [TcpStream]) -> usize {
    let mut n = 0;
    for s in sockets.iter_mut() {
        let mut byte = [0u8; 1];
        if let Ok(read) = tokio::time::timeout(Duration::from_millis(20), s.read(&mut byte)).await
            && read.map_or(true, |len| len == 0)
        {
            n += 1;
        }
    }
    n
}

/// Whether the kernel may give the coordinator transparent huge pages
/// (`THP_enabled` of its `/proc/PID/status`, Linux 5.0 and later).
fn huge_pages_allowed(app: &App) -> Option<bool> {
    let pid = app.coordinator_pid().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("THP_enabled:"))?;
    Some(line.trim() != "0")
}

fn open_files(app: &App) -> usize {
    let pid = app.coordinator_pid().expect("running");
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `/healthz`, `ListHosts` and a new host's `Hello`, each answered.
async fn everyone_is_answered(app: &App, round: usize) {
    let health = app.get("/healthz").await;
    assert_eq!(health.status, 200, "round {round}: {}", health.body);
    let hosts = app.admin().await.list_hosts(v1::ListHostsRequest::default()).await;
    assert!(hosts.is_ok(), "round {round}: {hosts:?}");
    let name = format!("idle-probe-{round}");
    let welcomed = open(app, hello_proposing(&name, &format!("{round:02}").repeat(32))).await;
    assert!(welcomed.is_ok(), "round {round}: {:?}", welcomed.err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_neither_keep_anyone_out_nor_stay_open() {
    let app = spawn_app_with(&[
        "--verify-on-change=false",
        "--max-connections",
        &GRPC_CAP.to_string(),
        "--http-max-connections",
        &HTTP_CAP.to_string(),
        "--first-request-timeout",
        "1",
        "--idle-timeout",
        "2",
    ])
    .await;
    assert_ne!(
        huge_pages_allowed(&app),
        Some(true),
        "the coordinator runs with transparent huge pages"
    );
    let baseline = open_files(&app);
    let started = Instant::now();
    let mut http = idle_sockets(app.http, IDLE).await;
    let mut grpc = idle_sockets(app.grpc, IDLE).await;
    assert_eq!(
        (http.len(), grpc.len()),
        (IDLE, IDLE),
        "the kernel took every connection"
    );
    // While they are held: everyone is answered, twice, and the open files stay bounded.
    for round in 0..2 {
        everyone_is_answered(&app, round).await;
        let files = open_files(&app);
        assert!(
            files <= baseline + GRPC_CAP + HTTP_CAP + 16,
            "round {round}: {files} open files (at start {baseline})"
        );
    }
    let answered_within = started.elapsed();
    // Every idle socket is closed once its first-request timeout has passed.
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(started.elapsed())).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut http_closed, mut grpc_closed) = (0, 0);
    while Instant::now() < deadline {
        http_closed = closed(&mut http).await;
        grpc_closed = closed(&mut grpc).await;
        if (http_closed, grpc_closed) == (IDLE, IDLE) {
            break;
        }
    }
    eprintln!(
        "{IDLE} idle sockets on each port: answered within {answered_within:?}; closed by the server: \
         HTTP {http_closed}, gRPC {grpc_closed}"
    );
    assert_eq!((http_closed, grpc_closed), (IDLE, IDLE), "idle sockets left open");
    everyone_is_answered(&app, 2).await;
}
