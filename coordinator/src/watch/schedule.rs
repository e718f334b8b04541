//! Schedules: a suite started on selected hosts every period. Each
//! coordinator polls for due schedules; a due row is locked with
//! `FOR UPDATE SKIP LOCKED`, and the campaign it starts is created in the
//! same transaction that advances its due time, so a firing happens once
//! across coordinators and across restarts. A schedule never runs two
//! campaigns at once: while its previous one runs, a due time is skipped
//! (`skip`) or waits for it to end (`delay`).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cipherfleet_core::spec::Suite;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::timing::{Timing, random_fraction};
use crate::domain::selector::Selector;
use crate::launch::{self, Launch, LaunchError, Points};
use crate::scheduler::Scheduler;
use crate::store::{self, schedules::Firing, schedules::Schedule};

/// How often due schedules are looked for.
pub const POLL: Duration = Duration::from_secs(1);

/// What a due time does while the schedule's previous campaign still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfRunning {
    /// Drop this due time; the next one comes a period later.
    Skip,
    /// Fire as soon as the previous campaign ends.
    Delay,
}

impl IfRunning {
    /// The spelling stored in `schedules.if_running`.
    pub const fn as_str(self) -> &'static str {
        match self {
            IfRunning::Skip => "skip",
            IfRunning::Delay => "delay",
        }
    }
}

impl FromStr for IfRunning {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skip" => Ok(IfRunning::Skip),
            "delay" => Ok(IfRunning::Delay),
            other => Err(format!("--if-running {other:?}: accepted skip or delay")),
        }
    }
}

impl Schedule {
    /// The stored rhythm.
    pub fn timing(&self) -> Timing {
        Timing {
            every_seconds: self.every_seconds,
            at_minute: self.at_minute,
            jitter_seconds: self.jitter_seconds,
        }
    }
}

/// What a due schedule does, given whether its previous campaign still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Fire,
    Skip,
    Wait,
}

/// The rule: fire, unless the previous campaign runs; then skip or wait.
pub fn decide(if_running: IfRunning, previous_running: bool) -> Decision {
    match (previous_running, if_running) {
        (false, _) => Decision::Fire,
        (true, IfRunning::Skip) => Decision::Skip,
        (true, IfRunning::Delay) => Decision::Wait,
    }
}

/// Fires every due schedule once; returns the campaigns started. One
/// transaction: the schedules' rows stay locked until their campaigns exist.
pub async fn fire_due(pool: &PgPool) -> store::Result<Vec<i64>> {
    let mut tx = pool.begin().await?;
    let (now, due) = store::schedules::lock_due(&mut tx).await?;
    let mut started = Vec::new();
    for s in &due {
        let previous = match s.last_campaign_id {
            Some(id) if store::schedules::campaign_running(&mut *tx, id).await? => Some(id),
            _ => None,
        };
        let if_running = s.if_running.parse().unwrap_or(IfRunning::Skip);
        let timing = s.timing();
        let next_due = timing.next_due(s.due_at, now);
        let next = Some((next_due, timing.fire_at(next_due, random_fraction())));
        let at = now.format("%Y-%m-%d %H:%M:%S UTC");
        match decide(if_running, previous.is_some()) {
            Decision::Wait => {
                let since = s.fire_at.format("%Y-%m-%d %H:%M:%S UTC");
                let why = format!(
                    "delayed since {since}: campaign {} still running",
                    previous.unwrap_or_default()
                );
                store::schedules::record_firing(&mut tx, s.id, &Firing::Waiting, &why, None).await?;
            }
            Decision::Skip => {
                let why = format!(
                    "skipped at {at}: campaign {} still running",
                    previous.unwrap_or_default()
                );
                store::schedules::record_firing(&mut tx, s.id, &Firing::Skipped, &why, next).await?;
                tracing::info!(schedule = s.id, "{why}");
            }
            Decision::Fire => match start(&mut tx, s).await? {
                Ok(campaign_id) => {
                    let why = format!("started campaign {campaign_id} at {at}");
                    let fired = Firing::Fired { campaign_id };
                    store::schedules::record_firing(&mut tx, s.id, &fired, &why, next).await?;
                    started.push(campaign_id);
                }
                Err(error) => {
                    let why = format!("failed at {at}: {error}");
                    tracing::warn!(schedule = s.id, "{why}");
                    store::schedules::record_firing(&mut tx, s.id, &Firing::Failed, &why, next).await?;
                }
            },
        }
    }
    tx.commit().await?;
    Ok(started)
}

