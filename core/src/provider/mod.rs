//! Providers: the implementations a point can be measured on, what each can
//! run, and how each knows the path it ran.
//!
//! RustCrypto is built into the agent and is the default; ring is built in
//! too (its assembly, as rustls services run it); the host's OpenSSL is
//! driven through its `openssl speed` (a static agent cannot load libcrypto);
//! the kernel crypto API is reached through AF_ALG sockets.
//!
//! - this file: [`Provider`], [`Provider::runs`] and [`PathBasis`].
//! - [`ring`]: the path ring takes on a CPU, from the features its dispatcher reads.
//! - [`openssl`]: OpenSSL's capability masks and the path it takes with and without them.
//! - [`kernel`]: what a kernel crypto driver runs on hardware, and the module that brings it.
//! - [`facts`]: what the agent found about each provider on its host
//!   (capabilities and why not, the kernel's drivers, the OpenSSL build).

pub mod facts;
pub mod kernel;
pub mod openssl;
pub mod ring;

use serde::{Deserialize, Serialize};

use crate::algorithm::{Algorithm, Cipher, Mode};
use crate::text_enum;

text_enum! {
    /// The implementation a point is measured on.
    #[derive(Default)]
    pub enum Provider ("provider") {
        /// The RustCrypto crates built into the agent: the default, and the
        /// one provider with a software build of its own.
        #[default]
        RustCrypto = "rustcrypto",
        /// ring, built into the agent: what rustls services run.
        Ring = "ring",
        /// The host's OpenSSL, through its `openssl speed`: what nginx,
        /// HAProxy, PostgreSQL and most daemons link.
        Openssl = "openssl",
        /// The kernel crypto API through AF_ALG: what dm-crypt, IPsec and kTLS use.
        Kernel = "kernel",
    }
}

impl Provider {
    /// Whether this is the built-in default (JSON then leaves the field out,
    /// so a RustCrypto record reads as it did before providers).
    pub fn is_rustcrypto(&self) -> bool {
        *self == Provider::RustCrypto
    }

    /// Whether the provider has an implementation of `algorithm` that the
    /// agent can drive. The one list of what each provider runs:
    ///
    /// - rustcrypto: every algorithm;
    /// - ring: AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305 (its whole AEAD list but for
    ///   the QUIC header protection);
    /// - openssl: what `openssl speed -evp` runs among ours: AES ECB, CBC, CTR, GCM, CCM and
    ///   OCB, ChaCha20, ChaCha20-Poly1305, DES and 3DES (not XChaCha20-Poly1305, which OpenSSL
    ///   lacks, nor our encrypt-then-MAC CBC-HMAC-SHA256: OpenSSL's `aes-*-cbc-hmac-sha256`
    ///   is TLS's MAC-then-encrypt); a given build may still lack one (DES needs 3.x's
    ///   legacy provider, ChaCha20 and OCB 1.1.0), which its run then says;
    /// - kernel: `cbc(aes)`, `ctr(aes)` and `gcm(aes)` for every key size, and
    ///   `rfc7539(chacha20,poly1305)`. (The kernel's `xts(aes)` has no algorithm of ours.)
    pub fn runs(self, algorithm: Algorithm) -> bool {
        let aes = algorithm.uses_aes();
        match self {
            Provider::RustCrypto => true,
            Provider::Ring => matches!(
                (algorithm.cipher, algorithm.mode),
                (Cipher::Aes128 | Cipher::Aes256, Mode::Gcm) | (Cipher::ChaCha20, Mode::Poly1305)
            ),
            Provider::Openssl => match algorithm.mode {
                Mode::Ecb | Mode::Cbc => true,
                Mode::Ctr | Mode::Gcm | Mode::Ccm | Mode::Ocb => aes,
                Mode::Stream | Mode::Poly1305 => algorithm.cipher == Cipher::ChaCha20,
                Mode::XPoly1305 | Mode::CbcHmacSha256 => false,
            },
            Provider::Kernel => match algorithm.mode {
                Mode::Cbc | Mode::Ctr | Mode::Gcm => aes,
                Mode::Poly1305 => true,
                _ => false,
            },
        }
    }

    /// The algorithms the provider runs, in table order.
    pub fn algorithms(self) -> Vec<Algorithm> {
        crate::algorithm::ALL
            .iter()
            .copied()
            .filter(|a| self.runs(*a))
            .collect()
    }

    /// How a measurement on this provider knows its `path_used`.
    pub fn path_basis(self) -> PathBasis {
        match self {
            Provider::RustCrypto => PathBasis::Detected,
            Provider::Ring | Provider::Openssl | Provider::Kernel => PathBasis::Inferred,
        }
    }
}

