//! AEAD constructions through the `aead` traits: AES-GCM, AES-CCM, AES-OCB3,
//! ChaCha20-Poly1305 and XChaCha20-Poly1305. Empty associated data.

use std::hint::black_box;

use aead::inout::InOutBuf;
use aead::{AeadInOut, KeyInit, Nonce, Tag};

pub use aead::consts;

use super::{KernelError, KernelInput, Keys, Operation, Pool};
use cipherfleet_core::spec::Direction;

/// AES-CCM as the engine runs it: 16-byte tag, 12-byte nonce (SP 800-38C; as
/// TLS 1.3's AES-CCM), which leaves a 3-byte length field: messages up to
/// 16 MiB − 1 ([`cipherfleet_core::algorithm::CCM_MAX_MESSAGE`]). The 13-byte
/// nonce of RFC 3610 would stop at 65,535 bytes.
pub type Ccm<C> = ccm::Ccm<C, consts::U16, consts::U12>;

/// What opens a pool ciphertext besides the key.
struct Sealed<A: AeadInOut> {
    nonce: Nonce<A>,
    tag: Tag<A>,
}

pub struct AeadKernel<A: AeadInOut> {
    keys: Keys<A>,
    direction: Direction,
    thread: u32,
    random_nonces: bool,
    plaintext: Vec<u8>,
    output: Vec<u8>,
    pool: Pool<Sealed<A>>,
}

fn make<A: KeyInit>(key: &[u8]) -> A {
    A::new_from_slice(key).expect("key length matches the algorithm")
}

impl<A: AeadInOut + KeyInit> AeadKernel<A> {
    pub fn new(input: &KernelInput<'_>) -> Result<Self, KernelError> {
        let spec = input.spec;
        let size = spec.point.size_bytes as usize;
        let mut k = AeadKernel {
            keys: Keys::new(spec.point.key_mode, input.master_key, A::key_size(), make::<A>),
            direction: spec.point.direction,
            thread: input.thread,
            random_nonces: !spec.point.nonce.is_counter(),
            plaintext: super::random_bytes(size),
            output: vec![0; size],
            pool: Pool::empty(),
        };
        if super::decrypts(input) {
            k.pool = Pool::new(spec.point.size_bytes, size);
            for slot in 0..k.pool.slots() {
                let nonce = k.nonce(super::pool_counter(slot));
                let tag = k.seal(slot as u64, &nonce)?;
                k.pool.push(&k.output, Sealed { nonce, tag });
            }
        }
        Ok(k)
    }

    #[inline(always)]
    fn nonce(&self, counter: u64) -> Nonce<A> {
        let mut nonce = Nonce::<A>::default();
        super::fill_nonce(&mut nonce, self.thread, counter);
        nonce
    }

    /// A nonce from the OS random source (`--nonce random`).
    #[inline(always)]
    fn random_nonce() -> Result<Nonce<A>, KernelError> {
        let mut nonce = Nonce::<A>::default();
        getrandom::fill(&mut nonce).map_err(|_| KernelError::Encrypt("the OS random source failed"))?;
        Ok(nonce)
    }

    /// Encrypts the plaintext into `output` under the key for `key_index`.
    #[inline(always)]
    fn seal(&mut self, key_index: u64, nonce: &Nonce<A>) -> Result<Tag<A>, KernelError> {
        let (plaintext, output) = (&self.plaintext, &mut self.output);
        self.keys
            .with(key_index, |c| {
                let buf = InOutBuf::new(plaintext, output).expect("buffers have equal length");
                c.encrypt_inout_detached(nonce, &[], buf)
            })
            .map_err(|_| KernelError::Encrypt("message too long for the AEAD"))
    }
}

impl<A: AeadInOut + KeyInit + Send> Operation for AeadKernel<A>
where
    Tag<A>: Send,
    Nonce<A>: Send,
{
    #[inline(always)]
    fn run(&mut self, op: u64) -> Result<(), KernelError> {
        match self.direction {
            Direction::Encrypt => {
                let nonce = if self.random_nonces {
                    Self::random_nonce()?
                } else {
                    self.nonce(op)
                };
                let tag = self.seal(op, &nonce)?;
                black_box(tag);
            }
            Direction::Decrypt => {
                let slot = self.pool.slot(op);
                let (ciphertext, sealed) = self.pool.get(slot);
                let output = &mut self.output;
                self.keys
                    .with(slot as u64, |c| {
                        let buf = InOutBuf::new(ciphertext, output).expect("buffers have equal length");
                        c.decrypt_inout_detached(&sealed.nonce, &[], buf, &sealed.tag)
                    })
                    .map_err(|_| KernelError::Verify("AEAD tag mismatch"))?;
            }
        }
        black_box(&mut self.output);
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
    use cipherfleet_core::spec::{JobSpec, KeyMode};

    fn kernel(direction: Direction) -> AeadKernel<aes_gcm::Aes256Gcm> {
        let spec = JobSpec {
            point: Point {
                algorithm: "aes-256-gcm".parse().unwrap(),
                direction,
                size_bytes: 100,
                threads: 1,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: Path::Accelerated,
                nonce: cipherfleet_core::spec::Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 1.0,
        };
        let master: [u8; 64] = core::array::from_fn(|i| i as u8);
        AeadKernel::new(&KernelInput {
            spec: &spec,
            thread: 3,
            master_key: &master,
            harness: Harness::Engine,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        })
        .unwrap()
    }

    #[test]
    fn encrypt_matches_the_crate_called_directly_with_the_counter_nonce() {
        let mut k = kernel(Direction::Encrypt);
        k.run(7).unwrap();
        let master: [u8; 64] = core::array::from_fn(|i| i as u8);
        let direct = aes_gcm::Aes256Gcm::new_from_slice(&master[..32]).unwrap();
        let mut nonce = Nonce::<aes_gcm::Aes256Gcm>::default();
        nonce[..4].copy_from_slice(&3u32.to_be_bytes());
        nonce[4..].copy_from_slice(&7u64.to_be_bytes());
        let mut expected = k.plaintext.clone();
        direct
            .encrypt_inout_detached(&nonce, &[], expected.as_mut_slice().into())
            .unwrap();
        assert_eq!(k.output, expected);
        assert_ne!(k.output, k.plaintext);
    }

    #[test]
    fn decrypt_fails_loudly_on_a_tampered_ciphertext() {
        let mut k = kernel(Direction::Decrypt);
        k.run(0).unwrap();
        assert_eq!(k.output, k.plaintext, "decrypt recovers the plaintext");
        k.pool.ciphertext_mut(1)[0] ^= 1;
        assert_eq!(k.run(1), Err(KernelError::Verify("AEAD tag mismatch")));
    }
}
