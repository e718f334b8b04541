//! Key handling per operation: one static key, a fresh key schedule per
//! operation, or a per-user key derived with HKDF-SHA256.

use hkdf::Hkdf;
use sha2::Sha256;

use cipherfleet_core::spec::KeyMode;

/// Users the `hkdf-per-user` mode cycles through.
pub const USERS: u64 = 10_000;
/// Keys the `per-op` mode rotates through (random, so no two neighbours match).
const ROTATING_KEYS: usize = 16;

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
            hkdf: Hkdf::<Sha256>::new(Some(b"cipherfleet user keys"), &master[..]),
            derived: vec![0; key_len],
        }
    }

    /// Mean nanoseconds per key setup over `iterations` setups from the rotating keys.
    pub fn time_setup(&self, iterations: u32) -> f64 {
        let iterations = iterations.max(1);
        let start = std::time::Instant::now();
        for i in 0..iterations as usize {
            std::hint::black_box((self.make)(std::hint::black_box(&self.rotating[i % ROTATING_KEYS])));
        }
        start.elapsed().as_nanos() as f64 / f64::from(iterations)
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
                let user = index % USERS;
                let mut info = *b"user:\0\0\0\0\0\0\0\0";
                info[5..].copy_from_slice(&user.to_be_bytes());
                self.hkdf
                    .expand(&info, &mut self.derived)
                    .expect("key length is far below HKDF's limit");
                let instance = (self.make)(&self.derived);
                f(&instance)
            }
        }
    }
}
