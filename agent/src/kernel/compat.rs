//! Operations shaped as `openssl speed -evp` / `-aead` shapes them (OpenSSL 3.0,
//! `apps/speed.c`), for `bench --openssl-compat`, so the two can be compared like
//! for like. Everything runs in place under one fixed key (the first bytes of
//! the master key), as openssl does:
//! - GCM, CCM, OCB (`EVP_Update_loop_aead_*`): every message sets the key and the
//!   nonce up again, authenticates 13 bytes of associated data (`-aead`'s
//!   "TLS-like" AAD), en- or decrypts and computes the tag. Decryption reads a
//!   sealed message and writes a second buffer, verifying its real tag.
//! - Every other mode (`EVP_Update_loop`), ChaCha20-Poly1305 included, since
//!   speed.c does not count it among the AEAD modes: one stream for the whole
//!   run, set up once, with no per-message nonce, IV, padding or tag. CBC
//!   chains across messages, CTR and ChaCha20 continue their keystream, Poly1305
//!   absorbs the ciphertext.
//!
//! The engine's own kernels (the other files) follow docs/measurement.md instead. The only
//! deviation from openssl: AEAD nonces still count up (openssl reuses one; the
//! cost is the same, and a repeated nonce is never benchmarked here).

use std::hint::black_box;

use aead::{AeadInOut, KeyInit, Nonce, Tag};
use chacha20::ChaCha20;
use cipher::common::InnerInit;
use cipher::consts::U16;
use cipher::{
    Block, BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, InnerIvInit, KeyIvInit,
    StreamCipher, StreamCipherSeek,
};
use poly1305::Poly1305;
use poly1305::universal_hash::UniversalHash;

use super::{Batch, KernelError, KernelInput, Operation};
use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::spec::{Direction, KeyMode};

/// `-aead`'s associated data: 13 bytes, as a TLS record header.
const AAD: [u8; 13] = [0xcc; 13];

/// Why a point cannot be measured the openssl way; the CLI refuses it before measuring.
pub fn unsupported(alg: Algorithm, size: u64, key_mode: KeyMode, concurrency: Option<u32>) -> Option<String> {
    if key_mode != KeyMode::Static {
        return Some("--openssl-compat measures one fixed key, as openssl speed does; use --key-mode static".into());
    }
    if concurrency.is_some() {
        return Some("--openssl-compat has no object-storage scenario; leave out --concurrency".into());
    }
    match (alg.cipher, alg.mode) {
        (_, Mode::CbcHmacSha256) | (_, Mode::XPoly1305) => {
            return Some(format!("{alg} has no openssl speed counterpart compared here"));
        }
        (cipher, Mode::Ecb | Mode::Cbc) => {
            let block = if matches!(cipher, Cipher::Des | Cipher::TripleDes) {
                8
            } else {
                16
            };
            if !size.is_multiple_of(block) {
                return Some(format!(
                    "{alg} as one openssl stream needs sizes that are whole {block}-byte blocks; {size} is not"
                ));
            }
        }
        _ => {}
    }
    None
}

