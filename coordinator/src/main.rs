use clap::Parser;

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
