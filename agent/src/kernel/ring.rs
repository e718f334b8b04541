//! ring's AEADs (the `ring` provider): AES-128-GCM, AES-256-GCM and
//! ChaCha20-Poly1305 through `LessSafeKey`, under the engine's rules.
//!
//! ring seals and opens in place; its API has no separate output buffer. So
//! encryption seals its buffer over and over (it starts as random plaintext
//! and stays random, being ciphertext), and decryption copies each pool
//! ciphertext into the buffer before opening it: a copy rustls pays too,
//! opening the record it read.
//!
//! Keys follow the key mode as [`super::Keys`] does, with ring's own HKDF
//! (the same salt and master key, so the same per-user keys).

use std::hint::black_box;

use ring::aead::{self, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use ring::hkdf;

use super::keys::{HKDF_SALT, ROTATING_KEYS, user_info};
use super::{KernelError, KernelInput, Operation, Pool};
use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::spec::{Direction, KeyMode};

/// ring's algorithm for `algorithm`, where ring has it.
pub fn algorithm(algorithm: Algorithm) -> Option<&'static aead::Algorithm> {
    match (algorithm.cipher, algorithm.mode) {
        (Cipher::Aes128, Mode::Gcm) => Some(&aead::AES_128_GCM),
        (Cipher::Aes256, Mode::Gcm) => Some(&aead::AES_256_GCM),
        (Cipher::ChaCha20, Mode::Poly1305) => Some(&aead::CHACHA20_POLY1305),
        _ => None,
    }
}

/// A key of `algorithm` from `bytes` (its exact length).
fn key(algorithm: &'static aead::Algorithm, bytes: &[u8]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(algorithm, bytes).expect("key length matches the algorithm"))
}

/// HKDF output of `len` bytes, as ring's `Okm::fill` wants its length.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// Supplies the key for each operation, as the key mode says.
struct RingKeys {
    algorithm: &'static aead::Algorithm,
    mode: KeyMode,
    static_key: LessSafeKey,
    rotating: Vec<Vec<u8>>,
    prk: hkdf::Prk,
    derived: Vec<u8>,
}

impl RingKeys {
    fn new(algorithm: &'static aead::Algorithm, mode: KeyMode, master: &[u8; 64]) -> Self {
        let len = algorithm.key_len();
        RingKeys {
            algorithm,
            mode,
            static_key: key(algorithm, &master[..len]),
            rotating: (0..ROTATING_KEYS).map(|_| super::random_bytes(len)).collect(),
            prk: hkdf::Salt::new(hkdf::HKDF_SHA256, HKDF_SALT).extract(&master[..]),
            derived: vec![0; len],
        }
    }

    fn derive(prk: &hkdf::Prk, index: u64, out: &mut [u8]) {
        let info = user_info(index);
        let info = [&info[..]];
        prk.expand(&info, Len(out.len()))
            .and_then(|okm| okm.fill(out))
            .expect("key length is far below HKDF's limit");
    }

    #[inline(always)]
    fn with<R>(&mut self, index: u64, f: impl FnOnce(&LessSafeKey) -> R) -> R {
        match self.mode {
            KeyMode::Static => f(&self.static_key),
            KeyMode::PerOp => f(&key(
                self.algorithm,
                black_box(&self.rotating[index as usize % ROTATING_KEYS]),
            )),
            KeyMode::HkdfPerUser => {
                Self::derive(&self.prk, index, &mut self.derived);
                f(&key(self.algorithm, &self.derived))
            }
        }
    }

    /// Mean nanoseconds per key setup as the key mode pays it (see [`super::Keys::time_setup`]).
    fn time_setup(&self, iterations: u32) -> f64 {
        let iterations = iterations.max(1);
        let mut derived = [0u8; 32];
        let derived = &mut derived[..self.derived.len()];
        let start = std::time::Instant::now();
        for i in 0..u64::from(iterations) {
            let k = match self.mode {
                KeyMode::HkdfPerUser => {
                    Self::derive(&self.prk, i, derived);
                    key(self.algorithm, black_box(derived))
                }
                KeyMode::Static | KeyMode::PerOp => {
                    key(self.algorithm, black_box(&self.rotating[i as usize % ROTATING_KEYS]))
                }
            };
            black_box(k);
        }
        start.elapsed().as_nanos() as f64 / f64::from(iterations)
    }

    fn state_bytes(&self) -> u64 {
        let (_key, heap) = crate::heap::owned_by(|| key(self.algorithm, &self.rotating[0]));
        std::mem::size_of::<LessSafeKey>() as u64 + heap
    }
}

/// What opens a pool ciphertext besides the key.
struct Sealed {
    nonce: [u8; aead::NONCE_LEN],
    tag: Tag,
}

/// One thread's ring AEAD.
pub struct RingAead {
    keys: RingKeys,
    direction: Direction,
    thread: u32,
    random_nonces: bool,
    /// Sealed in place (encryption), or the ciphertext being opened (decryption).
    buffer: Vec<u8>,
    pool: Pool<Sealed>,
}

impl RingAead {
    pub fn new(input: &KernelInput<'_>, algorithm: &'static aead::Algorithm) -> Result<Self, KernelError> {
        let spec = input.spec;
        let size = spec.point.size_bytes as usize;
        let mut k = RingAead {
            keys: RingKeys::new(algorithm, spec.point.key_mode, input.master_key),
            direction: spec.point.direction,
            thread: input.thread,
            random_nonces: !spec.point.nonce.is_counter(),
            buffer: super::random_bytes(size),
            pool: Pool::empty(),
        };
        if super::decrypts(input) {
            let plaintext = k.buffer.clone();
            k.pool = Pool::new(spec.point.size_bytes, size);
            for slot in 0..k.pool.slots() {
                let nonce = Self::counter_nonce(k.thread, super::pool_counter(slot));
                k.buffer.copy_from_slice(&plaintext);
                let tag = k.seal(slot as u64, nonce)?;
                k.pool.push(&k.buffer, Sealed { nonce, tag });
            }
        }
        Ok(k)
    }

