//! The measurement loop: build per-thread kernels, warm up, then measure every
//! thread at once from one shared start instant until one shared stop flag.
//!
//! - [`plan`]: batch sizes and what a sample is, from the warm-up's timings.
//!   Throughput batches last about a millisecond or more (one clock read per
//!   batch); each opens with a ~10 µs latency batch for the percentiles.
//! - [`thread`]: one thread's warm-up and measured loop. Samples are global
//!   time windows (each batch counts in the window where it ends), or single
//!   timed operations when one outlasts a window.
//! - [`summary`]: samples from the interval in which every thread ran; the
//!   median is the point's throughput, the coefficient of variation its spread.
//! - [`objects`]: the object-storage scenario, closed or open loop.
//!
//! The run lasts the requested seconds, and longer (up to the budget's cap,
//! [`cipherfleet_core::spec::Budget`]) until it has
//! [`MIN_SAMPLES`] samples; a point that still has fewer than [`LOW_SAMPLES`]
//! is flagged `low_samples`. Thread 0 times key setups before the start line,
//! outside the measured window; the parent process is elsewhere (see
//! [`crate::worker`]).

mod objects;
mod plan;
mod summary;
mod thread;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cipherfleet_core::measurement::{Figures, Harness, Latency, LatencyMethod, Memory};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Execution, InvalidSpec, JobSpec, LOW_SAMPLES, MIN_SAMPLES, validate_arrival_rate};
use cipherfleet_core::stats;

use self::objects::Objects;
use self::plan::{Calibration, Plan, Sampling};
use self::thread::{Live, Record, Shared, ThreadRun};
use crate::heap;
use crate::kernel::{self, Batch, KernelError, KernelInput};

pub use self::plan::{LATENCY_BATCH_TARGET, THROUGHPUT_BATCH_TARGET};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] InvalidSpec),
    #[error("thread {thread}: {source}")]
    Kernel { thread: u32, source: KernelError },
    #[error("{0}")]
    Resources(String),
}

/// How a caller bounds and shapes a measurement beyond its spec.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// The longest the measured phase may run while it still lacks samples.
    pub measure_cap: Duration,
    /// When this process will be killed: the measurement ends early enough to report.
    pub deadline: Option<Instant>,
    /// Object-storage scenario in an open loop: objects arriving per second.
    pub arrival_rate: Option<f64>,
    /// The shape of each operation (`bench --openssl-compat`: `openssl speed`'s).
    pub harness: Harness,
    /// The implementation measured: the RustCrypto crates or ring.
    pub provider: Provider,
}

impl RunOptions {
    /// The budget's cap for `execution`, no deadline, the closed loop.
    pub fn for_spec(spec: &JobSpec, execution: Execution) -> Self {
        RunOptions {
            measure_cap: spec.budget(execution).measure_cap,
            deadline: None,
            arrival_rate: None,
            harness: Harness::Engine,
            provider: Provider::RustCrypto,
        }
    }
}

/// Measures `spec` in this process, natively, with the budget's cap.
pub fn measure(spec: &JobSpec) -> Result<Figures, EngineError> {
    measure_with(spec, &RunOptions::for_spec(spec, Execution::Native))
}

/// What thread 0 learns before the start line.
struct KeyFacts {
    key_setup_ns: f64,
    cipher_state_bytes: u64,
}

/// What the main thread hands every thread at the start line.
struct StartLine {
    plan: Plan,
    start: Instant,
    /// Operation records each thread reserves.
    records: Vec<usize>,
    /// What each thread has done so far (its windows, for window sampling).
    live: Vec<Live>,
}