/// The openssl-shaped kernel for `input.spec` (after [`unsupported`] said yes).
pub fn build(input: &KernelInput<'_>) -> Result<Box<dyn Batch>, KernelError> {
    let spec = input.spec;
    let key = input.master_key;
    let size = spec.point.size_bytes as usize;
    let dir = spec.point.direction;
    Ok(match (spec.point.algorithm.cipher, spec.point.algorithm.mode) {
        (Cipher::Aes128, Mode::Gcm) => Box::new(PerMessage::<aes_gcm::Aes128Gcm>::new(key, size, dir)?),
        (Cipher::Aes192, Mode::Gcm) => Box::new(PerMessage::<aes_gcm::AesGcm<aes::Aes192, aead::consts::U12>>::new(
            key, size, dir,
        )?),
        (Cipher::Aes256, Mode::Gcm) => Box::new(PerMessage::<aes_gcm::Aes256Gcm>::new(key, size, dir)?),
        (Cipher::Aes128, Mode::Ccm) => Box::new(PerMessage::<super::aead::Ccm<aes::Aes128>>::new(key, size, dir)?),
        (Cipher::Aes192, Mode::Ccm) => Box::new(PerMessage::<super::aead::Ccm<aes::Aes192>>::new(key, size, dir)?),
        (Cipher::Aes256, Mode::Ccm) => Box::new(PerMessage::<super::aead::Ccm<aes::Aes256>>::new(key, size, dir)?),
        (Cipher::Aes128, Mode::Ocb) => Box::new(PerMessage::<ocb3::Ocb3<aes::Aes128>>::new(key, size, dir)?),
        (Cipher::Aes192, Mode::Ocb) => Box::new(PerMessage::<ocb3::Ocb3<aes::Aes192>>::new(key, size, dir)?),
        (Cipher::Aes256, Mode::Ocb) => Box::new(PerMessage::<ocb3::Ocb3<aes::Aes256>>::new(key, size, dir)?),
        (Cipher::ChaCha20, Mode::Poly1305) => Box::new(ChaChaStream::new(key, size, dir, true)),
        (Cipher::ChaCha20, Mode::Stream) => Box::new(ChaChaStream::new(key, size, dir, false)),
        (Cipher::Aes128, Mode::Ctr) => Box::new(CtrStream::<aes::Aes128>::new(key, size)),
        (Cipher::Aes192, Mode::Ctr) => Box::new(CtrStream::<aes::Aes192>::new(key, size)),
        (Cipher::Aes256, Mode::Ctr) => Box::new(CtrStream::<aes::Aes256>::new(key, size)),
        (Cipher::Aes128, mode) => block_stream::<aes::Aes128>(key, size, dir, mode),
        (Cipher::Aes192, mode) => block_stream::<aes::Aes192>(key, size, dir, mode),
        (Cipher::Aes256, mode) => block_stream::<aes::Aes256>(key, size, dir, mode),
        (Cipher::Des, mode) => block_stream::<des::Des>(key, size, dir, mode),
        (Cipher::TripleDes, mode) => block_stream::<des::TdesEde3>(key, size, dir, mode),
        (_, mode) => unreachable!("{mode:?} is refused by compat::unsupported"),
    })
}

/// Mean nanoseconds of `iterations` calls of `setup` (the key schedule as openssl pays it).
fn time_setup<T>(iterations: u32, mut setup: impl FnMut() -> T) -> f64 {
    let iterations = iterations.max(1);
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        black_box(setup());
    }
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

/// `size_of` the instance `make` builds plus the heap it owns.
fn state_bytes<T>(make: impl FnOnce() -> T) -> u64 {
    let (_instance, heap) = crate::heap::owned_by(make);
    std::mem::size_of::<T>() as u64 + heap
}

/// GCM, CCM, OCB: key and nonce set up for every message, 13 bytes of AAD, in place.
struct PerMessage<A: AeadInOut> {
    key: Vec<u8>,
    direction: Direction,
    buffer: Vec<u8>,
    /// Decryption: the sealed message, its nonce and tag (the buffer receives the plaintext).
    sealed: Option<(Vec<u8>, Nonce<A>, Tag<A>)>,
}

impl<A: AeadInOut + KeyInit> PerMessage<A> {
    fn new(master: &[u8; 64], size: usize, direction: Direction) -> Result<Self, KernelError> {
        let key = master[..A::key_size()].to_vec();
        let mut buffer = super::random_bytes(size);
        let sealed = match direction {
            Direction::Encrypt => None,
            Direction::Decrypt => {
                let nonce = Nonce::<A>::default();
                let mut message = buffer.clone();
                let tag = cipher_for::<A>(&key)
                    .encrypt_inout_detached(&nonce, &AAD, message.as_mut_slice().into())
                    .map_err(|_| KernelError::Encrypt("message too long for the AEAD"))?;
                buffer.fill(0);
                Some((message, nonce, tag))
            }
        };
        Ok(PerMessage {
            key,
            direction,
            buffer,
            sealed,
        })
    }
}

fn cipher_for<A: KeyInit>(key: &[u8]) -> A {
    A::new_from_slice(key).expect("key length matches the algorithm")
}

impl<A: AeadInOut + KeyInit + Send> Operation for PerMessage<A>
where
    Tag<A>: Send,
    Nonce<A>: Send,
{
    #[inline(always)]
    fn run(&mut self, op: u64) -> Result<(), KernelError> {
        let cipher = cipher_for::<A>(black_box(&self.key));
        match &self.sealed {
            None => {
                let mut nonce = Nonce::<A>::default();
                super::fill_nonce(&mut nonce, 0, op);
                let tag = cipher
                    .encrypt_inout_detached(&nonce, &AAD, self.buffer.as_mut_slice().into())
                    .map_err(|_| KernelError::Encrypt("message too long for the AEAD"))?;
                black_box(tag);
            }
            Some((message, nonce, tag)) => {
                let buf = aead::inout::InOutBuf::new(message, &mut self.buffer).expect("equal lengths");
                cipher
                    .decrypt_inout_detached(nonce, &AAD, buf, tag)
                    .map_err(|_| KernelError::Verify("AEAD tag mismatch"))?;
            }
        }
        black_box(&mut self.buffer);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        let _ = self.direction;
        time_setup(iterations, || cipher_for::<A>(black_box(&self.key)))
    }

    fn cipher_state_bytes(&self) -> u64 {
        state_bytes(|| cipher_for::<A>(&self.key))
    }
}

