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
//!   and user, its [`process`] gone; or the same machine, network namespace and
//!   gRPC listening address, which a live one would still hold) ends that one's
//!   leases at once ([`take_over`]), so a restarted coordinator's agents need
//!   not wait them out. A coordinator asked to admit a host whose lease another
//!   one holds judges that one ([`judge_holder`]): dead on this machine, its
//!   leases end there and then; silent past a renewal, the agent is told to
//!   come back soon rather than when the lease ends;
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
use crate::store::coordinators::Listener;
use crate::store::leases::Holder;

pub mod cancel;
pub mod leader;
pub mod process;
pub mod wake;

/// Renewals a lease survives missing: it lives this many heartbeat intervals.
pub const MISSED_RENEWALS: u32 = 3;

/// Registers this coordinator (`store::coordinators`), listening on
/// `listener`, and ends the leases of every coordinator that is certainly
/// dead: one registered where this one runs whose process is gone, or one
/// registered as listening where this one now listens (same boot and network
/// namespace: it would still hold the address if it lived, whatever its PID
/// namespace). That is this coordinator's predecessor, after a crash and a
/// restart — also a container restarted in its pod. Its agents are then
/// admitted at once, here or anywhere, instead of after their leases expire.
/// A live coordinator's leases are never touched: one in another machine,
/// PID namespace or user, or with anything unreadable, counts as alive.
/// Returns how many leases were ended.
pub async fn take_over(pool: &PgPool, holder: &Holder, listener: Option<&Listener>) -> Result<u64, store::Error> {
    let me = process::this();
    store::coordinators::forget_unseen(pool).await?;
    store::coordinators::register(pool, holder, &me).await?;
    let mut dead: Vec<Uuid> = store::coordinators::on_machine(pool, holder, &me)
        .await?
        .into_iter()
        .filter(|n| process::is_gone(n.pid, n.pid_start))
        .map(|n| n.id)
        .collect();
    if let Some(listener) = listener {
        store::coordinators::set_listener(pool, holder, listener).await?;
        for id in store::coordinators::same_listener(pool, holder, me.boot_id, listener).await? {
            if !dead.contains(&id) {
                dead.push(id);
            }
        }
    }
    if dead.is_empty() {
        return Ok(0);
    }
    let ended = store::leases::end_all_of(pool, &dead).await?;
    store::coordinators::forget(pool, &dead).await?;
    tracing::info!(
        coordinators = ?dead,
        leases = ended,
        "ended the leases of coordinators that died where this one runs: their agents are admitted at once"
    );
    Ok(ended)
}

/// The coordinator holding a host's lease, as [`judge_holder`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// No other coordinator holds a live lease of the host (any more).
    Free,
    /// It renews its leases: the host has a session there.
    Live,
    /// It missed a renewal (or is not registered): likely gone, not certainly
    /// (a paused VM comes back), so its lease is left to end or be ended.
    Silent,
    /// It ran on this machine and its process is gone: its leases were ended here.
    Dead,
}

/// Judges the coordinator other than `holder` that holds `host_id`'s live
/// lease, renewing every `renewal` when alive: see [`Holding`]. A dead one's
/// leases (all of them) are ended as its successor would ([`take_over`]).
pub async fn judge_holder(
    pool: &PgPool,
    holder: &Holder,
    host_id: i64,
    renewal: Duration,
) -> Result<Holding, store::Error> {
    let Some(other) = store::coordinators::lease_holder(pool, host_id, holder).await? else {
        return Ok(Holding::Free);
    };
    let me = process::this();
    let dead_here = other.process.as_ref().is_some_and(|p| {
        let same_machine = me.boot_id.is_some()
            && p.boot_id == me.boot_id
            && me.pid_namespace.is_some()
            && p.pid_namespace == me.pid_namespace
            && me.uid.is_some()
            && p.uid == me.uid;
        same_machine && p.pid_start.is_some_and(|start| process::is_gone(p.pid, start))
    });
    if dead_here {
        let ended = store::leases::end_all_of(pool, &[other.id]).await?;
        store::coordinators::forget(pool, &[other.id]).await?;
        tracing::info!(
            coordinator = %other.name,
            leases = ended,
            "a coordinator on this machine died: its leases are ended, its agents admitted at once"
        );
        return Ok(Holding::Dead);
    }
    // Renewals come every `renewal`; half of one more is late.
    let silent = other.silent_for.is_none_or(|s| s > renewal.mul_f64(1.5));
    Ok(if silent { Holding::Silent } else { Holding::Live })
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