/// Measures `spec` in this process within `options`.
pub fn measure_with(spec: &JobSpec, options: &RunOptions) -> Result<Figures, EngineError> {
    spec.validate()?;
    validate_arrival_rate(options.arrival_rate, spec.point.concurrency)?;
    check_memory(spec)?;
    let master: [u8; 64] = kernel::random_bytes(64).try_into().expect("64 bytes");
    let threads = spec.point.threads as usize;
    let warmup = Duration::from_secs_f64(spec.warmup_seconds());
    let objects = spec.point.concurrency.map(|n| Objects::new(n, options.arrival_rate));
    let stop = AtomicBool::new(false);
    let calibrations = Mutex::new(vec![None::<Calibration>; threads]);
    let start_line = OnceLock::<StartLine>::new();
    // Workers plus this thread, which decides the plan and then times the measured phase.
    let warmed_up = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);

    let (runs, key, wall, cpu) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..spec.point.threads)
            .map(|thread| {
                let (master, objects, stop) = (&master, objects.as_ref(), &stop);
                let (calibrations, start_line, warmed_up, go) = (&calibrations, &start_line, &warmed_up, &go);
                scope.spawn(move || -> Result<(ThreadRun, Option<KeyFacts>), EngineError> {
                    let kernel = kernel::build(&KernelInput {
                        spec,
                        thread,
                        master_key: master,
                        harness: options.harness,
                        provider: options.provider,
                    });
                    let warmed = kernel.and_then(|mut k| {
                        let calibration = thread::warm_up(k.as_mut(), warmup, objects)?;
                        Ok((k, calibration))
                    });
                    // Key setups are timed here, before the start line, so they
                    // never share the measured window with the other threads.
                    let key = match (&warmed, thread) {
                        (Ok((k, _)), 0) => Some(KeyFacts {
                            key_setup_ns: time_key_setup(k.as_ref()),
                            cipher_state_bytes: k.cipher_state_bytes(),
                        }),
                        _ => None,
                    };
                    calibrations.lock().expect("calibrations")[thread as usize] = warmed.as_ref().ok().map(|(_, c)| *c);
                    warmed_up.wait();
                    go.wait();
                    let fail = |source| {
                        stop.store(true, Ordering::Relaxed);
                        EngineError::Kernel { thread, source }
                    };
                    let (mut k, _) = warmed.map_err(fail)?;
                    let line = start_line.get().expect("published before the start line");
                    let shared = Shared {
                        start: line.start,
                        stop,
                        objects,
                    };
                    let i = thread as usize;
                    let run = thread::measure(
                        k.as_mut(),
                        line.plan.batches[i],
                        line.plan.sampling,
                        line.records[i],
                        &shared,
                        &line.live[i],
                    )
                    .map_err(fail)?;
                    Ok((run, key))
                })
            })
            .collect();

        warmed_up.wait();
        let calibrated: Vec<Option<Calibration>> = calibrations.lock().expect("calibrations").clone();
        // A thread that failed to build or warm up reports its error after the start line;
        // the others then stop after one batch.
        if calibrated.iter().any(Option::is_none) {
            stop.store(true, Ordering::Relaxed);
        }
        let calibrated: Vec<Calibration> = calibrated
            .into_iter()
            .map(|c| c.unwrap_or(Calibration { op_ns: 1.0 }))
            .collect();
        let plan = plan::plan(spec, &calibrated);
        let cap = effective_cap(options, &plan);
        let records: Vec<usize> = calibrated
            .iter()
            .map(|c| thread::records_for(cap, plan.sampling, Duration::from_nanos(c.op_ns as u64)))
            .collect();
        let live = records
            .iter()
            .map(|&n| match plan.sampling {
                Sampling::Windows(_) => Live::new(n),
                Sampling::Operations => Live::new(0),
            })
            .collect();
        let cpu0 = cpu_times();
        let start = Instant::now();
        if let Some(o) = &objects {
            o.begin(start);
        }
        let line = StartLine {
            plan,
            start,
            records,
            live,
        };
        let line = start_line.get_or_init(|| line);
        go.wait();
        wait_for_samples(spec, line, cap, objects.as_ref(), &stop);
        stop.store(true, Ordering::Relaxed);

        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("measurement thread panicked"))
            .collect();
        let (wall, cpu1) = (start.elapsed(), cpu_times());
        let mut runs = Vec::with_capacity(results.len());
        let mut key = None;
        for r in results {
            let (run, k) = r?;
            key = key.or(k);
            runs.push(run);
        }
        Ok::<_, EngineError>((runs, key, wall, (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1)))
    })?;

    let line = start_line.into_inner().expect("published");
    Ok(summarise(
        spec,
        options,
        &line,
        &runs,
        key.unwrap_or(KeyFacts {
            key_setup_ns: 0.0,
            cipher_state_bytes: 0,
        }),
        wall,
        cpu,
    ))
}

/// The measurement cap, shortened so that a deadline leaves time to finish
/// the operations in flight and report.
fn effective_cap(options: &RunOptions, plan: &Plan) -> Duration {
    match options.deadline {
        Some(deadline) => {
            let reserve = Duration::from_secs(1) + plan.op_time * 2;
            let left = deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(reserve);
            options.measure_cap.min(left)
        }
        None => options.measure_cap,
    }
}

