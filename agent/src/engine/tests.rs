//! Whole measurements, kept short. They assert invariants (counts, bounds,
//! zero allocations), never speeds; speeds belong to `agent/benches`.

use super::*;
use cipherfleet_core::Point;
use cipherfleet_core::algorithm::ALL;
use cipherfleet_core::measurement::SampleKind;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, KeyMode};

/// Seconds a point is measured for, unless a test says otherwise.
const SECONDS: f64 = 0.05;

fn point(alg: &str, size: u64) -> Point {
    Point {
        algorithm: alg.parse().unwrap(),
        direction: Direction::Encrypt,
        size_bytes: size,
        threads: 1,
        concurrency: None,
        key_mode: KeyMode::Static,
        path: Path::Accelerated,
        nonce: cipherfleet_core::spec::Nonce::Counter,
        provider: cipherfleet_core::provider::Provider::RustCrypto,
    }
}

fn spec(alg: &str, size: u64) -> JobSpec {
    point(alg, size).spec(SECONDS)
}

#[test]
fn tiny_payloads_get_millisecond_batches_and_finer_latency_batches() {
    let f = measure(&spec("aes-128-gcm", 16)).unwrap();
    assert!(f.samples >= MIN_SAMPLES && !f.low_samples, "{f:?}");
    assert_eq!(f.sample_kind, SampleKind::Window);
    // One clock read per ≥ 1 ms of work; the latency batch is a hundredth of that.
    assert!(f.throughput_batch_ops >= f.batch_ops, "{f:?}");
    let expected = if f.batch_ops > 1 {
        LatencyMethod::BatchMean
    } else {
        LatencyMethod::PerOp
    };
    assert_eq!(f.latency_method, expected);
    assert!(f.latency_samples > 0 && f.latency_samples * f.batch_ops <= f.operations);
    assert_eq!(f.bytes_processed, f.operations * 16);
    assert!(f.throughput_mb_s > 0.0);
    assert!(f.latency_ns.p50 <= f.latency_ns.p99 && f.latency_ns.p99 <= f.latency_ns.max);
    assert_eq!(f.sample_throughputs_mb_s.len(), f.samples as usize);
    assert!(f.sample_seconds >= 0.005);
    assert!(f.key_setup_ns > 0.0);
    // The samples are the all-running windows: their bytes are within what was processed.
    assert!(f.all_running_bytes > 0 && f.all_running_bytes <= f.bytes_processed);
    assert!((f.all_running_seconds - f.samples as f64 * f.sample_seconds).abs() < 1e-9);
}

#[test]
fn a_run_too_short_for_five_samples_is_flagged() {
    // 100 ms windows, stopped after 250 ms: two whole windows at most, even
    // when this thread wakes late on a busy machine.
    let s = JobSpec {
        seconds: 3.0,
        ..spec("aes-128-gcm", 1024)
    };
    let options = RunOptions {
        measure_cap: Duration::from_millis(250),
        ..RunOptions::for_spec(&s, Execution::Native)
    };
    let f = measure_with(&s, &options).unwrap();
    assert!(f.samples < LOW_SAMPLES && f.low_samples, "{f:?}");
    assert_eq!(f.sample_throughputs_mb_s.len(), f.samples as usize);
    assert!(f.throughput_mb_s > 0.0);
}

#[test]
fn a_deadline_shortens_the_run() {
    let s = JobSpec {
        seconds: 5.0,
        ..spec("aes-128-gcm", 1024)
    };
    let options = RunOptions {
        deadline: Some(Instant::now() + Duration::from_millis(2500)),
        ..RunOptions::for_spec(&s, Execution::Native)
    };
    let f = measure_with(&s, &options).unwrap();
    // 1 s is kept in reserve for the operations in flight and the report.
    assert!(f.elapsed_seconds < 1.6, "{f:?}");
}

