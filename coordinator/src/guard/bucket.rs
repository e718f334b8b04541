//! A token bucket: a burst, then a steady rate. Time is
//! `tokio::time::Instant`, so tests drive it with `time::pause`.

use std::time::Duration;

use tokio::time::Instant;

/// `capacity` tokens, refilled at `per_second`.
#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Full: `capacity` tokens, then `refill` more every `per`.
    pub fn new(capacity: u32, per: Duration, refill: u32) -> Bucket {
        Bucket {
            capacity: f64::from(capacity),
            per_second: f64::from(refill) / per.as_secs_f64(),
            tokens: f64::from(capacity),
            at: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = now;
    }

    /// Takes one token if there is one.
    pub fn take(&mut self) -> bool {
        self.take_at(Instant::now())
    }

    /// [`Bucket::take`], the time being `now`.
    pub fn take_at(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How long until a token is there (zero when one is).
    pub fn wait(&mut self) -> Duration {
        self.refill(Instant::now());
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.per_second)
        }
    }

    /// Every token is back: nothing was spent lately.
    pub fn is_full(&mut self) -> bool {
        self.refill(Instant::now());
        self.tokens >= self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_bucket_allows_its_burst_then_its_rate() {
        let mut b = Bucket::new(3, Duration::from_secs(1), 2);
        assert!(b.take() && b.take() && b.take());
        assert!(!b.take(), "the burst is spent");
        assert_eq!(b.wait(), Duration::from_millis(500));
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(b.take(), "half a second refills one");
        assert!(!b.take());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(b.is_full());
        assert!(b.take() && b.take() && b.take());
        assert!(!b.take(), "refills stop at the burst");
    }
}
