//! Dispatch across coordinators: a campaign created through one coordinator
//! must reach hosts connected to another. Inserting jobs notifies the
//! `cipherfleet_jobs_queued` channel (a trigger, `migrations/0013`); every
//! coordinator listens, and dispatches to its idle hosts that have work. A
//! poll every [`POLL`] is the safety net for a notification missed while the
//! listening connection was re-established.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use crate::scheduler::Scheduler;

/// The channel the jobs trigger notifies.
pub const CHANNEL: &str = "cipherfleet_jobs_queued";
/// How often idle hosts with work are looked for without a notification.
pub const POLL: Duration = Duration::from_secs(5);

/// The background task, until `shutdown`.
pub async fn run(scheduler: Arc<Scheduler>, shutdown: CancellationToken) {
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut listener: Option<PgListener> = None;
    loop {
        if listener.is_none() {
            listener = listen(&scheduler).await;
        }
        let woken = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = poll.tick() => false,
            n = recv(&mut listener) => match n {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "listening for queued jobs; polling until it is back");
                    listener = None;
                    continue;
                }
            },
        };
        match scheduler.dispatch_waiting().await {
            Ok(n) if n > 0 => tracing::debug!(hosts = n, woken, "dispatched to idle hosts with work"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "dispatching queued jobs"),
        }
    }
}

async fn listen(scheduler: &Scheduler) -> Option<PgListener> {
    let connected = async {
        let mut l = PgListener::connect_with(scheduler.pool()).await?;
        l.listen(CHANNEL).await?;
        Ok::<_, sqlx::Error>(l)
    };
    match connected.await {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for queued jobs; polling every {POLL:?}");
            None
        }
    }
}

/// The next notification; never, without a listener (the loop tries to
/// listen again at the next poll).
async fn recv(listener: &mut Option<PgListener>) -> Result<(), sqlx::Error> {
    match listener {
        Some(l) => l.recv().await.map(drop),
        None => std::future::pending().await,
    }
}
