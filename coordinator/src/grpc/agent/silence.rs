//! When a silent agent is lost, and when the silence is the coordinator's own.
//!
//! A session that hears nothing from its agent for its silence (three
//! heartbeat intervals) is lost. But a session hears a message only when this
//! process gets round to reading it: a coordinator that fell behind (a connect
//! storm on too few cores, a paused VM) has heartbeats waiting unread in its
//! connections, and declaring those agents lost ends live sessions and sends
//! every one of them back into the storm, which puts the coordinator further
//! behind — the way a 50,000-agent storm on this project's 2-core test machine
//! collapsed (docs/performance.md, "Coordinator queries and sessions"). The
//! silence timer itself tells how far behind the process is: it fires late by
//! as much. A timer [`BEHIND`] late or more excuses the silence for twice that
//! lateness (time to read what waited), as long as the agent has been silent
//! less than [`MAX_EXCUSED`] silences; an agent still silent after that is lost
//! whatever the coordinator's state. This is the failure detectors' rule of not
//! convicting a peer for one's own pause.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A silence timer this late means the coordinator, not the agent, fell behind.
pub const BEHIND: Duration = Duration::from_secs(1);
/// However far behind the coordinator is, an agent silent this many silences is lost.
pub const MAX_EXCUSED: u32 = 4;
/// The warning that the coordinator fell behind is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What a session does when its silence timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Heard from within the silence: wait until this instant.
    Wait(Instant),
    /// Silent, but the timer fired late (the coordinator fell behind): wait until this instant.
    Excused(Instant),
    /// Silent: the agent is lost.
    Lost,
}

/// The verdict at `now` on a session last heard from at `heard`, whose timer
/// was due at `due`; `silence` is how long an agent may say nothing.
pub fn judge(now: Instant, heard: Instant, due: Instant, silence: Duration) -> Verdict {
    let quiet = now.saturating_duration_since(heard);
    if quiet < silence {
        return Verdict::Wait(heard + silence);
    }
    let late = now.saturating_duration_since(due);
    if late >= BEHIND && quiet < silence * MAX_EXCUSED {
        warn_behind(late);
        return Verdict::Excused(now + (late * 2).min(silence));
    }
    Verdict::Lost
}

/// Logs that the coordinator fell behind, at most once every [`WARN_EVERY`]
/// (every session of a storm would say it at once).
fn warn_behind(late: Duration) {
    static LAST: Mutex<Option<std::time::Instant>> = Mutex::new(None);
    let now = std::time::Instant::now();
    let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if last.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
        *last = Some(now);
        drop(last);
        tracing::warn!(
            behind_ms = late.as_millis() as u64,
            "the coordinator is behind reading its agents (too little CPU for its sessions?): \
             agents' silence is not held against them until it has caught up"
        );
    } else {
        tracing::debug!(behind_ms = late.as_millis() as u64, "an agent's silence excused");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SILENCE: Duration = Duration::from_secs(30);

    #[test]
    fn a_timer_on_time_judges_the_agent_and_a_late_one_excuses_it_for_a_while() {
        let t0 = Instant::now();
        let s = |secs: u64| Duration::from_secs(secs);
        // Heard from since the timer was set: wait for the rest of the silence.
        assert_eq!(
            judge(t0 + s(30), t0 + s(10), t0 + s(30), SILENCE),
            Verdict::Wait(t0 + s(40))
        );
        // Silent, the timer on time (or less than BEHIND late): lost.
        assert_eq!(judge(t0 + s(30), t0, t0 + s(30), SILENCE), Verdict::Lost);
        let almost = BEHIND - Duration::from_millis(1);
        assert_eq!(judge(t0 + s(30) + almost, t0, t0 + s(30), SILENCE), Verdict::Lost);
        // The timer 5 s late: the coordinator was behind; twice that to catch up.
        assert_eq!(judge(t0 + s(35), t0, t0 + s(30), SILENCE), Verdict::Excused(t0 + s(45)));
        // Very late: at most one silence more.
        assert_eq!(
            judge(t0 + s(80), t0, t0 + s(30), SILENCE),
            Verdict::Excused(t0 + s(110))
        );
        // Silent for MAX_EXCUSED silences: lost however late the timer.
        let limit = SILENCE * MAX_EXCUSED;
        assert_eq!(judge(t0 + limit, t0, t0 + s(30), SILENCE), Verdict::Lost);
    }
}
