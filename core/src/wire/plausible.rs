//! The bounds physics puts on a measurement's figures, past the checks of
//! form (finite, non-negative, one value per sample): a result outside them
//! is a broken clock, an overflowed counter or a forged result, and the
//! report would rank and colour the fleet by it. Each bound says why it
//! holds; a result outside one is refused naming the figure.
//!
//! The bounds are generous on purpose: a real run on the slowest emulated
//! host or the fastest machine sits orders of magnitude inside each.

use super::{WireError, wire_error};
use crate::measurement::{Figures, Measurement};

/// Most plaintext one thread can process a second, in MB/s: 1 TB/s, far
/// past what a core can stream (tens of GB/s from its caches, a whole
/// socket's memory a few hundred).
pub const MAX_THROUGHPUT_MB_S_PER_THREAD: f64 = 1e6;

/// Most operations one thread can complete a second: ten a nanosecond. A
/// cipher call takes tens of cycles at least, and clocks stay below 10 GHz.
pub const MAX_OPS_PER_SECOND_PER_THREAD: f64 = 1e10;

/// How many times the run's length (its warm-up and measured phase) a
/// latency may be: one operation or object cannot take longer than the run
/// that timed it, and this leaves an order of magnitude for clocks that disagree.
pub const LATENCY_RUN_FACTOR: f64 = 10.0;

/// How far the bytes processed may stray, either way, from the throughput
/// times the measured phase's length. The throughput is the median sample,
/// the bytes are the whole run's: a thread that started late or a starved
/// window moves them apart by a few times, never by a hundred.
pub const BYTES_RUN_FACTOR: f64 = 100.0;

/// The largest count or duration the database stores (`bigint`).
const MAX_STORED: u64 = i64::MAX as u64;

/// `measurement.measurement_json.name`, as a `&'static str`.
macro_rules! field {
    ($name:literal) => {
        concat!("measurement.measurement_json.", $name)
    };
}

/// Checks the figures `f` of measurement `m` (figures of form already
/// checked: finite, non-negative) against the bounds above.
pub(super) fn check(m: &Measurement, f: &Figures) -> Result<(), WireError> {
    check_counts(f)?;
    let threads = f64::from(m.threads.max(1));
    let most_mb_s = MAX_THROUGHPUT_MB_S_PER_THREAD * threads;
    let too_fast = |name: &str, value: f64| {
        wire_error(
            name,
            format!(
                "{value} MB/s is more than {MAX_THROUGHPUT_MB_S_PER_THREAD} MB/s (1 TB/s) a thread \
                 for {threads} threads: no machine processes that"
            ),
        )
    };
    if f.throughput_mb_s > most_mb_s {
        return Err(too_fast(field!("throughput_mb_s"), f.throughput_mb_s));
    }
    if let Some((i, value)) = f
        .sample_throughputs_mb_s
        .iter()
        .enumerate()
        .find(|(_, v)| **v > most_mb_s)
    {
        return Err(too_fast(&format!("{}[{i}]", field!("sample_throughputs_mb_s")), *value));
    }
    if f.ops_per_s > MAX_OPS_PER_SECOND_PER_THREAD * threads {
        return Err(wire_error(
            field!("ops_per_s"),
            format!(
                "{} operations a second is more than {MAX_OPS_PER_SECOND_PER_THREAD} a thread \
                 for {threads} threads: no cipher call takes less than a tenth of a nanosecond",
                f.ops_per_s
            ),
        ));
    }
    check_latencies(f)?;
    check_bytes(m, f)
}

/// Counts and durations within the database's `bigint`.
fn check_counts(f: &Figures) -> Result<(), WireError> {
    let memory = f.memory.as_ref();
    let counts = [
        (field!("operations"), Some(f.operations)),
        (field!("bytes_processed"), Some(f.bytes_processed)),
        (field!("all_running_bytes"), Some(f.all_running_bytes)),
        (field!("batch_ops"), Some(f.batch_ops)),
        (field!("latency_samples"), Some(f.latency_samples)),
        (field!("throughput_batch_ops"), Some(f.throughput_batch_ops)),
        (field!("objects"), f.objects),
        (field!("latency_ns.p50"), Some(f.latency_ns.p50)),
        (field!("latency_ns.p90"), Some(f.latency_ns.p90)),
        (field!("latency_ns.p99"), Some(f.latency_ns.p99)),
        (field!("latency_ns.p999"), Some(f.latency_ns.p999)),
        (field!("latency_ns.max"), Some(f.latency_ns.max)),
        (
            field!("memory.cipher_state_bytes"),
            memory.map(|m| m.cipher_state_bytes),
        ),
        (field!("memory.peak_rss_bytes"), memory.map(|m| m.peak_rss_bytes)),
    ];
    match counts.into_iter().find(|(_, n)| n.is_some_and(|n| n > MAX_STORED)) {
        Some((name, Some(n))) => Err(wire_error(
            name,
            format!("{n} is more than {MAX_STORED}, the largest value stored (an overflowed counter)"),
        )),
        _ => Ok(()),
    }
}

