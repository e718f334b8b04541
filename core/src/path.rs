//! The path a measurement asks for and the path that ran, the build flavour,
//! and the rule that turns the worker's backends into a path.
//!
//! Detection (which backend the crates pick on this CPU) lives in the agent;
//! this is the vocabulary both ends share.

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Cipher, Mode};
use crate::text_enum;

text_enum! {
    /// Build flavour of an agent binary.
    pub enum Flavour ("build flavour") {
        /// Run-time detection picks hardware instructions where present.
        Accelerated = "accelerated",
        /// Built with every crypto crate forced to its portable software backend.
        Software = "software",
    }
}

text_enum! {
    /// The path a measurement asks for (`path`) or ran on (`path_used`).
    pub enum Path ("path") {
        Accelerated = "accelerated",
        Software = "software",
    }
}

/// Backend names each primitive uses in a process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backends {
    /// `aes-ni`, `vaes`, `armv8-aes` or `soft`.
    pub aes: String,
    /// GHASH/POLYVAL multiply: `clmul` (x86, needs AVX + PCLMULQDQ), `pmull` (ARM) or `soft`.
    pub ghash: String,
    /// ChaCha20: `avx2`, `sse2`, `neon` or `soft`.
    pub chacha20: String,
    /// SHA-256 (HMAC, HKDF): `sha-ni`, `armv8-sha2` or `soft`.
    pub sha256: String,
}

impl Backends {
    /// The path an algorithm runs on here: accelerated only when every primitive it
    /// depends on for its bulk work runs on hardware instructions. DES has no
    /// hardware path anywhere, so it is always `software`.
    pub fn path_for(&self, alg: Algorithm) -> Path {
        let hw = |b: &str| b != "soft";
        let accelerated = match (alg.cipher, alg.mode) {
            (Cipher::Des | Cipher::TripleDes, _) => false,
            (Cipher::ChaCha20, _) => hw(&self.chacha20),
            (_, Mode::Gcm) => hw(&self.aes) && hw(&self.ghash),
            (_, Mode::CbcHmacSha256) => hw(&self.aes),
            _ => hw(&self.aes),
        };
        if accelerated { Path::Accelerated } else { Path::Software }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_soft() -> Backends {
        Backends {
            aes: "soft".into(),
            ghash: "soft".into(),
            chacha20: "soft".into(),
            sha256: "soft".into(),
        }
    }

    #[test]
    fn gcm_needs_both_aes_and_ghash_hardware() {
        let gcm: Algorithm = "aes-256-gcm".parse().unwrap();
        let westmere = Backends {
            aes: "aes-ni".into(),
            ..all_soft()
        };
        assert_eq!(westmere.path_for(gcm), Path::Software);
        let modern = Backends {
            aes: "aes-ni".into(),
            ghash: "clmul".into(),
            ..all_soft()
        };
        assert_eq!(modern.path_for(gcm), Path::Accelerated);
        assert_eq!(modern.path_for("aes-128-cbc".parse().unwrap()), Path::Accelerated);
    }

    #[test]
    fn des_is_always_software() {
        let b = Backends {
            aes: "aes-ni".into(),
            ghash: "clmul".into(),
            chacha20: "avx2".into(),
            sha256: "sha-ni".into(),
        };
        assert_eq!(b.path_for("des-ede3-cbc".parse().unwrap()), Path::Software);
    }
}
