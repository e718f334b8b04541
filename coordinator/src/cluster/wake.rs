//! What other coordinators' changes wake here. Dispatch across coordinators:
//! a campaign created through one coordinator must reach hosts connected to
//! another. Inserting jobs notifies the `cipherfleet_jobs_queued` channel (a
//! trigger, `migrations/0013`); every coordinator listens, and dispatches to
//! its idle hosts that have work. A cancelled campaign notifies
//! [`cancel::CHANNEL`], and every coordinator stops its agents' running jobs of
//! it. A poll every [`POLL`] does both, the safety net for a notification
//! missed while the listening connection was re-established.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgNotification};
use tokio_util::sync::CancellationToken;

use super::cancel;
use crate::scheduler::Scheduler;

/// The channel the jobs trigger notifies.
pub const CHANNEL: &str = "cipherfleet_jobs_queued";
/// How often idle hosts with work are looked for without a notification.
pub const POLL: Duration = Duration::from_secs(5);

/// Why the loop woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woken {
    /// Jobs were queued somewhere.
    Queued,
    /// A campaign was cancelled somewhere (its id, if the payload held one).
    Cancelled(Option<i64>),
    /// The safety net: both, for whatever was missed.
    Poll,
}

impl Woken {
    fn of(n: &PgNotification) -> Woken {
        match n.channel() {
            cancel::CHANNEL => Woken::Cancelled(n.payload().parse().ok()),
            _ => Woken::Queued,
        }
    }
}

/// The background task, until `shutdown`.
pub async fn run(pool: PgPool, scheduler: Arc<Scheduler>, shutdown: CancellationToken) {
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut listener: Option<PgListener> = None;
    loop {
        if listener.is_none() {
            listener = listen(&pool).await;
        }
        let woken = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = poll.tick() => Woken::Poll,
            n = recv(&mut listener) => match n {
                Ok(n) => Woken::of(&n),
                Err(e) => {
                    tracing::warn!(error = %e, "listening for queued jobs and cancels; polling until it is back");
                    listener = None;
                    continue;
                }
            },
        };
        match woken {
            Woken::Cancelled(campaign) => stop_cancelled(&pool, &scheduler, campaign).await,
            Woken::Queued => dispatch_waiting(&scheduler).await,
            Woken::Poll => {
                stop_cancelled(&pool, &scheduler, None).await;
                dispatch_waiting(&scheduler).await;
            }
        }
    }
}

async fn dispatch_waiting(scheduler: &Scheduler) {
    match scheduler.dispatch_waiting().await {
        Ok(n) if n > 0 => tracing::debug!(hosts = n, "dispatched to idle hosts with work"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "dispatching queued jobs"),
    }
}

async fn stop_cancelled(pool: &PgPool, scheduler: &Scheduler, campaign: Option<i64>) {
    match cancel::stop_running(pool, scheduler, campaign).await {
        Ok(n) if n > 0 => tracing::info!(jobs = n, ?campaign, "told agents to stop jobs of a cancelled campaign"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "stopping running jobs of cancelled campaigns"),
    }
}

async fn listen(pool: &PgPool) -> Option<PgListener> {
    let connected = async {
        let mut l = PgListener::connect_with(pool).await?;
        l.listen_all([CHANNEL, cancel::CHANNEL]).await?;
        Ok::<_, sqlx::Error>(l)
    };
    match connected.await {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for queued jobs and cancels; polling every {POLL:?}");
            None
        }
    }
}

/// The next notification; never, without a listener (the loop tries to
/// listen again at the next poll).
async fn recv(listener: &mut Option<PgListener>) -> Result<PgNotification, sqlx::Error> {
    match listener {
        Some(l) => l.recv().await,
        None => std::future::pending().await,
    }
}