/// Starts the schedule's campaign in the firing's transaction. The inner
/// error says why this firing started nothing (no host matches).
async fn start(tx: &mut sqlx::PgConnection, s: &Schedule) -> store::Result<Result<i64, String>> {
    // Both were checked when the schedule was added; a stored row that no
    // longer reads (a suite renamed since) fails its firings, not the loop.
    let suite = match Suite::from_str(&s.suite) {
        Ok(suite) => suite,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let selector: Selector = match serde_json::from_value(s.selector.clone()) {
        Ok(selector) => selector,
        Err(e) => return Ok(Err(format!("stored selector unreadable: {e}"))),
    };
    let name = format!("schedule {}: {} every {}", s.id, s.suite, human(s.every_seconds));
    let launch = Launch {
        points: &Points::Suite(suite),
        selector: &selector,
        name: &name,
        started_by: &format!("schedule {}", s.id),
        // A schedule queues for every selected host; a host that stays away
        // fails its jobs when their time to live runs out.
        online: None,
        queued_ttl: store::campaigns::DEFAULT_QUEUED_TTL,
    };
    match launch::insert(tx, &launch).await {
        Ok(launched) => Ok(Ok(launched.campaign_id)),
        Err(LaunchError::Db(e)) => Err(e),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// A period in the unit an operator would write: `5s`, `15m`, `24h`, `7d`, or combined.
pub fn human(seconds: i64) -> String {
    let mut out = String::new();
    let mut rest = seconds;
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if out.is_empty() { "0s".into() } else { out }
}

/// A schedule to add, as checked before it is stored.
#[derive(Debug, Clone)]
pub struct NewSchedule {
    pub suite: Suite,
    pub selector: Selector,
    pub timing: Timing,
    pub if_running: IfRunning,
    pub created_by: String,
}

/// Stores a schedule with its first due time.
pub async fn add(pool: &PgPool, new: &NewSchedule, now: DateTime<Utc>) -> store::Result<Schedule> {
    let due_at = new.timing.first_due(now);
    let selector = serde_json::to_value(&new.selector).expect("serialises");
    let suite = new.suite.to_string();
    store::schedules::insert(
        pool,
        &store::schedules::NewSchedule {
            suite: &suite,
            selector: &selector,
            every_seconds: new.timing.every_seconds,
            at_minute: new.timing.at_minute,
            jitter_seconds: new.timing.jitter_seconds,
            if_running: new.if_running.as_str(),
            created_by: &new.created_by,
            due_at,
            fire_at: new.timing.fire_at(due_at, random_fraction()),
        },
    )
    .await
}

/// The background task: fires due schedules every [`POLL`] and dispatches
/// their campaigns, until `shutdown`.
pub async fn run(pool: PgPool, scheduler: Arc<Scheduler>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match fire_due(&pool).await {
            Ok(started) if !started.is_empty() => {
                if let Err(e) = scheduler.dispatch_all().await {
                    tracing::warn!(error = %e, "dispatching scheduled campaigns");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "firing due schedules"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_campaign_skips_or_delays_the_next_one() {
        assert_eq!(decide(IfRunning::Skip, false), Decision::Fire);
        assert_eq!(decide(IfRunning::Delay, false), Decision::Fire);
        assert_eq!(decide(IfRunning::Skip, true), Decision::Skip);
        assert_eq!(decide(IfRunning::Delay, true), Decision::Wait);
        assert!("later".parse::<IfRunning>().unwrap_err().contains("skip or delay"));
    }

    #[test]
    fn periods_read_as_an_operator_writes_them() {
        for (s, text) in [
            (5, "5s"),
            (900, "15m"),
            (86_400, "1d"),
            (5400, "1h30m"),
            (90_061, "1d1h1m1s"),
        ] {
            assert_eq!(human(s), text);
        }
    }
}