/// The CPU features a provider's dispatcher reads, each as usable here (AVX-class
/// features only where the OS enabled their register state). ring and OpenSSL
/// read their own subsets ([`ring::backends`], [`openssl::backends`]); NEON is
/// part of aarch64, and `aes`, `pmull`, `sha` are its crypto extensions there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFlags {
    pub aes: bool,
    pub pclmulqdq: bool,
    pub ssse3: bool,
    pub sse41: bool,
    pub avx: bool,
    pub movbe: bool,
    pub avx2: bool,
    pub bmi2: bool,
    pub avx512f: bool,
    /// VAES and VPCLMULQDQ both (ring and OpenSSL use them together).
    pub vaes_vpclmulqdq: bool,
    /// SHA-NI (x86) or the SHA-2 instructions (aarch64).
    pub sha: bool,
    /// aarch64: PMULL.
    pub pmull: bool,
    /// aarch64 (and 32-bit ARM): NEON.
    pub neon: bool,
}

text_enum! {
    /// How a measurement's `path_used` was known.
    #[derive(Default)]
    pub enum PathBasis ("path basis") {
        /// From the backends the implementation's own run-time detection picks
        /// (the RustCrypto crates: `agent/src/backend.rs` mirrors each crate's dispatch
        /// and is checked against `aes::hardware_accelerated()`).
        #[default]
        Detected = "detected",
        /// From what the implementation's dispatcher reads, not from the
        /// implementation itself, which does not say: the CPU features ring
        /// checks ([`ring::backends`]), OpenSSL's capability vector and build
        /// ([`openssl::backends`]), or the driver the kernel ranks first in `/proc/crypto`.
        Inferred = "inferred",
    }
}

impl PathBasis {
    /// Whether the path was detected (JSON then leaves the field out).
    pub fn is_detected(&self) -> bool {
        *self == PathBasis::Detected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: Provider) -> Vec<&'static str> {
        p.algorithms().iter().map(|a| a.name()).collect()
    }

    #[test]
    fn each_provider_runs_its_own_list() {
        assert_eq!(Provider::RustCrypto.algorithms().len(), crate::algorithm::ALL.len());
        assert_eq!(
            names(Provider::Ring),
            ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"]
        );
        assert_eq!(
            names(Provider::Kernel),
            [
                "aes-128-cbc",
                "aes-192-cbc",
                "aes-256-cbc",
                "aes-128-ctr",
                "aes-192-ctr",
                "aes-256-ctr",
                "aes-128-gcm",
                "aes-192-gcm",
                "aes-256-gcm",
                "chacha20-poly1305"
            ]
        );
        let openssl = names(Provider::Openssl);
        for yes in [
            "aes-128-ecb",
            "aes-256-ocb",
            "aes-192-ccm",
            "chacha20",
            "chacha20-poly1305",
            "des-ede3-cbc",
        ] {
            assert!(openssl.contains(&yes), "{yes}");
        }
        for no in ["xchacha20-poly1305", "aes-128-cbc-hmac-sha256"] {
            assert!(!openssl.contains(&no), "{no}");
        }
    }

    #[test]
    fn a_rustcrypto_record_is_unchanged_and_others_say_what_ran() {
        use crate::measurement::{Implementation, Measurement};
        let spec = crate::spec::Suite::Quick.expand(1)[0].clone();
        let plain = serde_json::to_value(Measurement::failed(&spec, "x".into(), None)).unwrap();
        for absent in ["provider", "path_basis", "implementation"] {
            assert!(plain.get(absent).is_none(), "{absent}: {plain}");
        }
        let ring = Measurement::failed(&spec, "x".into(), None).on_provider(
            Provider::Ring,
            Some(Implementation {
                name: "ring 0.17.14".into(),
                ..Implementation::default()
            }),
        );
        let json = serde_json::to_value(&ring).unwrap();
        assert_eq!(json["provider"], "ring");
        assert_eq!(json["path_basis"], "inferred");
        assert_eq!(json["implementation"], serde_json::json!({"name": "ring 0.17.14"}));
        assert_eq!(serde_json::from_value::<Measurement>(json).unwrap(), ring);
        let old: Measurement = serde_json::from_value(plain).unwrap();
        assert_eq!(
            (old.provider, old.path_basis),
            (Provider::RustCrypto, PathBasis::Detected)
        );
    }

    #[test]
    fn a_provider_reads_from_text_and_defaults_to_rustcrypto() {
        assert_eq!("ring".parse::<Provider>().unwrap(), Provider::Ring);
        assert_eq!(Provider::default(), Provider::RustCrypto);
        let e = "boringssl".parse::<Provider>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown provider 'boringssl'; accepted: rustcrypto, ring, openssl, kernel"
        );
        assert_eq!(Provider::Ring.path_basis(), PathBasis::Inferred);
        assert_eq!(Provider::RustCrypto.path_basis(), PathBasis::Detected);
    }
}
