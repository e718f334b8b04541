//! The measurement loop: build per-thread kernels, warm up, then time batches
//! of operations in many short samples on every thread at once.
//!
//! - Each thread owns its kernel (cipher instance, buffers) and starts measuring
//!   at the same barrier; the parent process is elsewhere (see [`crate::worker`]).
//! - A batch is as many operations as take about [`BATCH_TARGET`]; tiny payloads
//!   thus read the clock once per ~10 µs, not per operation, and their latency
//!   is the batch mean (`latency_method = batch-mean`). Operations longer than
//!   the target are timed one by one (`per-op`).
//! - Throughput is the median of the samples (summed across threads), with
//!   the samples' coefficient of variation as its spread.
//! - Object-storage scenario (`concurrency`): a closed loop keeps N objects in
//!   flight on the thread pool; an object's latency runs from its submission
//!   (when the previous object completed) to its completion, queueing included.

use std::collections::VecDeque;
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use cipherfleet_core::measurement::{Figures, Latency, LatencyMethod};
use hdrhistogram::Histogram;

use crate::kernel::{self, Batch, KernelError, KernelInput};
use cipherfleet_core::spec::{InvalidSpec, JobSpec};
use cipherfleet_core::stats;

/// Target duration of one timed batch.
pub const BATCH_TARGET: Duration = Duration::from_micros(10);
/// Samples aimed for per measurement.
const TARGET_SAMPLES: f64 = 30.0;
/// Largest batch (operations per clock read).
const MAX_BATCH: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] InvalidSpec),
    #[error("thread {thread}: {source}")]
    Kernel { thread: u32, source: KernelError },
    #[error("{0}")]
    Resources(String),
}

/// One thread's share of the measured phase.
struct ThreadRun {
    /// Bytes per second of each sample.
    samples: Vec<f64>,
    histogram: Histogram<u64>,
    operations: u64,
    batch: u64,
}

/// Objects in flight: submission times of the objects waiting for a thread.
struct ObjectQueue(Mutex<VecDeque<Instant>>);

impl ObjectQueue {
    fn take(&self) -> Instant {
        // With concurrency ≥ threads the queue is never empty when a thread asks (validated).
        self.0
            .lock()
            .expect("queue lock")
            .pop_front()
            .unwrap_or_else(Instant::now)
    }
    fn submit(&self, at: Instant) {
        self.0.lock().expect("queue lock").push_back(at);
    }
}

/// Measures `spec` in this process.
pub fn measure(spec: &JobSpec) -> Result<Figures, EngineError> {
    spec.validate()?;
    check_memory(spec)?;
    let master: [u8; 64] = kernel::random_bytes(64).try_into().expect("64 bytes");
    let threads = spec.threads;
    let warmup = Duration::from_secs_f64(spec.warmup_seconds());
    let measured = Duration::from_secs_f64(spec.seconds);
    let sample = Duration::from_secs_f64((spec.seconds / TARGET_SAMPLES).clamp(0.005, 1.0));
    let queue = spec
        .concurrency
        .map(|n| ObjectQueue(Mutex::new(vec![Instant::now(); n as usize].into())));
    // Workers plus this thread, which takes CPU time and wall clock around the measured phase.
    let built = Barrier::new(threads as usize + 1);
    let start_line = Barrier::new(threads as usize + 1);

    let (runs, wall, cpu, key_setup_ns) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (built, start_line, queue, master) = (&built, &start_line, queue.as_ref(), &master);
                scope.spawn(move || -> Result<(ThreadRun, f64), EngineError> {
                    let kernel = kernel::build(&KernelInput {
                        spec,
                        thread,
                        master_key: master,
                    });
                    built.wait();
                    let warmed = kernel.and_then(|mut k| {
                        let batch = warm_up(k.as_mut(), warmup, queue)?;
                        Ok((k, batch))
                    });
                    start_line.wait();
                    let (mut k, batch) = warmed.map_err(|source| EngineError::Kernel { thread, source })?;
                    let run = run_samples(k.as_mut(), spec, batch, measured, sample, queue)
                        .map_err(|source| EngineError::Kernel { thread, source })?;
                    let key_setup = if thread == 0 { time_key_setup(k.as_ref()) } else { 0.0 };
                    Ok((run, key_setup))
                })
            })
            .collect();
        built.wait();
        start_line.wait();
        let (t0, cpu0) = (Instant::now(), cpu_times());
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("measurement thread panicked"))
            .collect();
        let (wall, cpu1) = (t0.elapsed(), cpu_times());
        let mut runs = Vec::with_capacity(results.len());
        let mut key_setup_ns = 0.0;
        for r in results {
            let (run, ks) = r?;
            key_setup_ns += ks;
            runs.push(run);
        }
        Ok::<_, EngineError>((runs, wall, (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1), key_setup_ns))
    })?;

    Ok(summarise(spec, &runs, wall, cpu, warmup, sample, key_setup_ns))
}

