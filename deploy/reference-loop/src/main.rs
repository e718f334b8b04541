//! The least a service can do to encrypt: one cipher instance, a counter nonce
//! (or an IV encrypted from the counter for CBC), input buffer to output buffer,
//! in a tight loop — the same crate calls the agent's kernels make, without the
//! engine around them.
//!
//! Usage: `cipherfleet-reference-loop ALGORITHM SIZE_BYTES SECONDS`
//! Prints one JSON line: the median and mean MB/s (10^6 plaintext bytes per
//! second) of the samples, measured after a warm-up of a quarter of SECONDS
//! (50 ms to 1 s), as the engine does; and `cpu_mb_s`, the bytes over the CPU
//! time the loop got (`/proc/thread-self/schedstat`), which a shared machine's
//! steal time does not lower, to compare with the engine's bytes / CPU seconds.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aead::inout::InOutBuf;
use aead::{AeadInOut, KeyInit, Nonce};
use cipher::block_padding::Pkcs7;
use cipher::{Block, BlockCipherEncrypt, BlockModeEncrypt, InnerIvInit, StreamCipher};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// About this long between two clock reads, as the engine's batches.
const BATCH_TARGET: Duration = Duration::from_micros(10);
/// Samples aimed for, as the engine.
const TARGET_SAMPLES: f64 = 30.0;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [alg, size, seconds] = args.as_slice() else {
        eprintln!("usage: cipherfleet-reference-loop ALGORITHM SIZE_BYTES SECONDS");
        std::process::exit(2);
    };
    let size: usize = size.parse().expect("SIZE_BYTES is a whole number");
    let seconds: f64 = seconds.parse().expect("SECONDS is a number");
    let Measured {
        samples,
        bytes,
        cpu_seconds,
    } = match alg.as_str() {
        "aes-128-gcm" => aead_loop::<aes_gcm::Aes128Gcm>(size, seconds),
        "aes-256-gcm" => aead_loop::<aes_gcm::Aes256Gcm>(size, seconds),
        "chacha20-poly1305" => aead_loop::<chacha20poly1305::ChaCha20Poly1305>(size, seconds),
        // A 12-byte nonce, as the agent's CCM (TLS 1.3's choice; messages up to 16 MiB).
        "aes-128-ccm" => aead_loop::<ccm::Ccm<aes::Aes128, aead::consts::U16, aead::consts::U12>>(size, seconds),
        "aes-128-ocb" => aead_loop::<ocb3::Ocb3<aes::Aes128>>(size, seconds),
        "aes-128-cbc" => cbc_loop::<aes::Aes128>(size, seconds),
        "aes-256-cbc" => cbc_loop::<aes::Aes256>(size, seconds),
        "des-cbc" => cbc_loop::<des::Des>(size, seconds),
        "des-ede3-cbc" => cbc_loop::<des::TdesEde3>(size, seconds),
        "aes-128-ctr" => ctr_loop::<aes::Aes128>(size, seconds),
        "aes-256-ctr" => ctr_loop::<aes::Aes256>(size, seconds),
        "aes-128-cbc-hmac-sha256" => cbc_hmac_loop::<aes::Aes128>(size, seconds),
        other => {
            eprintln!("unknown algorithm '{other}'");
            std::process::exit(2);
        }
    };
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let cpu = bytes as f64 / cpu_seconds / 1e6;
    println!(
        "{{\"algorithm\":\"{alg}\",\"size_bytes\":{size},\"median_mb_s\":{median:.3},\"mean_mb_s\":{mean:.3},\"cpu_mb_s\":{cpu:.3},\"samples\":{}}}",
        samples.len()
    );
}

fn random(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    getrandom::fill(&mut v).expect("OS random source");
    v
}

/// Counter nonce: 4 zero bytes (thread 0), then the 8-byte counter, as the kernels write it.
fn counter_block(block: &mut [u8], counter: u64) {
    block.fill(0);
    if block.len() >= 12 {
        block[4..12].copy_from_slice(&counter.to_be_bytes());
    } else {
        block.copy_from_slice(&counter.to_be_bytes());
    }
}

/// What [`measure`] found.
struct Measured {
    /// Each sample's MB/s.
    samples: Vec<f64>,
    /// Bytes over the measured phase, and the CPU seconds this thread got for them.
    bytes: u64,
    cpu_seconds: f64,
}

