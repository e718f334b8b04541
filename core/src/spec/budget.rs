//! What a point may cost: how far the engine may extend its measurement to
//! reach the minimum samples, and how long its worker may live before it is
//! killed as hung. One rule for the agent (which kills the worker) and the
//! coordinator (which re-queues a job whose agent went quiet past it).
//!
//! Both scale with the point's expected cost: bytes per operation times the
//! operations the point needs, at a conservative software rate for the
//! algorithm (the slowest path the point may take), times a slowdown on
//! emulated hosts. They are ceilings, not estimates: a point stops as soon as
//! it has its samples.

use std::time::Duration;

use super::JobSpec;
use crate::algorithm::{Cipher, Mode};
use crate::spec::KeyMode;

/// Samples a point aims for at least; when one operation outlasts a sample,
/// timed operations instead.
pub const MIN_SAMPLES: u32 = 10;
/// Below this many samples a point is flagged `low_samples`.
pub const LOW_SAMPLES: u32 = 5;
/// The object-storage scenario completes at least this many times
/// `concurrency` objects after the first `concurrency` (which are discarded).
pub const MIN_OBJECTS_PER_SLOT: u64 = 10;
/// Decrypt points open ciphertexts from a pool made before measuring; it holds
/// at least this many messages (more when they are small, see the agent's kernel).
pub const DECRYPT_POOL_MIN_MESSAGES: u64 = 4;

/// How much slower than native the budget assumes an emulated host (qemu-user
/// TCG) runs: above the slowdowns measured on the project's build VM, so it
/// leaves room (docs/performance.md, "Emulated hosts and the time budget").
pub const EMULATION_SLOWDOWN: f64 = 10.0;

/// Fixed time every worker may take besides its own work: process start,
/// known-answer tests and report, generously (60 s, as before budgets scaled).
const BASE_SECONDS: f64 = 60.0;
/// The longest the engine extends a measurement beyond the requested seconds.
const MAX_EXTENSION_SECONDS: f64 = 1800.0;
/// Fixed per-operation cost assumed on top of the bytes: key setup in the
/// per-op and HKDF modes, nonce and tag handling (native, generous).
const KEY_SETUP_SECONDS: f64 = 20e-6;

/// Where the worker runs: on the CPU itself, or under an emulator. The agent
/// knows it from its worker prefix (`qemu-…`), the coordinator from the
/// host's `emulated` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    Native,
    Emulated,
}

impl Execution {
    /// The factor the budget multiplies native costs by.
    pub fn slowdown(self) -> f64 {
        match self {
            Execution::Native => 1.0,
            Execution::Emulated => EMULATION_SLOWDOWN,
        }
    }
}

/// What a point may cost (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// The longest the measured phase may run while it still lacks samples.
    pub measure_cap: Duration,
    /// When the worker is killed as hung.
    pub time_limit: Duration,
}

/// Bytes per second a slow core reaches on the software path of a release
/// build: about a third of what this project's 2-core build VM measures with
/// forced software backends (docs/performance.md, "Emulated hosts and the
/// time budget"), so a slower CPU still fits.
fn conservative_rate(cipher: Cipher, mode: Mode) -> f64 {
    const MB: f64 = 1e6;
    match (cipher, mode) {
        (Cipher::TripleDes, _) => 2.0 * MB,
        (Cipher::Des, _) => 6.0 * MB,
        (Cipher::ChaCha20, Mode::Stream) => 60.0 * MB,
        (Cipher::ChaCha20, _) => 40.0 * MB,
        (_, Mode::Ccm) => 8.0 * MB,
        (_, Mode::Ocb | Mode::CbcHmacSha256) => 10.0 * MB,
        _ => 15.0 * MB,
    }
}

impl JobSpec {
    /// Seconds one operation may take at the conservative rate, on `execution`.
    pub fn conservative_op_seconds(&self, execution: Execution) -> f64 {
        let alg = self.point.algorithm;
        // Padding and tags add at most a few blocks.
        let bytes = (self.point.size_bytes + 64) as f64;
        let setup = match self.point.key_mode {
            KeyMode::Static => 0.0,
            KeyMode::PerOp | KeyMode::HkdfPerUser => KEY_SETUP_SECONDS,
        };
        (bytes / conservative_rate(alg.cipher, alg.mode) + setup) * execution.slowdown()
    }

    /// Operations the point needs before it may stop: [`MIN_SAMPLES`] timed
    /// ones plus two per thread (a thread's first operation may begin before
    /// the last thread began, its last end after the first thread stopped;
    /// neither is a sample), or in the object-storage scenario the discarded
    /// first `concurrency` and [`MIN_OBJECTS_PER_SLOT`] times it.
    pub fn operations_needed(&self) -> u64 {
        match self.point.concurrency {
            Some(n) => u64::from(n) * (1 + MIN_OBJECTS_PER_SLOT),
            None => u64::from(MIN_SAMPLES) + 2 * u64::from(self.point.threads),
        }
    }

