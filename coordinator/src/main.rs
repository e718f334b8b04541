use clap::Parser;

// glibc's malloc is the coordinator's bottleneck in a connect storm: profiles
// put much of its CPU in `_int_malloc`, sorting its free lists. Side by side,
// mimalloc costs less CPU per result and per heartbeat (docs/performance.md,
// "Two changes from profiling the storms"). musl builds keep musl's allocator.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
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
