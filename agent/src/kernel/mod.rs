//! Per-operation work for every algorithm: one file per cipher family.
//!
//! A kernel owns one thread's cipher instance(s) and buffers and performs
//! operation number `op` when asked. Rules every kernel follows (docs/measurement.md):
//! - a fresh nonce/IV per operation from `(thread, op)`, never reused under one key;
//! - encryption reads random plaintext and writes a separate output buffer
//!   (no copy in the measured loop, nothing the optimiser can drop: results
//!   pass through `black_box`);
//! - decryption cycles through a pool of ciphertexts made before measuring
//!   (about 32 KiB per thread, see [`pool`]) and verifies every tag (or
//!   padding), failing loudly when it does not verify.
//!
//! [`Batch::run_batch`] is monomorphised per kernel, so the measured loop has
//! no dynamic dispatch per operation.
//!
//! `bench --openssl-compat` swaps in the kernels of [`compat`], shaped as
//! `openssl speed` shapes its operations ([`KernelInput::harness`]); the
//! `ring` provider swaps in [`ring`]'s ([`KernelInput::provider`]).

mod aead;
pub mod af_alg;
mod block;
mod cbc_hmac;
pub mod compat;
mod keys;
pub mod pool;
pub mod ring;
mod stream;

pub use aead::Ccm;
pub use keys::Keys;
pub use pool::{Pool, pool_slots};

use cipherfleet_core::algorithm::{Cipher, Mode};
use cipherfleet_core::measurement::Harness;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, JobSpec};

/// A failure inside the measured loop: always fatal for the point.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    #[error("decryption did not verify ({0}); the implementation or the benchmark is broken")]
    Verify(&'static str),
    #[error("encryption failed: {0}")]
    Encrypt(&'static str),
    /// The provider cannot run the point (no such algorithm, or no way to reach it here).
    #[error("{0}")]
    Unsupported(String),
}

/// One operation on one payload.
pub trait Operation: Send {
    fn run(&mut self, op: u64) -> Result<(), KernelError>;
    /// Mean nanoseconds to turn key material into a ready instance the way
    /// the key mode does (key schedule, plus the HMAC key for CBC-HMAC, plus
    /// HKDF-Expand for `hkdf-per-user`), over `iterations` setups.
    fn key_setup_ns(&self, iterations: u32) -> f64;
    /// Bytes of the keyed cipher state one operation works with: `size_of`
    /// the instance plus the heap it owns.
    fn cipher_state_bytes(&self) -> u64;
}

/// `count` operations starting at `first`; what the engine times.
pub trait Batch: Send {
    fn run_batch(&mut self, first: u64, count: u64) -> Result<(), KernelError>;
    fn key_setup_ns(&self, iterations: u32) -> f64;
    fn cipher_state_bytes(&self) -> u64;
}

impl<T: Operation> Batch for T {
    fn run_batch(&mut self, first: u64, count: u64) -> Result<(), KernelError> {
        for op in first..first + count {
            self.run(op)?;
        }
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        Operation::key_setup_ns(self, iterations)
    }

    fn cipher_state_bytes(&self) -> u64 {
        Operation::cipher_state_bytes(self)
    }
}

/// Everything a kernel is built from, shared by all threads of a point.
pub struct KernelInput<'a> {
    pub spec: &'a JobSpec,
    /// Thread index, part of every nonce so threads sharing a key never collide.
    pub thread: u32,
    /// Key material for the static and derived key modes (64 bytes: enough for
    /// an encryption key plus a 32-byte MAC key).
    pub master_key: &'a [u8; 64],
    /// The shape of each operation: the engine's own, or `openssl speed`'s ([`compat`]).
    pub harness: Harness,
    /// The implementation measured: the RustCrypto crates, or ring ([`ring`]).
    pub provider: Provider,
}