    /// The point's budget on `execution`.
    pub fn budget(&self, execution: Execution) -> Budget {
        let op = self.conservative_op_seconds(execution);
        // Threads may share one core: assume the operations run one after another.
        let needed = self.operations_needed() as f64 * op;
        let extension = (2.0 * self.seconds + 1.0).max(needed).min(MAX_EXTENSION_SECONDS);
        let measure_cap = self.seconds + extension;
        // Before measuring: every thread fills its decrypt pool and warms up
        // (at least two operations to size its batches).
        let pool = match self.point.direction {
            super::Direction::Encrypt => 0.0,
            super::Direction::Decrypt => DECRYPT_POOL_MIN_MESSAGES as f64,
        };
        let setup = (pool + 2.0) * f64::from(self.point.threads) * op + self.warmup_seconds();
        let base = BASE_SECONDS * execution.slowdown().sqrt();
        Budget {
            measure_cap: Duration::from_secs_f64(measure_cap),
            time_limit: Duration::from_secs_f64(base + setup + 1.25 * measure_cap),
        }
    }

    /// How long the point may take before its worker is killed: the budget's
    /// time limit. The agent and the coordinator both use this one rule; the
    /// agent alone may override it from its environment.
    pub fn time_limit(&self, execution: Execution) -> Duration {
        self.budget(execution)
            .time_limit
            .max(self.provider_allowance(execution))
    }

    /// The least time a point of the `openssl` provider needs: `openssl
    /// speed`'s runs of a second each (three at least) and their start-up,
    /// under emulation slower, and 1.0.2's fixed sizes of 3 s each in one run.
    /// Zero for the providers the agent runs in its own engine.
    fn provider_allowance(&self, execution: Execution) -> Duration {
        if self.point.provider != crate::provider::Provider::Openssl {
            return Duration::ZERO;
        }
        let runs = self.seconds.ceil().max(3.0);
        Duration::from_secs_f64((runs * 1.5 + 20.0) * execution.slowdown().sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Path;
    use crate::point::Point;
    use crate::spec::{Direction, Nonce};

    fn point(alg: &str, size_bytes: u64) -> Point {
        Point {
            algorithm: alg.parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            nonce: Nonce::Counter,
            provider: crate::provider::Provider::RustCrypto,
        }
    }

    /// [`point`], measured for a second.
    fn spec(alg: &str, size_bytes: u64) -> JobSpec {
        point(alg, size_bytes).spec(1.0)
    }

    #[test]
    fn a_small_point_keeps_the_old_floor_and_a_modest_extension() {
        let b = spec("aes-256-gcm", 16).budget(Execution::Native);
        assert_eq!(
            b.measure_cap,
            Duration::from_secs(4),
            "requested 1 s, extended by 2 × 1 s + 1 s"
        );
        assert!(
            b.time_limit >= Duration::from_secs(60) && b.time_limit < Duration::from_secs(70),
            "{b:?}"
        );
    }

    #[test]
    fn budgets_grow_with_size_threads_slow_algorithms_and_emulation() {
        let limit = |s: &JobSpec, e| s.time_limit(e);
        let base = spec("aes-256-gcm", 1 << 20);
        let native = limit(&base, Execution::Native);
        for bigger in [
            spec("aes-256-gcm", 10 << 20),
            Point {
                threads: 8,
                ..base.point
            }
            .spec(base.seconds),
            spec("des-ede3-cbc", 1 << 20),
            Point {
                direction: Direction::Decrypt,
                ..base.point
            }
            .spec(base.seconds),
        ] {
            assert!(limit(&bigger, Execution::Native) > native, "{}", bigger.label());
        }
        assert!(limit(&base, Execution::Emulated) > native);
    }

    #[test]
    fn ten_mib_3des_decrypt_under_emulation_has_room_for_its_ten_operations() {
        let s = Point {
            direction: Direction::Decrypt,
            ..point("des-ede3-cbc", 10 << 20)
        }
        .spec(1.0);
        let b = s.budget(Execution::Emulated);
        // One operation's time as measured under qemu-x86_64 -cpu Nehalem
        // (docs/performance.md, "Emulated hosts and the time budget").
        let measured_op = 4.4;
        let needed = f64::from(MIN_SAMPLES + 2) * measured_op;
        assert!(b.measure_cap.as_secs_f64() >= 2.0 * needed, "{b:?}");
        // Pool of four, two warm-up operations, the measurement, and the fixed part.
        assert!(
            b.time_limit.as_secs_f64() >= 6.0 * measured_op + b.measure_cap.as_secs_f64(),
            "{b:?}"
        );
        // A ceiling, not a free pass: a hung worker is still killed within the hour.
        assert!(b.time_limit < Duration::from_secs(3600), "{b:?}");
    }

    #[test]
    fn the_object_scenario_budgets_for_its_discarded_and_counted_objects() {
        let s = Point {
            threads: 2,
            concurrency: Some(32),
            ..point("aes-256-gcm", 10 << 20)
        }
        .spec(3.0);
        assert_eq!(s.operations_needed(), 32 * 11);
        let b = s.budget(Execution::Native);
        assert!(
            b.measure_cap.as_secs_f64() >= 352.0 * s.conservative_op_seconds(Execution::Native),
            "{b:?}"
        );
    }

    #[test]
    fn extension_is_bounded() {
        let s = Point {
            threads: 1024,
            ..point("des-ede3-cbc", 1 << 30)
        }
        .spec(1.0);
        let b = s.budget(Execution::Emulated);
        assert_eq!(b.measure_cap, Duration::from_secs_f64(1.0 + MAX_EXTENSION_SECONDS));
    }
}
