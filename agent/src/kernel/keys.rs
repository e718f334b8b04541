//! Key handling per operation: one static key, a fresh key schedule per
//! operation, or a per-user key derived with HKDF-SHA256.

use hkdf::Hkdf;
use sha2::Sha256;

use cipherfleet_core::spec::KeyMode;

/// Users the `hkdf-per-user` mode cycles through.
pub const USERS: u64 = 10_000;
/// Keys the `per-op` mode rotates through (random, so no two neighbours match).
pub(super) const ROTATING_KEYS: usize = 16;

/// HKDF salt of the per-user keys (the master key is the input key material).
pub(super) const HKDF_SALT: &[u8] = b"cipherfleet user keys";

/// HKDF info for the user of operation `index`: `user:` and the user number.
pub(super) fn user_info(index: u64) -> [u8; 13] {
    let mut info = *b"user:\0\0\0\0\0\0\0\0";
    info[5..].copy_from_slice(&(index % USERS).to_be_bytes());
    info
}

/// Supplies a ready cipher instance for each operation according to the key mode.
pub struct Keys<C> {
    mode: KeyMode,
    make: fn(&[u8]) -> C,
    static_instance: C,
    rotating: Vec<Vec<u8>>,
    hkdf: Hkdf<Sha256>,
    derived: Vec<u8>,
}

impl<C> Keys<C> {
    /// `key_len` bytes of `master` key the static instance; `make` expands key bytes into an instance.
    pub fn new(mode: KeyMode, master: &[u8; 64], key_len: usize, make: fn(&[u8]) -> C) -> Self {
        Keys {
            mode,
            make,
            static_instance: make(&master[..key_len]),
            rotating: (0..ROTATING_KEYS).map(|_| super::random_bytes(key_len)).collect(),
            hkdf: Hkdf::<Sha256>::new(Some(HKDF_SALT), &master[..]),
            derived: vec![0; key_len],
        }
    }

    /// Mean nanoseconds per key setup over `iterations` setups, paying what the
    /// key mode pays per operation: the key schedule from the rotating keys,
    /// and for `hkdf-per-user` the HKDF-Expand of the user's key before it.
    /// (`static` times the same schedule: what its one setup cost.)
    pub fn time_setup(&self, iterations: u32) -> f64 {
        let iterations = iterations.max(1);
        let mut derived = [0u8; 64];
        let derived = &mut derived[..self.derived.len()];
        let start = std::time::Instant::now();
        for i in 0..u64::from(iterations) {
            let instance = match self.mode {
                KeyMode::HkdfPerUser => {
                    self.hkdf
                        .expand(&user_info(i), derived)
                        .expect("key length is far below HKDF's limit");
                    (self.make)(std::hint::black_box(derived))
                }
                KeyMode::Static | KeyMode::PerOp => {
                    (self.make)(std::hint::black_box(&self.rotating[i as usize % ROTATING_KEYS]))
                }
            };
            std::hint::black_box(instance);
        }
        start.elapsed().as_nanos() as f64 / f64::from(iterations)
    }

    /// Bytes of one keyed instance: its `size_of` plus the heap it owns,
    /// counted around a key setup (zero heap where the allocator does not count).
    pub fn state_bytes(&self) -> u64 {
        let (instance, heap) = crate::heap::owned_by(|| (self.make)(&self.rotating[0]));
        drop(instance);
        std::mem::size_of::<C>() as u64 + heap
    }

    /// Runs `f` with the instance for `index` (the operation, or the decrypt-pool
    /// slot, so a pool ciphertext is always opened with the key that sealed it).
    #[inline(always)]
    pub fn with<R>(&mut self, index: u64, f: impl FnOnce(&C) -> R) -> R {
        match self.mode {
            KeyMode::Static => f(&self.static_instance),
            KeyMode::PerOp => {
                let key = &self.rotating[index as usize % ROTATING_KEYS];
                let instance = (self.make)(std::hint::black_box(key));
                f(&instance)
            }
            KeyMode::HkdfPerUser => {
                self.hkdf
                    .expand(&user_info(index), &mut self.derived)
                    .expect("key length is far below HKDF's limit");
                let instance = (self.make)(&self.derived);
                f(&instance)
            }
        }
    }
}
