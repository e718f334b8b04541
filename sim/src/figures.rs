//! Synthetic but plausible measurements: a point's figures on a simulated
//! host, from a cycles-per-byte model of each primitive on each backend, the
//! template's clock and cores, the host's own speed, and a few per cent of
//! noise between samples. What ran (`path_used`, `backends`) follows the
//! host's backends exactly as a real worker's would, so the software path of
//! a no-AES host, the partial GCM of a host without AVX and the masked hosts
//! show in the report and the findings as they would from a real fleet.

use cipherfleet_core::algorithm::{self, Algorithm, Cipher, Mode};
use cipherfleet_core::measurement::{Figures, Latency, LatencyMethod, Measurement, Memory, SampleKind, WorkerReport};
use cipherfleet_core::path::{Backends, Flavour, Path, is_hardware};
use cipherfleet_core::spec::{Direction, JobSpec, KeyMode, LOW_SAMPLES};
use cipherfleet_core::stats;

use crate::rng::Rng;
use crate::template::Profile;

/// Relative spread of one sample around the point's rate.
const SAMPLE_NOISE: f64 = 0.02;
/// Length the engine aims for per sample window.
const SAMPLE_SECONDS: f64 = 0.01;

/// The measurement a real agent on `profile` would report for `spec`.
pub fn measure(profile: &Profile, spec: &JobSpec, rng: &mut Rng) -> Measurement {
    let (backends, flavour) = match spec.point.path {
        Path::Accelerated => (profile.backends.clone(), Flavour::Accelerated),
        // The software sibling: every crate forced to its portable backend.
        Path::Software => (Backends::soft(), Flavour::Software),
    };
    let report = WorkerReport {
        path_used: backends.path_for(spec.point.algorithm, spec.point.key_mode),
        figures: figures(profile, spec, &backends, rng),
        backends,
        build_flavour: flavour,
        selftest_passed: algorithm::ALL.len() as u32,
        harness: Default::default(),
    };
    Measurement::ok(spec, report, Some(profile.facts.clone()))
}

/// Cycles per byte of AES on `backend`: `parallel` for ECB, CTR, GCM, OCB and
/// CBC decryption, serial for CBC encryption and CBC-MAC.
fn aes_cpb(backend: &str, parallel: bool) -> f64 {
    match (backend, parallel) {
        ("vaes", true) => 0.35,
        ("aes-ni", true) => 0.7,
        ("aes-ni" | "vaes", false) => 2.7,
        ("armv8-aes", true) => 1.0,
        ("armv8-aes", false) => 2.5,
        (_, true) => 12.0,
        (_, false) => 15.0,
    }
}

fn ghash_cpb(backend: &str) -> f64 {
    if is_hardware(backend) { 0.35 } else { 4.0 }
}

fn chacha_cpb(backend: &str) -> f64 {
    match backend {
        "avx2" => 1.1,
        "sse2" => 2.3,
        "neon" => 2.8,
        _ => 5.5,
    }
}

fn poly1305_cpb(backend: Option<&str>) -> f64 {
    if backend.is_some_and(is_hardware) { 0.6 } else { 1.6 }
}

fn sha256_cpb(backend: &str) -> f64 {
    if is_hardware(backend) { 2.0 } else { 12.0 }
}

/// AES-192 and AES-256 run 12 and 14 rounds to AES-128's 10.
fn rounds(cipher: Cipher) -> f64 {
    match cipher {
        Cipher::Aes192 => 1.2,
        Cipher::Aes256 => 1.4,
        _ => 1.0,
    }
}

/// Cycles per byte of the whole construction.
fn cycles_per_byte(a: Algorithm, direction: Direction, b: &Backends) -> f64 {
    let r = rounds(a.cipher);
    let decrypt = direction == Direction::Decrypt;
    let aes = |parallel: bool| aes_cpb(&b.aes, parallel) * r;
    match (a.cipher, a.mode) {
        (Cipher::Des, _) => 35.0,
        (Cipher::TripleDes, _) => 100.0,
        (Cipher::ChaCha20, Mode::Stream) => chacha_cpb(&b.chacha20),
        (Cipher::ChaCha20, _) => chacha_cpb(&b.chacha20) + poly1305_cpb(b.poly1305.as_deref()),
        (_, Mode::Ecb | Mode::Ctr) => aes(true),
        (_, Mode::Cbc) => aes(decrypt),
        (_, Mode::Gcm) => aes(true) + ghash_cpb(&b.ghash),
        (_, Mode::Ccm) => aes(true) + aes(false),
        (_, Mode::Ocb) => aes(true) * 1.1,
        (_, Mode::CbcHmacSha256) => aes(decrypt) + sha256_cpb(&b.sha256),
        (_, _) => aes(true),
    }
}

