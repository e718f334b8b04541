//! Several coordinators on one PostgreSQL. Any coordinator accepts any agent;
//! what keeps them from stepping on each other:
//!
//! - a host's session is leased to one coordinator at a time (`db::leases`,
//!   [`crate::scheduler::Scheduler::take_lease`]); [`renew_leases`] keeps this
//!   coordinator's leases alive, one statement per heartbeat interval, and
//!   gives them back at shutdown. A coordinator that dies loses them within
//!   [`MISSED_RENEWALS`] intervals, and its agents' next sessions elsewhere
//!   take them over (re-queueing what the agent no longer runs, as after any
//!   reconnect; only a job's current attempt counts, so nothing runs twice);
//! - jobs are claimed with `FOR UPDATE SKIP LOCKED` (`db::jobs`), and queueing
//!   jobs anywhere wakes every coordinator ([`wake`]);
//! - what must run once across the cluster runs on the [`leader`], or under
//!   a row lock or an advisory lock where the work itself is shared.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::db::leases::Holder;
use crate::scheduler::Scheduler;

pub mod leader;
pub mod wake;

/// Renewals a lease survives missing: it lives this many heartbeat intervals.
pub const MISSED_RENEWALS: u32 = 3;

/// This process as a lease holder: a new id per start, and `hostname/pid` for people.
pub fn holder() -> Holder {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "coordinator".into());
    Holder {
        id: Uuid::new_v4(),
        name: format!("{hostname}/{}", std::process::id()),
    }
}

/// The background task: renews this coordinator's leases every `interval`
/// (the heartbeat interval) until `shutdown`, then gives them all back so the
/// agents may reconnect to another coordinator at once.
pub async fn renew_leases(scheduler: Arc<Scheduler>, interval: Duration, shutdown: CancellationToken) {
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
    }
    match scheduler.release_leases().await {
        Ok(n) => tracing::debug!(leases = n, "leases given back"),
        Err(e) => tracing::warn!(error = %e, "giving back the hosts' leases (they expire by themselves)"),
    }
}