#[test]
fn an_operation_longer_than_a_window_makes_every_operation_a_sample() {
    // 64 KiB of 3DES takes over 5 ms (the shortest window) on any CPU, in any build.
    let s = Point {
        direction: Direction::Decrypt,
        ..point("des-ede3-cbc", 64 << 10)
    }
    .spec(SECONDS);
    // A debug build on a busy machine is slower than the budget's conservative
    // rate: give it the room a release build would not need.
    let options = RunOptions {
        measure_cap: Duration::from_secs(20),
        ..RunOptions::for_spec(&s, Execution::Native)
    };
    let f = measure_with(&s, &options).unwrap();
    assert_eq!(f.sample_kind, SampleKind::Operation, "{f:?}");
    assert!(f.samples >= MIN_SAMPLES && !f.low_samples, "{f:?}");
    assert_eq!(f.latency_method, LatencyMethod::PerOp);
    assert_eq!((f.batch_ops, f.throughput_batch_ops), (1, 1));
    assert!(f.operations >= u64::from(f.samples));
    assert!(f.latency_samples >= u64::from(f.samples));
}

/// One algorithm per family and kernel, for the key modes.
const FAMILIES: &[&str] = &[
    "aes-128-ecb",
    "aes-192-cbc",
    "aes-256-ctr",
    "aes-128-gcm",
    "aes-256-ccm",
    "aes-192-ocb",
    "aes-128-cbc-hmac-sha256",
    "chacha20",
    "chacha20-poly1305",
    "xchacha20-poly1305",
    "des-cbc",
    "des-ede3-ecb",
];

#[test]
fn every_point_reports_memory_and_no_measured_loop_allocates() {
    let mut points = Vec::new();
    for alg in ALL {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            points.push((alg.name(), direction, KeyMode::Static));
        }
    }
    for alg in FAMILIES {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            for key_mode in [KeyMode::PerOp, KeyMode::HkdfPerUser] {
                points.push((alg, direction, key_mode));
            }
        }
    }
    for (alg, direction, key_mode) in points {
        let s = Point {
            direction,
            key_mode,
            ..point(alg, 64)
        }
        .spec(0.01);
        let f = measure(&s).unwrap_or_else(|e| panic!("{}: {e}", s.label()));
        let m = f.memory.unwrap_or_else(|| panic!("{}: no memory figures", s.label()));
        assert!(m.cipher_state_bytes > 0, "{}: {m:?}", s.label());
        assert!(m.peak_rss_bytes > 0, "{}: {m:?}", s.label());
        assert_eq!(m.allocs_per_op, Some(0.0), "{}: the measured loop allocates", s.label());
        assert_eq!(m.heap_bytes_per_op, Some(0.0), "{}", s.label());
    }
}

/// `bench --openssl-compat` goes through the same engine with openssl's
/// shapes: it reports memory too, and its loops do not allocate either.
#[test]
fn openssl_shaped_points_report_memory_and_do_not_allocate() {
    for alg in ALL {
        if crate::kernel::compat::unsupported(*alg, 64, KeyMode::Static, None).is_some() {
            continue;
        }
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            let s = Point {
                direction,
                ..point(alg.name(), 64)
            }
            .spec(0.01);
            let options = RunOptions {
                harness: Harness::OpensslCompat,
                ..RunOptions::for_spec(&s, Execution::Native)
            };
            let f = measure_with(&s, &options).unwrap_or_else(|e| panic!("{}: {e}", s.label()));
            let m = f.memory.unwrap_or_else(|| panic!("{}: no memory figures", s.label()));
            assert!(m.cipher_state_bytes > 0, "{}: {m:?}", s.label());
            assert_eq!(m.allocs_per_op, Some(0.0), "{}: the measured loop allocates", s.label());
        }
    }
}

