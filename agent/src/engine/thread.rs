//! One measuring thread: its warm-up, and its share of the measured phase.
//!
//! Every thread starts from the shared start instant and runs until the
//! shared stop flag. It reads the clock once per throughput batch (about a
//! millisecond of work or more) and credits the batch to the global window in
//! which it ended, so the windows of all threads line up in time. Each
//! throughput batch opens with a short latency-timed batch, which feeds the
//! latency percentiles at a finer grain. Nothing in the loop allocates: the
//! windows, the per-operation records and the histogram are sized before it.
//! The windows are [`Live`]: the stop decision reads them while the thread
//! runs, so it waits by the same rule that later picks the samples.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::objects::Objects;
use super::plan::{Batches, Calibration, MAX_BATCH, Sampling, THROUGHPUT_BATCH_TARGET};
use crate::heap;
use crate::kernel::{Batch, KernelError};

/// Longest latency the histograms hold: one hour.
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
/// Most windows or per-operation records one thread keeps (later ones pile
/// into the last window, which is never a sample).
const MAX_RECORDS: usize = 1 << 16;

/// What every thread shares in the measured phase.
pub struct Shared<'a> {
    /// The start of the measured phase: window 0 begins here.
    pub start: Instant,
    pub stop: &'a AtomicBool,
    pub objects: Option<&'a Objects>,
}

/// What one thread has done so far in the measured phase. Only that thread
/// writes it; the stop decision reads it as it grows, and the summary once
/// the thread has stopped. Aligned so that no two threads write one cache line.
#[repr(align(128))]
pub struct Live {
    /// Window sampling: operations whose batch ended in each window; the
    /// last entry collects overflow and is never a sample. Empty otherwise.
    windows: Box<[AtomicU64]>,
    /// When the thread began its first measured batch, and ended its latest,
    /// in nanoseconds from the start. The end is stored after the windows
    /// (release), so a reader that loads it first sees every batch up to it.
    begin_ns: AtomicU64,
    end_ns: AtomicU64,
    /// Operations (or objects) completed.
    operations: AtomicU64,
}

/// A copy of a thread's [`Live`] record.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub begin_ns: u64,
    pub end_ns: u64,
    pub operations: u64,
    pub windows: Vec<u64>,
}

impl Live {
    /// A record with `windows` windows (none for operation sampling).
    pub fn new(windows: usize) -> Self {
        Live {
            windows: (0..windows).map(|_| AtomicU64::new(0)).collect(),
            begin_ns: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            operations: AtomicU64::new(0),
        }
    }

    pub fn operations(&self) -> u64 {
        self.operations.load(Ordering::Relaxed)
    }

    /// The record so far, with at most its first `windows` windows: enough
    /// to cover the windows that have ended keeps the copy short while a
    /// long run is under way.
    pub fn record(&self, windows: usize) -> Record {
        let end_ns = self.end_ns.load(Ordering::Acquire);
        Record {
            begin_ns: self.begin_ns.load(Ordering::Relaxed),
            end_ns,
            operations: self.operations.load(Ordering::Relaxed),
            windows: self.windows[..windows.min(self.windows.len())]
                .iter()
                .map(|w| w.load(Ordering::Relaxed))
                .collect(),
        }
    }

    /// A record as a thread would have left it.
    #[cfg(test)]
    pub fn from_record(r: &Record) -> Self {
        let live = Live::new(r.windows.len());
        for (w, &n) in r.windows.iter().enumerate() {
            live.count(w, n);
        }
        live.begin_ns.store(r.begin_ns, Ordering::Relaxed);
        live.end_ns.store(r.end_ns, Ordering::Relaxed);
        live.operations.store(r.operations, Ordering::Relaxed);
        live
    }

