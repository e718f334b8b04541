//! One measuring thread: its warm-up, and its share of the measured phase.
//!
//! Every thread starts from the shared start instant and runs until the
//! shared stop flag. It reads the clock once per throughput batch (about a
//! millisecond of work or more) and credits the batch to the global window in
//! which it ended, so the windows of all threads line up in time. Each
//! throughput batch opens with a short latency-timed batch, which feeds the
//! latency percentiles at a finer grain. Nothing in the loop allocates: the
//! windows, the per-operation records and the histogram are sized before it.

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
    /// Operations completed by all threads so far (for the stop decision).
    pub progress: &'a AtomicU64,
    pub objects: Option<&'a Objects>,
}

/// One thread's share of the measured phase.
pub struct ThreadRun {
    /// When this thread began its first measured batch, and ended its last.
    pub first_start: Instant,
    pub last_end: Instant,
    /// Window sampling: operations whose batch ended in each window.
    pub windows: Vec<u64>,
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

/// The measured phase of one thread: batches (or objects) until `stop`.
pub fn measure(
    k: &mut dyn Batch,
    batches: Batches,
    sampling: Sampling,
    records: usize,
    shared: &Shared<'_>,
) -> Result<ThreadRun, KernelError> {
    let mut histogram = new_histogram();
    let (mut windows, mut timed) = match sampling {
        Sampling::Windows(_) => (vec![0u64; records], Vec::new()),
        Sampling::Operations => (Vec::new(), Vec::with_capacity(records)),
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
            Sampling::Windows(_) => {
                let w = (nanos(t_end - shared.start) / window_ns) as usize;
                let last = windows.len() - 1;
                windows[w.min(last)] += n;
            }
            Sampling::Operations => {
                if timed.len() < timed.capacity() {
                    timed.push((nanos(t_end - shared.start), nanos(t_end - began)));
                }
            }
        }
        shared.progress.fetch_add(n, Ordering::Relaxed);
        t_prev = t_end;
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(ThreadRun {
        first_start,
        last_end: t_prev,
        windows,
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
