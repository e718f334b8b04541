//! One point on the host's OpenSSL, in the worker: `openssl speed` run a few
//! times, each run a sample, and the path OpenSSL took inferred from the CPU,
//! its build and its capability vector.
//!
//! A run lasts `-seconds 1` (the shortest it takes); a point runs
//! `max(3, ⌈seconds⌉)` of them while its deadline allows, so the median and
//! the spread mean what they mean for the engine's samples. OpenSSL 1.0.2
//! measures its fixed sizes for 3 s each and is run once. What `openssl speed`
//! cannot report is left out honestly: its latency is each run's mean time per
//! operation (`batch-mean`, one value per run), it has no key-setup figure and
//! no memory figures, and it has no warm-up of its own.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cipherfleet_core::algorithm::Mode;
use cipherfleet_core::measurement::{Figures, Implementation, Latency, LatencyMethod, SampleKind};
use cipherfleet_core::path::{Backends, Path as PathKind};
use cipherfleet_core::provider::facts::OpensslBuild;
use cipherfleet_core::provider::openssl as rule;
use cipherfleet_core::spec::{Direction, JobSpec, KeyMode, LOW_SAMPLES};
use cipherfleet_core::stats;

use super::speed::{FIXED_SIZES_1_0_2, SizeResult, SpeedArgs, parse};

/// What one point on OpenSSL produced.
pub struct Measured {
    pub figures: Figures,
    pub backends: Backends,
    pub implementation: Implementation,
}

/// Why `spec` cannot run on `build`, if it cannot.
pub fn unsupported(spec: &JobSpec, build: &OpensslBuild) -> Option<String> {
    let p = &spec.point;
    if p.concurrency.is_some() {
        return Some("openssl speed has no object-storage scenario; leave out --concurrency".into());
    }
    if p.key_mode != KeyMode::Static {
        return Some("openssl speed keys once (its -aead re-keys with the same key); use --key-mode static".into());
    }
    if !p.nonce.is_counter() {
        return Some("openssl speed draws no nonces; leave out --nonce random".into());
    }
    if p.direction == Direction::Decrypt && !build.speed_bytes_seconds {
        return Some(format!("{} has no `speed -decrypt`; measure encryption", build.version));
    }
    if !build.speed_bytes_seconds && !FIXED_SIZES_1_0_2.contains(&p.size_bytes) {
        return Some(format!(
            "{} has no `speed -bytes`: it measures only 16, 64, 256, 1024 and 8192 bytes; use one of these sizes",
            build.version
        ));
    }
    None
}

/// The environment variable and value the run sets: the software mask for the
/// software path, nothing for the accelerated one (an override already in the
/// agent's environment is inherited, and recorded).
fn mask_for(path: PathKind) -> Option<(&'static str, &'static str)> {
    match path {
        PathKind::Software => rule::software_env(std::env::consts::ARCH),
        PathKind::Accelerated => None,
    }
}

