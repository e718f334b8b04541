//! The path ring takes on a CPU. ring does not say which code it picked, so
//! the agent reads the CPU features ring's dispatcher reads and applies its
//! rules here, once: the measurement's `path_basis` is then `inferred`.
//!
//! Source: ring 0.17.14 (the version in Cargo.lock; check again on an upgrade):
//! - features: `src/cpu/intel.rs` (`cpuid_to_caps_and_set_c_flags`; AVX, AVX2 and
//!   VAES+VPCLMULQDQ only where the OS enabled their state, which
//!   `crypto/cpu_intel.c` checks in XCR0) and `src/cpu/arm/linux.rs` (`AT_HWCAP`;
//!   NEON is assumed on aarch64);
//! - AES-GCM: `src/aead/aes_gcm.rs` `DynKey::new`: AES-NI with SSSE3 and PCLMULQDQ
//!   (then VAES+VPCLMULQDQ+AVX2, or PCLMULQDQ+AVX+MOVBE, or plain PCLMULQDQ for
//!   GHASH), else SSSE3's vector-permute AES (`vpaes`) with software GHASH, else
//!   portable C; on aarch64 AES+PMULL, else NEON `vpaes` and NEON GHASH;
//! - ChaCha20-Poly1305: `src/aead/chacha20_poly1305/mod.rs` and `integrated.rs`: the
//!   integrated assembly with SSE4.1 (its AVX2 variant with AVX2+BMI2), else ChaCha20 from
//!   `src/aead/chacha.rs` (AVX2 or SSSE3 for messages over 128 bytes) and Poly1305 in C;
//!   on aarch64 the NEON assembly;
//! - SHA-256 (HKDF, `hkdf-per-user`): `src/digest/sha2/sha2_32.rs`: SHA-NI with SSSE3,
//!   else AVX or SSSE3 assembly, which has no SHA instruction and is reported `soft`;
//!   on aarch64 the SHA-2 instructions.
//!
//! ring cannot be built for software only (it has no such switch), so its
//! software figures come from hosts whose CPU lacks the instructions, such as
//! the emulated ones.

use super::CpuFlags;
use crate::path::Backends;

