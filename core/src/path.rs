//! The path a measurement asks for and the path that ran, the build flavour,
//! and the rule that turns the worker's backends into the path that ran.
//!
//! Detection (which backend the crates pick on this CPU) lives in the agent;
//! this is the vocabulary both ends share.

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Cipher, Mode};
use crate::spec::KeyMode;
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
    /// The path a measurement asks for (`path`): one of the two builds. What
    /// ran is a [`PathUsed`], which can also be a mix.
    pub enum Path ("path") {
        Accelerated = "accelerated",
        Software = "software",
    }
}

text_enum! {
    /// The path a measurement ran on (`path_used`), from the backends its
    /// primitives really used; best first.
    pub enum PathUsed ("path used") {
        /// Every primitive the point runs used hardware instructions.
        Accelerated = "accelerated",
        /// Some primitives used hardware instructions and some ran in software:
        /// AES-GCM with AES-NI but GHASH in software, CBC-HMAC without SHA-NI.
        Partial = "partial",
        /// No primitive used hardware instructions.
        Software = "software",
    }
}

impl PathUsed {
    /// Whether what ran falls short of the accelerated path that was asked for
    /// (partly or wholly software). A software request never falls back.
    pub fn fell_back(self, requested: Path) -> bool {
        requested == Path::Accelerated && self != PathUsed::Accelerated
    }

    /// Whether what ran is not the path asked for: a fallback, or a software
    /// request that used hardware (a software build missing a soft flag).
    pub fn differs_from(self, requested: Path) -> bool {
        self != PathUsed::from(requested)
    }
}

impl From<Path> for PathUsed {
    fn from(path: Path) -> PathUsed {
        match path {
            Path::Accelerated => PathUsed::Accelerated,
            Path::Software => PathUsed::Software,
        }
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
    /// Poly1305: `avx2` (x86) or `soft` (the crate has no ARM backend). `None`
    /// from agents before `cipherfleet.measurement/2`, which did not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poly1305: Option<String>,
    /// SHA-256 (HMAC, HKDF): `sha-ni`, `armv8-sha2` or `soft`.
    pub sha256: String,
}

/// Whether a backend counts as hardware acceleration: it uses instructions
/// beyond its architecture's baseline, the ones a CPU model, a hypervisor or
/// the OS can take away. SSE2 is in every x86-64 CPU and NEON in every AArch64
/// one, so ChaCha20 on them is the path a host has when it lacks (or lost)
/// AVX2, not acceleration. The same holds for the vector code ring and
/// OpenSSL fall back to without AES-NI or AVX2: SSSE3's and NEON's
/// vector-permute AES (`vpaes`), and SSSE3 or SSE4.1 ChaCha20 and Poly1305.
pub fn is_hardware(backend: &str) -> bool {
    !matches!(backend, "soft" | "sse2" | "neon" | "vpaes" | "ssse3" | "sse4.1")
}

impl Backends {
    /// Every primitive on its portable software backend.
    pub fn soft() -> Backends {
        Backends {
            aes: "soft".into(),
            ghash: "soft".into(),
            chacha20: "soft".into(),
            poly1305: Some("soft".into()),
            sha256: "soft".into(),
        }
    }

    /// The best backends the crates have on `arch` (`std::env::consts::ARCH`
    /// spelling): what an accelerated build runs on a CPU with every feature.
    /// What a point can reach at best there is `best_on(arch).path_for(…)`.
    pub fn best_on(arch: &str) -> Backends {
        let name = |s: &str| s.to_string();
        match arch {
            "x86_64" | "x86" => Backends {
                aes: name("vaes"),
                ghash: name("clmul"),
                chacha20: name("avx2"),
                poly1305: Some(name("avx2")),
                sha256: name("sha-ni"),
            },
            "aarch64" => Backends {
                aes: name("armv8-aes"),
                ghash: name("pmull"),
                chacha20: name("neon"),
                poly1305: Some(name("soft")),
                sha256: name("armv8-sha2"),
            },
            _ => Backends::soft(),
        }
    }