/// ChaCha20 (and Poly1305 over the ciphertext) as one stream, in place.
struct ChaChaStream {
    key: chacha20::Key,
    direction: Direction,
    cipher: ChaCha20,
    mac: Option<Poly1305>,
    buffer: Vec<u8>,
}

impl ChaChaStream {
    fn new(master: &[u8; 64], size: usize, direction: Direction, authenticated: bool) -> Self {
        let key = chacha20::Key::try_from(&master[..32]).expect("32-byte key");
        let mut cipher = ChaCha20::new(&key, &chacha20::Nonce::default());
        // RFC 8439: the Poly1305 key is keystream block 0; the message starts at block 1.
        let mut block0 = [0u8; 64];
        cipher.apply_keystream(&mut block0);
        let mac = authenticated.then(|| Poly1305::new_from_slice(&block0[..32]).expect("32-byte key"));
        ChaChaStream {
            key,
            direction,
            cipher,
            mac,
            buffer: super::random_bytes(size),
        }
    }
}

impl Operation for ChaChaStream {
    #[inline(always)]
    fn run(&mut self, _op: u64) -> Result<(), KernelError> {
        if self.direction == Direction::Decrypt
            && let Some(mac) = &mut self.mac
        {
            mac.update_padded(&self.buffer);
        }
        if self.cipher.try_apply_keystream(&mut self.buffer).is_err() {
            // 256 GiB into the stream: start it over, as openssl resets its IV.
            self.cipher.seek(64u64);
            self.cipher.apply_keystream(&mut self.buffer);
        }
        if self.direction == Direction::Encrypt
            && let Some(mac) = &mut self.mac
        {
            mac.update_padded(&self.buffer);
        }
        black_box(&mut self.buffer);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        time_setup(iterations, || {
            ChaCha20::new(black_box(&self.key), &chacha20::Nonce::default())
        })
    }

    fn cipher_state_bytes(&self) -> u64 {
        let mac = self.mac.as_ref().map_or(0, |_| std::mem::size_of::<Poly1305>() as u64);
        state_bytes(|| ChaCha20::new(&self.key, &chacha20::Nonce::default())) + mac
    }
}

/// ECB and CBC as one stream in place: no padding, and CBC chains across messages.
enum BlockStream<C: BlockCipherEncrypt + BlockCipherDecrypt> {
    EcbEncrypt(ecb::Encryptor<C>),
    EcbDecrypt(ecb::Decryptor<C>),
    CbcEncrypt(cbc::Encryptor<C>),
    CbcDecrypt(cbc::Decryptor<C>),
}

struct BlockStreamKernel<C: BlockCipherEncrypt + BlockCipherDecrypt> {
    key: Vec<u8>,
    stream: BlockStream<C>,
    buffer: Vec<u8>,
}

fn block_stream<C>(master: &[u8; 64], size: usize, direction: Direction, mode: Mode) -> Box<dyn Batch>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt + Send + 'static,
{
    let key = master[..C::key_size()].to_vec();
    let iv = Block::<C>::default();
    let cipher = cipher_for::<C>(&key);
    let stream = match (mode, direction) {
        (Mode::Ecb, Direction::Encrypt) => BlockStream::EcbEncrypt(ecb::Encryptor::inner_init(cipher)),
        (Mode::Ecb, Direction::Decrypt) => BlockStream::EcbDecrypt(ecb::Decryptor::inner_init(cipher)),
        (Mode::Cbc, Direction::Encrypt) => BlockStream::CbcEncrypt(cbc::Encryptor::inner_iv_init(cipher, &iv)),
        (Mode::Cbc, Direction::Decrypt) => BlockStream::CbcDecrypt(cbc::Decryptor::inner_iv_init(cipher, &iv)),
        (other, _) => unreachable!("{other:?} is not ECB or CBC"),
    };
    Box::new(BlockStreamKernel {
        key,
        stream,
        buffer: super::random_bytes(size),
    })
}