/// The ring provider runs through the same engine: every algorithm, both
/// directions, every key mode and random nonces, with memory figures, key
/// setups timed, samples taken and no allocation in the measured loops.
#[test]
fn ring_points_follow_the_engines_rules() {
    let ring = |s: &JobSpec| RunOptions {
        provider: Provider::Ring,
        ..RunOptions::for_spec(s, Execution::Native)
    };
    for alg in Provider::Ring.algorithms() {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            for key_mode in [KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser] {
                let s = Point {
                    direction,
                    key_mode,
                    ..point(alg.name(), 64)
                }
                .spec(0.01);
                let f = measure_with(&s, &ring(&s)).unwrap_or_else(|e| panic!("ring {}: {e}", s.label()));
                assert!(f.key_setup_ns > 0.0 && f.operations > 0, "{}: {f:?}", s.label());
                let m = f.memory.unwrap_or_else(|| panic!("{}: no memory figures", s.label()));
                assert!(m.cipher_state_bytes > 0, "{}: {m:?}", s.label());
                assert_eq!(m.allocs_per_op, Some(0.0), "{}: the measured loop allocates", s.label());
            }
        }
        let random = Point {
            nonce: cipherfleet_core::spec::Nonce::Random,
            ..point(alg.name(), 64)
        }
        .spec(0.01);
        assert!(measure_with(&random, &ring(&random)).unwrap().operations > 0);
    }
    let s = spec("aes-256-gcm", 1024);
    let f = measure_with(&s, &ring(&s)).unwrap();
    assert!(f.samples >= MIN_SAMPLES && f.throughput_mb_s > 0.0, "{f:?}");
    // ring has no AES-192; the engine says so rather than measure the crates instead.
    let s = spec("aes-192-gcm", 64);
    let e = measure_with(&s, &ring(&s)).unwrap_err().to_string();
    assert!(e.contains("ring has no aes-192-gcm"), "{e}");
}

#[test]
fn key_setup_is_timed_for_every_key_mode() {
    for key_mode in [KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser] {
        let f = measure(
            &Point {
                key_mode,
                ..point("aes-256-gcm", 64)
            }
            .spec(0.01),
        )
        .unwrap();
        assert!(f.key_setup_ns > 0.0, "{key_mode:?}");
    }
}

#[test]
fn closed_loop_objects_discard_the_first_wave_and_count_ten_per_slot() {
    let s = Point {
        threads: 2,
        concurrency: Some(8),
        ..point("chacha20-poly1305", 16 << 10)
    }
    .spec(SECONDS);
    // Room for a debug build, many times slower than the budget's release rates.
    let f = measure_with(
        &s,
        &RunOptions {
            measure_cap: Duration::from_secs(20),
            ..RunOptions::for_spec(&s, Execution::Native)
        },
    )
    .unwrap();
    assert_eq!(f.latency_method, LatencyMethod::PerObject);
    assert_eq!(f.batch_ops, 1);
    let objects = f.objects.expect("the object scenario counts its objects");
    assert!(objects >= 80, "at least 10 × concurrency counted: {f:?}");
    assert_eq!(f.operations, objects + 8, "the first 8 completions were discarded");
    assert_eq!(f.latency_samples, objects);
    assert_eq!(f.arrival_rate_per_s, None);
    // 8 objects on 2 threads: each waits for about 3 others, so p50 is well above one object's work.
    let per_object_ns = 1e9 / f.ops_per_s * 2.0;
    assert!(f.latency_ns.p50 as f64 > per_object_ns * 1.5, "{f:?}");
}

#[test]
fn open_loop_objects_arrive_at_the_rate_and_count_from_their_arrival() {
    let s = Point {
        concurrency: Some(4),
        ..point("aes-128-gcm", 4 << 10)
    }
    .spec(SECONDS);
    let rate = 1000.0;
    let f = measure_with(
        &s,
        &RunOptions {
            arrival_rate: Some(rate),
            measure_cap: Duration::from_secs(20),
            ..RunOptions::for_spec(&s, Execution::Native)
        },
    )
    .unwrap();
    assert_eq!(f.arrival_rate_per_s, Some(rate));
    let objects = f.objects.unwrap();
    assert!(objects >= 40, "{f:?}");
    // Arrivals are scheduled, not driven by completions: no more objects than
    // arrived by the end (plus the discarded and the one in flight).
    assert!(
        f.operations as f64 <= rate * f.elapsed_seconds + 4.0 + 2.0,
        "{} objects in {} s",
        f.operations,
        f.elapsed_seconds
    );
    assert!(f.latency_ns.p50 > 0);
}