/// Runs operations for `warmup` and returns the batch size that takes about [`BATCH_TARGET`].
fn warm_up(k: &mut dyn Batch, warmup: Duration, queue: Option<&ObjectQueue>) -> Result<u64, KernelError> {
    let start = Instant::now();
    let mut batch = 1u64;
    let mut op = 0u64;
    loop {
        let submitted = queue.map(ObjectQueue::take);
        let t0 = Instant::now();
        k.run_batch(op, batch)?;
        let t1 = Instant::now();
        if let Some(q) = queue {
            let _ = submitted;
            q.submit(t1);
        }
        op += batch;
        if queue.is_none() && t1 - t0 < BATCH_TARGET && batch < MAX_BATCH {
            batch *= 2;
        }
        if t1 - start >= warmup {
            return Ok(batch);
        }
    }
}

/// The measured phase of one thread.
fn run_samples(
    k: &mut dyn Batch,
    spec: &JobSpec,
    batch: u64,
    measured: Duration,
    sample: Duration,
    queue: Option<&ObjectQueue>,
) -> Result<ThreadRun, KernelError> {
    // Operations counted from 1 << 32 so they never meet the warm-up's counters.
    let mut op = 1u64 << 32;
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    let mut samples = Vec::with_capacity((measured.as_secs_f64() / sample.as_secs_f64()) as usize + 2);
    let start = Instant::now();
    let mut t0 = start;
    let mut operations = 0u64;
    loop {
        let sample_start = t0;
        let mut sample_ops = 0u64;
        let t1 = loop {
            let submitted = queue.map(ObjectQueue::take);
            k.run_batch(op, batch)?;
            let t1 = Instant::now();
            match (queue, submitted) {
                (Some(q), Some(at)) => {
                    histogram.saturating_record(nanos(t1 - at));
                    q.submit(t1);
                }
                _ => {
                    let per_op = nanos(t1 - t0) / batch;
                    histogram.record_n(per_op.max(1), batch).ok();
                }
            }
            op += batch;
            sample_ops += batch;
            t0 = t1;
            if t1 - sample_start >= sample {
                break t1;
            }
        };
        operations += sample_ops;
        samples.push((sample_ops * spec.size_bytes) as f64 / (t1 - sample_start).as_secs_f64());
        if t1 - start >= measured {
            break;
        }
    }
    Ok(ThreadRun {
        samples,
        histogram,
        operations,
        batch,
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Median of 15 chunks of 64 key setups, in ns per setup.
fn time_key_setup(k: &dyn Batch) -> f64 {
    let chunks: Vec<f64> = (0..15).map(|_| k.key_setup_ns(64)).collect();
    stats::median(&chunks).unwrap_or(0.0)
}

fn summarise(
    spec: &JobSpec,
    runs: &[ThreadRun],
    wall: Duration,
    (user, sys): (f64, f64),
    warmup: Duration,
    sample: Duration,
    key_setup_ns: f64,
) -> Figures {
    // Sample k of the whole point = sum over threads of their sample k.
    let n = runs.iter().map(|r| r.samples.len()).min().unwrap_or(0);
    let combined: Vec<f64> = (0..n).map(|i| runs.iter().map(|r| r.samples[i]).sum::<f64>()).collect();
    let throughput = stats::median(&combined).unwrap_or(0.0);
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    for r in runs {
        histogram.add(&r.histogram).expect("same bounds");
    }
    let batch = runs.iter().map(|r| r.batch).max().unwrap_or(1);
    let operations: u64 = runs.iter().map(|r| r.operations).sum();
    let latency_method = if spec.concurrency.is_some() {
        LatencyMethod::PerObject
    } else if batch > 1 {
        LatencyMethod::BatchMean
    } else {
        LatencyMethod::PerOp
    };
    let wall_s = wall.as_secs_f64();
    Figures {
        throughput_mb_s: throughput / 1e6,
        ops_per_s: throughput / spec.size_bytes as f64,
        latency_ns: Latency {
            p50: histogram.value_at_quantile(0.50),
            p90: histogram.value_at_quantile(0.90),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
        },
        latency_method,
        batch_ops: batch,
        cv: stats::cv(&combined),
        samples: combined.len() as u32,
        sample_seconds: sample.as_secs_f64(),
        warmup_seconds: warmup.as_secs_f64(),
        elapsed_seconds: wall_s,
        operations,
        bytes_processed: operations * spec.size_bytes,
        cpu_user_seconds: user,
        cpu_sys_seconds: sys,
        cpu_utilization: if wall_s > 0.0 {
            (user + sys) / (wall_s * f64::from(spec.threads))
        } else {
            0.0
        },
        key_setup_ns,
        sample_throughputs_mb_s: combined.iter().map(|b| b / 1e6).collect(),
    }
}

/// User and system CPU seconds of this process so far.
fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// Refuses points whose buffers would not fit in available memory.
fn check_memory(spec: &JobSpec) -> Result<(), EngineError> {
    let per_thread_buffers = match spec.direction {
        cipherfleet_core::spec::Direction::Encrypt => 2,
        cipherfleet_core::spec::Direction::Decrypt => 2 + kernel::pool_slots(spec.size_bytes) as u64,
    };
    let needed = per_thread_buffers * (spec.size_bytes + 64) * u64::from(spec.threads);
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    match available {
        Some(avail) if needed > avail / 4 * 3 => Err(EngineError::Resources(format!(
            "--size × --threads needs about {} MiB of buffers but only {} MiB of memory is available; use a smaller --size or fewer --threads",
            needed >> 20,
            avail >> 20
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::{Direction, KeyMode};

    fn spec(alg: &str, size: u64) -> JobSpec {
        JobSpec {
            algorithm: alg.parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes: size,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            seconds: 0.05,
        }
    }

    #[test]
    fn tiny_payloads_are_timed_in_batches_and_counted_exactly() {
        let f = measure(&spec("aes-128-gcm", 16)).unwrap();
        // Debug builds can be slow enough for single-op batches; the method must say which.
        let expected = if f.batch_ops > 1 {
            LatencyMethod::BatchMean
        } else {
            LatencyMethod::PerOp
        };
        assert_eq!(f.latency_method, expected);
        assert_eq!(f.bytes_processed, f.operations * 16);
        assert!(f.samples >= 2 && f.throughput_mb_s > 0.0, "{f:?}");
        assert!(f.latency_ns.p50 <= f.latency_ns.p99 && f.latency_ns.p99 <= f.latency_ns.max);
        assert_eq!(f.sample_throughputs_mb_s.len(), f.samples as usize);
        assert!(f.key_setup_ns > 0.0);
    }

    /// A kernel whose operations take a fixed busy-wait time.
    struct Spin(Duration);

    impl Batch for Spin {
        fn run_batch(&mut self, _first: u64, count: u64) -> Result<(), KernelError> {
            let until = Instant::now() + self.0 * count as u32;
            while Instant::now() < until {}
            Ok(())
        }
        fn key_setup_ns(&self, _: u32) -> f64 {
            1.0
        }
    }

    #[test]
    fn warm_up_sizes_batches_to_the_target() {
        let fast = warm_up(&mut Spin(Duration::ZERO), Duration::from_millis(20), None).unwrap();
        assert!(fast >= 64, "instant operations get large batches: {fast}");
        let slow = warm_up(&mut Spin(BATCH_TARGET * 2), Duration::from_millis(20), None).unwrap();
        assert_eq!(slow, 1, "operations longer than the target are timed alone");
    }

    #[test]
    fn samples_cover_the_measured_time() {
        let s = spec("aes-128-gcm", 1000);
        let run = run_samples(
            &mut Spin(Duration::from_micros(50)),
            &s,
            1,
            Duration::from_millis(100),
            Duration::from_millis(10),
            None,
        )
        .unwrap();
        // At most one sample per 10 ms of the 100 ms (plus the one that crosses the end).
        assert!((1..=11).contains(&run.samples.len()), "{}", run.samples.len());
        // 1000 bytes per operation of at least 50 µs: never above 20 MB/s, whatever else runs.
        let med = stats::median(&run.samples).unwrap();
        assert!(med > 0.0 && med <= 20.0e6 * 1.001, "{med}");
        // Each operation takes at least 50 µs of the ~110 ms the loop can run.
        assert!(
            run.operations >= run.samples.len() as u64 && run.operations <= 2_300,
            "{}",
            run.operations
        );
        assert!(run.histogram.value_at_quantile(0.5) >= 50_000);
    }

    #[test]
    fn threads_are_summed_and_object_latency_includes_queueing() {
        let s = JobSpec {
            threads: 2,
            concurrency: Some(8),
            size_bytes: 64 << 10,
            ..spec("chacha20-poly1305", 1)
        };
        let f = measure(&s).unwrap();
        assert_eq!(f.latency_method, LatencyMethod::PerObject);
        assert_eq!(f.batch_ops, 1);
        // 8 objects on 2 threads: each waits for ~3 others, so p50 is well above one object's work.
        let per_object_ns = 1e9 / f.ops_per_s * 2.0;
        assert!(f.latency_ns.p50 as f64 > per_object_ns * 1.5, "{f:?}");
    }

    #[test]
    fn decrypt_points_verify_and_run() {
        for alg in ["aes-256-gcm", "aes-128-cbc-hmac-sha256", "des-ede3-cbc", "chacha20"] {
            let f = measure(&JobSpec {
                direction: Direction::Decrypt,
                ..spec(alg, 1024)
            })
            .unwrap();
            assert!(f.operations > 0, "{alg}");
        }
    }

    #[test]
    fn invalid_spec_is_rejected_before_work() {
        let err = measure(&JobSpec {
            threads: 0,
            ..spec("aes-128-gcm", 16)
        })
        .unwrap_err();
        assert!(err.to_string().contains("--threads"), "{err}");
    }

    #[test]
    fn impossible_memory_is_refused_with_the_flags_named() {
        let err = measure(&JobSpec {
            threads: 1024,
            size_bytes: 1 << 30,
            ..spec("aes-128-gcm", 1)
        })
        .unwrap_err();
        assert!(err.to_string().contains("--threads"), "{err}");
    }
}
