//! Handshake turns: at most [`limits::HANDSHAKES_AT_ONCE`] handshakes do their
//! database work at once, the rest wait for a turn, as long as the agent still
//! waits for its answer ([`super::deadline`]) leaves time for the work a turn
//! takes. One that cannot have a turn in time is refused `UNAVAILABLE` with a
//! time to come back ([`PUSHBACK_KEY`], the gRPC retry pushback) before its
//! agent gives up: a random moment within what the handshakes waiting now
//! take to be admitted, from the turns' measured length. A herd (a restart, a
//! failover, a connect storm) refused at once then comes back spread over the
//! time the coordinator needs for it, instead of on each agent's own backoff,
//! whose ceiling doubles with every refusal (up to 30 s) while the coordinator
//! may be idle again long before; and no turn goes to an agent that has left.
//! While handshakes wait, results are stored in small batches, one at a time
//! ([`Precedence`]): admitting agents goes first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tonic::Status;

use super::limits;
use crate::ingest::Precedence;

/// The metadata key of the time to come back, in milliseconds (gRPC's
/// `grpc-retry-pushback-ms`, which `cipherfleet-agent` honours).
pub const PUSHBACK_KEY: &str = "grpc-retry-pushback-ms";
/// Least time to come back: past the wait that just failed.
const MIN_PUSHBACK: Duration = Duration::from_secs(1);
/// Most time to come back (the agents' own backoff ceiling).
const MAX_PUSHBACK: Duration = Duration::from_secs(30);
/// A turn's length assumed before any was measured.
const FIRST_GUESS: Duration = Duration::from_millis(20);
/// The least time kept for a turn's work before the agent stops waiting.
const MIN_WORK: Duration = Duration::from_millis(250);

/// The turns, shared by every session of a coordinator.
pub struct Turns {
    permits: Arc<Semaphore>,
    at_once: usize,
    /// Handshakes waiting for a turn now (shared with the ingest batcher).
    waiting: Arc<Precedence>,
    /// Moving average of a turn's length, in microseconds.
    mean_us: AtomicU64,
}

/// A handshake's turn; its length is measured when it is dropped.
pub struct Turn {
    _permit: OwnedSemaphorePermit,
    turns: Arc<Turns>,
    since: Instant,
}

impl Turns {
    /// `at_once` turns ([`limits::HANDSHAKES_AT_ONCE`] in `serve`), whose
    /// waiting handshakes count in `precedence` (the ingest batcher's).
    pub fn new(at_once: usize, precedence: Arc<Precedence>) -> Arc<Turns> {
        Arc::new(Turns {
            permits: Arc::new(Semaphore::new(at_once)),
            at_once,
            waiting: precedence,
            mean_us: AtomicU64::new(FIRST_GUESS.as_micros() as u64),
        })
    }

    /// A turn early enough for its work to be done by `answer_by`, when the
    /// agent stops waiting: it waits until then, less twice a turn's measured
    /// length (at least [`MIN_WORK`]). Else `UNAVAILABLE` with the time to
    /// come back, at once when that moment has passed already.
    pub async fn take_before(self: &Arc<Self>, answer_by: Instant) -> Result<Turn, Status> {
        let work = self.mean().saturating_mul(2).max(MIN_WORK);
        self.take_until(answer_by.checked_sub(work).unwrap_or_else(Instant::now))
            .await
    }

    /// A turn by `latest`, else `UNAVAILABLE` with the time to come back.
    async fn take_until(self: &Arc<Self>, latest: Instant) -> Result<Turn, Status> {
        // A past `latest` still takes a turn that is free now (the turn is tried first).
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Ok(self.turn(permit));
        }
        let waits = self.waiting.enter();
        let taken = tokio::time::timeout_at(latest, self.permits.clone().acquire_owned()).await;
        let waiting = waits.count();
        drop(waits);
        match taken {
            Ok(Ok(permit)) => Ok(self.turn(permit)),
            Ok(Err(_)) => Err(Status::unavailable("the coordinator is shutting down")),
            Err(_) => Err(self.refusal(waiting)),
        }
    }

    fn turn(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Turn {
        Turn {
            _permit: permit,
            turns: self.clone(),
            since: Instant::now(),
        }
    }

    /// `UNAVAILABLE` with a time to come back, `waiting` handshakes waiting.
    fn refusal(&self, waiting: usize) -> Status {
        let random = getrandom::u64().unwrap_or(u64::MAX / 2);
        let back = pushback(waiting, self.at_once, self.mean(), random);
        let mut status = Status::unavailable(format!(
            "the coordinator is busy admitting other agents; retry in {} ms",
            back.as_millis()
        ));
        if let Ok(value) = back.as_millis().to_string().parse() {
            status.metadata_mut().insert(PUSHBACK_KEY, value);
        }
        status
    }

    fn mean(&self) -> Duration {
        Duration::from_micros(self.mean_us.load(Ordering::Relaxed))
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let took = self.since.elapsed().as_micros().min(u128::from(u32::MAX)) as u64;
        // An average over the last ~32 turns; a lost update between two turns costs nothing.
        let mean = self.turns.mean_us.load(Ordering::Relaxed);
        let next = (mean * 31 + took) / 32;
        self.turns.mean_us.store(next.max(1), Ordering::Relaxed);
    }
}

