//! The process around an async command, shared by `run` and the simulator
//! (`cipherfleet-sim`): logging to stderr, a tokio runtime, and SIGTERM,
//! SIGINT or SIGHUP turned into a shutdown token.

use std::io;

/// Logging to stderr; CIPHERFLEET_LOG=debug (or error, warn, trace) changes the level.
pub fn init_logging() {
    use tracing::level_filters::LevelFilter;
    let level = std::env::var("CIPHERFLEET_LOG")
        .ok()
        .and_then(|v| v.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_max_level(level)
        .with_target(false)
        .try_init();
}

/// Runs `main` on a runtime of `threads` worker threads with a token SIGTERM/SIGINT/SIGHUP cancel;
/// its exit code.
pub fn on_runtime<F, Fut>(threads: usize, main: F) -> i32
where
    F: FnOnce(tokio_util::sync::CancellationToken) -> Fut,
    Fut: std::future::Future<Output = i32>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(async {
        let shutdown = tokio_util::sync::CancellationToken::new();
        if let Err(e) = cancel_on_signal(shutdown.clone()) {
            tracing::error!("cannot install signal handlers: {e}");
            return 1;
        }
        main(shutdown).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

/// Cancels `shutdown` on the first SIGTERM, SIGINT or SIGHUP (a terminal
/// closing): each ends a running job within its grace and keeps its spool.
fn cancel_on_signal(shutdown: tokio_util::sync::CancellationToken) -> io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        };
        tracing::info!("{name}: shutting down");
        shutdown.cancel();
    });
    Ok(())
}
