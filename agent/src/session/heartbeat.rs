//! When a session's heartbeats are due: every interval the coordinator asks
//! for, each gap as the host chooses ([`super::Host::heartbeat_gap`]), and
//! re-paced in place when a later `Welcome` changes the interval.

use std::time::Duration;

use tokio::time::Instant;

/// Heartbeat interval when the coordinator sends 0.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);
/// A heartbeat sent later than this after it was due moves the next one after
/// it, rather than keeping the schedule and sending a burst to catch up
/// (tokio's own threshold for a missed interval tick).
const LATE_SLACK: Duration = Duration::from_millis(5);

/// The interval `Welcome.heartbeat_interval_ms` asks for.
pub(crate) fn heartbeat_interval(ms: u32) -> Duration {
    match ms {
        0 => DEFAULT_HEARTBEAT,
        ms => Duration::from_millis(ms.into()).max(Duration::from_millis(100)),
    }
}

/// The next heartbeat's time once the interval goes from `old` to `new` at
/// `now`: the time left until `next` scales with it, so a fleet re-paced at
/// once stays as spread out as it was.
pub(crate) fn repaced(now: Instant, next: Instant, old: Duration, new: Duration) -> Instant {
    now + next
        .saturating_duration_since(now)
        .mul_f64(new.as_secs_f64() / old.as_secs_f64())
}

/// One session's heartbeat schedule.
#[derive(Debug)]
pub(super) struct Pacing {
    /// What the coordinator asks for.
    pub interval: Duration,
    /// When the next heartbeat is due.
    pub due: Instant,
}

impl Pacing {
    /// The schedule from `Welcome` at `now`, the first heartbeat `gap` later.
    pub fn new(interval: Duration, now: Instant, gap: Duration) -> Pacing {
        Pacing {
            interval,
            due: now + gap,
        }
    }

    /// The heartbeat due was sent at `now`; the next comes `gap` after it was due, or after now if it went late.
    pub fn sent(&mut self, now: Instant, gap: Duration) {
        let from = if now > self.due + LATE_SLACK { now } else { self.due };
        self.due = from + gap;
    }

    /// The coordinator asks for a heartbeat `every` from `now` on.
    pub fn repace(&mut self, now: Instant, every: Duration) {
        self.due = repaced(now, self.due, self.interval, every);
        self.interval = every;
    }
}