/// Waits until the requested time is over and the point has its samples (and
/// objects), or the cap is reached. A sample spans as many windows as the
/// batches, as they really run, need ([`summary::windows_for`]); an estimate
/// from the operations so far says when that many windows may have passed,
/// and then the windows themselves decide, by the rule the summary applies
/// (which merges samples further where a busy machine left a thread without
/// CPU for a whole sample).
fn wait_for_samples(spec: &JobSpec, line: &StartLine, cap: Duration, objects: Option<&Objects>, stop: &AtomicBool) {
    let requested = Duration::from_secs_f64(spec.seconds);
    let batch_ops = line.plan.batches.iter().map(|b| b.throughput).max().unwrap_or(1);
    loop {
        let elapsed = line.start.elapsed();
        if elapsed >= cap || stop.load(Ordering::Relaxed) {
            return;
        }
        let operations: u64 = line.live.iter().map(Live::operations).sum();
        let enough = elapsed >= requested
            && objects.is_none_or(|o| o.completed() >= o.needed())
            && match line.plan.sampling {
                Sampling::Windows(w) => {
                    // Counting every batch as the largest underestimates the batches run,
                    // so the estimate errs long.
                    let batches = operations / (batch_ops * u64::from(spec.point.threads)).max(1);
                    let mean_batch = elapsed.as_nanos() as u64 / batches.max(1);
                    let per_sample = summary::windows_for(mean_batch, w.as_nanos() as u64).min(1 << 20) as u32;
                    // Stretched batches mean a busy machine, where the batch in flight
                    // when the threads stop may stretch the mean across a border: a
                    // margin of twice the windows.
                    let per_sample = if per_sample > 1 { 2 * per_sample } else { 1 };
                    // The first window began before the threads, and the last sample
                    // may end after one of them stopped: a window and a sample more.
                    elapsed >= w * (per_sample * (MIN_SAMPLES + 1) + 1)
                        && window_samples(line, w, elapsed) >= MIN_SAMPLES as usize
                }
                Sampling::Operations => operations >= spec.operations_needed(),
            };
        if enough {
            return;
        }
        // This thread only sleeps: it takes no CPU from the measuring threads.
        std::thread::sleep(Duration::from_millis(2).min(cap - elapsed));
    }
}

/// The samples the windows that have ended by `elapsed` give, as the summary
/// will take them.
fn window_samples(line: &StartLine, w: Duration, elapsed: Duration) -> usize {
    // Every window that may have ended, and one more that cannot have: the
    // summary never takes the last window it is given.
    let windows = (elapsed.as_nanos() / w.as_nanos().max(1)) as usize + 2;
    let records: Vec<Record> = line.live.iter().map(|l| l.record(windows)).collect();
    let tracks: Vec<summary::Track<'_>> = records
        .iter()
        .zip(&line.plan.batches)
        .map(|(r, b)| track(r, *b, &[]))
        .collect();
    summary::windows(&tracks, w.as_nanos() as u64, 1).samples.len()
}

/// A thread's record as the summary reads it.
fn track<'a>(r: &'a Record, batches: plan::Batches, timed: &'a [(u64, u64)]) -> summary::Track<'a> {
    summary::Track {
        begin_ns: r.begin_ns,
        end_ns: r.end_ns,
        batches: r.operations / batches.throughput.max(1),
        windows: &r.windows,
        timed,
    }
}

/// Median of 15 chunks of 64 key setups, in ns per setup.
fn time_key_setup(k: &dyn Batch) -> f64 {
    let chunks: Vec<f64> = (0..15).map(|_| k.key_setup_ns(64)).collect();
    stats::median(&chunks).unwrap_or(0.0)
}