/// Measures `spec` on `binary`, described by `build`, finishing before `deadline`.
pub fn measure(
    spec: &JobSpec,
    binary: &Path,
    build: &OpensslBuild,
    deadline: Option<Instant>,
) -> Result<Measured, String> {
    if let Some(why) = unsupported(spec, build) {
        return Err(why);
    }
    let p = &spec.point;
    let args = SpeedArgs {
        cipher: p.algorithm.name().to_string(),
        aead: build.speed_aead && p.algorithm.is_authenticated() && p.algorithm.mode != Mode::CbcHmacSha256,
        decrypt: p.direction == Direction::Decrypt,
        bytes: build.speed_bytes_seconds.then_some(p.size_bytes),
        seconds: build.speed_bytes_seconds.then_some(1),
        multi: (p.threads > 1).then_some(p.threads),
    };
    let mask = mask_for(p.path);
    let runs_wanted = if build.speed_bytes_seconds {
        (spec.seconds.ceil() as u32).max(3)
    } else {
        1
    };
    // A run takes its second plus start-up; an emulated one far more.
    let run_estimate = Duration::from_secs_f64(
        f64::from(args.seconds.unwrap_or(15)) * crate::worker::execution().slowdown().sqrt() + 0.5,
    );
    let cpu0 = children_cpu();
    let started = Instant::now();
    let mut runs: Vec<SizeResult> = Vec::new();
    for i in 0..runs_wanted {
        if i > 0 && deadline.is_some_and(|d| Instant::now() + run_estimate > d) {
            break;
        }
        let results = run_once(binary, &args, mask)?;
        let wanted = results
            .into_iter()
            .find(|r| r.size == p.size_bytes)
            .ok_or_else(|| format!("openssl speed reported no {}-byte result", p.size_bytes))?;
        runs.push(wanted);
    }
    let wall = started.elapsed().as_secs_f64();
    let (user, sys) = {
        let cpu1 = children_cpu();
        (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1)
    };
    let cpu = apply_masks(crate::probe::cpu_flags(), build, mask);
    let backends = rule::backends(std::env::consts::ARCH, &cpu, build.no_asm);
    let mut command = String::new();
    if let Some((name, value)) = mask {
        command.push_str(&format!("{name}={value} "));
    }
    command.push_str(&format!("{} {}", build.binary, args.to_args().join(" ")));
    let note = match (build.no_asm, build.speed_bytes_seconds) {
        (true, _) => Some("a no-asm build: C code only, whatever the CPU".to_string()),
        (false, false) => Some(format!("{} measures its fixed sizes for 3 s each, once", build.version)),
        (false, true) => None,
    };
    Ok(Measured {
        figures: figures(spec, &runs, wall, user, sys),
        backends,
        implementation: Implementation {
            name: build.version.clone(),
            library: build.libcrypto.clone(),
            binary: Some(build.binary.clone()),
            command: Some(command),
            note,
        },
    })
}

/// The CPU as OpenSSL sees it: the agent's environment override, then the run's mask.
fn apply_masks(
    cpu: cipherfleet_core::provider::CpuFlags,
    build: &OpensslBuild,
    mask: Option<(&str, &str)>,
) -> cipherfleet_core::provider::CpuFlags {
    let mut cpu = cpu;
    if let Some((name, value)) = build.capability_env.as_deref().and_then(|e| e.split_once('=')) {
        cpu = rule::apply_mask(cpu, name, value);
    }
    if let Some((name, value)) = mask {
        cpu = rule::apply_mask(cpu, name, value);
    }
    cpu
}

fn run_once(binary: &Path, args: &SpeedArgs, mask: Option<(&str, &str)>) -> Result<Vec<SizeResult>, String> {
    let mut command = super::command(binary);
    command
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((name, value)) = mask {
        command.env(name, value);
    }
    let out = command
        .output()
        .map_err(|e| format!("could not start {}: {e}", binary.display()))?;
    // +DT/+R come on stderr, +H/+F on stdout: read them as one text.
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let parsed = parse(&text);
    if !out.status.success() {
        let said = parsed.err().unwrap_or_default();
        return Err(format!(
            "`openssl {}` failed ({}): {said}",
            args.to_args().join(" "),
            out.status
        ));
    }
    parsed
}