#[test]
fn an_arrival_rate_without_the_object_scenario_is_refused() {
    let s = spec("aes-128-gcm", 16);
    let err = measure_with(
        &s,
        &RunOptions {
            arrival_rate: Some(10.0),
            ..RunOptions::for_spec(&s, Execution::Native)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("--arrival-rate"), "{err}");
}

/// Two threads can do at most twice what one does; a figure above that is
/// an artefact of how threads' samples are combined (for instance one thread
/// running alone at the end of another's run). On a shared, noisy 2-core VM
/// any single comparison can be unlucky, so the test is built not to flake:
///
/// - one- and two-thread runs alternate, five of each, so a slow or quiet
///   spell of the machine falls on both;
/// - the two-thread figure is the median of its runs: one lucky run moves nothing;
/// - the bound is twice the single thread's 90th-percentile window (its speed
///   when undisturbed) plus four robust standard deviations (1.4826 × MAD) of
///   those windows, doubled: the single thread's own measured noise.
///
/// Contention can only lower the two-thread figure, never raise it, so the
/// bound is one-sided.
#[test]
fn two_threads_never_measure_more_than_twice_one_thread_beyond_the_noise() {
    let job = |threads| {
        Point {
            threads,
            ..point("aes-128-gcm", 16 << 10)
        }
        .spec(0.2)
    };
    let (mut single_windows, mut double) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let one = measure(&job(1)).unwrap();
        single_windows.extend(one.sample_throughputs_mb_s);
        double.push(measure(&job(2)).unwrap().throughput_mb_s);
    }
    let typical = stats::percentile(&single_windows, 90.0).unwrap();
    let spread = 1.4826 * stats::mad(&single_windows).unwrap();
    let bound = 2.0 * (typical + 4.0 * spread);
    let two = stats::median(&double).unwrap();
    assert!(
        two <= bound,
        "two threads {two:.1} MB/s > 2 × (p90 {typical:.1} + 4 × {spread:.2}) = {bound:.1} MB/s; runs {double:?}"
    );
}