impl<C> Operation for BlockStreamKernel<C>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt + Send,
{
    #[inline(always)]
    fn run(&mut self, _op: u64) -> Result<(), KernelError> {
        // Sizes are whole blocks (compat::unsupported), so nothing is left over.
        let (blocks, _) = Block::<C>::slice_as_chunks_mut(&mut self.buffer);
        match &mut self.stream {
            BlockStream::EcbEncrypt(e) => e.encrypt_blocks(blocks),
            BlockStream::EcbDecrypt(d) => d.decrypt_blocks(blocks),
            BlockStream::CbcEncrypt(e) => e.encrypt_blocks(blocks),
            BlockStream::CbcDecrypt(d) => d.decrypt_blocks(blocks),
        }
        black_box(&mut self.buffer);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        time_setup(iterations, || cipher_for::<C>(black_box(&self.key)))
    }

    fn cipher_state_bytes(&self) -> u64 {
        std::mem::size_of::<BlockStream<C>>() as u64
    }
}

/// AES-CTR as one keystream, in place.
struct CtrStream<C: BlockCipherEncrypt<BlockSize = U16>> {
    key: Vec<u8>,
    stream: ctr::Ctr128BE<C>,
    buffer: Vec<u8>,
}

impl<C: KeyInit + BlockCipherEncrypt<BlockSize = U16>> CtrStream<C> {
    fn new(master: &[u8; 64], size: usize) -> Self {
        let key = master[..C::key_size()].to_vec();
        let core = ctr::CtrCore::<C, ctr::flavors::Ctr128BE>::inner_iv_init(cipher_for::<C>(&key), &Default::default());
        CtrStream {
            key,
            stream: ctr::Ctr128BE::from_core(core),
            buffer: super::random_bytes(size),
        }
    }
}

impl<C: KeyInit + BlockCipherEncrypt<BlockSize = U16> + Send> Operation for CtrStream<C> {
    #[inline(always)]
    fn run(&mut self, _op: u64) -> Result<(), KernelError> {
        // Encryption and decryption are the same keystream XOR.
        self.stream.apply_keystream(&mut self.buffer);
        black_box(&mut self.buffer);
        Ok(())
    }

    fn key_setup_ns(&self, iterations: u32) -> f64 {
        time_setup(iterations, || cipher_for::<C>(black_box(&self.key)))
    }

