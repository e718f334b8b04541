//! The decrypt pool: ciphertexts sealed before measuring, which decrypt
//! operations open in turn (and verify).
//!
//! It stays about as cache-resident as the encrypt side's plaintext and
//! output buffers: about [`POOL_BYTES`] per thread, but never fewer than
//! [`DECRYPT_POOL_MIN_MESSAGES`] messages, stored back to back. The slot count
//! is a power of two, so an operation finds its slot with a mask, not a
//! division.

use cipherfleet_core::spec::DECRYPT_POOL_MIN_MESSAGES;

/// Bytes of ciphertext (plus nonces and tags) a pool aims for per thread.
pub const POOL_BYTES: u64 = 32 << 10;
/// Most slots (tiny messages): enough variety, little bookkeeping.
const MAX_SLOTS: u64 = 1024;
/// Bytes of nonce, IV and tag kept beside each ciphertext, roughly.
const META_BYTES: u64 = 32;

/// How many ciphertexts the decrypt pool holds for `size`-byte messages: a
/// power of two, about [`POOL_BYTES`] in all, at least a few messages.
pub fn pool_slots(size: u64) -> usize {
    let fit = (POOL_BYTES / (size + META_BYTES)).max(1);
    let power = 1u64 << fit.ilog2();
    power.clamp(DECRYPT_POOL_MIN_MESSAGES.next_power_of_two(), MAX_SLOTS) as usize
}

/// Sealed messages: ciphertexts of one length back to back, each with its `M`
/// (nonce, IV, tag…).
pub struct Pool<M> {
    data: Vec<u8>,
    stride: usize,
    meta: Vec<M>,
    mask: usize,
}

impl<M> Pool<M> {
    /// An empty pool for [`pool_slots`]`(message_len)` ciphertexts of `stride` bytes.
    pub fn new(message_len: u64, stride: usize) -> Self {
        let slots = pool_slots(message_len);
        Pool {
            data: Vec::with_capacity(slots * stride),
            stride,
            meta: Vec::with_capacity(slots),
            mask: slots - 1,
        }
    }

    /// No pool: encrypt points.
    pub fn empty() -> Self {
        Pool {
            data: Vec::new(),
            stride: 0,
            meta: Vec::new(),
            mask: 0,
        }
    }

    /// Slots the pool is to hold; fill them all with [`Pool::push`].
    pub fn slots(&self) -> usize {
        self.mask + 1
    }

    pub fn push(&mut self, ciphertext: &[u8], meta: M) {
        debug_assert_eq!(ciphertext.len(), self.stride);
        debug_assert!(self.meta.len() < self.slots(), "pool full");
        self.data.extend_from_slice(ciphertext);
        self.meta.push(meta);
    }

    /// The slot operation `op` opens.
    #[inline(always)]
    pub fn slot(&self, op: u64) -> usize {
        op as usize & self.mask
    }

    #[inline(always)]
    pub fn get(&self, slot: usize) -> (&[u8], &M) {
        (&self.data[slot * self.stride..][..self.stride], &self.meta[slot])
    }

    /// Bytes held: ciphertexts plus their metadata.
    pub fn bytes(&self) -> usize {
        self.data.len() + self.meta.len() * std::mem::size_of::<M>()
    }

    #[cfg(test)]
    pub fn ciphertext_mut(&mut self, slot: usize) -> &mut [u8] {
        &mut self.data[slot * self.stride..][..self.stride]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_stays_near_32_kib_with_at_least_four_messages() {
        // (message bytes, slots)
        for (size, slots) in [
            (11, 512),
            (16, 512),
            (64, 256),
            (1024, 16),
            (8 << 10, 4),
            (16 << 10, 4),
            (1 << 20, 4),
            (10 << 20, 4),
        ] {
            assert_eq!(pool_slots(size), slots, "{size} B");
            assert!(slots.is_power_of_two());
        }
    }

    #[test]
    fn slots_cycle_without_division_and_hold_their_own_bytes() {
        let mut pool = Pool::new(1024, 3);
        for i in 0..pool.slots() {
            pool.push(&[i as u8; 3], i);
        }
        assert_eq!(pool.slot(16 + 5), 5);
        assert_eq!(pool.get(pool.slot(21)), (&[5u8, 5, 5][..], &5));
        assert_eq!(pool.bytes(), 16 * 3 + 16 * std::mem::size_of::<usize>());
    }
}
