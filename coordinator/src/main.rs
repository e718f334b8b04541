use clap::Parser;

// glibc's malloc spent a quarter of the coordinator's CPU in `_int_malloc`
// (sorting its free lists) in a storm of 50,000 agents over three
// coordinators; side by side, mimalloc took 144 instead of 173 µs of CPU a
// result, and at 50,000 agents 62 instead of 130 µs a heartbeat (README,
// scale figures). musl builds keep musl's allocator.
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
        Err(e) => match e.downcast::<cipherfleet_coordinator::cli::Exit>() {
            // A command with a status of its own (`check`).
            Ok(exit) => exit.report(),
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::from(1)
            }
        },
    }
}
