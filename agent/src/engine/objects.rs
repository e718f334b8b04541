//! The object-storage scenario: objects of `size` bytes on the thread pool,
//! latency per object from its submission (or intended arrival) to its
//! completion, queueing included.
//!
//! - Closed loop (default): `concurrency` objects are in flight; each
//!   completion submits the next one at once. The objects queued when the
//!   measurement starts are re-stamped to that instant, so warm-up queueing
//!   does not count, and the first `concurrency` completions (that synthetic
//!   burst) are discarded.
//! - Open loop (`arrival_rate`): object k arrives at start + k / rate whether
//!   or not earlier ones are done, as requests reach a real object store; its
//!   latency counts from that intended arrival, so a stall shows in the tail
//!   instead of silently slowing the arrivals (coordinated omission). The
//!   first `concurrency` completions are discarded there too.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Objects in flight, shared by the measuring threads.
pub struct Objects {
    concurrency: u64,
    /// Closed loop: submission times of the objects waiting for a thread.
    queue: Mutex<VecDeque<Instant>>,
    /// Open loop: objects per second.
    arrival_rate: Option<f64>,
    /// Open loop: the next object to arrive.
    next_arrival: AtomicU64,
    /// Start of the measured phase, set once before it begins.
    start: OnceLock<Instant>,
    /// Completions in the measured phase.
    completed: AtomicU64,
}

impl Objects {
    pub fn new(concurrency: u32, arrival_rate: Option<f64>) -> Self {
        let now = Instant::now();
        Objects {
            concurrency: u64::from(concurrency),
            // Full to its capacity: taking and submitting never reallocates.
            queue: Mutex::new(vec![now; concurrency as usize].into()),
            arrival_rate,
            next_arrival: AtomicU64::new(0),
            start: OnceLock::new(),
            completed: AtomicU64::new(0),
        }
    }

    /// Warm-up: the closed loop, whatever the measured phase uses.
    pub fn take_warm_up(&self) -> Instant {
        self.pop()
    }

    /// Warm-up: an object completed at `at`; the next one is submitted then.
    pub fn complete_warm_up(&self, at: Instant) {
        self.push(at);
    }

    /// Starts the measured phase at `start`: queued objects are re-stamped to it.
    pub fn begin(&self, start: Instant) {
        let _ = self.start.set(start);
        self.queue
            .lock()
            .expect("queue lock")
            .iter_mut()
            .for_each(|t| *t = start);
        self.completed.store(0, Ordering::Relaxed);
    }

    /// The next object for a measuring thread: when it was submitted (closed
    /// loop) or is due to arrive (open loop; waits for it). `None` when `stop`
    /// is raised while waiting.
    pub fn take(&self, stop: &AtomicBool) -> Option<Instant> {
        let Some(rate) = self.arrival_rate else {
            return Some(self.pop());
        };
        let start = *self.start.get().expect("begin() runs before the measured phase");
        let k = self.next_arrival.fetch_add(1, Ordering::Relaxed);
        let due = start + Duration::from_secs_f64(k as f64 / rate);
        wait_until(due, stop).then_some(due)
    }

    /// An object taken in the measured phase completed at `at`; returns
    /// whether it counts (the first `concurrency` completions do not).
    pub fn complete(&self, at: Instant) -> bool {
        if self.arrival_rate.is_none() {
            self.push(at);
        }
        self.completed.fetch_add(1, Ordering::Relaxed) >= self.concurrency
    }

    /// Completions so far in the measured phase, discarded ones included.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// Completions the point needs: the discarded ones plus ten per slot.
    pub fn needed(&self) -> u64 {
        self.concurrency * (1 + cipherfleet_core::spec::MIN_OBJECTS_PER_SLOT)
    }

    fn pop(&self) -> Instant {
        // With concurrency ≥ threads (validated) the queue is never empty when a thread asks.
        self.queue
            .lock()
            .expect("queue lock")
            .pop_front()
            .unwrap_or_else(Instant::now)
    }

    fn push(&self, at: Instant) {
        self.queue.lock().expect("queue lock").push_back(at);
    }
}

/// Sleeps, then spins, until `due`; false if `stop` was raised first.
fn wait_until(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        let left = due - now;
        // Sleep most of a long wait (waking costs tens of microseconds), spin the rest.
        if left > Duration::from_micros(200) {
            std::thread::sleep((left - Duration::from_micros(100)).min(Duration::from_millis(5)));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_loop_restamps_the_queue_and_discards_the_first_wave() {
        let objects = Objects::new(3, None);
        let stop = AtomicBool::new(false);
        let early = objects.take_warm_up();
        objects.complete_warm_up(early);
        let start = Instant::now();
        objects.begin(start);
        let stamps: Vec<Instant> = (0..3).map(|_| objects.take(&stop).unwrap()).collect();
        assert!(
            stamps.iter().all(|&t| t == start),
            "every queued object counts from the start"
        );
        let counted: Vec<bool> = (0..5).map(|_| objects.complete(Instant::now())).collect();
        assert_eq!(counted, [false, false, false, true, true]);
        assert_eq!(objects.completed(), 5);
        assert_eq!(objects.needed(), 33);
    }

    #[test]
    fn open_loop_objects_arrive_on_schedule_whatever_the_completions() {
        let objects = Objects::new(2, Some(1000.0));
        let stop = AtomicBool::new(false);
        let start = Instant::now();
        objects.begin(start);
        let due: Vec<Duration> = (0..4).map(|_| objects.take(&stop).unwrap() - start).collect();
        assert_eq!(due, [0, 1, 2, 3].map(Duration::from_millis));
        // Waiting for an arrival ends when the point stops.
        let late = Objects::new(1, Some(0.001));
        late.begin(Instant::now());
        late.take(&stop).unwrap();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(late.take(&stop), None);
    }
}