    /// The path a point of `algorithm` with `key_mode` runs on here, from the
    /// primitives it uses: AES-GCM needs AES and GHASH, CBC-HMAC AES and
    /// SHA-256, (X)ChaCha20-Poly1305 ChaCha20 and Poly1305, and HKDF per user
    /// adds SHA-256 to any of them. `accelerated` when all of them ran on
    /// hardware ([`is_hardware`]), `software` when none did, `partial` else.
    /// DES has no hardware path anywhere. An unreported backend (`None`)
    /// counts as software: a path claims no more than is known to have run.
    pub fn path_for(&self, algorithm: Algorithm, key_mode: KeyMode) -> PathUsed {
        let hw = |b: &str| is_hardware(b);
        let poly1305 = self.poly1305.as_deref().is_some_and(hw);
        let mut ran: Vec<bool> = match (algorithm.cipher, algorithm.mode) {
            (Cipher::Des | Cipher::TripleDes, _) => vec![false],
            (Cipher::ChaCha20, Mode::Poly1305 | Mode::XPoly1305) => vec![hw(&self.chacha20), poly1305],
            (Cipher::ChaCha20, _) => vec![hw(&self.chacha20)],
            (_, Mode::Gcm) => vec![hw(&self.aes), hw(&self.ghash)],
            (_, Mode::CbcHmacSha256) => vec![hw(&self.aes), hw(&self.sha256)],
            _ => vec![hw(&self.aes)],
        };
        if key_mode == KeyMode::HkdfPerUser {
            ran.push(hw(&self.sha256));
        }
        match (ran.iter().all(|&h| h), ran.iter().any(|&h| h)) {
            (true, _) => PathUsed::Accelerated,
            (false, true) => PathUsed::Partial,
            (false, false) => PathUsed::Software,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86_full() -> Backends {
        Backends {
            aes: "aes-ni".into(),
            ghash: "clmul".into(),
            chacha20: "avx2".into(),
            poly1305: Some("avx2".into()),
            sha256: "sha-ni".into(),
        }
    }

    #[test]
    fn each_point_is_judged_by_the_primitives_it_runs() {
        use KeyMode::{HkdfPerUser as Hkdf, Static};
        use PathUsed::{Accelerated as Acc, Partial, Software as Soft};
        let westmere = Backends {
            aes: "aes-ni".into(),
            chacha20: "sse2".into(),
            ..Backends::soft()
        };
        let skylake = Backends {
            sha256: "soft".into(),
            ..x86_full()
        };
        let no_avx_state = Backends {
            ghash: "soft".into(),
            chacha20: "sse2".into(),
            poly1305: Some("soft".into()),
            ..x86_full()
        };
        let old_agent = Backends {
            poly1305: None,
            ..x86_full()
        };
        let a72 = Backends::best_on("aarch64");
        let cases: [(&str, &Backends, &str, KeyMode, PathUsed); 17] = [
            ("everything in hardware", &x86_full(), "aes-256-gcm", Static, Acc),
            ("GCM without CLMUL", &westmere, "aes-128-gcm", Static, Partial),
            ("CBC needs AES only", &westmere, "aes-128-cbc", Static, Acc),
            (
                "CBC-HMAC without SHA-NI",
                &westmere,
                "aes-128-cbc-hmac-sha256",
                Static,
                Partial,
            ),
            (
                "CBC-HMAC with both",
                &x86_full(),
                "aes-256-cbc-hmac-sha256",
                Static,
                Acc,
            ),
            ("HKDF without SHA-NI", &skylake, "aes-128-ctr", Hkdf, Partial),
            ("HKDF with SHA-NI", &x86_full(), "aes-128-ctr", Hkdf, Acc),
            ("SSE2 ChaCha20 is not acceleration", &westmere, "chacha20", Static, Soft),
            ("AVX2 ChaCha20 is", &x86_full(), "chacha20", Static, Acc),
            (
                "no AVX state: GHASH and ChaCha20 lose it",
                &no_avx_state,
                "chacha20-poly1305",
                Static,
                Soft,
            ),
            ("no AVX state: AES-GCM", &no_avx_state, "aes-128-gcm", Static, Partial),
            (
                "ChaCha20-Poly1305 needs both",
                &x86_full(),
                "xchacha20-poly1305",
                Static,
                Acc,
            ),
            (
                "an unreported Poly1305 is not claimed",
                &old_agent,
                "chacha20-poly1305",
                Static,
                Partial,
            ),
            ("ARM: no Poly1305 backend", &a72, "chacha20-poly1305", Static, Soft),
            ("ARM: GCM", &a72, "aes-128-gcm", Static, Acc),
            ("DES has no hardware path", &x86_full(), "des-ede3-cbc", Static, Soft),
            ("the software build", &Backends::soft(), "aes-128-gcm", Hkdf, Soft),
        ];
        for (name, backends, algorithm, key_mode, want) in cases {
            assert_eq!(backends.path_for(algorithm.parse().unwrap(), key_mode), want, "{name}");
        }
    }

    #[test]
    fn the_best_an_arch_reaches() {
        let best = |arch: &str, alg: &str| Backends::best_on(arch).path_for(alg.parse().unwrap(), KeyMode::Static);
        assert_eq!(best("x86_64", "chacha20-poly1305"), PathUsed::Accelerated);
        assert_eq!(best("aarch64", "chacha20-poly1305"), PathUsed::Software);
        assert_eq!(best("aarch64", "aes-256-cbc-hmac-sha256"), PathUsed::Accelerated);
        assert_eq!(best("riscv64", "aes-128-gcm"), PathUsed::Software);
    }

    #[test]
    fn a_fallback_is_less_than_the_accelerated_request() {
        assert!(!PathUsed::Accelerated.fell_back(Path::Accelerated));
        assert!(PathUsed::Partial.fell_back(Path::Accelerated));
        assert!(PathUsed::Software.fell_back(Path::Accelerated));
        assert!(!PathUsed::Software.fell_back(Path::Software));
        assert!(PathUsed::Partial.differs_from(Path::Software));
        assert!(!PathUsed::Software.differs_from(Path::Software));
        assert_eq!(
            PathUsed::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            ["accelerated", "partial", "software"]
        );
    }

    #[test]
    fn backends_of_an_agent_before_poly1305_was_reported_still_parse() {
        let old = r#"{"aes":"aes-ni","ghash":"clmul","chacha20":"avx2","sha256":"soft"}"#;
        let b: Backends = serde_json::from_str(old).unwrap();
        assert_eq!(b.poly1305, None);
        let json = serde_json::to_value(&b).unwrap();
        assert!(json.get("poly1305").is_none(), "nothing is invented on the way out");
    }
}
