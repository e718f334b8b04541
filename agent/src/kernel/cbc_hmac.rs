//! AES-CBC (PKCS#7) then HMAC-SHA256 over IV || ciphertext: encrypt-then-MAC with
//! independent encryption and MAC keys. Decryption checks the MAC (constant
//! time) before it decrypts, as EtM requires.

use std::hint::black_box;

use cipher::block_padding::Pkcs7;
use cipher::{Block, BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, InnerIvInit, KeyInit};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::block::padded_len;
use super::{KernelError, KernelInput, Keys, Operation, Pool};
use cipherfleet_core::spec::Direction;

type HmacSha256 = Hmac<Sha256>;
const MAC_KEY_LEN: usize = 32;

/// A ready pair: the AES key schedule and the keyed HMAC state.
pub struct Pair<C> {
    cipher: C,
    mac: HmacSha256,
}

fn make<C: KeyInit>(key: &[u8]) -> Pair<C> {
    let (enc, mac) = key.split_at(key.len() - MAC_KEY_LEN);
    Pair {
        cipher: C::new_from_slice(enc).expect("key length matches the algorithm"),
        mac: <HmacSha256 as KeyInit>::new_from_slice(mac).expect("HMAC takes any key length"),
    }
}

/// What opens a pool ciphertext besides the keys.
struct Sealed<C: BlockCipherEncrypt> {
    iv: Block<C>,
    tag: [u8; 32],
}

pub struct CbcHmacKernel<C: BlockCipherEncrypt> {
    keys: Keys<Pair<C>>,
    direction: Direction,
    thread: u32,
    plaintext: Vec<u8>,
    output: Vec<u8>,
    pool: Pool<Sealed<C>>,
}

impl<C> CbcHmacKernel<C>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt,
{
    pub fn new(input: &KernelInput<'_>) -> Result<Self, KernelError> {
        let spec = input.spec;
        let size = spec.point.size_bytes as usize;
        let mut k = CbcHmacKernel {
            keys: Keys::new(
                spec.point.key_mode,
                input.master_key,
                C::key_size() + MAC_KEY_LEN,
                make::<C>,
            ),
            direction: spec.point.direction,
            thread: input.thread,
            plaintext: super::random_bytes(size),
            output: vec![0; padded_len(size, C::block_size())],
            pool: Pool::empty(),
        };
        if super::decrypts(input) {
            k.pool = Pool::new(spec.point.size_bytes, k.output.len());
            for slot in 0..k.pool.slots() {
                let (iv, tag) = k.seal(slot as u64, super::pool_counter(slot))?;
                k.pool.push(&k.output, Sealed { iv, tag });
            }
        }
        Ok(k)
    }

    #[inline(always)]
    fn seal(&mut self, key_index: u64, counter: u64) -> Result<(Block<C>, [u8; 32]), KernelError> {
        let (plaintext, output, thread) = (&self.plaintext, &mut self.output, self.thread);
        self.keys.with(key_index, |pair| {
            let mut iv = Block::<C>::default();
            super::fill_nonce(&mut iv, thread, counter);
            pair.cipher.encrypt_block(&mut iv);
            let ciphertext = cbc::Encryptor::<&C>::inner_iv_init(&pair.cipher, &iv)
                .encrypt_padded_b2b::<Pkcs7>(plaintext, output)
                .map_err(|_| KernelError::Encrypt("output buffer too small for padding"))?;
            let mut mac = pair.mac.clone();
            mac.update(&iv);
            mac.update(ciphertext);
            Ok((iv, mac.finalize().into_bytes().into()))
        })
    }
}

impl<C> Operation for CbcHmacKernel<C>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt + Send,
    Block<C>: Send,
{
    #[inline(always)]
    fn run(&mut self, op: u64) -> Result<(), KernelError> {
        match self.direction {
            Direction::Encrypt => {
                black_box(self.seal(op, op)?);
            }
            Direction::Decrypt => {
                let slot = self.pool.slot(op);
                let (ciphertext, sealed) = self.pool.get(slot);
                let output = &mut self.output;
                self.keys.with(slot as u64, |pair| {
                    let mut mac = pair.mac.clone();
                    mac.update(&sealed.iv);
                    mac.update(ciphertext);
                    mac.verify_slice(&sealed.tag)
                        .map_err(|_| KernelError::Verify("HMAC-SHA256 tag mismatch"))?;
                    cbc::Decryptor::<&C>::inner_iv_init(&pair.cipher, &sealed.iv)
                        .decrypt_padded_b2b::<Pkcs7>(ciphertext, output)
                        .map(|_| ())
                        .map_err(|_| KernelError::Verify("PKCS#7 padding invalid"))
                })?;
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
