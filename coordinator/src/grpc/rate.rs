//! Rate limits: a token bucket per session (inbound messages) and one per
//! peer address (failed token attempts, before anyone is authenticated).
//! Time is `tokio::time::Instant`, so tests drive it with `time::pause`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Messages an agent may send in a burst: a reconnect re-sends its whole spool
/// (at most [`cipherfleet_core::wire::MAX_SPOOLED_JOB_IDS`] outcomes) at once.
pub const SESSION_BURST: u32 = 2 * cipherfleet_core::wire::MAX_SPOOLED_JOB_IDS as u32;
/// Messages a second an agent may keep sending: heartbeats, outcomes and their
/// acceptances come a few a second at most.
pub const SESSION_PER_SECOND: u32 = 200;

/// Failed token attempts one peer address may make in a burst …
pub const FAILED_AUTH_BURST: u32 = 10;
/// … and then per minute.
pub const FAILED_AUTH_PER_MINUTE: u32 = 10;
/// Peer addresses tracked for failed attempts; past it, the ones that have
/// recovered their whole allowance are forgotten first.
const MAX_PEERS: usize = 10_000;

/// A token bucket: `capacity` tokens, refilled at `per_second`.
#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub fn new(capacity: u32, per: Duration, refill: u32) -> Bucket {
        Bucket {
            capacity: f64::from(capacity),
            per_second: f64::from(refill) / per.as_secs_f64(),
            tokens: f64::from(capacity),
            at: Instant::now(),
        }
    }

    /// The allowance of one agent session.
    pub fn for_session() -> Bucket {
        Bucket::new(SESSION_BURST, Duration::from_secs(1), SESSION_PER_SECOND)
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

    /// Would take a token (nothing was spent, or all was refilled).
    fn has_token(&mut self) -> bool {
        self.refill(Instant::now());
        self.tokens >= 1.0
    }

    fn is_full(&mut self) -> bool {
        self.refill(Instant::now());
        self.tokens >= self.capacity
    }
}

/// The refusal of a peer past its failed token attempts.
pub fn too_many_failures() -> tonic::Status {
    tonic::Status::resource_exhausted(format!(
        "too many failed token attempts from this address (more than {FAILED_AUTH_BURST}, then \
         {FAILED_AUTH_PER_MINUTE} a minute); wait before trying again"
    ))
}

/// Failed token attempts per peer address.
#[derive(Debug, Default)]
pub struct FailedAuth {
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

impl FailedAuth {
    /// Whether `peer` may try a token now (it has not failed too often lately).
    pub fn allowed(&self, peer: Option<IpAddr>) -> bool {
        let Some(peer) = peer else { return true };
        self.lock().get_mut(&peer).is_none_or(Bucket::has_token)
    }

    /// Counts a failed attempt of `peer`.
    pub fn failed(&self, peer: Option<IpAddr>) {
        let Some(peer) = peer else { return };
        let mut peers = self.lock();
        if peers.len() >= MAX_PEERS && !peers.contains_key(&peer) {
            peers.retain(|_, b| !b.is_full());
            if peers.len() >= MAX_PEERS {
                // Every tracked peer is failing: forget one rather than grow.
                if let Some(any) = peers.keys().next().copied() {
                    peers.remove(&any);
                }
            }
        }
        peers
            .entry(peer)
            .or_insert_with(|| Bucket::new(FAILED_AUTH_BURST, Duration::from_secs(60), FAILED_AUTH_PER_MINUTE))
            .take();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Bucket>> {
        self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(b.take(), "half a second refills one");
        assert!(!b.take());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(b.take() && b.take() && b.take());
        assert!(!b.take(), "refills stop at the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_keeps_failing_is_refused_until_it_waits_and_others_are_not() {
        let auth = FailedAuth::default();
        let bad: IpAddr = "192.0.2.7".parse().unwrap();
        let good: IpAddr = "192.0.2.8".parse().unwrap();
        for _ in 0..FAILED_AUTH_BURST {
            assert!(auth.allowed(Some(bad)));
            auth.failed(Some(bad));
        }
        assert!(!auth.allowed(Some(bad)));
        assert!(auth.allowed(Some(good)));
        assert!(auth.allowed(None), "no address, nothing to count by");
        tokio::time::advance(Duration::from_secs(60) / FAILED_AUTH_PER_MINUTE).await;
        assert!(auth.allowed(Some(bad)), "one attempt back after its share of a minute");
    }

    #[tokio::test(start_paused = true)]
    async fn the_peer_table_stays_bounded() {
        let auth = FailedAuth::default();
        for i in 0..(MAX_PEERS as u32 + 100) {
            auth.failed(Some(IpAddr::from(i.to_be_bytes())));
        }
        assert!(auth.lock().len() <= MAX_PEERS);
    }
}
