//! Which implementation the crypto crates pick on this machine, and the build flavour.
//!
//! The RustCrypto crates detect CPU features at run time and can only be forced
//! to software at build time (`--cfg aes_backend="soft"` and friends). The
//! software-flavoured sibling binary is built with those flags plus
//! `--cfg cipherfleet_soft`, so a binary always knows which flavour it is.
//! The detection below mirrors each crate's own dispatch so that `path_used`
//! reports what actually ran, not what was requested.

use cipherfleet_core::path::{Backends, Flavour};

/// The flavour this binary was built as.
pub const FLAVOUR: Flavour = if cfg!(cipherfleet_soft) {
    Flavour::Software
} else {
    Flavour::Accelerated
};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the software flavour can check this; in the accelerated build it would pass vacuously.
    #[cfg(cipherfleet_soft)]
    #[test]
    fn software_build_reports_soft_backends() {
        assert_eq!(FLAVOUR, Flavour::Software);
        let b = backends();
        for (primitive, name) in [
            ("aes", &b.aes),
            ("ghash", &b.ghash),
            ("chacha20", &b.chacha20),
            ("sha256", &b.sha256),
        ] {
            assert_eq!(name, "soft", "{primitive}");
        }
    }

    #[cfg(not(cipherfleet_soft))]
    #[test]
    fn accelerated_build_says_so() {
        assert_eq!(FLAVOUR, Flavour::Accelerated);
    }
}
