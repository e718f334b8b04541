//! Reconnect delays: exponential backoff with full jitter, so a fleet that lost
//! its coordinator does not reconnect in lock-step when it comes back.

use std::time::Duration;

/// First ceiling of the delay.
pub const INITIAL: Duration = Duration::from_millis(250);
/// Largest ceiling of the delay.
pub const CAP: Duration = Duration::from_secs(30);
/// Largest ceiling while the coordinator answers that another session holds the host
/// (`ALREADY_EXISTS`): it is up and admits the host as soon as the old lease ends (a few
/// heartbeats after its coordinator died), so waiting longer only delays the failover.
pub const HELD_CAP: Duration = Duration::from_secs(4);

/// Delay between connection attempts: uniformly random in
/// `[0, min(CAP, INITIAL × 2^attempt)]`, reset after a successful handshake.
#[derive(Debug, Default)]
pub struct Backoff {
    attempt: u32,
}

impl Backoff {
    /// The delay before the next attempt, its ceiling at most `cap` (e.g. [`HELD_CAP`]).
    pub fn next_delay_within(&mut self, cap: Duration) -> Duration {
        // Without randomness the ceiling itself is still a valid backoff.
        let random = getrandom::u64().unwrap_or(u64::MAX);
        let delay = delay(self.attempt, random, cap);
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// The delay before the next attempt: within [`CAP`], or [`HELD_CAP`] when the host is
    /// `held_elsewhere`.
    pub fn after_lost(&mut self, held_elsewhere: bool) -> Duration {
        self.next_delay_within(if held_elsewhere { HELD_CAP } else { CAP })
    }

    /// The delay before the next attempt after a lost session: the coordinator's `pushback`
    /// when it named one (the attempt count is kept: the coordinator is up and said when),
    /// else [`Backoff::after_lost`].
    pub fn after(&mut self, held_elsewhere: bool, pushback: Option<Duration>) -> Duration {
        match pushback {
            Some(delay) => delay.min(CAP),
            None => self.after_lost(held_elsewhere),
        }
    }

    /// Called after a `Welcome`: the next failure starts from the shortest delay again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The ceiling for `attempt` (at most `cap`), scaled by `random` (the whole `u64` range maps onto
/// `[0, ceiling]`).
fn delay(attempt: u32, random: u64, cap: Duration) -> Duration {
    let ceiling = INITIAL.saturating_mul(1 << attempt.min(16)).min(cap);
    let ms = ceiling.as_millis() as u64;
    Duration::from_millis(((u128::from(random) * u128::from(ms)) / u128::from(u64::MAX)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_from_250_ms_up_to_30_s() {
        let ceilings: Vec<u64> = (0..10).map(|a| delay(a, u64::MAX, CAP).as_millis() as u64).collect();
        assert_eq!(
            ceilings,
            [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]
        );
        assert_eq!(delay(u32::MAX, u64::MAX, CAP), CAP);
    }

    #[test]
    fn a_host_held_elsewhere_retries_within_the_held_cap() {
        let ceilings: Vec<u64> = (0..8)
            .map(|a| delay(a, u64::MAX, HELD_CAP).as_millis() as u64)
            .collect();
        assert_eq!(ceilings, [250, 500, 1_000, 2_000, 4_000, 4_000, 4_000, 4_000]);
        let mut backoff = Backoff::default();
        for _ in 0..20 {
            assert!(backoff.after_lost(true) <= HELD_CAP);
        }
        // Back to the long ceiling once the refusal is of another kind.
        assert!((0..20).map(|_| backoff.after_lost(false)).any(|d| d > HELD_CAP));
    }

    #[test]
    fn jitter_spans_zero_to_the_ceiling() {
        assert_eq!(delay(3, 0, CAP), Duration::ZERO);
        assert_eq!(delay(3, u64::MAX / 2, CAP).as_millis(), 999);
    }

    #[test]
    fn a_herd_reconnecting_at_once_spreads_over_the_whole_jitter_window() {
        // A thousand agents lose their coordinator together; each draws its
        // own first delay (as `Backoff::next_delay` does, from the OS). The
        // reconnects must cover the window evenly, not bunch at its start or end.
        const AGENTS: usize = 1_000;
        const BINS: usize = 10;
        let window = INITIAL.saturating_mul(1 << 3); // the fourth attempt's ceiling: 2 s
        let mut bins = [0usize; BINS];
        for _ in 0..AGENTS {
            let d = delay(3, getrandom::u64().expect("the OS's random numbers"), CAP);
            assert!(d <= window, "{d:?}");
            let bin = (d.as_secs_f64() / window.as_secs_f64() * BINS as f64) as usize;
            bins[bin.min(BINS - 1)] += 1;
        }
        // 100 expected per bin (sd ≈ 9.5): outside 50..=150 is a broken spread, not bad luck.
        assert!(
            bins.iter().all(|&n| (50..=150).contains(&n)),
            "reconnects per tenth of the window: {bins:?}"
        );
    }

    #[test]
    fn a_pushback_replaces_the_backoff_and_keeps_its_attempt_count() {
        let mut b = Backoff::default();
        assert_eq!(
            b.after(false, Some(Duration::from_millis(7_300))),
            Duration::from_millis(7_300)
        );
        assert_eq!(b.after(true, Some(Duration::from_secs(300))), CAP);
        // No attempt was counted: the next backoff is the first one's.
        assert!(b.after(false, None) <= INITIAL);
    }

    #[test]
    fn reset_starts_over() {
        let mut b = Backoff::default();
        for _ in 0..20 {
            assert!(b.after_lost(false) <= CAP);
        }
        b.reset();
        assert!(b.after_lost(false) <= INITIAL);
    }
}