    #[inline(always)]
    fn counter_nonce(thread: u32, counter: u64) -> [u8; aead::NONCE_LEN] {
        let mut nonce = [0u8; aead::NONCE_LEN];
        super::fill_nonce(&mut nonce, thread, counter);
        nonce
    }

    #[inline(always)]
    fn seal(&mut self, key_index: u64, nonce: [u8; aead::NONCE_LEN]) -> Result<Tag, KernelError> {
        let buffer = &mut self.buffer;
        self.keys
            .with(key_index, |k| {
                k.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), buffer)
            })
            .map_err(|_| KernelError::Encrypt("message too long for the AEAD"))
    }
}

impl Operation for RingAead {
    #[inline(always)]
    fn run(&mut self, op: u64) -> Result<(), KernelError> {
        match self.direction {
            Direction::Encrypt => {
                let nonce = if self.random_nonces {
                    let mut n = [0u8; aead::NONCE_LEN];
                    getrandom::fill(&mut n).map_err(|_| KernelError::Encrypt("the OS random source failed"))?;
                    n
                } else {
                    Self::counter_nonce(self.thread, op)
                };
                let tag = self.seal(op, nonce)?;
                let _ = black_box(tag);
            }
            Direction::Decrypt => {
                let slot = self.pool.slot(op);
                let (ciphertext, sealed) = self.pool.get(slot);
                self.buffer.copy_from_slice(ciphertext);
                let (nonce, tag, buffer) = (sealed.nonce, sealed.tag, &mut self.buffer);
                self.keys
                    .with(slot as u64, |k| {
                        k.open_in_place_separate_tag(
                            Nonce::assume_unique_for_key(nonce),
                            Aad::empty(),
                            tag,
                            buffer,
                            0..,
                        )
                        .map(|plaintext| plaintext.len())
                    })
                    .map_err(|_| KernelError::Verify("AEAD tag mismatch"))?;
            }
        }
        black_box(&mut self.buffer);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        self.keys.time_setup(iterations)
    }

    fn cipher_state_bytes(&self) -> u64 {
        self.keys.state_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::Point;
    use cipherfleet_core::measurement::Harness;
    use cipherfleet_core::path::Path;
    use cipherfleet_core::provider::Provider;
    use cipherfleet_core::spec::{JobSpec, Nonce as NonceKind};

    fn kernel(alg: &str, direction: Direction, key_mode: KeyMode) -> RingAead {
        let spec = JobSpec {
            point: Point {
                algorithm: alg.parse().unwrap(),
                direction,
                size_bytes: 100,
                threads: 1,
                concurrency: None,
                key_mode,
                path: Path::Accelerated,
                nonce: NonceKind::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 1.0,
        };
        let master: [u8; 64] = core::array::from_fn(|i| i as u8);
        let input = KernelInput {
            spec: &spec,
            thread: 3,
            master_key: &master,
            harness: Harness::Engine,
            provider: Provider::Ring,
        };
        RingAead::new(&input, algorithm(spec.point.algorithm).unwrap()).unwrap()
    }

    #[test]
    fn encrypt_seals_with_the_counter_nonce_as_rustcrypto_would() {
        use ::aead::{AeadInOut, KeyInit};
        let mut k = kernel("aes-256-gcm", Direction::Encrypt, KeyMode::Static);
        let plaintext = k.buffer.clone();
        k.run(7).unwrap();
        let master: [u8; 64] = core::array::from_fn(|i| i as u8);
        let direct = aes_gcm::Aes256Gcm::new_from_slice(&master[..32]).unwrap();
        let mut nonce = ::aead::Nonce::<aes_gcm::Aes256Gcm>::default();
        nonce[..4].copy_from_slice(&3u32.to_be_bytes());
        nonce[4..].copy_from_slice(&7u64.to_be_bytes());
        let mut expected = plaintext.clone();
        direct
            .encrypt_inout_detached(&nonce, &[], expected.as_mut_slice().into())
            .unwrap();
        assert_eq!(k.buffer, expected);
    }

    #[test]
    fn decrypt_verifies_under_every_key_mode_and_refuses_a_tampered_ciphertext() {
        for alg in ["aes-128-gcm", "chacha20-poly1305"] {
            for mode in [KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser] {
                let mut k = kernel(alg, Direction::Decrypt, mode);
                for op in 0..8 {
                    k.run(op).unwrap_or_else(|e| panic!("{alg} {mode}: {e}"));
                }
                k.pool.ciphertext_mut(1)[0] ^= 1;
                assert_eq!(k.run(1), Err(KernelError::Verify("AEAD tag mismatch")), "{alg} {mode}");
            }
        }
    }

    #[test]
    fn ring_derives_the_same_user_keys_as_the_rustcrypto_hkdf() {
        let master: [u8; 64] = core::array::from_fn(|i| i as u8);
        let keys = RingKeys::new(&aead::AES_256_GCM, KeyMode::HkdfPerUser, &master);
        let mut ours = [0u8; 32];
        RingKeys::derive(&keys.prk, 42, &mut ours);
        let theirs = ::hkdf::Hkdf::<sha2::Sha256>::new(Some(HKDF_SALT), &master);
        let mut expected = [0u8; 32];
        theirs.expand(&user_info(42), &mut expected).unwrap();
        assert_eq!(ours, expected);
    }
}
