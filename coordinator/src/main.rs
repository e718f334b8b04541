use clap::Parser;

// glibc's malloc is the coordinator's bottleneck in a connect storm: profiles
// put much of its CPU in `_int_malloc`, sorting its free lists. Side by side,
// mimalloc costs less CPU per result and per heartbeat (docs/performance.md,
// "Two changes from profiling the storms"). musl builds keep musl's allocator.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// No transparent huge pages for the coordinator: mimalloc asks for them
/// (`MADV_HUGEPAGE`), and the first touch of a 2 MiB region then makes all of
/// it resident, zeroed, however little of it is used. Without them the resident
/// set under ingest is about a third lower at the same CPU a result
/// (docs/performance.md, "Ingest, 1,000 agents"). Children inherit it: the
/// private cluster's PostgreSQL asks for none.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn without_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE reads no memory of this process.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        eprintln!(
            "cipherfleet-coordinator: keeping transparent huge pages: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    without_huge_pages();
    let cli = cipherfleet_coordinator::cli::Cli::parse();
    // CIPHERFLEET_LOG=error|warn|info|debug|trace; info by default.
    let level = std::env::var("CIPHERFLEET_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(tracing::Level::INFO);
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .init();
    match cipherfleet_coordinator::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => cipherfleet_coordinator::cli::exit_status(e),
    }
}
