//! Block cipher modes over AES, DES and 3DES: ECB and CBC with PKCS#7 padding, and CTR.
//!
//! CBC IVs must be unpredictable, so each operation's IV is the encryption of
//! its counter block under the key (SP 800-38A, Appendix C) — one extra block
//! operation, which a correct service pays too. CTR only needs uniqueness:
//! its IV is the counter block itself with a zero 32-bit block counter.

use std::hint::black_box;

use cipher::block_padding::Pkcs7;
use cipher::common::InnerInit;
use cipher::{
    Block, BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, BlockSizeUser, InnerIvInit,
    KeyInit, StreamCipher,
};

use super::{KernelError, KernelInput, Keys, Operation, Pool};
use cipherfleet_core::algorithm::Mode;
use cipherfleet_core::spec::Direction;

pub struct BlockKernel<C: BlockSizeUser> {
    keys: Keys<C>,
    mode: Mode,
    direction: Direction,
    thread: u32,
    plaintext: Vec<u8>,
    output: Vec<u8>,
    /// Decrypt pool: ciphertexts with their IVs.
    pool: Pool<Block<C>>,
}

fn make<C: KeyInit>(key: &[u8]) -> C {
    C::new_from_slice(key).expect("key length matches the algorithm")
}

/// Padded length of `size` bytes with PKCS#7 (always at least one padding byte).
pub fn padded_len(size: usize, block: usize) -> usize {
    (size / block + 1) * block
}

impl<C> BlockKernel<C>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt + CtrCipher,
{
    pub fn new(input: &KernelInput<'_>, mode: Mode) -> Result<Self, KernelError> {
        let spec = input.spec;
        let size = spec.point.size_bytes as usize;
        let out_len = match mode {
            Mode::Ctr => size,
            _ => padded_len(size, C::block_size()),
        };
        let mut k = BlockKernel {
            keys: Keys::new(spec.point.key_mode, input.master_key, C::key_size(), make::<C>),
            mode,
            direction: spec.point.direction,
            thread: input.thread,
            plaintext: super::random_bytes(size),
            output: vec![0; out_len],
            pool: Pool::empty(),
        };
        if super::decrypts(input) {
            k.pool = Pool::new(spec.point.size_bytes, out_len);
            for slot in 0..k.pool.slots() {
                let iv = k.seal(slot as u64, super::pool_counter(slot))?;
                k.pool.push(&k.output, iv);
            }
        }
        Ok(k)
    }

    /// Encrypts the plaintext into `output`; returns the IV used.
    #[inline(always)]
    fn seal(&mut self, key_index: u64, counter: u64) -> Result<Block<C>, KernelError> {
        let (plaintext, output, mode, thread) = (&self.plaintext, &mut self.output, self.mode, self.thread);
        self.keys.with(key_index, |c| {
            let mut iv = Block::<C>::default();
            match mode {
                Mode::Ecb => {
                    ecb::Encryptor::<&C>::inner_init(c)
                        .encrypt_padded_b2b::<Pkcs7>(plaintext, output)
                        .map_err(|_| KernelError::Encrypt("output buffer too small for padding"))?;
                }
                Mode::Cbc => {
                    fill_counter_block(&mut iv, thread, counter);
                    c.encrypt_block(&mut iv);
                    cbc::Encryptor::<&C>::inner_iv_init(c, &iv)
                        .encrypt_padded_b2b::<Pkcs7>(plaintext, output)
                        .map_err(|_| KernelError::Encrypt("output buffer too small for padding"))?;
                }
                Mode::Ctr => {
                    fill_counter_block(&mut iv, thread, counter);
                    c.ctr_apply(&iv, plaintext, output);
                }
                other => unreachable!("{other:?} is not a block mode"),
            }
            Ok(iv)
        })
    }
}

/// Counter block: thread and counter as in every nonce; for DES's 8-byte blocks
/// the thread goes into the top 16 bits of the counter instead.
fn fill_counter_block(block: &mut [u8], thread: u32, counter: u64) {
    if block.len() >= 12 {
        super::fill_nonce(block, thread, counter);
    } else {
        block.copy_from_slice(&((u64::from(thread) << 48) ^ counter).to_be_bytes());
    }
}

/// CTR over a borrowed key schedule. Only AES (128-bit blocks) has a CTR algorithm;
/// the 64-bit-block ciphers implement this to satisfy the bound and are never asked.
pub trait CtrCipher {
    fn ctr_apply(&self, iv: &[u8], input: &[u8], output: &mut [u8]);
}

macro_rules! ctr_for_aes {
    ($($t:ty),*) => {$(
        impl CtrCipher for $t {
            #[inline(always)]
            fn ctr_apply(&self, iv: &[u8], input: &[u8], output: &mut [u8]) {
                let iv = cipher::Array::try_from(iv).expect("16-byte IV");
                let core = ctr::CtrCore::<&$t, ctr::flavors::Ctr128BE>::inner_iv_init(self, &iv);
                ctr::Ctr128BE::from_core(core).apply_keystream_b2b(input, output);
            }
        }
    )*};
}
ctr_for_aes!(aes::Aes128, aes::Aes192, aes::Aes256);

macro_rules! no_ctr {
    ($($t:ty),*) => {$(
        impl CtrCipher for $t {
            fn ctr_apply(&self, _: &[u8], _: &[u8], _: &mut [u8]) {
                unreachable!("no CTR algorithm is defined over a 64-bit block cipher")
            }
        }
    )*};
}
no_ctr!(des::Des, des::TdesEde3);

impl<C> Operation for BlockKernel<C>
where
    C: KeyInit + BlockCipherEncrypt + BlockCipherDecrypt + CtrCipher + Send,
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
                let (ciphertext, iv) = self.pool.get(slot);
                let (output, mode) = (&mut self.output, self.mode);
                self.keys.with(slot as u64, |c| match mode {
                    Mode::Ecb => ecb::Decryptor::<&C>::inner_init(c)
                        .decrypt_padded_b2b::<Pkcs7>(ciphertext, output)
                        .map(|_| ())
                        .map_err(|_| KernelError::Verify("PKCS#7 padding invalid")),
                    Mode::Cbc => cbc::Decryptor::<&C>::inner_iv_init(c, iv)
                        .decrypt_padded_b2b::<Pkcs7>(ciphertext, output)
                        .map(|_| ())
                        .map_err(|_| KernelError::Verify("PKCS#7 padding invalid")),
                    Mode::Ctr => {
                        c.ctr_apply(iv, ciphertext, output);
                        Ok(())
                    }
                    other => unreachable!("{other:?} is not a block mode"),
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