/// No latency longer than [`LATENCY_RUN_FACTOR`] times the run.
fn check_latencies(f: &Figures) -> Result<(), WireError> {
    let run_seconds = f.elapsed_seconds + f.warmup_seconds;
    let most_ns = LATENCY_RUN_FACTOR * run_seconds * 1e9;
    let l = &f.latency_ns;
    let latencies = [
        (field!("latency_ns.p50"), l.p50),
        (field!("latency_ns.p90"), l.p90),
        (field!("latency_ns.p99"), l.p99),
        (field!("latency_ns.p999"), l.p999),
        (field!("latency_ns.max"), l.max),
    ];
    match latencies.into_iter().find(|(_, ns)| *ns as f64 > most_ns) {
        Some((name, ns)) => Err(wire_error(
            name,
            format!(
                "{ns} ns is more than {LATENCY_RUN_FACTOR} times the run that timed it \
                 ({run_seconds} s of warm-up and measurement)"
            ),
        )),
        None => Ok(()),
    }
}

/// The bytes processed within [`BYTES_RUN_FACTOR`] of the throughput times
/// the measured phase, either way, give or take one operation a thread.
fn check_bytes(m: &Measurement, f: &Figures) -> Result<(), WireError> {
    let at_throughput = f.throughput_mb_s * 1e6 * f.elapsed_seconds;
    let bytes = f.bytes_processed as f64;
    let one_each = m.size_bytes as f64 * f64::from(m.threads.max(1));
    let consistent =
        bytes <= BYTES_RUN_FACTOR * at_throughput + one_each && at_throughput <= BYTES_RUN_FACTOR * bytes + one_each;
    if consistent {
        return Ok(());
    }
    Err(wire_error(
        field!("bytes_processed"),
        format!(
            "{} bytes in {} s do not fit a throughput of {} MB/s (that would be {at_throughput:.0} bytes; \
             at most {BYTES_RUN_FACTOR} times more or less is accepted)",
            f.bytes_processed, f.elapsed_seconds, f.throughput_mb_s
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::measurement::tests::measurement;

    fn check_edited(edit: fn(&mut Figures)) -> Result<(), WireError> {
        let mut m = measurement();
        edit(m.figures.as_mut().unwrap());
        let f = m.figures.clone().unwrap();
        check(&m, &f)
    }

    #[test]
    fn a_real_run_is_plausible() {
        check_edited(|_| {}).unwrap();
        // The run that ended before its first whole sample: one operation, no more.
        check_edited(|f| {
            f.operations = 1;
            f.bytes_processed = 1024;
            f.throughput_mb_s = 0.0;
            f.sample_throughputs_mb_s = vec![0.0; 3];
        })
        .unwrap();
    }

    /// What was found stored: 1e300 MB/s, latencies and byte counts of 2^64 − 1.
    #[test]
    fn figures_no_machine_produces_are_refused_naming_the_figure() {
        type Edit = fn(&mut Figures);
        let cases: Vec<(Edit, &str)> = vec![
            (|f| f.throughput_mb_s = 1e300, "throughput_mb_s"),
            (|f| f.throughput_mb_s = 1.1e6, "throughput_mb_s"),
            (|f| f.sample_throughputs_mb_s[2] = 2e6, "sample_throughputs_mb_s[2]"),
            (|f| f.ops_per_s = 1e11, "ops_per_s"),
            (|f| f.latency_ns.p50 = u64::MAX, "latency_ns.p50"),
            (|f| f.latency_ns.p99 = u64::MAX, "latency_ns.p99"),
            (|f| f.latency_ns.max = i64::MAX as u64, "latency_ns.max"),
            // A p99 of 20 s in a run of a tenth of a second.
            (|f| f.latency_ns.p99 = 20_000_000_000, "latency_ns.p99"),
            (|f| f.bytes_processed = u64::MAX, "bytes_processed"),
            (|f| f.operations = u64::MAX, "operations"),
            (|f| f.batch_ops = 1 << 63, "batch_ops"),
            (|f| f.objects = Some(u64::MAX), "objects"),
            (
                |f| f.memory.as_mut().unwrap().peak_rss_bytes = u64::MAX,
                "memory.peak_rss_bytes",
            ),
            // A thousand times the bytes the throughput moves in the run, and a thousandth.
            (|f| f.bytes_processed *= 1000, "bytes_processed"),
            (|f| f.bytes_processed /= 1000, "bytes_processed"),
        ];
        for (edit, field) in cases {
            let err = check_edited(edit).unwrap_err();
            assert_eq!(err.field, format!("measurement.measurement_json.{field}"), "{err}");
        }
    }

    #[test]
    fn the_throughput_bound_grows_with_the_threads() {
        let mut m = measurement();
        m.threads = 64;
        let f = m.figures.as_mut().unwrap();
        f.throughput_mb_s = 10e6;
        f.sample_throughputs_mb_s = vec![10e6; 3];
        f.ops_per_s = 1e4;
        f.bytes_processed = (10e6 * 1e6 * f.elapsed_seconds) as u64;
        let f = f.clone();
        check(&m, &f).unwrap();
    }
}