/// When a refused handshake comes back: uniformly (by `random`, the whole `u64`
/// range) within twice the time the `waiting` handshakes take to be admitted,
/// `at_once` at a time, each taking `mean`; at least [`MIN_PUSHBACK`], at most
/// [`MAX_PUSHBACK`]. Twice: the refused ones arrive at no more than half the
/// rate the coordinator admits, and the next refusals see the queue they left.
fn pushback(waiting: usize, at_once: usize, mean: Duration, random: u64) -> Duration {
    let drain = mean.saturating_mul(waiting as u32) / at_once.max(1) as u32;
    let window = drain.saturating_mul(2).clamp(MIN_PUSHBACK, MAX_PUSHBACK);
    let spread = window - MIN_PUSHBACK;
    let ms = (u128::from(random) * spread.as_millis()) / u128::from(u64::MAX);
    MIN_PUSHBACK + Duration::from_millis(ms as u64)
}

/// What `serve` uses: [`limits::HANDSHAKES_AT_ONCE`] turns, ahead of storing results.
pub fn for_serve(precedence: Arc<Precedence>) -> Arc<Turns> {
    Turns::new(limits::HANDSHAKES_AT_ONCE, precedence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushback_spreads_over_twice_the_queue_s_drain_time_within_bounds() {
        let ms = |d: Duration| d.as_millis() as u64;
        // 4,000 waiting, 16 at a time, 20 ms each: 5 s to drain, so 1 s to 10 s.
        let mean = Duration::from_millis(20);
        assert_eq!(ms(pushback(4_000, 16, mean, 0)), 1_000);
        assert_eq!(ms(pushback(4_000, 16, mean, u64::MAX)), 10_000);
        assert_eq!(ms(pushback(4_000, 16, mean, u64::MAX / 2)), 5_499);
        // A short queue still waits past the wait that failed; a huge one at most 30 s.
        assert_eq!(ms(pushback(0, 16, mean, u64::MAX)), 1_000);
        assert_eq!(ms(pushback(1_000_000, 16, mean, u64::MAX)), 30_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handshake_that_waits_in_vain_is_told_when_to_come_back_before_its_agent_gives_up() {
        let precedence = Arc::new(Precedence::default());
        let turns = Turns::new(1, precedence.clone());
        let soon = |secs| Instant::now() + Duration::from_secs(secs);
        let held = turns.take_before(soon(20)).await.expect("a free turn");
        let start = Instant::now();
        let refused = turns.take_before(soon(5)).await.err().expect("no turn free");
        // Refused when only the work a turn takes was left before the agent's deadline.
        assert_eq!(start.elapsed(), Duration::from_secs(5) - MIN_WORK);
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        let back: u64 = refused
            .metadata()
            .get(PUSHBACK_KEY)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("the time to come back");
        assert!((1_000..=30_000).contains(&back), "{back}");
        assert!(refused.message().contains(&format!("{back} ms")), "{refused:?}");
        // A deadline too near for the work is refused at once, without waiting.
        let start = Instant::now();
        assert!(turns.take_before(Instant::now() + MIN_WORK / 2).await.is_err());
        assert_eq!(start.elapsed(), Duration::ZERO);
        drop(held);
        assert!(
            turns.take_before(Instant::now()).await.is_ok(),
            "a freed turn is taken, even with no time left to wait"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn handshakes_waiting_for_a_turn_and_only_they_take_precedence_over_results() {
        let precedence = Arc::new(Precedence::default());
        let turns = Turns::new(2, precedence.clone());
        let soon = Instant::now() + Duration::from_secs(10);
        let first = turns.take_before(soon).await.expect("a free turn");
        let _second = turns.take_before(soon).await.expect("a free turn");
        assert!(!precedence.waiting(), "a turn taken at once waits for nothing");
        let waiter = tokio::spawn({
            let turns = turns.clone();
            async move { turns.take_before(soon).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(precedence.waiting(), "every turn busy: the third handshake waits");
        drop(first);
        let _third = waiter.await.unwrap().expect("the freed turn");
        assert!(!precedence.waiting());
        // A handshake dropped while it waits (its agent gave up) waits no more.
        let gone = tokio::spawn({
            let turns = turns.clone();
            async move { turns.take_before(soon).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(precedence.waiting());
        gone.abort();
        assert!(gone.await.unwrap_err().is_cancelled());
        assert!(!precedence.waiting(), "the count follows a dropped handshake");
        // Nor does one refused when its wait ran out.
        assert!(
            turns
                .take_before(Instant::now() + Duration::from_secs(3))
                .await
                .is_err()
        );
        assert!(!precedence.waiting());
    }
}
