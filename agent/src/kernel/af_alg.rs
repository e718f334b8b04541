//! The kernel crypto API through AF_ALG (the `kernel` provider): AES-CBC,
//! AES-CTR, AES-GCM and ChaCha20-Poly1305, one `sendmsg` and one `read` per
//! message, under the engine's rules.
//!
//! What differs from the crates' kernels, and why:
//! - every message crosses into the kernel and back: that is the cost a
//!   user-space caller of the kernel API pays, and part of the figure;
//! - CBC pads with PKCS#7 in user space (the kernel's `cbc(aes)` takes whole
//!   blocks), once, since the plaintext does not change; its IV is the counter
//!   block itself, unique per message (the kernel API has no way to encrypt it
//!   first without a second call, which would measure the harness);
//! - re-keying (`per-op`, `hkdf-per-user`) closes the operation socket, sets
//!   the key and accepts a new one, as the kernel refuses a new key while an
//!   operation socket is open; the per-user key is derived with the crates'
//!   HKDF-SHA256, since the kernel API has none.

use std::hint::black_box;

use hkdf::Hkdf;
use sha2::Sha256;

use super::keys::{HKDF_SALT, ROTATING_KEYS, user_info};
use super::{KernelError, KernelInput, Operation, Pool};
use crate::provider::linux::af_alg::{Kind, Op, Transform};
use cipherfleet_core::algorithm::Mode;
use cipherfleet_core::spec::{Direction, KeyMode};

/// The tag length of the kernel's AEADs as the engine runs them.
const TAG: usize = 16;

/// What opens a pool ciphertext besides the key.
struct Sealed {
    iv: [u8; 16],
}

/// One thread's AF_ALG kernel.
pub struct AfAlgKernel {
    transform: Transform,
    /// The operation socket; closed only while re-keying.
    op: Option<Op>,
    mode: Mode,
    key_mode: KeyMode,
    direction: Direction,
    thread: u32,
    rotating: Vec<Vec<u8>>,
    hkdf: Hkdf<Sha256>,
    derived: Vec<u8>,
    /// The plaintext (CBC: padded).
    plaintext: Vec<u8>,
    /// Ciphertext (and tag) out of encryption, plaintext out of decryption.
    output: Vec<u8>,
    pool: Pool<Sealed>,
}

fn io_error(what: &'static str) -> impl Fn(std::io::Error) -> KernelError {
    move |e| KernelError::Unsupported(format!("AF_ALG {what}: {e}"))
}

impl AfAlgKernel {
    /// A kernel on `transform` (already bound to the implementation measured).
    pub fn new(input: &KernelInput<'_>, transform: Transform) -> Result<Self, KernelError> {
        let spec = input.spec;
        let alg = spec.point.algorithm;
        let size = spec.point.size_bytes as usize;
        let mut plaintext = super::random_bytes(size);
        if alg.mode == Mode::Cbc {
            let pad = 16 - size % 16;
            plaintext.extend(std::iter::repeat_n(pad as u8, pad));
        }
        let key_len = alg.key_len();
        if transform.kind == Kind::Aead {
            transform.set_tag_len(TAG).map_err(io_error("tag length"))?;
        }
        transform
            .set_key(&input.master_key[..key_len])
            .map_err(io_error("key"))?;
        let op = transform.op().map_err(io_error("accept"))?;
        let out_len = plaintext.len() + TAG;
        let mut k = AfAlgKernel {
            transform,
            op: Some(op),
            mode: alg.mode,
            key_mode: spec.point.key_mode,
            direction: spec.point.direction,
            thread: input.thread,
            rotating: (0..ROTATING_KEYS).map(|_| super::random_bytes(key_len)).collect(),
            hkdf: Hkdf::<Sha256>::new(Some(HKDF_SALT), &input.master_key[..]),
            derived: vec![0; key_len],
            plaintext,
            output: vec![0; out_len],
            pool: Pool::empty(),
        };
        if super::decrypts(input) {
            let sealed_len = k.sealed_len();
            k.pool = Pool::new(spec.point.size_bytes, sealed_len);
            for slot in 0..k.pool.slots() {
                let iv = k.iv(super::pool_counter(slot));
                k.encrypt(slot as u64, &iv)?;
                k.pool.push(&k.output[..sealed_len], Sealed { iv });
            }
        }
        Ok(k)
    }

    fn aead(&self) -> bool {
        self.transform.kind == Kind::Aead
    }

    /// Bytes of one sealed message: ciphertext plus tag, or the padded ciphertext.
    fn sealed_len(&self) -> usize {
        self.plaintext.len() + if self.aead() { TAG } else { 0 }
    }

