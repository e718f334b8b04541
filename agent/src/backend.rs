//! Which implementation the crypto crates pick on this machine, and the build flavour.
//!
//! The RustCrypto crates detect CPU features at run time and can only be forced
//! to software at build time (`--cfg aes_backend="soft"` and friends). The
//! software-flavoured sibling binary is built with those flags plus
//! `--cfg cipherfleet_soft`, so a binary always knows which flavour it is.
//! The detection below mirrors each crate's own dispatch so that `path_used`
//! reports what actually ran, not what was requested.

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Cipher, Mode};

/// Build flavour of this binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavour {
    /// Run-time detection picks hardware instructions where present.
    Accelerated,
    /// Built with every crypto crate forced to its portable software backend.
    Software,
}

/// The flavour this binary was built as.
pub const FLAVOUR: Flavour = if cfg!(cipherfleet_soft) {
    Flavour::Software
} else {
    Flavour::Accelerated
};

/// The flavour's name as reports print it.
pub const FLAVOUR_NAME: &str = if cfg!(cipherfleet_soft) {
    "software"
} else {
    "accelerated"
};

/// The path a measurement ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    Accelerated,
    Software,
}

impl Path {
    pub fn as_str(self) -> &'static str {
        match self {
            Path::Accelerated => "accelerated",
            Path::Software => "software",
        }
    }
}

/// Backend names each primitive uses in this process.
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

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod detect {
    cpufeatures::new!(cpuid_aes, "aes");
    cpufeatures::new!(cpuid_vaes, "vaes");
    cpufeatures::new!(cpuid_clmul, "avx", "pclmulqdq");
    cpufeatures::new!(cpuid_avx2, "avx2");
    cpufeatures::new!(cpuid_sse2, "sse2");
    cpufeatures::new!(cpuid_shani, "sha", "sse2", "ssse3", "sse4.1");
    pub fn aes() -> bool {
        cpuid_aes::get()
    }
    pub fn vaes() -> bool {
        cpuid_vaes::get()
    }
    pub fn clmul() -> bool {
        cpuid_clmul::get()
    }
    pub fn avx2() -> bool {
        cpuid_avx2::get()
    }
    pub fn sse2() -> bool {
        cpuid_sse2::get()
    }
    pub fn shani() -> bool {
        cpuid_shani::get()
    }
}

#[cfg(target_arch = "aarch64")]
mod detect {
    cpufeatures::new!(cpuid_aes, "aes");
    cpufeatures::new!(cpuid_sha2, "sha2");
    pub fn aes() -> bool {
        cpuid_aes::get()
    }
    pub fn sha2() -> bool {
        cpuid_sha2::get()
    }
}

/// Detects the backends as the crates themselves would choose them.
pub fn backends() -> Backends {
    let soft = FLAVOUR == Flavour::Software;
    let pick = |accelerated: Option<&'static str>| -> String {
        match accelerated {
            Some(name) if !soft => name.to_string(),
            _ => "soft".to_string(),
        }
    };
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        let aes = if detect::vaes() && detect::aes() {
            Some("vaes")
        } else if detect::aes() {
            Some("aes-ni")
        } else {
            None
        };
        let chacha = if detect::avx2() {
            Some("avx2")
        } else if detect::sse2() {
            Some("sse2")
        } else {
            None
        };
        Backends {
            aes: pick(aes),
            ghash: pick(detect::clmul().then_some("clmul")),
            chacha20: pick(chacha),
            sha256: pick(detect::shani().then_some("sha-ni")),
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let aes = detect::aes();
        Backends {
            aes: pick(aes.then_some("armv8-aes")),
            ghash: pick(aes.then_some("pmull")),
            chacha20: pick(Some("neon")),
            sha256: pick(detect::sha2().then_some("armv8-sha2")),
        }
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = pick;
        Backends {
            aes: "soft".into(),
            ghash: "soft".into(),
            chacha20: "soft".into(),
            sha256: "soft".into(),
        }
    }
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

    #[test]
    fn software_build_reports_soft_backends() {
        if FLAVOUR == Flavour::Software {
            assert_eq!(backends(), all_soft());
        }
    }
}
