//! `cipherfleet-agent run`: the daemon. It keeps one session open to the
//! coordinator, runs the jobs it pushes one at a time, and never loses an
//! outcome: each is spooled on disk before it is sent and deleted only when the
//! coordinator acknowledges it.
//!
//! - [`config`]: flags, the enrollment token, default host name, state directory and spool place.
//! - [`host`]: what the daemon plugs into the session engine ([`crate::session`]): workers, spool, probed facts, logs.
//! - [`executor`]: runs a job in a worker process on a blocking thread; cancellable.
//! - [`ceilings`]: what a pushed job may use at most (threads, seconds, memory, time, priority).
//! - [`spool`]: outcomes on disk until acknowledged.
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

mod ceilings;
mod config;
mod executor;
mod host;
mod spool;

use anyhow::Context as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use config::{ConfigError, ConnectArgs, DaemonConfig, RunArgs, TOKEN_ENV, check_labels, default_name, parse_label};

use crate::session::{self, Agent, Ended, HostCredential};
use executor::Executor;
use host::Machine;
use spool::Spool;

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
    let (done_tx, done) = mpsc::unbounded_channel();
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
    let agent = Agent {
        name: &config.name,
        labels: &config.labels,
        token: &config.token,
        coordinators: &config.coordinators,
        first: 0,
        local_address: None,
        shutdown: &shutdown,
    };
    let mut machine = Machine {
        config: &config,
        spool,
        executor,
        done,
        watch_logged: Default::default(),
    };
    let reason = match session::run(&agent, &mut credential, &mut machine).await {
        Ended::Shutdown => {
            // Shut down while disconnected: the outcome waits in the spool for the next start.
            if let Some(job) = machine.executor.running() {
                info!("shutting down: waiting up to {:?} for job {job:?}", config.grace);
            }
            ExitReason::Shutdown
        }
        Ended::Rejected(reason) => {
            error!("{reason}; exiting");
            // Nothing more will be accepted from this agent: stop the job, keep its outcome.
            machine
                .executor
                .cancel(None, None, "agent exiting: the coordinator refused its session".into());
            ExitReason::Rejected(reason)
        }
    };
    machine.wait_idle().await;
    grace_timer.abort();
    Ok(reason)
}