    #[inline(always)]
    fn iv(&self, counter: u64) -> [u8; 16] {
        let mut iv = [0u8; 16];
        super::fill_nonce(&mut iv, self.thread, counter);
        iv
    }

    #[inline(always)]
    fn iv_len(&self) -> usize {
        if self.aead() { 12 } else { 16 }
    }

    /// Puts the key of `index` in place, as the key mode says: nothing for a
    /// static key, else a new key on a freshly opened operation socket (the
    /// kernel refuses a new key while one is open).
    #[inline(always)]
    fn key_for(&mut self, index: u64) -> Result<(), KernelError> {
        match self.key_mode {
            KeyMode::Static => return Ok(()),
            KeyMode::PerOp => {}
            KeyMode::HkdfPerUser => self
                .hkdf
                .expand(&user_info(index), &mut self.derived)
                .expect("key length is far below HKDF's limit"),
        }
        self.op = None;
        let key = match self.key_mode {
            KeyMode::PerOp => &self.rotating[index as usize % ROTATING_KEYS],
            _ => &self.derived,
        };
        self.transform.set_key(black_box(key)).map_err(io_error("key"))?;
        self.op = Some(self.transform.op().map_err(io_error("accept"))?);
        Ok(())
    }

    #[inline(always)]
    fn encrypt(&mut self, key_index: u64, iv: &[u8; 16]) -> Result<usize, KernelError> {
        self.key_for(key_index)?;
        let (assoclen, iv_len) = (self.aead().then_some(0), self.iv_len());
        // Read exactly the sealed length: a longer buffer makes an skcipher's read wait for more input.
        let sealed_len = self.sealed_len();
        let (plaintext, output) = (&self.plaintext, &mut self.output[..sealed_len]);
        let n = self
            .op
            .as_mut()
            .expect("an operation socket is open between messages")
            .crypt(true, &iv[..iv_len], assoclen, plaintext, output)
            .map_err(|_| KernelError::Encrypt("AF_ALG encryption failed"))?;
        if n != self.sealed_len() {
            return Err(KernelError::Encrypt("AF_ALG returned a message of the wrong length"));
        }
        Ok(n)
    }
}

impl Operation for AfAlgKernel {
    #[inline(always)]
    fn run(&mut self, op: u64) -> Result<(), KernelError> {
        match self.direction {
            Direction::Encrypt => {
                let iv = self.iv(op);
                black_box(self.encrypt(op, &iv)?);
            }
            Direction::Decrypt => {
                let slot = self.pool.slot(op);
                self.key_for(slot as u64)?;
                let (assoclen, iv_len) = (self.aead().then_some(0), self.iv_len());
                let (ciphertext, sealed) = self.pool.get(slot);
                let opened = &mut self.output[..self.plaintext.len()];
                let n = self
                    .op
                    .as_mut()
                    .expect("an operation socket is open between messages")
                    .crypt(false, &sealed.iv[..iv_len], assoclen, ciphertext, opened)
                    .map_err(|_| KernelError::Verify("AF_ALG decryption refused the message"))?;
                if self.mode == Mode::Cbc {
                    let pad = self.output[n.saturating_sub(1)] as usize;
                    let ok = (1..=16).contains(&pad) && self.output[n - pad..n].iter().all(|b| *b as usize == pad);
                    if !ok {
                        return Err(KernelError::Verify("CBC padding"));
                    }
                }
            }
        }
        black_box(&mut self.output);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        // What re-keying costs through AF_ALG: a key set on a socket of its
        // own (this one's operation socket stays open), then an operation socket.
        let Ok(timing) = Transform::bind(self.transform.kind, &self.transform.name) else {
            return 0.0;
        };
        if timing.kind == Kind::Aead && timing.set_tag_len(TAG).is_err() {
            return 0.0;
        }
        let iterations = iterations.max(1);
        let start = std::time::Instant::now();
        for i in 0..iterations {
            let key = &self.rotating[i as usize % ROTATING_KEYS];
            match timing.set_key(black_box(key)).and_then(|()| timing.op()) {
                Ok(op) => drop(black_box(op)),
                Err(_) => return 0.0,
            }
        }
        start.elapsed().as_nanos() as f64 / f64::from(iterations)
    }

    fn cipher_state_bytes(&self) -> u64 {
        // The key schedule lives in the kernel; the agent holds two descriptors.
        (std::mem::size_of::<Transform>() + std::mem::size_of::<Op>()) as u64
    }
}
