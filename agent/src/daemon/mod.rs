//! `cipherfleet-agent run`: the daemon. It keeps one session open to the
//! coordinator, runs the jobs it pushes one at a time, and never loses an
//! outcome: each is spooled on disk before it is sent and deleted only when the
//! coordinator acknowledges it.
//!
//! - [`config`]: flags, the enrollment token, default host name, state directory and spool place.
//! - [`credential`]: the host credential in the state directory (proposed by the agent at enrollment).
//! - [`session`]: one connected session (handshake, message handling, heartbeats).
//! - [`executor`]: runs a job in a worker process on a blocking thread; cancellable.
//! - [`ceilings`]: what a pushed job may use at most (threads, seconds, memory, time, priority).
//! - [`spool`]: outcomes on disk until acknowledged.
//! - [`backoff`]: reconnect delays.
//!
//! A job outlives the session it came in: when the stream breaks the agent
//! reconnects (exponential backoff with full jitter) while the job runs on, and
//! its outcome goes out on the next session. Given several coordinators
//! (`--coordinator a,b`), each reconnect goes to the next one in the list, so
//! the agents of a coordinator that died spread over the others (except after
//! `ALREADY_EXISTS`: that coordinator is up and waits for the host's old lease to end). An unknown token or protocol
//! version, or a host name the coordinator will not admit with this agent's
//! credential, ends the agent with [`ExitReason::Rejected`] (exit status 3).
//! Another live session of the same host is waited out: the agent retries.

pub(crate) mod backoff;
mod ceilings;
mod config;
pub(crate) mod credential;
mod executor;
pub(crate) mod session;
mod spool;

use std::sync::Mutex;

use anyhow::Context as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub(crate) use config::parse_label;
pub use config::{
    ConfigError, ConnectArgs, CoordinatorUrl, DaemonConfig, RunArgs, TOKEN_ENV, check_labels, default_name,
};

use backoff::Backoff;
use credential::HostCredential;
use executor::Executor;
use session::SessionEnd;
use spool::{Outcome, Spool};

/// Why [`run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReason {
    /// Shutdown was requested and is complete.
    Shutdown,
    /// The coordinator refused the agent (token, protocol version, or the host's
    /// credential); retrying would not help.
    Rejected(String),
}

impl ExitReason {
    /// Process exit status: 0 after a shutdown, 3 when refused.
    pub fn exit_code(&self) -> i32 {
        match self {
            ExitReason::Shutdown => 0,
            ExitReason::Rejected(_) => 3,
        }
    }
}

/// What every session shares.
struct Context {
    config: DaemonConfig,
    /// The host credential (and its proposal), kept in the state directory.
    credential: Mutex<HostCredential>,
    spool: Spool,
    executor: Executor,
    shutdown: CancellationToken,
}

/// Runs the daemon until `shutdown` is cancelled (then lets a running job
/// finish for up to `config.grace`) or the coordinator refuses the agent.
/// Errors are local problems at start, such as an unusable spool directory.
pub async fn run(config: DaemonConfig, shutdown: CancellationToken) -> anyhow::Result<ExitReason> {
    let mut credential = HostCredential::open(&config.state_dir, &config.name)?;
    // On disk before the first Hello: a lost Welcome then costs a retry, not the host.
    credential.prepare().with_context(|| {
        format!(
            "storing the host credential's proposal in {}",
            config.state_dir.display()
        )
    })?;
    let spool = Spool::open(&config.spool_dir)?;
    if let Some(job) = spool
        .recover_interrupted()
        .context("recovering the job an earlier agent was running")?
    {
        warn!(
            "job {job:?} was running when the agent last stopped; it was not measured and the coordinator queues it again"
        );
    }
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let executor = Executor::new(spool.clone(), done_tx, config.ceilings.nice);
    info!(
        "agent {} (name {:?}) for coordinator {}; spool {}; {}",
        env!("CARGO_PKG_VERSION"),
        config.name,
        config
            .coordinators
            .iter()
            .map(|c| c.url.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        spool.dir().display(),
        if credential.current().is_some() {
            format!("host credential {}", credential.path().unwrap_or_default().display())
        } else {
            "no host credential yet: enrolls with the enrollment token".to_string()
        }
    );
    // Past the grace period a job still running is killed and reported failed.
    let grace_timer = tokio::spawn({
        let executor = executor.clone();
        let shutdown = shutdown.clone();
        let grace = config.grace;
        async move {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
            if executor.cancel(None, None, "agent shutting down".into()) {
                warn!("grace period of {grace:?} over: killing the running job");
            }
        }
    });
    let ctx = Context {
        config,
        credential: Mutex::new(credential),
        spool,
        executor,
        shutdown,
    };
    let reason = serve(&ctx, &mut done).await;
    grace_timer.abort();
    Ok(reason)
}

/// The reconnect loop.
async fn serve(ctx: &Context, done: &mut mpsc::UnboundedReceiver<Outcome>) -> ExitReason {
    let mut backoff = Backoff::default();
    let mut turn = 0;
    while !ctx.shutdown.is_cancelled() {
        let coordinator = &ctx.config.coordinators[turn % ctx.config.coordinators.len()];
        match session::run(ctx, coordinator, done).await {
            SessionEnd::Shutdown => return ExitReason::Shutdown,
            SessionEnd::Rejected(reason) => {
                error!("{reason}; exiting");
                // Nothing more will be accepted from this agent: stop the job, keep its outcome.
                ctx.executor
                    .cancel(None, None, "agent exiting: the coordinator refused its session".into());
                wait_idle(ctx, done).await;
                return ExitReason::Rejected(reason);
            }
            SessionEnd::Lost {
                reason,
                welcomed,
                held_elsewhere,
                pushback,
            } => {
                if welcomed {
                    backoff.reset();
                }
                // The next coordinator of the list, if there are several; the same one when it
                // answered that the host's session is held elsewhere or that it is busy (it is
                // up: it admits the host once that lease ends, or at the time it named).
                if !held_elsewhere {
                    turn = turn.wrapping_add(1);
                }
                let delay = backoff.after(held_elsewhere, pushback);
                let running = ctx
                    .executor
                    .running()
                    .map(|job| format!(" (job {job:?} keeps running)"))
                    .unwrap_or_default();
                warn!(
                    "session lost: {reason}; reconnecting in {} ms{running}",
                    delay.as_millis()
                );
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = ctx.shutdown.cancelled() => {}
                }
            }
        }
    }
    // Shut down while disconnected: the outcome waits in the spool for the next start.
    if let Some(job) = ctx.executor.running() {
        info!("shutting down: waiting up to {:?} for job {job:?}", ctx.config.grace);
    }
    wait_idle(ctx, done).await;
    ExitReason::Shutdown
}

/// Waits until no job runs (its outcome is then spooled).
async fn wait_idle(ctx: &Context, done: &mut mpsc::UnboundedReceiver<Outcome>) {
    loop {
        // An outcome is queued before the executor reads as idle, so draining first is race-free.
        while done.try_recv().is_ok() {}
        if ctx.executor.running().is_none() {
            return;
        }
        if done.recv().await.is_none() {
            return;
        }
    }
}
