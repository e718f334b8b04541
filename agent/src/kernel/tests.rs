use super::*;
use cipherfleet_core::Point;
use cipherfleet_core::algorithm::ALL;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::{KeyMode, Nonce};

fn spec(alg: cipherfleet_core::algorithm::Algorithm, direction: Direction, key_mode: KeyMode, size: u64) -> JobSpec {
    JobSpec {
        point: Point {
            algorithm: alg,
            direction,
            size_bytes: size,
            threads: 1,
            concurrency: None,
            key_mode,
            path: Path::Accelerated,
            nonce: Nonce::Counter,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        },
        seconds: 1.0,
    }
}

#[test]
fn every_algorithm_runs_in_both_directions_and_every_key_mode() {
    let master = [7u8; 64];
    for &alg in ALL {
        for direction in [Direction::Encrypt, Direction::Decrypt] {
            for key_mode in [KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser] {
                for size in [11, 18, 1024] {
                    let s = spec(alg, direction, key_mode, size);
                    let mut k = build(&KernelInput {
                        spec: &s,
                        thread: 1,
                        master_key: &master,
                        harness: Harness::Engine,
                        provider: cipherfleet_core::provider::Provider::RustCrypto,
                    })
                    .unwrap_or_else(|e| panic!("{}: {e}", s.label()));
                    // More operations than pool slots or rotating keys, so every slot is reused.
                    k.run_batch(0, pool_slots(size) as u64 + 20)
                        .unwrap_or_else(|e| panic!("{}: {e}", s.label()));
                    assert!(k.key_setup_ns(4) > 0.0);
                }
            }
        }
    }
}

#[test]
fn nonces_differ_across_threads_and_operations() {
    let mut seen = std::collections::HashSet::new();
    for thread in 0..4 {
        for op in (0..1000).chain([1 << 32, pool_counter(0), pool_counter(1023)]) {
            let mut n = [0u8; 12];
            fill_nonce(&mut n, thread, op);
            assert!(seen.insert(n), "nonce repeated for thread {thread} op {op}");
        }
    }
}

#[test]
fn random_plaintext_is_not_all_zero() {
    assert!(random_bytes(64).iter().any(|&b| b != 0));
}

#[test]
fn ccm_runs_past_the_13_byte_nonce_limit_in_both_directions() {
    let master = [9u8; 64];
    for direction in [Direction::Encrypt, Direction::Decrypt] {
        let s = spec("aes-128-ccm".parse().unwrap(), direction, KeyMode::Static, 70_000);
        let mut k = build(&KernelInput {
            spec: &s,
            thread: 0,
            master_key: &master,
            harness: Harness::Engine,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        })
        .unwrap_or_else(|e| panic!("{}: {e}", s.label()));
        k.run_batch(0, 3).unwrap_or_else(|e| panic!("{}: {e}", s.label()));
    }
}

#[test]
fn random_nonces_run_every_aead_encryption_the_spec_accepts() {
    let master = [5u8; 64];
    for &alg in ALL {
        let mut s = spec(alg, Direction::Encrypt, KeyMode::Static, 18);
        s.point.nonce = Nonce::Random;
        let aead = alg.is_authenticated() && alg.mode != cipherfleet_core::algorithm::Mode::CbcHmacSha256;
        assert_eq!(s.validate().is_ok(), aead, "{alg}");
        if aead {
            let mut k = build(&KernelInput {
                spec: &s,
                thread: 0,
                master_key: &master,
                harness: Harness::Engine,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            })
            .unwrap();
            k.run_batch(0, 8).unwrap_or_else(|e| panic!("{alg}: {e}"));
        }
    }
}