#[test]
fn invalid_spec_is_rejected_before_work() {
    let err = measure(
        &Point {
            threads: 0,
            ..point("aes-128-gcm", 16)
        }
        .spec(SECONDS),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--threads"), "{err}");
}

#[test]
fn impossible_memory_is_refused_with_the_flags_named() {
    let err = measure(
        &Point {
            threads: 1024,
            size_bytes: 1 << 30,
            ..point("aes-128-gcm", 1)
        }
        .spec(SECONDS),
    )
    .unwrap_err();
    assert!(err.to_string().contains("--threads"), "{err}");
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
    fn cipher_state_bytes(&self) -> u64 {
        1
    }
}

#[test]
fn warm_up_measures_the_time_per_operation() {
    // Lower bounds only: a busy machine can stretch a spin, never shorten it.
    let fast = thread::warm_up(&mut Spin(Duration::from_micros(10)), Duration::from_millis(20), None).unwrap();
    assert!(fast.op_ns >= 10_000.0, "{fast:?}");
    // A 10 µs operation gets batches of about a millisecond.
    assert!(plan::batches(fast.op_ns, false).throughput <= 100, "{fast:?}");
    let slow = thread::warm_up(&mut Spin(Duration::from_millis(3)), Duration::from_millis(20), None).unwrap();
    assert!(slow.op_ns >= 3e6, "{slow:?}");
    assert_eq!(plan::batches(slow.op_ns, false).throughput, 1);
}

#[test]
fn windows_count_each_batch_where_it_ends() {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let shared = Shared {
        start,
        stop: &stop,
        objects: None,
    };
    let live = thread::Live::new(12);
    let batches = plan::Batches {
        throughput: 10,
        latency: 2,
    };
    let run = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(60));
            stop.store(true, Ordering::Relaxed);
        });
        thread::measure(
            &mut Spin(Duration::from_micros(100)),
            batches,
            Sampling::Windows(Duration::from_millis(10)),
            0,
            &shared,
            &live,
        )
        .unwrap()
    });
    // Every operation lands in exactly one window; batches of 10, so windows hold multiples of 10.
    let record = live.record(usize::MAX);
    assert_eq!(record.windows.len(), 12);
    assert_eq!(record.windows.iter().sum::<u64>(), run.operations);
    assert!(record.windows.iter().all(|w| w % 10 == 0), "{:?}", record.windows);
    assert_eq!(record.operations, run.operations);
    // The record spans the batches: at least one millisecond each, from the start.
    assert!(
        record.begin_ns + run.operations / 10 * 1_000_000 <= record.end_ns,
        "{record:?}"
    );
    assert!(Duration::from_nanos(record.end_ns) <= start.elapsed());
    // A prefix is what a stop decision under way copies.
    assert_eq!(live.record(3).windows, record.windows[..3]);
    // Each batch (1 ms of spinning, at least) takes one latency value from its first 2 operations.
    assert_eq!(run.latency_samples, run.operations / 10);
    assert!(run.histogram.value_at_quantile(0.5) >= 100_000);
    assert_eq!(run.heap.allocations, 0, "the measured loop allocates");
}

/// A start line 70 ms into a run of one thread in 5 ms windows, with batches
/// of 3 operations about a millisecond long, whose windows are `windows`.
fn line_70_ms_in(windows: [u64; 16]) -> StartLine {
    let w = Duration::from_millis(5);
    let record = thread::Record {
        begin_ns: 1_000_000,
        end_ns: 69_000_000,
        operations: windows.iter().sum(),
        windows: windows.to_vec(),
    };
    StartLine {
        plan: Plan {
            batches: vec![plan::Batches {
                throughput: 3,
                latency: 1,
            }],
            sampling: Sampling::Windows(w),
            nominal_window: w,
            op_time: Duration::from_micros(330),
        },
        start: Instant::now() - Duration::from_millis(70),
        records: vec![0],
        live: vec![thread::Live::from_record(&record)],
    }
}

#[test]
fn the_wait_ends_when_the_windows_hold_the_samples_the_summary_will_take() {
    // 63 batches in 70 ms: the operations alone say twelve samples of one
    // window have passed. But the thread ran in every other window only, so
    // the summary merges windows in pairs and takes six: the wait must go on
    // (here to the cap, as the record no longer grows).
    let mut starved = [0u64; 16];
    starved[1..14].iter_mut().step_by(2).for_each(|n| *n = 27);
    let line = line_70_ms_in(starved);
    let Sampling::Windows(w) = line.plan.sampling else {
        unreachable!()
    };
    assert_eq!(window_samples(&line, w, line.start.elapsed()), 6);
    let cap = Duration::from_millis(150);
    let stop = AtomicBool::new(false);
    wait_for_samples(&spec("aes-128-gcm", 16), &line, cap, None, &stop);
    assert!(line.start.elapsed() >= cap, "the wait ended with six samples");

    // The same operations spread over every window: twelve samples, no wait.
    let mut even = [0u64; 16];
    even[1..14].fill(15);
    let line = line_70_ms_in(even);
    assert_eq!(window_samples(&line, w, line.start.elapsed()), 12);
    let cap = Duration::from_secs(60);
    wait_for_samples(&spec("aes-128-gcm", 16), &line, cap, None, &stop);
    assert!(line.start.elapsed() < cap);
}
