//! How a point is sampled, decided once every thread has warmed up: batch
//! sizes per thread, and whether a sample is a global time window or one
//! timed operation. Pure functions of the warm-up's timings.

use std::time::Duration;

use cipherfleet_core::measurement::SampleKind;
use cipherfleet_core::spec::JobSpec;

/// Least duration of one throughput batch: the clock is read once per batch,
/// so even a slow clock source (a microsecond or more per read on some
/// hypervisors) costs under 0.1 % of the figure.
pub const THROUGHPUT_BATCH_TARGET: Duration = Duration::from_millis(1);
/// Duration of one latency-timed batch: tiny payloads are timed in batches of
/// about this long (`batch-mean`), longer operations one by one. Each
/// throughput batch starts with one latency batch, so percentiles keep this
/// finer timing while throughput reads the clock once per millisecond.
pub const LATENCY_BATCH_TARGET: Duration = Duration::from_micros(10);
/// Largest batch (operations per clock read).
pub const MAX_BATCH: u64 = 1 << 24;
/// Windows aimed for in the requested time.
const TARGET_SAMPLES: f64 = 30.0;
/// Shortest and longest nominal window.
const MIN_WINDOW: Duration = Duration::from_millis(5);
const MAX_WINDOW: Duration = Duration::from_secs(1);
/// A window spans at least this many batches of the slowest thread, so that
/// counting each batch in the window where it ends moves a window's figure by
/// at most about a quarter.
pub const BATCHES_PER_WINDOW: u32 = 4;

/// What one thread's warm-up measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Mean nanoseconds per operation in the warm-up's last batch.
    pub op_ns: f64,
}

/// Batch sizes of one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batches {
    /// Operations between two clock reads for throughput.
    pub throughput: u64,
    /// Operations of the latency-timed batch that opens each throughput batch.
    pub latency: u64,
}

/// How the measured phase samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// Global windows of this length from the shared start; each batch counts
    /// in the window where it ends.
    Windows(Duration),
    /// Every operation is timed and is a sample: one outlasts a window.
    Operations,
}

impl Sampling {
    pub fn kind(self) -> SampleKind {
        match self {
            Sampling::Windows(_) => SampleKind::Window,
            Sampling::Operations => SampleKind::Operation,
        }
    }
}

/// The measured phase's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub batches: Vec<Batches>,
    pub sampling: Sampling,
    /// The nominal window: `seconds / 30`, between 5 ms and 1 s.
    pub nominal_window: Duration,
    /// Slowest thread's time per operation.
    pub op_time: Duration,
}

/// Batch sizes for one thread from its time per operation; objects are
/// always taken one at a time.
pub fn batches(op_ns: f64, objects: bool) -> Batches {
    if objects {
        return Batches {
            throughput: 1,
            latency: 1,
        };
    }
    let ops_in = |target: Duration| (target.as_nanos() as f64 / op_ns.max(1.0)).ceil() as u64;
    let throughput = ops_in(THROUGHPUT_BATCH_TARGET).clamp(1, MAX_BATCH);
    let latency = ops_in(LATENCY_BATCH_TARGET).clamp(1, throughput);
    Batches { throughput, latency }
}

/// The plan for `spec` from every thread's warm-up.
pub fn plan(spec: &JobSpec, calibrations: &[Calibration]) -> Plan {
    let objects = spec.point.concurrency.is_some();
    let nominal = Duration::from_secs_f64(spec.seconds / TARGET_SAMPLES).clamp(MIN_WINDOW, MAX_WINDOW);
    let batches: Vec<Batches> = calibrations.iter().map(|c| batches(c.op_ns, objects)).collect();
    let slowest = calibrations.iter().map(|c| c.op_ns).fold(0.0, f64::max);
    let op_time = Duration::from_nanos(slowest as u64);
    let longest_batch = calibrations
        .iter()
        .zip(&batches)
        .map(|(c, b)| Duration::from_nanos((c.op_ns * b.throughput as f64) as u64))
        .max()
        .unwrap_or_default();
    let sampling = if op_time > nominal {
        Sampling::Operations
    } else {
        Sampling::Windows(nominal.max(longest_batch * BATCHES_PER_WINDOW))
    };
    Plan {
        batches,
        sampling,
        nominal_window: nominal,
        op_time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::Point;
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::{Direction, KeyMode};

    fn spec(seconds: f64, concurrency: Option<u32>) -> JobSpec {
        JobSpec {
            point: Point {
                algorithm: "aes-128-gcm".parse().unwrap(),
                direction: Direction::Encrypt,
                size_bytes: 16,
                threads: 1,
                concurrency,
                key_mode: KeyMode::Static,
                path: Path::Accelerated,
                nonce: cipherfleet_core::spec::Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds,
        }
    }

    #[test]
    fn batches_last_a_millisecond_and_latency_batches_ten_microseconds() {
        // (ns per op, throughput ops, latency ops)
        let cases = [
            (50.0, 20_000, 200),
            (1_000.0, 1_000, 10),
            (15_000.0, 67, 1),
            (2_000_000.0, 1, 1),
            (0.0, 1_000_000, 10_000),
        ];
        for (op_ns, throughput, latency) in cases {
            assert_eq!(batches(op_ns, false), Batches { throughput, latency }, "{op_ns} ns");
        }
        assert_eq!(
            batches(50.0, true),
            Batches {
                throughput: 1,
                latency: 1
            }
        );
    }

    #[test]
    fn a_sample_is_a_window_unless_one_operation_outlasts_it() {
        let c = |op_ns| Calibration { op_ns };
        // 1 s: nominal 33 ms windows.
        let fast = plan(&spec(1.0, None), &[c(100.0), c(120.0)]);
        assert_eq!(fast.sampling, Sampling::Windows(Duration::from_secs_f64(1.0 / 30.0)));
        assert_eq!(fast.batches.len(), 2);
        // 20 ms operations: windows grow to four of them.
        let slow = plan(&spec(1.0, None), &[c(20e6)]);
        assert_eq!(slow.sampling, Sampling::Windows(Duration::from_millis(80)));
        // 50 ms operations outlast the 33 ms window: one sample per operation.
        assert_eq!(plan(&spec(1.0, None), &[c(50e6)]).sampling, Sampling::Operations);
        // Short runs keep a 5 ms floor; 2 ms objects are taken one at a time.
        let objects = plan(&spec(0.05, Some(4)), &[c(2e6)]);
        assert_eq!(objects.nominal_window, MIN_WINDOW);
        assert_eq!(objects.sampling, Sampling::Windows(Duration::from_millis(8)));
        assert_eq!(objects.batches[0].throughput, 1);
    }
}