    /// Counts a batch of `n` that ended in window `w` (the writing thread only).
    fn count(&self, w: usize, n: u64) {
        if let Some(last) = self.windows.len().checked_sub(1) {
            let slot = &self.windows[w.min(last)];
            slot.store(slot.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
    }
}

/// One thread's share of the measured phase; its windows are in its [`Live`].
pub struct ThreadRun {
    /// Operation sampling: (end, duration) of each operation in nanoseconds
    /// from the start, in order.
    pub timed: Vec<(u64, u64)>,
    pub histogram: Histogram<u64>,
    /// Timed values behind the histogram.
    pub latency_samples: u64,
    pub operations: u64,
    /// Objects that count (after the discarded first wave).
    pub objects_counted: u64,
    /// Heap traffic of this thread during the measured loop.
    pub heap: heap::Counts,
    pub batches: Batches,
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid bounds")
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn record(h: &mut Histogram<u64>, ns: u64, count: u64) {
    h.saturating_record_n(ns.clamp(1, MAX_LATENCY_NS), count);
}

/// Runs operations for at least `warmup`, doubling the batch until one lasts
/// [`THROUGHPUT_BATCH_TARGET`], and returns the time per operation of the
/// fastest batch of that size: a batch stretched by preemption on a busy
/// machine must not make operations look longer than a window. Objects are
/// taken one at a time from the closed loop.
pub fn warm_up(k: &mut dyn Batch, warmup: Duration, objects: Option<&Objects>) -> Result<Calibration, KernelError> {
    let start = Instant::now();
    let mut batch = 1u64;
    let mut op = 0u64;
    let mut fastest = f64::INFINITY;
    loop {
        if let Some(o) = objects {
            o.take_warm_up();
        }
        let t0 = Instant::now();
        k.run_batch(op, batch)?;
        let t1 = Instant::now();
        if let Some(o) = objects {
            o.complete_warm_up(t1);
        }
        op += batch;
        let elapsed = t1 - t0;
        let sized = elapsed >= THROUGHPUT_BATCH_TARGET || batch >= MAX_BATCH || objects.is_some();
        if sized {
            fastest = fastest.min(elapsed.as_nanos() as f64 / batch as f64);
            if t1 - start >= warmup {
                return Ok(Calibration { op_ns: fastest });
            }
        } else {
            batch *= 2;
        }
    }
}

/// How many windows or per-operation records to reserve for a measured phase
/// of at most `cap` with `sampling`, at `op_time` per operation.
pub fn records_for(cap: Duration, sampling: Sampling, op_time: Duration) -> usize {
    let n = match sampling {
        // Plus the partial first window, the overflow window and slack for the stop.
        Sampling::Windows(w) => cap.as_secs_f64() / w.as_secs_f64() + 4.0,
        Sampling::Operations => 2.0 * cap.as_secs_f64() / op_time.as_secs_f64().max(1e-9) + 16.0,
    };
    (n.ceil() as usize).clamp(4, MAX_RECORDS)
}

/// The measured phase of one thread: batches (or objects) until `stop`,
/// counted in `live` (sized for `sampling`) and, for operation sampling, in
/// up to `records` per-operation records.
pub fn measure(
    k: &mut dyn Batch,
    batches: Batches,
    sampling: Sampling,
    records: usize,
    shared: &Shared<'_>,
    live: &Live,
) -> Result<ThreadRun, KernelError> {
    let mut histogram = new_histogram();
    let mut timed = match sampling {
        Sampling::Windows(_) => Vec::new(),
        Sampling::Operations => Vec::with_capacity(records),
    };
    let window_ns = match sampling {
        Sampling::Windows(w) => nanos(w).max(1),
        Sampling::Operations => u64::MAX,
    };
    // Operations counted from 1 << 32 so they never meet the warm-up's counters.
    let mut op = 1u64 << 32;
    let (mut operations, mut objects_counted, mut latency_samples) = (0u64, 0u64, 0u64);
    let heap_before = heap::counts();
    let first_start = Instant::now();
    let begin_ns = nanos(first_start - shared.start);
    live.begin_ns.store(begin_ns, Ordering::Relaxed);
    live.end_ns.store(begin_ns, Ordering::Release);
    let mut t_prev = first_start;
    loop {
        let n = batches.throughput;
        // The batch's end, and when its work began (an object may wait for its arrival).
        let (t_end, began) = match shared.objects {
            None if batches.latency < n => {
                k.run_batch(op, batches.latency)?;
                let t_mid = Instant::now();
                record(&mut histogram, nanos(t_mid - t_prev) / batches.latency, batches.latency);
                latency_samples += 1;
                k.run_batch(op + batches.latency, n - batches.latency)?;
                (Instant::now(), t_prev)
            }
            None => {
                k.run_batch(op, n)?;
                let t = Instant::now();
                record(&mut histogram, nanos(t - t_prev) / n, n);
                latency_samples += 1;
                (t, t_prev)
            }
            Some(objects) => {
                let Some(stamp) = objects.take(shared.stop) else {
                    break;
                };
                let began = Instant::now();
                k.run_batch(op, 1)?;
                let t = Instant::now();
                // The first wave is discarded: neither its latency nor a count.
                if objects.complete(t) {
                    record(&mut histogram, nanos(t - stamp), 1);
                    latency_samples += 1;
                    objects_counted += 1;
                }
                (t, began)
            }
        };
        op += n;
        operations += n;
        match sampling {
            Sampling::Windows(_) => live.count((nanos(t_end - shared.start) / window_ns) as usize, n),
            Sampling::Operations => {
                if timed.len() < timed.capacity() {
                    timed.push((nanos(t_end - shared.start), nanos(t_end - began)));
                }
            }
        }
        live.operations.store(operations, Ordering::Relaxed);
        live.end_ns.store(nanos(t_end - shared.start), Ordering::Release);
        t_prev = t_end;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(ThreadRun {
        timed,
        histogram,
        latency_samples,
        operations,
        objects_counted,
        heap: heap::counts().since(heap_before),
        batches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_cover_the_cap_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(
            records_for(Duration::from_secs(4), Sampling::Windows(ms(40)), ms(1)),
            104
        );
        assert_eq!(records_for(Duration::from_secs(60), Sampling::Operations, ms(4400)), 44);
        assert_eq!(
            records_for(Duration::from_secs(1800), Sampling::Windows(ms(5)), ms(1)),
            MAX_RECORDS
        );
    }
}