/// Nanoseconds of one key setup (`key_setup_ns`).
fn key_setup_ns(a: Algorithm, b: &Backends, ghz: f64) -> f64 {
    let base = match a.cipher {
        Cipher::ChaCha20 => 5.0,
        Cipher::Des => 120.0,
        Cipher::TripleDes => 360.0,
        _ if is_hardware(&b.aes) => 20.0 * rounds(a.cipher),
        _ => 250.0 * rounds(a.cipher),
    };
    // CBC-HMAC keys HMAC too: two SHA-256 blocks.
    let hmac = if a.mode == Mode::CbcHmacSha256 {
        128.0 * sha256_cpb(&b.sha256) / ghz
    } else {
        0.0
    };
    base + hmac
}

fn figures(profile: &Profile, spec: &JobSpec, b: &Backends, rng: &mut Rng) -> Figures {
    let t = profile.template;
    let ghz = t.ghz * profile.speed;
    let a = spec.point.algorithm;
    let key_setup = key_setup_ns(a, b, ghz);
    let mut per_op_ns = 60.0 + spec.point.size_bytes as f64 * cycles_per_byte(a, spec.point.direction, b) / ghz;
    if a.is_authenticated() {
        per_op_ns += 40.0;
    }
    match spec.point.key_mode {
        KeyMode::Static => {}
        KeyMode::PerOp => per_op_ns += key_setup,
        // HKDF-SHA256: about six compression blocks, then the key setup.
        KeyMode::HkdfPerUser => per_op_ns += 200.0 + 6.0 * 64.0 * sha256_cpb(&b.sha256) / ghz + key_setup,
    }
    let workers = spec.point.threads.min(t.cores).max(1);
    let scaling = f64::from(workers) * 0.97f64.powf(f64::from(workers).log2());
    let rate = spec.point.size_bytes as f64 / per_op_ns * 1e9 * scaling;

    let n = ((spec.seconds / SAMPLE_SECONDS).round() as u32).clamp(LOW_SAMPLES, 200);
    let sample_seconds = spec.seconds / f64::from(n);
    let samples: Vec<f64> = (0..n)
        .map(|_| rate * (1.0 + SAMPLE_NOISE * rng.normal()).max(0.5))
        .collect();
    let throughput = stats::median(&samples).unwrap_or(rate);
    let elapsed = spec.seconds * rng.range(1.0, 1.03);
    let operations = ((throughput / spec.point.size_bytes as f64) * spec.seconds).max(1.0) as u64;
    let bytes = operations * spec.point.size_bytes;

    // Operations too short for the clock are timed in batches, as the engine does.
    let batch_ops = if spec.point.concurrency.is_none() && per_op_ns < 1000.0 {
        (1000.0 / per_op_ns).ceil() as u64
    } else {
        1
    };
    let latency_method = match (spec.point.concurrency, batch_ops) {
        (Some(_), _) => LatencyMethod::PerObject,
        (None, 1) => LatencyMethod::PerOp,
        (None, _) => LatencyMethod::BatchMean,
    };
    // An object waits for the ones ahead of it on the pool.
    let latency = match spec.point.concurrency {
        Some(c) => per_op_ns * f64::from(c) / f64::from(workers),
        None => per_op_ns,
    } * rng.range(0.98, 1.02);
    let ns = |factor: f64| (latency * factor).round().max(1.0) as u64;
    let threads = f64::from(spec.point.threads);
    let (user, sys) = (elapsed * threads * 0.97, elapsed * threads * 0.01);
    Figures {
        throughput_mb_s: throughput / 1e6,
        ops_per_s: throughput / spec.point.size_bytes as f64,
        latency_ns: Latency {
            p50: ns(1.0),
            p90: ns(1.04),
            p99: ns(1.15),
            p999: ns(1.6),
            max: ns(8.0),
        },
        latency_method,
        batch_ops,
        latency_samples: (operations / batch_ops).clamp(1, 100_000),
        throughput_batch_ops: batch_ops.max((1e6 / per_op_ns).ceil() as u64),
        cv: stats::cv(&samples),
        samples: n,
        sample_kind: SampleKind::Window,
        low_samples: n < LOW_SAMPLES,
        sample_seconds,
        warmup_seconds: spec.warmup_seconds(),
        elapsed_seconds: elapsed,
        operations,
        bytes_processed: bytes,
        all_running_bytes: (bytes as f64 * 0.97) as u64,
        all_running_seconds: f64::from(n) * sample_seconds,
        objects: spec.point.concurrency.map(|c| operations.saturating_sub(u64::from(c))),
        arrival_rate_per_s: None,
        cpu_user_seconds: user,
        cpu_sys_seconds: sys,
        cpu_utilization: (user + sys) / (elapsed * threads),
        key_setup_ns: key_setup,
        sample_throughputs_mb_s: samples.iter().map(|s| s / 1e6).collect(),
        memory: Some(Memory {
            cipher_state_bytes: if a.uses_aes() { 496 } else { 224 },
            peak_rss_bytes: (4 << 20) + 2 * spec.point.size_bytes * u64::from(spec.point.threads),
            heap_bytes_per_op: Some(0.0),
            allocs_per_op: Some(0.0),
        }),
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::Point;
    use cipherfleet_core::path::PathUsed;
    use cipherfleet_core::spec::{Matrix, Nonce, Suite};
    use cipherfleet_core::wire;
    use cipherfleet_proto::v1;

    use super::*;
    use crate::template::TEMPLATES;

    use crate::template::tests::profile_of as profile;

    fn spec(algorithm: &str, size: u64, path: Path) -> JobSpec {
        JobSpec {
            point: Point {
                algorithm: algorithm.parse().unwrap(),
                direction: Direction::Encrypt,
                size_bytes: size,
                threads: 1,
                concurrency: None,
                key_mode: KeyMode::Static,
                path,
                nonce: Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 0.2,
        }
    }

    fn mb_s(key: &str, spec: &JobSpec) -> f64 {
        measure(&profile(key), spec, &mut Rng::seeded(1))
            .figures
            .unwrap()
            .throughput_mb_s
    }

    #[test]
    fn every_point_of_the_standard_and_object_suites_is_a_measurement_the_coordinator_stores() {
        let mut rng = Rng::seeded(9);
        for t in TEMPLATES {
            let p = profile(t.key);
            let points: Vec<JobSpec> = [Suite::Standard, Suite::ObjectStorage, Suite::FieldLevel]
                .iter()
                .flat_map(|s| s.matrices(t.cores))
                .flat_map(|m: Matrix| m.expand())
                .collect();
            assert!(points.len() > 50);
            for spec in &points {
                let m = measure(&p, spec, &mut rng);
                let wire_m = v1::Measurement::try_from(&m).unwrap_or_else(|e| panic!("{}: {e}", spec.label()));
                wire::validate_measurement(&wire_m).unwrap_or_else(|e| panic!("{} {}: {e}", t.key, spec.label()));
                wire::check_measurement_matches(spec, &wire_m).unwrap();
                let f = m.figures.unwrap();
                assert!(f.throughput_mb_s > 0.0 && f.latency_ns.p50 <= f.latency_ns.p99, "{f:?}");
                assert_eq!(
                    m.path_used,
                    Some(
                        m.backends
                            .as_ref()
                            .unwrap()
                            .path_for(spec.point.algorithm, spec.point.key_mode)
                    )
                );
            }
        }
    }

    #[test]
    fn hosts_without_aes_instructions_measure_aes_at_software_speed() {
        let gcm = spec("aes-256-gcm", 16384, Path::Accelerated);
        let fast = mb_s("xeon-gold-6130", &gcm);
        let slow = mb_s("xeon-x5570", &gcm);
        assert!((1000.0..10_000.0).contains(&fast), "{fast}");
        assert!(fast > 8.0 * slow, "AES-NI {fast} MB/s vs software {slow} MB/s");
        // The software path of an AES-NI host runs at the no-AES host's level (the clocks differ a little).
        let soft = mb_s("xeon-gold-6130", &spec("aes-256-gcm", 16384, Path::Software));
        assert!((soft / slow - 1.0).abs() < 0.3, "{soft} vs {slow}");
        let arm = mb_s("neoverse-n1", &gcm);
        let pi = mb_s("cortex-a72", &gcm);
        assert!(arm > 5.0 * pi, "ARMv8 AES {arm} vs none {pi}");
        let m = measure(&profile("cortex-a72"), &gcm, &mut Rng::seeded(1));
        assert_eq!(m.path_used, Some(PathUsed::Software));
        let m = measure(
            &profile("xeon-gold-6130"),
            &spec("aes-256-gcm", 16, Path::Software),
            &mut Rng::seeded(1),
        );
        assert_eq!(
            (m.path_used, m.build_flavour),
            (Some(PathUsed::Software), Some(Flavour::Software))
        );
    }

    #[test]
    fn small_payloads_pay_the_per_operation_cost_and_more_threads_scale() {
        let small = mb_s("epyc-7543", &spec("aes-128-gcm", 16, Path::Accelerated));
        let large = mb_s("epyc-7543", &spec("aes-128-gcm", 16384, Path::Accelerated));
        assert!(large > 10.0 * small, "{small} vs {large}");
        let mut four = spec("chacha20-poly1305", 16384, Path::Accelerated);
        four.point.threads = 4;
        let one = mb_s("epyc-7543", &spec("chacha20-poly1305", 16384, Path::Accelerated));
        let ratio = mb_s("epyc-7543", &four) / one;
        assert!((3.0..4.2).contains(&ratio), "{ratio}");
    }

    #[test]
    fn samples_scatter_a_few_per_cent_around_the_reported_median() {
        let p = profile("neoverse-v1");
        let s = spec("chacha20-poly1305", 1024, Path::Accelerated);
        let a = measure(&p, &s, &mut Rng::seeded(1)).figures.unwrap();
        let b = measure(&p, &s, &mut Rng::seeded(2)).figures.unwrap();
        assert_ne!(a.throughput_mb_s, b.throughput_mb_s, "noise");
        assert!((a.throughput_mb_s / b.throughput_mb_s - 1.0).abs() < 0.05);
        let cv = a.cv.unwrap();
        assert!((0.005..0.05).contains(&cv), "{cv}");
        assert_eq!(
            stats::median(&a.sample_throughputs_mb_s).map(|m| (m * 1e6).round()),
            Some((a.throughput_mb_s * 1e6).round())
        );
    }
}