    fn cipher_state_bytes(&self) -> u64 {
        std::mem::size_of::<ctr::Ctr128BE<C>>() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aead::inout::InOutBuf;
    use cipherfleet_core::Point;
    use cipherfleet_core::measurement::Harness;
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::JobSpec;

    const MASTER: [u8; 64] = [7; 64];

    fn spec(alg: &str, direction: Direction, size: u64) -> JobSpec {
        JobSpec {
            point: Point {
                algorithm: alg.parse().unwrap(),
                direction,
                size_bytes: size,
                threads: 1,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: Path::Accelerated,
                nonce: cipherfleet_core::spec::Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 1.0,
        }
    }

    fn kernel(s: &JobSpec) -> Box<dyn Batch> {
        build(&KernelInput {
            spec: s,
            thread: 0,
            master_key: &MASTER,
            harness: Harness::OpensslCompat,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        })
        .unwrap_or_else(|e| panic!("{}: {e}", s.label()))
    }

    #[test]
    fn every_supported_algorithm_runs_both_ways() {
        for &alg in cipherfleet_core::algorithm::ALL {
            for direction in [Direction::Encrypt, Direction::Decrypt] {
                let s = spec(alg.name(), direction, 1024);
                if unsupported(alg, 1024, KeyMode::Static, None).is_some() {
                    continue;
                }
                let mut k = kernel(&s);
                k.run_batch(0, 20).unwrap_or_else(|e| panic!("{}: {e}", s.label()));
                assert!(k.key_setup_ns(4) > 0.0, "{}", s.label());
                assert!(k.cipher_state_bytes() > 0, "{}", s.label());
            }
        }
    }

    #[test]
    fn what_openssl_speed_cannot_mirror_is_refused_with_the_reason() {
        let alg = |name: &str| name.parse::<Algorithm>().unwrap();
        let refused = |a: &str, size, key_mode, concurrency| unsupported(alg(a), size, key_mode, concurrency).unwrap();
        assert!(refused("aes-128-gcm", 16, KeyMode::PerOp, None).contains("--key-mode static"));
        assert!(refused("aes-128-gcm", 16, KeyMode::Static, Some(4)).contains("--concurrency"));
        assert!(refused("aes-128-cbc-hmac-sha256", 16, KeyMode::Static, None).contains("no openssl speed"));
        assert!(refused("xchacha20-poly1305", 16, KeyMode::Static, None).contains("no openssl speed"));
        assert!(refused("aes-128-cbc", 11, KeyMode::Static, None).contains("16-byte blocks"));
        assert!(refused("des-ede3-cbc", 12, KeyMode::Static, None).contains("8-byte blocks"));
        for ok in [
            "aes-128-cbc",
            "aes-256-ctr",
            "aes-256-gcm",
            "chacha20-poly1305",
            "des-ede3-cbc",
        ] {
            assert_eq!(unsupported(alg(ok), 16, KeyMode::Static, None), None, "{ok}");
        }
    }

    /// In place, the key and nonce set up per message, 13 bytes of AAD: the
    /// buffer after one message is the crate's own output for that message.
    #[test]
    fn aead_messages_are_sealed_in_place_with_the_13_byte_aad() {
        let mut k = PerMessage::<aes_gcm::Aes256Gcm>::new(&MASTER, 100, Direction::Encrypt).unwrap();
        let mut expected = k.buffer.clone();
        k.run(5).unwrap();
        let mut nonce = Nonce::<aes_gcm::Aes256Gcm>::default();
        super::super::fill_nonce(&mut nonce, 0, 5);
        aes_gcm::Aes256Gcm::new_from_slice(&MASTER[..32])
            .unwrap()
            .encrypt_inout_detached(&nonce, &AAD, InOutBuf::from(expected.as_mut_slice()))
            .unwrap();
        assert_eq!(k.buffer, expected);
    }

    #[test]
    fn aead_decryption_verifies_the_real_tag() {
        let mut k = PerMessage::<aes_gcm::Aes128Gcm>::new(&MASTER, 64, Direction::Decrypt).unwrap();
        k.run(0).unwrap();
        k.sealed.as_mut().unwrap().0[3] ^= 1;
        assert_eq!(k.run(1), Err(KernelError::Verify("AEAD tag mismatch")));
    }

    /// One stream: two 16-byte messages of CBC (chained, no padding) and of
    /// CTR (one keystream) give what one 32-byte message gives.
    #[test]
    fn block_streams_continue_across_messages() {
        let aes = || aes::Aes128::new_from_slice(&MASTER[..16]).unwrap();
        let mut cbc_kernel = BlockStreamKernel::<aes::Aes128> {
            key: MASTER[..16].to_vec(),
            stream: BlockStream::CbcEncrypt(cbc::Encryptor::inner_iv_init(aes(), &Default::default())),
            buffer: Vec::new(),
        };
        let mut ctr_kernel = CtrStream::<aes::Aes128>::new(&MASTER, 16);
        let (mut cbc_out, mut ctr_out) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            cbc_kernel.buffer = vec![1; 16];
            cbc_kernel.run(0).unwrap();
            cbc_out.extend_from_slice(&cbc_kernel.buffer);
            ctr_kernel.buffer = vec![1; 16];
            ctr_kernel.run(0).unwrap();
            ctr_out.extend_from_slice(&ctr_kernel.buffer);
        }
        let mut whole = vec![1u8; 32];
        let (blocks, _) = Block::<aes::Aes128>::slice_as_chunks_mut(&mut whole);
        cbc::Encryptor::<aes::Aes128>::inner_iv_init(aes(), &Default::default()).encrypt_blocks(blocks);
        assert_eq!(cbc_out, whole);
        let mut whole = vec![1u8; 32];
        ctr::Ctr128BE::<aes::Aes128>::new(&MASTER[..16].try_into().unwrap(), &Default::default())
            .apply_keystream(&mut whole);
        assert_eq!(ctr_out, whole);
    }

    /// ChaCha20-Poly1305 as openssl's stream: the ciphertext is the RFC 8439
    /// keystream from block 1, and Poly1305 absorbs it.
    #[test]
    fn chacha_poly_stream_encrypts_from_block_one() {
        let mut k = ChaChaStream::new(&MASTER, 64, Direction::Encrypt, true);
        let plaintext = k.buffer.clone();
        k.run(0).unwrap();
        let mut expected = plaintext;
        let mut reference = ChaCha20::new(&k.key, &chacha20::Nonce::default());
        reference.seek(64u64);
        reference.apply_keystream(&mut expected);
        assert_eq!(k.buffer, expected);
        assert!(k.mac.is_some());
    }
}