/// User and system CPU seconds of this process's waited-for children.
fn children_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// The point's figures from its runs: each run one sample.
fn figures(spec: &JobSpec, runs: &[SizeResult], wall: f64, user: f64, sys: f64) -> Figures {
    let size = spec.point.size_bytes as f64;
    let threads = f64::from(spec.point.threads);
    let samples: Vec<f64> = runs.iter().map(|r| r.bytes_per_second / 1e6).collect();
    let median = stats::median(&samples).unwrap_or(0.0);
    // One process's operations and seconds where openssl printed them; else from the rate.
    let seconds = |r: &SizeResult| r.seconds.unwrap_or(1.0);
    let operations = |r: &SizeResult| {
        r.operations
            .map(|o| o * u64::from(spec.point.threads))
            .unwrap_or_else(|| (r.bytes_per_second * seconds(r) / size) as u64)
    };
    // Mean nanoseconds per operation of each run, per process.
    let mut means: Vec<u64> = runs
        .iter()
        .map(|r| (threads * size / r.bytes_per_second.max(1e-9) * 1e9) as u64)
        .collect();
    means.sort_unstable();
    let rank = |q: f64| means[((q * means.len() as f64).ceil() as usize).clamp(1, means.len()) - 1];
    let total_ops: u64 = runs.iter().map(operations).sum();
    let elapsed: f64 = runs.iter().map(seconds).sum();
    Figures {
        throughput_mb_s: median,
        ops_per_s: median * 1e6 / size,
        latency_ns: Latency {
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            p999: rank(0.999),
            max: *means.last().unwrap_or(&0),
        },
        latency_method: LatencyMethod::BatchMean,
        batch_ops: runs.first().map(operations).unwrap_or(1) / u64::from(spec.point.threads).max(1),
        latency_samples: runs.len() as u64,
        throughput_batch_ops: runs.first().map(operations).unwrap_or(1),
        cv: stats::cv(&samples),
        samples: samples.len() as u32,
        sample_kind: SampleKind::Window,
        low_samples: (samples.len() as u32) < LOW_SAMPLES,
        sample_seconds: runs.first().map(seconds).unwrap_or(1.0),
        warmup_seconds: 0.0,
        elapsed_seconds: wall,
        operations: total_ops,
        bytes_processed: total_ops * spec.point.size_bytes,
        all_running_bytes: total_ops * spec.point.size_bytes,
        all_running_seconds: elapsed,
        objects: None,
        arrival_rate_per_s: None,
        cpu_user_seconds: user,
        cpu_sys_seconds: sys,
        cpu_utilization: if wall > 0.0 {
            (user + sys) / (wall * threads)
        } else {
            0.0
        },
        key_setup_ns: 0.0,
        sample_throughputs_mb_s: samples,
        memory: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::Point;
    use cipherfleet_core::spec::Nonce;

    fn spec(size: u64, threads: u32) -> JobSpec {
        Point {
            algorithm: "aes-256-gcm".parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes: size,
            threads,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: PathKind::Accelerated,
            nonce: Nonce::Counter,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        }
        .spec(3.0)
    }

    #[test]
    fn each_run_is_a_sample_and_its_mean_a_latency_value() {
        let runs: Vec<SizeResult> = [100e6, 110e6, 90e6]
            .iter()
            .map(|b| SizeResult {
                size: 16,
                bytes_per_second: *b,
                operations: Some((*b / 16.0) as u64),
                seconds: Some(1.0),
            })
            .collect();
        let f = figures(&spec(16, 1), &runs, 3.3, 3.0, 0.1);
        assert_eq!(f.throughput_mb_s, 100.0);
        assert_eq!(f.samples, 3);
        assert!(f.low_samples, "three runs are fewer than {LOW_SAMPLES}");
        assert_eq!(f.latency_ns.p50, 160, "16 B at 100 MB/s");
        assert_eq!(f.latency_ns.max, 177);
        assert_eq!(f.latency_method, LatencyMethod::BatchMean);
        assert_eq!(f.operations, (100e6 / 16.0 + 110e6 / 16.0 + 90e6 / 16.0) as u64);
        assert!(f.cv.unwrap() > 0.09 && f.cv.unwrap() < 0.11);
        // Two processes: each operation of one process takes twice the aggregate's time.
        let f2 = figures(&spec(16, 2), &runs, 3.3, 6.0, 0.1);
        assert_eq!(f2.latency_ns.p50, 320);
    }

    #[test]
    fn what_openssl_speed_cannot_measure_is_refused() {
        let new = OpensslBuild {
            speed_bytes_seconds: true,
            version: "OpenSSL 3.0.19".into(),
            ..OpensslBuild::default()
        };
        let old = OpensslBuild {
            version: "OpenSSL 1.0.2u".into(),
            ..OpensslBuild::default()
        };
        assert_eq!(unsupported(&spec(16384, 1), &new), None);
        let e = unsupported(&spec(16384, 1), &old).unwrap();
        assert!(e.contains("16, 64, 256, 1024 and 8192"), "{e}");
        assert_eq!(unsupported(&spec(8192, 1), &old), None);
        let mut per_op = spec(16, 1);
        per_op.point.key_mode = KeyMode::PerOp;
        assert!(unsupported(&per_op, &new).unwrap().contains("--key-mode static"));
        let mut objects = spec(16, 1);
        objects.point.concurrency = Some(4);
        assert!(unsupported(&objects, &new).unwrap().contains("--concurrency"));
    }
}
