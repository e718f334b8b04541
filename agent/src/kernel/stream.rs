//! The raw ChaCha20 stream cipher (RFC 8439: 96-bit nonce, 32-bit block counter).
//! Unauthenticated: decryption is the same keystream XOR over a pool ciphertext.

use std::hint::black_box;

use chacha20::ChaCha20;
use cipher::{KeyIvInit, StreamCipher};

use super::{KernelError, KernelInput, Keys, Operation, Pool};
use cipherfleet_core::spec::Direction;

/// ChaCha20's "key setup" is copying the key into the state: the instance is the key.
type Key = chacha20::Key;

fn make(key: &[u8]) -> Key {
    Key::try_from(key).expect("32-byte key")
}

pub struct ChaChaKernel {
    keys: Keys<Key>,
    direction: Direction,
    thread: u32,
    plaintext: Vec<u8>,
    output: Vec<u8>,
    /// Decrypt pool: ciphertexts with their nonce counters.
    pool: Pool<u64>,
}

impl ChaChaKernel {
    pub fn new(input: &KernelInput<'_>) -> Result<Self, KernelError> {
        let spec = input.spec;
        let size = spec.point.size_bytes as usize;
        let mut k = ChaChaKernel {
            keys: Keys::new(spec.point.key_mode, input.master_key, 32, make),
            direction: spec.point.direction,
            thread: input.thread,
            plaintext: super::random_bytes(size),
            output: vec![0; size],
            pool: Pool::empty(),
        };
        if super::decrypts(input) {
            k.pool = Pool::new(spec.point.size_bytes, size);
            for slot in 0..k.pool.slots() {
                let counter = super::pool_counter(slot);
                let (plaintext, output, thread) = (&k.plaintext, &mut k.output, k.thread);
                k.keys
                    .with(slot as u64, |key| apply(key, thread, counter, plaintext, output));
                k.pool.push(&k.output, counter);
            }
        }
        Ok(k)
    }
}

#[inline(always)]
fn apply(key: &Key, thread: u32, counter: u64, input: &[u8], output: &mut [u8]) {
    let mut nonce = chacha20::Nonce::default();
    super::fill_nonce(&mut nonce, thread, counter);
    ChaCha20::new(key, &nonce).apply_keystream_b2b(input, output);
}

impl Operation for ChaChaKernel {
    #[inline(always)]
    fn run(&mut self, op: u64) -> Result<(), KernelError> {
        let thread = self.thread;
        match self.direction {
            Direction::Encrypt => {
                let (plaintext, output) = (&self.plaintext, &mut self.output);
                self.keys.with(op, |key| apply(key, thread, op, plaintext, output));
            }
            Direction::Decrypt => {
                let slot = self.pool.slot(op);
                let (ciphertext, counter) = self.pool.get(slot);
                let output = &mut self.output;
                self.keys
                    .with(slot as u64, |key| apply(key, thread, *counter, ciphertext, output));
            }
        }
        black_box(&mut self.output);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        self.keys.time_setup(iterations)
    }

    /// The keyed state is the `ChaCha20` instance each operation builds from
    /// key and nonce (key, nonce, counter and any backend buffer).
    fn cipher_state_bytes(&self) -> u64 {
        let nonce = chacha20::Nonce::default();
        let (_instance, heap) = crate::heap::owned_by(|| ChaCha20::new(&Key::default(), &nonce));
        std::mem::size_of::<ChaCha20>() as u64 + heap
    }
}