fn summarise(
    spec: &JobSpec,
    options: &RunOptions,
    line: &StartLine,
    runs: &[ThreadRun],
    key: KeyFacts,
    wall: Duration,
    (user, sys): (f64, f64),
) -> Figures {
    let records: Vec<Record> = line.live.iter().map(|l| l.record(usize::MAX)).collect();
    let tracks: Vec<summary::Track<'_>> = records
        .iter()
        .zip(runs)
        .map(|(record, r)| track(record, r.batches, &r.timed))
        .collect();
    let (sampled, sample_seconds) = match line.plan.sampling {
        Sampling::Windows(w) => {
            let sampled = summary::windows(&tracks, w.as_nanos() as u64, spec.point.size_bytes);
            let seconds = w.as_secs_f64() * sampled.windows_per_sample as f64;
            (sampled, seconds)
        }
        Sampling::Operations => (
            summary::operations(&tracks, spec.point.threads, spec.point.size_bytes),
            line.plan.nominal_window.as_secs_f64(),
        ),
    };
    let operations: u64 = runs.iter().map(|r| r.operations).sum();
    let wall_s = wall.as_secs_f64();
    // No whole sample (the cap came first): one sample, the mean over the run, flagged low.
    let samples = if sampled.samples.is_empty() {
        vec![(operations * spec.point.size_bytes) as f64 / wall_s.max(1e-9)]
    } else {
        sampled.samples
    };
    let throughput = stats::median(&samples).unwrap_or(0.0);
    let mut histogram = thread::new_histogram();
    for r in runs {
        histogram.add(&r.histogram).expect("same bounds");
    }
    let latency_batch = runs.iter().map(|r| r.batches.latency).max().unwrap_or(1);
    let latency_method = if spec.point.concurrency.is_some() {
        LatencyMethod::PerObject
    } else if latency_batch > 1 {
        LatencyMethod::BatchMean
    } else {
        LatencyMethod::PerOp
    };
    let heap = runs.iter().fold(heap::Counts::default(), |sum, r| heap::Counts {
        allocations: sum.allocations + r.heap.allocations,
        allocated_bytes: sum.allocated_bytes + r.heap.allocated_bytes,
        freed_bytes: sum.freed_bytes + r.heap.freed_bytes,
    });
    let per_op = |n: u64| n as f64 / operations.max(1) as f64;
    let counting = heap::is_counting();
    Figures {
        throughput_mb_s: throughput / 1e6,
        ops_per_s: throughput / spec.point.size_bytes as f64,
        latency_ns: Latency {
            p50: histogram.value_at_quantile(0.50),
            p90: histogram.value_at_quantile(0.90),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
        },
        latency_method,
        batch_ops: latency_batch,
        latency_samples: runs.iter().map(|r| r.latency_samples).sum(),
        throughput_batch_ops: runs.iter().map(|r| r.batches.throughput).max().unwrap_or(1),
        cv: stats::cv(&samples),
        samples: samples.len() as u32,
        sample_kind: line.plan.sampling.kind(),
        low_samples: (samples.len() as u32) < LOW_SAMPLES,
        sample_seconds,
        warmup_seconds: spec.warmup_seconds(),
        elapsed_seconds: wall_s,
        operations,
        bytes_processed: operations * spec.point.size_bytes,
        all_running_bytes: sampled.all_running_bytes,
        all_running_seconds: sampled.all_running_seconds,
        objects: spec
            .point
            .concurrency
            .map(|_| runs.iter().map(|r| r.objects_counted).sum()),
        arrival_rate_per_s: spec.point.concurrency.and(options.arrival_rate),
        cpu_user_seconds: user,
        cpu_sys_seconds: sys,
        cpu_utilization: if wall_s > 0.0 {
            (user + sys) / (wall_s * f64::from(spec.point.threads))
        } else {
            0.0
        },
        key_setup_ns: key.key_setup_ns,
        sample_throughputs_mb_s: samples.iter().map(|b| b / 1e6).collect(),
        memory: Some(Memory {
            cipher_state_bytes: key.cipher_state_bytes,
            peak_rss_bytes: peak_rss_bytes(),
            heap_bytes_per_op: counting.then(|| per_op(heap.allocated_bytes)),
            allocs_per_op: counting.then(|| per_op(heap.allocations)),
        }),
    }
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    }
}

/// User and system CPU seconds of this process so far.
fn cpu_times() -> (f64, f64) {
    let usage = rusage();
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// Peak resident set of this process (Linux reports `ru_maxrss` in KiB).
fn peak_rss_bytes() -> u64 {
    u64::try_from(rusage().ru_maxrss).unwrap_or(0) * 1024
}

/// The bytes of buffers a point needs: per thread, a plaintext and a
/// ciphertext (and for decryption its pool of sealed messages), each with
/// room for a tag. The daemon's `--max-memory` and the check below both use it.
pub fn working_set_bytes(spec: &JobSpec) -> u64 {
    let messages = match spec.point.direction {
        cipherfleet_core::spec::Direction::Encrypt => 2,
        cipherfleet_core::spec::Direction::Decrypt => 2 + kernel::pool_slots(spec.point.size_bytes) as u64,
    };
    messages
        .saturating_mul(spec.point.size_bytes.saturating_add(64))
        .saturating_mul(u64::from(spec.point.threads))
}

/// Refuses points whose buffers would not fit in available memory.
fn check_memory(spec: &JobSpec) -> Result<(), EngineError> {
    let needed = working_set_bytes(spec);
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
mod tests;
