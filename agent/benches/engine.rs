//! Benchmark of the benchmark engine itself (`cargo bench -p cipherfleet-agent`,
//! or `deploy/bench-engine.sh`, which also builds the software sibling).
//!
//! 1. Engine overhead: in one run, alternating, the engine's AES-256-GCM and
//!    ChaCha20-Poly1305 encrypt throughput against a minimal loop over the same
//!    crate calls, at 16 B and 16 KiB, one thread. Targets: engine ≥ 97 % of the
//!    minimal loop at 16 KiB and ≥ 90 % at 16 B.
//! 2. Repeatability: the CV of five repeated engine measurements.
//! 3. Accelerated/software ratio of AES-256-GCM at 16 KiB, through the real
//!    binaries (`target/release/cipherfleet-agent{,-soft}`), alternating.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use aead::inout::InOutBuf;
use aead::{AeadInOut, KeyInit, Nonce};
use cipherfleet_agent::engine;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::{Direction, JobSpec, KeyMode};
use cipherfleet_core::stats;

const ROUNDS: usize = 10;
const ROUND_SECONDS: f64 = 0.5;
const SECONDS: f64 = 1.0;

fn spec(alg: &str, size: u64) -> JobSpec {
    JobSpec {
        algorithm: alg.parse().unwrap(),
        direction: Direction::Encrypt,
        size_bytes: size,
        threads: 1,
        concurrency: None,
        key_mode: KeyMode::Static,
        path: Path::Accelerated,
        seconds: SECONDS,
    }
}

/// The least a caller can do: one instance, counter nonces, input → output, MB/s.
fn minimal_loop<A: AeadInOut + KeyInit>(size: usize, seconds: f64) -> f64 {
    let mut key = vec![0u8; A::key_size()];
    getrandom::fill(&mut key).unwrap();
    let cipher = A::new_from_slice(&key).unwrap();
    let mut plaintext = vec![0u8; size];
    getrandom::fill(&mut plaintext).unwrap();
    let mut output = vec![0u8; size];
    let mut counter = 0u64;
    let mut run = |until: Duration| -> (u64, Duration) {
        let start = Instant::now();
        let mut ops = 0u64;
        loop {
            for _ in 0..64 {
                let mut nonce = Nonce::<A>::default();
                nonce[4..12].copy_from_slice(&counter.to_be_bytes());
                counter += 1;
                let tag = cipher
                    .encrypt_inout_detached(&nonce, &[], InOutBuf::new(&plaintext, &mut output).unwrap())
                    .unwrap();
                black_box(tag);
                black_box(&mut output);
            }
            ops += 64;
            let elapsed = start.elapsed();
            if elapsed >= until {
                return (ops, elapsed);
            }
        }
    };
    run(Duration::from_secs_f64((seconds / 4.0).clamp(0.05, 1.0))); // warm-up, as the engine does
    let (ops, elapsed) = run(Duration::from_secs_f64(seconds));
    (ops * size as u64) as f64 / elapsed.as_secs_f64() / 1e6
}

/// (reported median MB/s, mean MB/s = bytes processed / measured wall time).
fn engine_mb_s(alg: &str, size: u64, seconds: f64) -> (f64, f64) {
    let f = engine::measure(&JobSpec {
        seconds,
        ..spec(alg, size)
    })
    .expect("engine measures");
    (f.throughput_mb_s, f.bytes_processed as f64 / f.elapsed_seconds / 1e6)
}

fn overhead() {
    println!(
        "== engine vs minimal loop (encrypt, 1 thread, {ROUNDS} rounds of {ROUND_SECONDS} s, order alternating ABBA)"
    );
    println!(
        "   ratio = median over rounds of engine/minimal within the round; 'mean' uses the engine's bytes/wall time,"
    );
    println!(
        "   'reported' the median-of-samples figure the engine prints (less hurt by interference, so it reads higher)"
    );
    println!(
        "{:<18} {:>6} {:>12} {:>12} {:>12} {:>10} {:>10} {:>7}",
        "algorithm", "size", "engine MB/s", "(mean)", "minimal", "ratio mean", "reported", "target"
    );
    for (alg, size, target) in [
        ("aes-256-gcm", 16u64, 0.90),
        ("aes-256-gcm", 16384, 0.97),
        ("chacha20-poly1305", 16, 0.90),
        ("chacha20-poly1305", 16384, 0.97),
    ] {
        let minimal = || match alg {
            "aes-256-gcm" => minimal_loop::<aes_gcm::Aes256Gcm>(size as usize, ROUND_SECONDS),
            _ => minimal_loop::<chacha20poly1305::ChaCha20Poly1305>(size as usize, ROUND_SECONDS),
        };
        let (mut reported, mut mean, mut min, mut r_mean, mut r_reported) = (vec![], vec![], vec![], vec![], vec![]);
        for round in 0..ROUNDS {
            let ((e_rep, e_mean), m) = if round % 2 == 0 {
                let e = engine_mb_s(alg, size, ROUND_SECONDS);
                (e, minimal())
            } else {
                let m = minimal();
                (engine_mb_s(alg, size, ROUND_SECONDS), m)
            };
            reported.push(e_rep);
            mean.push(e_mean);
            min.push(m);
            r_mean.push(e_mean / m);
            r_reported.push(e_rep / m);
        }
        let med = |v: &[f64]| stats::median(v).unwrap();
        let ratio = med(&r_mean);
        let verdict = if ratio >= target { "ok" } else { "BELOW" };
        println!(
            "{alg:<18} {size:>6} {:>12.2} {:>12.2} {:>12.2} {:>9.1}% {:>9.1}% {:>6.0}% {verdict}",
            med(&reported),
            med(&mean),
            med(&min),
            ratio * 100.0,
            med(&r_reported) * 100.0,
            target * 100.0
        );
    }
}

fn repeatability() {
    println!("\n== repeatability: five engine measurements of aes-256-gcm 16 KiB encrypt");
    let runs: Vec<f64> = (0..5).map(|_| engine_mb_s("aes-256-gcm", 16384, SECONDS).0).collect();
    let shown: Vec<String> = runs.iter().map(|r| format!("{r:.1}")).collect();
    println!(
        "MB/s: {}  cv = {:.2}%",
        shown.join(", "),
        stats::cv(&runs).unwrap() * 100.0
    );
}

fn software_ratio() {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let (agent, soft) = (dir.join("cipherfleet-agent"), dir.join("cipherfleet-agent-soft"));
    println!("\n== accelerated / software, aes-256-gcm 16 KiB encrypt, real binaries, 3 alternating rounds");
    if !agent.is_file() || !soft.is_file() {
        println!(
            "skipped: {} and {} are needed (deploy/bench-engine.sh builds them)",
            agent.display(),
            soft.display()
        );
        return;
    }
    let measure = |path: &str| -> f64 {
        let args = [
            "bench",
            "-a",
            "aes-256-gcm",
            "--size",
            "16k",
            "--seconds",
            "1",
            "--format",
            "json",
            "--path",
            path,
        ];
        let out = Command::new(&agent).args(args).output().expect("agent runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["path_used"], path, "the {path} path ran");
        v["throughput_mb_s"].as_f64().unwrap()
    };
    let (mut a, mut s) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        a.push(measure("accelerated"));
        s.push(measure("software"));
    }
    let (a, s) = (stats::median(&a).unwrap(), stats::median(&s).unwrap());
    println!("accelerated {a:.1} MB/s, software {s:.1} MB/s, ratio {:.1}x", a / s);
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used here.
    println!("backends: {:?}", cipherfleet_agent::backend::backends());
    overhead();
    repeatability();
    software_ratio();
}
