//! The heartbeat interval a session is told in its `Welcome`: the one
//! configured (`--heartbeat-seconds`), or longer on a coordinator holding
//! more sessions than `--max-heartbeat-rate` allows at that interval, so that
//! its heartbeats (and the load generator's, and the network's) grow no
//! faster than that rate with its fleet, as Nomad scales its heartbeat TTLs.
//! The session is judged lost after three of its own intervals; a lost agent
//! is then noticed later on a larger fleet.
//!
//! The [`Pacer`] looks at the session count every [`LOOK_EVERY`]; when the
//! interval it gives differs from the last by a fifth or more, every session
//! tells its agent the new one in a second `Welcome`. A fleet that connected
//! in a storm, its first agents told the configured interval, thus slows down
//! as a whole. A session is judged by the longest interval it was told: an
//! agent that ignores a shorter one is not lost for it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::scheduler::Scheduler;

/// How often the [`Pacer`] looks at the session count.
pub const LOOK_EVERY: Duration = Duration::from_secs(5);

/// The longest interval told: past it the rate limit gives way.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// The configured interval and rate limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// `--heartbeat-seconds`: the interval of a fleet within the rate.
    pub base: Duration,
    /// `--max-heartbeat-rate`: heartbeats a second this coordinator aims to
    /// stay under; 0: no limit, every session gets `base`.
    pub max_rate: u32,
}

impl Pace {
    /// Always `base`.
    pub fn fixed(base: Duration) -> Pace {
        Pace { base, max_rate: 0 }
    }

    /// The interval of a session welcomed while `sessions` are open here (it
    /// included): `base`, or `sessions / max_rate` seconds when that is
    /// longer, at most [`MAX_INTERVAL`] (or `base` if that is longer still).
    pub fn interval(&self, sessions: usize) -> Duration {
        if self.max_rate == 0 {
            return self.base;
        }
        let spread = Duration::from_secs_f64(sessions as f64 / f64::from(self.max_rate));
        self.base.max(spread.min(MAX_INTERVAL))
    }
}

/// The interval all of a coordinator's sessions are to use now.
pub struct Pacer {
    pace: Pace,
    now: watch::Sender<Duration>,
}

impl Pacer {
    /// The set interval (`--heartbeat-seconds`): also how often leases are renewed.
    pub fn base(&self) -> Duration {
        self.pace.base
    }

    pub fn new(pace: Pace) -> Arc<Pacer> {
        Arc::new(Pacer {
            pace,
            now: watch::Sender::new(pace.base),
        })
    }

    /// The interval of a session welcomed while `sessions` are open.
    pub fn interval(&self, sessions: usize) -> Duration {
        self.pace.interval(sessions)
    }

    /// Changes of the interval from now on (the current one counts as seen).
    pub fn subscribe(&self) -> watch::Receiver<Duration> {
        self.now.subscribe()
    }

    /// With `sessions` open: the new interval when it differs from the last
    /// by a fifth or more, which every subscriber is then told.
    pub fn look(&self, sessions: usize) -> Option<Duration> {
        let next = self.pace.interval(sessions);
        self.now
            .send_if_modified(|now| {
                let far = next.abs_diff(*now) * 5 >= *now;
                if far {
                    *now = next;
                }
                far
            })
            .then_some(next)
    }

    /// Looks every [`LOOK_EVERY`] until `shutdown`.
    pub async fn run(self: Arc<Self>, scheduler: Arc<Scheduler>, shutdown: CancellationToken) {
        if self.pace.max_rate == 0 {
            return;
        }
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            let sessions = scheduler.sessions();
            if let Some(every) = self.look(sessions) {
                tracing::info!(
                    sessions,
                    interval_ms = every.as_millis() as u64,
                    "heartbeat interval changed"
                );
            }
        }
    }
}

/// The next change of `rx`'s interval; never, once its [`Pacer`] is gone.
/// Returns the receiver with it, for the next wait.
pub async fn changed(mut rx: watch::Receiver<Duration>) -> (watch::Receiver<Duration>, Duration) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
    let now = *rx.borrow_and_update();
    (rx, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_pacer_tells_its_sessions_only_a_change_of_a_fifth_or_more() {
        let pacer = Pacer::new(Pace {
            base: Duration::from_secs(5),
            max_rate: 2000,
        });
        let mut rx = pacer.subscribe();
        assert_eq!(pacer.look(10_000), None, "still 5 s");
        assert_eq!(pacer.look(11_000), None, "5.5 s: a tenth longer");
        assert!(!rx.has_changed().unwrap());
        assert_eq!(pacer.look(12_000), Some(Duration::from_secs(6)));
        let (rx2, now) = changed(rx.clone()).await;
        assert_eq!(now, Duration::from_secs(6));
        assert_eq!(pacer.look(13_000), None, "6.5 s: a twelfth more than 6");
        assert_eq!(pacer.look(16_000), Some(Duration::from_secs(8)));
        assert_eq!(pacer.look(1), Some(Duration::from_secs(5)), "the fleet shrank");
        rx = rx2;
        assert_eq!(*rx.borrow_and_update(), Duration::from_secs(5), "the latest change");
        drop(pacer);
        let never = tokio::time::timeout(Duration::from_millis(50), changed(rx)).await;
        assert!(never.is_err(), "no change once the pacer is gone");
    }

    #[test]
    fn the_interval_grows_past_the_rate_and_stops_at_the_ceiling() {
        let pace = Pace {
            base: Duration::from_secs(5),
            max_rate: 2000,
        };
        assert_eq!(pace.interval(1), Duration::from_secs(5));
        assert_eq!(
            pace.interval(10_000),
            Duration::from_secs(5),
            "10,000 at 5 s is 2,000/s"
        );
        assert_eq!(pace.interval(17_000), Duration::from_millis(8500));
        assert_eq!(pace.interval(1_000_000), MAX_INTERVAL);
        assert_eq!(
            Pace::fixed(Duration::from_secs(5)).interval(1_000_000),
            Duration::from_secs(5)
        );
        let slow = Pace {
            base: Duration::from_secs(90),
            max_rate: 1,
        };
        assert_eq!(slow.interval(1_000), Duration::from_secs(90), "a longer base is kept");
    }
}
