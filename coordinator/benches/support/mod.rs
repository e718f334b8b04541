//! What both benchmarks share: a private PostgreSQL cluster in a temporary
//! directory, stopped and removed at the end whatever happens, and a plain
//! HTTP client (the e2e tests' own).

use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use cipherfleet_coordinator::pg::PrivateCluster;

#[allow(dead_code)]
#[path = "../../tests/e2e/http.rs"]
pub mod http;
#[path = "../../tests/support/temp_dir.rs"]
mod temp_dir;

use temp_dir::TempDir;

/// Runs `bench` on a two-thread runtime with a private PostgreSQL cluster in a
/// fresh temporary directory (`what` names it) and that directory. Whatever
/// happens in the bench (a panic, Ctrl-C), the cluster is stopped and the
/// directory removed before this returns or the process exits: a leaked
/// postgres would outlive it. A panic is resumed afterwards; Ctrl-C exits with 130.
pub fn with_private_cluster<T>(what: &str, bench: impl AsyncFnOnce(&PrivateCluster, &Path) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = TempDir::new(what);
    let cluster = runtime
        .block_on(PrivateCluster::start(&dir.path().join("postgres")))
        .unwrap_or_else(|e| panic!("starting a private PostgreSQL cluster: {e}"));
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(async {
            tokio::select! {
                value = bench(&cluster, dir.path()) => Some(value),
                Ok(()) = tokio::signal::ctrl_c() => None,
            }
        })
    }));
    // Dropping what still runs (servers, simulated hosts, agents, which are
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
        Ok(Some(value)) => value,
        Ok(None) => {
            eprintln!("interrupted");
            std::process::exit(130);
        }
        Err(payload) => panic::resume_unwind(payload),
    }
}