/// Builds the kernel for `input.spec`, including the decrypt pool.
pub fn build(input: &KernelInput<'_>) -> Result<Box<dyn Batch>, KernelError> {
    let alg = input.spec.point.algorithm;
    match input.provider {
        Provider::RustCrypto => {}
        Provider::Ring => {
            return match ring::algorithm(alg) {
                Some(ring_alg) if input.harness == Harness::Engine => {
                    Ok(Box::new(ring::RingAead::new(input, ring_alg)?))
                }
                Some(_) => Err(KernelError::Unsupported(
                    "ring is measured with the engine's own harness only".into(),
                )),
                None => Err(KernelError::Unsupported(format!("ring has no {alg}"))),
            };
        }
        Provider::Kernel => {
            let transform =
                crate::provider::linux::bind_for(alg, input.spec.point.path).map_err(KernelError::Unsupported)?;
            return Ok(Box::new(af_alg::AfAlgKernel::new(input, transform)?));
        }
        Provider::Openssl => {
            return Err(KernelError::Unsupported(
                "the openssl provider runs `openssl speed`, not the engine's kernels".into(),
            ));
        }
    }
    if input.harness == Harness::OpensslCompat {
        return compat::build(input);
    }
    Ok(match (alg.cipher, alg.mode) {
        (Cipher::Aes128, Mode::Gcm) => Box::new(aead::AeadKernel::<aes_gcm::Aes128Gcm>::new(input)?),
        (Cipher::Aes192, Mode::Gcm) => {
            Box::new(aead::AeadKernel::<aes_gcm::AesGcm<aes::Aes192, aead::consts::U12>>::new(input)?)
        }
        (Cipher::Aes256, Mode::Gcm) => Box::new(aead::AeadKernel::<aes_gcm::Aes256Gcm>::new(input)?),
        (Cipher::Aes128, Mode::Ccm) => Box::new(aead::AeadKernel::<aead::Ccm<aes::Aes128>>::new(input)?),
        (Cipher::Aes192, Mode::Ccm) => Box::new(aead::AeadKernel::<aead::Ccm<aes::Aes192>>::new(input)?),
        (Cipher::Aes256, Mode::Ccm) => Box::new(aead::AeadKernel::<aead::Ccm<aes::Aes256>>::new(input)?),
        (Cipher::Aes128, Mode::Ocb) => Box::new(aead::AeadKernel::<ocb3::Ocb3<aes::Aes128>>::new(input)?),
        (Cipher::Aes192, Mode::Ocb) => Box::new(aead::AeadKernel::<ocb3::Ocb3<aes::Aes192>>::new(input)?),
        (Cipher::Aes256, Mode::Ocb) => Box::new(aead::AeadKernel::<ocb3::Ocb3<aes::Aes256>>::new(input)?),
        (Cipher::ChaCha20, Mode::Poly1305) => {
            Box::new(aead::AeadKernel::<chacha20poly1305::ChaCha20Poly1305>::new(input)?)
        }
        (Cipher::ChaCha20, Mode::XPoly1305) => {
            Box::new(aead::AeadKernel::<chacha20poly1305::XChaCha20Poly1305>::new(input)?)
        }
        (Cipher::ChaCha20, _) => Box::new(stream::ChaChaKernel::new(input)?),
        (Cipher::Aes128, Mode::CbcHmacSha256) => Box::new(cbc_hmac::CbcHmacKernel::<aes::Aes128>::new(input)?),
        (Cipher::Aes192, Mode::CbcHmacSha256) => Box::new(cbc_hmac::CbcHmacKernel::<aes::Aes192>::new(input)?),
        (Cipher::Aes256, Mode::CbcHmacSha256) => Box::new(cbc_hmac::CbcHmacKernel::<aes::Aes256>::new(input)?),
        (Cipher::Aes128, mode) => Box::new(block::BlockKernel::<aes::Aes128>::new(input, mode)?),
        (Cipher::Aes192, mode) => Box::new(block::BlockKernel::<aes::Aes192>::new(input, mode)?),
        (Cipher::Aes256, mode) => Box::new(block::BlockKernel::<aes::Aes256>::new(input, mode)?),
        (Cipher::Des, mode) => Box::new(block::BlockKernel::<des::Des>::new(input, mode)?),
        (Cipher::TripleDes, mode) => Box::new(block::BlockKernel::<des::TdesEde3>::new(input, mode)?),
    })
}

/// Writes the per-operation nonce: thread (4 bytes BE) then counter (8 bytes BE),
/// the rest zero. Ciphertexts for the decrypt pool use counters counting down
/// from `u64::MAX`, a range the measured loop never reaches.
pub fn fill_nonce(nonce: &mut [u8], thread: u32, counter: u64) {
    nonce.fill(0);
    nonce[..4].copy_from_slice(&thread.to_be_bytes());
    nonce[4..12].copy_from_slice(&counter.to_be_bytes());
}

/// Counter for pool slot `slot`.
pub fn pool_counter(slot: usize) -> u64 {
    u64::MAX - slot as u64
}

/// Random bytes (plaintext and keys are never all-zero).
pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    getrandom::fill(&mut v).expect("the OS random source failed");
    v
}

/// Whether the point decrypts (and so needs a pool).
fn decrypts(input: &KernelInput<'_>) -> bool {
    input.spec.point.direction == Direction::Decrypt
}

#[cfg(test)]
mod tests;