/// Nanoseconds this thread has run on a CPU (first field of its schedstat).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs `op(counter)` in batches of about [`BATCH_TARGET`]: warm-up, then
/// samples of `seconds / 30`.
fn measure(size: usize, seconds: f64, mut op: impl FnMut(u64)) -> Measured {
    let mut counter = 0u64;
    let mut batch = 1u64;
    let warmup = Duration::from_secs_f64((seconds / 4.0).clamp(0.05, 1.0));
    let start = Instant::now();
    while start.elapsed() < warmup {
        let t0 = Instant::now();
        for _ in 0..batch {
            op(counter);
            counter += 1;
        }
        if t0.elapsed() < BATCH_TARGET && batch < 1 << 20 {
            batch *= 2;
        }
    }
    let sample = Duration::from_secs_f64((seconds / TARGET_SAMPLES).clamp(0.005, 1.0));
    let measured = Duration::from_secs_f64(seconds);
    let mut samples = Vec::new();
    let cpu0 = cpu_ns();
    let start = Instant::now();
    let mut sample_start = start;
    let mut ops = 0u64;
    let mut total = 0u64;
    loop {
        for _ in 0..batch {
            op(counter);
            counter += 1;
        }
        ops += batch;
        let now = Instant::now();
        if now - sample_start >= sample {
            samples.push((ops * size as u64) as f64 / (now - sample_start).as_secs_f64() / 1e6);
            total += ops;
            ops = 0;
            sample_start = now;
            if now - start >= measured {
                return Measured {
                    samples,
                    bytes: total * size as u64,
                    cpu_seconds: (cpu_ns() - cpu0) as f64 / 1e9,
                };
            }
        }
    }
}

fn aead_loop<A: AeadInOut + KeyInit>(size: usize, seconds: f64) -> Measured {
    let cipher = A::new_from_slice(&random(A::key_size())).expect("key length");
    let plaintext = random(size);
    let mut output = vec![0u8; size];
    measure(size, seconds, |counter| {
        let mut nonce = Nonce::<A>::default();
        counter_block(&mut nonce, counter);
        let buf = InOutBuf::new(&plaintext, &mut output).expect("equal lengths");
        black_box(cipher.encrypt_inout_detached(&nonce, &[], buf).expect("encrypts"));
        black_box(&mut output);
    })
}

/// CBC with PKCS#7 and an IV that is the encryption of the counter block (SP 800-38A, Appendix C).
fn cbc_loop<C: KeyInit + BlockCipherEncrypt>(size: usize, seconds: f64) -> Measured {
    let cipher = C::new_from_slice(&random(C::key_size())).expect("key length");
    let plaintext = random(size);
    let mut output = vec![0u8; (size / C::block_size() + 1) * C::block_size()];
    measure(size, seconds, |counter| {
        let mut iv = Block::<C>::default();
        counter_block(&mut iv, counter);
        cipher.encrypt_block(&mut iv);
        cbc::Encryptor::<&C>::inner_iv_init(&cipher, &iv)
            .encrypt_padded_b2b::<Pkcs7>(&plaintext, &mut output)
            .expect("room for padding");
        black_box(&mut output);
    })
}

fn ctr_loop<C: KeyInit + BlockCipherEncrypt<BlockSize = cipher::consts::U16>>(size: usize, seconds: f64) -> Measured {
    let cipher = C::new_from_slice(&random(C::key_size())).expect("key length");
    let plaintext = random(size);
    let mut output = vec![0u8; size];
    measure(size, seconds, |counter| {
        let mut iv = Block::<C>::default();
        counter_block(&mut iv, counter);
        let core = ctr::CtrCore::<&C, ctr::flavors::Ctr128BE>::inner_iv_init(&cipher, &iv);
        ctr::Ctr128BE::from_core(core).apply_keystream_b2b(&plaintext, &mut output);
        black_box(&mut output);
    })
}

/// AES-CBC (IV from the counter) then HMAC-SHA256 over IV || ciphertext.
fn cbc_hmac_loop<C: KeyInit + BlockCipherEncrypt>(size: usize, seconds: f64) -> Measured {
    let cipher = C::new_from_slice(&random(C::key_size())).expect("key length");
    let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&random(32)).expect("any key length");
    let plaintext = random(size);
    let mut output = vec![0u8; (size / C::block_size() + 1) * C::block_size()];
    measure(size, seconds, |counter| {
        let mut iv = Block::<C>::default();
        counter_block(&mut iv, counter);
        cipher.encrypt_block(&mut iv);
        let ciphertext = cbc::Encryptor::<&C>::inner_iv_init(&cipher, &iv)
            .encrypt_padded_b2b::<Pkcs7>(&plaintext, &mut output)
            .expect("room for padding");
        let mut mac = mac.clone();
        mac.update(&iv);
        mac.update(ciphertext);
        black_box(mac.finalize());
        black_box(&mut output);
    })
}
