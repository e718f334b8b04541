//! The clock the engine times with: the kernel's clock source and what one
//! read of the monotonic clock costs here. A slow source (`hpet`, `acpi_pm`,
//! or any clock under emulation) costs microseconds a read, which shortens
//! what a timed batch measures and lowers its figure: the facts that explain
//! a host whose small-payload numbers look wrong.

use std::hint::black_box;
use std::time::Instant;

use cipherfleet_core::stats::median;

use super::linux;

/// Where the kernel's current clock source is named.
const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// Reads per timed batch, and batches: a few milliseconds on a slow clock.
const READS: u32 = 1000;
const BATCHES: usize = 7;

/// The kernel's current clock source, e.g. `tsc` or `arch_sys_counter`.
pub(super) fn clocksource() -> Option<String> {
    linux::read_trimmed(CLOCKSOURCE)
}

/// Nanoseconds one `Instant::now()` costs: the median over [`BATCHES`] of a
/// batch's mean, to a tenth of a nanosecond (a preempted batch does not count).
pub(super) fn read_cost_ns() -> Option<f64> {
    let per_read: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..READS {
                black_box(Instant::now());
            }
            start.elapsed().as_nanos() as f64 / f64::from(READS)
        })
        .collect();
    median(&per_read).map(|ns| (ns * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_read_costs_something_but_not_a_millisecond() {
        let ns = read_cost_ns().unwrap();
        assert!(ns > 0.0 && ns < 1_000_000.0, "{ns} ns");
    }
}