/// The backends ring runs on `arch` (`std::env::consts::ARCH` spelling) with
/// `cpu`, named as the measurement's `backends` name them: `aes` (`vaes`,
/// `aes-ni`, `armv8-aes`, `vpaes`, `soft`), `ghash` (`vpclmulqdq`, `clmul-avx`,
/// `clmul`, `pmull`, `neon`, `soft`), `chacha20` and `poly1305` (`avx2`,
/// `sse4.1`, `ssse3`, `neon`, `soft`), `sha256` (`sha-ni`, `armv8-sha2`, `soft`).
/// `vpaes`, SSSE3, SSE4.1 and NEON are vector code without crypto
/// instructions, which [`crate::path::is_hardware`] counts as software.
pub fn backends(arch: &str, cpu: &CpuFlags) -> Backends {
    let s = |name: &str| name.to_string();
    match arch {
        "x86_64" => {
            let (aes, ghash) = if cpu.aes && cpu.pclmulqdq && cpu.ssse3 {
                if cpu.avx2 && cpu.vaes_vpclmulqdq && cpu.avx {
                    ("vaes", "vpclmulqdq")
                } else if cpu.avx && cpu.movbe {
                    ("aes-ni", "clmul-avx")
                } else {
                    ("aes-ni", "clmul")
                }
            } else if cpu.ssse3 {
                ("vpaes", "soft")
            } else {
                ("soft", "soft")
            };
            let (chacha20, poly1305) = if cpu.sse41 {
                if cpu.avx2 && cpu.bmi2 {
                    ("avx2", "avx2")
                } else {
                    ("sse4.1", "sse4.1")
                }
            } else if cpu.avx2 {
                ("avx2", "soft")
            } else if cpu.ssse3 {
                ("ssse3", "soft")
            } else {
                ("soft", "soft")
            };
            Backends {
                aes: s(aes),
                ghash: s(ghash),
                chacha20: s(chacha20),
                poly1305: Some(s(poly1305)),
                sha256: s(if cpu.sha && cpu.ssse3 { "sha-ni" } else { "soft" }),
            }
        }
        "aarch64" => {
            let (aes, ghash) = if cpu.aes && cpu.pmull {
                ("armv8-aes", "pmull")
            } else {
                ("vpaes", "neon")
            };
            Backends {
                aes: s(aes),
                ghash: s(ghash),
                chacha20: s("neon"),
                poly1305: Some(s("neon")),
                sha256: s(if cpu.sha { "armv8-sha2" } else { "soft" }),
            }
        }
        _ => Backends::soft(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathUsed;
    use crate::spec::KeyMode;

    fn path(arch: &str, cpu: &CpuFlags, alg: &str) -> PathUsed {
        backends(arch, cpu).path_for(alg.parse().unwrap(), KeyMode::Static)
    }

    /// A Skylake server: AES-NI, PCLMULQDQ, AVX, MOVBE, AVX2, BMI2, no VAES, no SHA-NI.
    fn skylake() -> CpuFlags {
        CpuFlags {
            aes: true,
            pclmulqdq: true,
            ssse3: true,
            sse41: true,
            avx: true,
            movbe: true,
            avx2: true,
            bmi2: true,
            ..CpuFlags::default()
        }
    }

    /// Nehalem, as `qemu-x86_64 -cpu Nehalem` presents it: SSSE3 and SSE4.1, nothing newer.
    fn nehalem() -> CpuFlags {
        CpuFlags {
            ssse3: true,
            sse41: true,
            ..CpuFlags::default()
        }
    }

    #[test]
    fn ring_needs_aes_ni_and_pclmulqdq_together_for_hardware_gcm() {
        use PathUsed::{Accelerated, Software};
        let b = backends("x86_64", &skylake());
        assert_eq!((b.aes.as_str(), b.ghash.as_str()), ("aes-ni", "clmul-avx"));
        assert_eq!(path("x86_64", &skylake(), "aes-256-gcm"), Accelerated);
        let no_avx = CpuFlags {
            avx: false,
            avx2: false,
            ..skylake()
        };
        assert_eq!(backends("x86_64", &no_avx).ghash, "clmul");
        // AES-NI without PCLMULQDQ (a hypervisor masking one) is not half hardware in
        // ring: it falls to vpaes and software GHASH.
        let masked = CpuFlags {
            pclmulqdq: false,
            ..skylake()
        };
        assert_eq!(backends("x86_64", &masked).aes, "vpaes");
        assert_eq!(path("x86_64", &masked, "aes-128-gcm"), Software);
        assert_eq!(path("x86_64", &nehalem(), "aes-128-gcm"), Software);
        let ice_lake = CpuFlags {
            vaes_vpclmulqdq: true,
            sha: true,
            ..skylake()
        };
        let b = backends("x86_64", &ice_lake);
        assert_eq!(
            (b.aes.as_str(), b.ghash.as_str(), b.sha256.as_str()),
            ("vaes", "vpclmulqdq", "sha-ni")
        );
    }

    #[test]
    fn chacha20_poly1305_is_accelerated_with_avx2_and_bmi2_only() {
        assert_eq!(path("x86_64", &skylake(), "chacha20-poly1305"), PathUsed::Accelerated);
        // SSE4.1 is the path a CPU without AVX2 has: vector code, not acceleration.
        let b = backends("x86_64", &nehalem());
        assert_eq!((b.chacha20.as_str(), b.poly1305.as_deref()), ("sse4.1", Some("sse4.1")));
        assert_eq!(path("x86_64", &nehalem(), "chacha20-poly1305"), PathUsed::Software);
        let baseline = backends("x86_64", &CpuFlags::default());
        assert_eq!(baseline, Backends::soft());
    }

    #[test]
    fn aarch64_uses_the_crypto_extensions_or_neon() {
        let a72 = CpuFlags {
            aes: true,
            pmull: true,
            sha: true,
            ..CpuFlags::default()
        };
        assert_eq!(path("aarch64", &a72, "aes-256-gcm"), PathUsed::Accelerated);
        assert_eq!(path("aarch64", &CpuFlags::default(), "aes-256-gcm"), PathUsed::Software);
        assert_eq!(backends("aarch64", &CpuFlags::default()).aes, "vpaes");
        // NEON is every aarch64 CPU's: ring's ChaCha20-Poly1305 there is software by the rule.
        assert_eq!(path("aarch64", &a72, "chacha20-poly1305"), PathUsed::Software);
        assert_eq!(
            backends("aarch64", &a72).path_for("aes-128-gcm".parse().unwrap(), KeyMode::HkdfPerUser),
            PathUsed::Accelerated
        );
    }
}
