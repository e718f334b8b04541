//! Several coordinators on one PostgreSQL. Any coordinator accepts any agent;
//! what keeps them from stepping on each other:
//!
//! - a host's session is leased to one coordinator at a time (`store::leases`,
//!   [`crate::scheduler::Scheduler::start_session`]); [`renew_leases`] keeps this
//!   coordinator's leases alive, one statement per heartbeat interval, and
//!   gives them back at shutdown. A coordinator that dies loses them within
//!   [`MISSED_RENEWALS`] intervals, and its agents' next sessions elsewhere
//!   take them over (re-queueing what the agent no longer runs, as after any
//!   reconnect; only a job's current attempt counts, so nothing runs twice).
//!   A coordinator starting where a dead one ran (same machine, PID namespace
//!   and user; its [`process`] gone) ends that one's leases at once
//!   ([`take_over`]), so a restarted coordinator's agents need not wait them out;
//! - jobs are claimed with `FOR UPDATE SKIP LOCKED` (`store::jobs`), and queueing
//!   jobs anywhere wakes every coordinator ([`wake`]), and so does cancelling
//!   a campaign: each one stops its own agents' jobs of it ([`cancel`]);
//! - what must run once across the cluster runs on the [`leader`], or under
//!   a row lock or an advisory lock where the work itself is shared.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::scheduler::Scheduler;
use crate::store;
use crate::store::leases::Holder;

pub mod cancel;
pub mod leader;
pub mod process;
pub mod wake;

/// Renewals a lease survives missing: it lives this many heartbeat intervals.
pub const MISSED_RENEWALS: u32 = 3;

/// Registers this coordinator (`store::coordinators`), and ends the leases of
/// every coordinator registered where this one runs whose process is gone:
/// this coordinator's dead predecessor, after a crash and a restart. Its agents
/// are then admitted at once, here or anywhere, instead of after their leases
/// expire. A live coordinator's leases are never touched: one in another
/// machine, PID namespace or user, or with anything unreadable, counts as
/// alive. Returns how many leases were ended.
pub async fn take_over(pool: &PgPool, holder: &Holder) -> Result<u64, store::Error> {
    let me = process::this();
    store::coordinators::forget_unseen(pool).await?;
    store::coordinators::register(pool, holder, &me).await?;
    let dead: Vec<_> = store::coordinators::on_machine(pool, holder, &me)
        .await?
        .into_iter()
        .filter(|n| process::is_gone(n.pid, n.pid_start))
        .collect();
    if dead.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = dead.iter().map(|n| n.id).collect();
    let ended = store::leases::end_all_of(pool, &ids).await?;
    store::coordinators::forget(pool, &ids).await?;
    let names: Vec<&str> = dead.iter().map(|n| n.name.as_str()).collect();
    tracing::info!(
        coordinators = ?names,
        leases = ended,
        "ended the leases of coordinators that died on this machine: their agents are admitted at once"
    );
    Ok(ended)
}

/// The background task: renews this coordinator's leases every `interval`
/// (the heartbeat interval) until `shutdown`, then gives them all back so the
/// agents may reconnect to another coordinator at once.
pub async fn renew_leases(pool: PgPool, scheduler: Arc<Scheduler>, interval: Duration, shutdown: CancellationToken) {
    let me = process::this();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        if let Err(e) = scheduler.renew_leases().await {
            tracing::warn!(error = %e, "renewing the hosts' leases");
        }
        // Seen lately (and registered again, should its row have been forgotten).
        if let Err(e) = store::coordinators::register(&pool, scheduler.holder(), &me).await {
            tracing::debug!(error = %e, "marking this coordinator seen");
        }
    }
    match scheduler.release_leases().await {
        Ok(n) => tracing::debug!(leases = n, "leases given back"),
        Err(e) => tracing::warn!(error = %e, "giving back the hosts' leases (they expire by themselves)"),
    }
    if let Err(e) = store::coordinators::forget(&pool, &[scheduler.holder().id]).await {
        tracing::debug!(error = %e, "forgetting this coordinator (forgotten after an hour)");
    }
}
