//! The kernel crypto API: its chosen drivers from `/proc/crypto`, and AF_ALG.
//!
//! - [`proc_crypto`]: `/proc/crypto` read back, the driver the kernel picks per name.
//! - [`af_alg`]: AF_ALG sockets with raw system calls.
//!
//! The accelerated path binds the algorithm name (`gcm(aes)`), so the kernel
//! picks its driver as it does for dm-crypt or IPsec; the software path binds
//! the generic drivers by name (`gcm_base(ctr(aes-generic),ghash-generic)`),
//! which the kernel instantiates whatever else it has: the kernel's own
//! software path, measured on the same host.

pub mod af_alg;
pub mod proc_crypto;

use cipherfleet_core::algorithm::{Algorithm, Mode};
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::CpuFlags;
use cipherfleet_core::provider::facts::{AfAlg, KernelCrypto};
use cipherfleet_core::provider::kernel::NAMES;

use self::af_alg::{Kind, Transform};

/// The AF_ALG type and the names to try, in order, for `algorithm` on `path`:
/// the algorithm name for the accelerated path, generic drivers for the
/// software path (`aes-generic`; kernels since 5.4 also have `aes-fixed-time`'s
/// sibling names, and 6.x may call ChaCha20's generic code `chacha20-lib`).
pub fn names(algorithm: Algorithm, path: Path) -> Option<(Kind, Vec<&'static str>)> {
    let accelerated = path == Path::Accelerated;
    Some(match algorithm.mode {
        Mode::Cbc if algorithm.uses_aes() => (
            Kind::Skcipher,
            if accelerated {
                vec!["cbc(aes)"]
            } else {
                vec!["cbc(aes-generic)", "cbc(aes-fixed-time)"]
            },
        ),
        Mode::Ctr if algorithm.uses_aes() => (
            Kind::Skcipher,
            if accelerated {
                vec!["ctr(aes)"]
            } else {
                vec!["ctr(aes-generic)", "ctr(aes-fixed-time)"]
            },
        ),
        Mode::Gcm => (
            Kind::Aead,
            if accelerated {
                vec!["gcm(aes)"]
            } else {
                vec![
                    "gcm_base(ctr(aes-generic),ghash-generic)",
                    "gcm_base(ctr(aes-fixed-time),ghash-generic)",
                ]
            },
        ),
        Mode::Poly1305 => (
            Kind::Aead,
            if accelerated {
                vec!["rfc7539(chacha20,poly1305)"]
            } else {
                vec![
                    "rfc7539(chacha20-generic,poly1305-generic)",
                    "rfc7539(chacha20-lib,poly1305-generic)",
                ]
            },
        ),
        _ => return None,
    })
}

/// A socket bound to what measures `algorithm` on `path`, or why there is none.
pub fn bind_for(algorithm: Algorithm, path: Path) -> Result<Transform, String> {
    let (kind, candidates) = names(algorithm, path).ok_or_else(|| format!("the kernel provider has no {algorithm}"))?;
    let mut why = String::new();
    for name in &candidates {
        match Transform::bind(kind, name) {
            Ok(t) => return Ok(t),
            Err(e) if why.is_empty() => why = af_alg::explain(kind, name, &e),
            Err(_) => {}
        }
    }
    Err(why)
}

/// The driver `/proc/crypto` lists for what `transform` is bound to: the
/// chosen one for an algorithm name, the name itself for a driver name.
pub fn driver_of(transform: &Transform) -> (String, String) {
    let text = std::fs::read_to_string("/proc/crypto").unwrap_or_default();
    let entries = proc_crypto::parse(&text);
    if let Some((e, _)) = proc_crypto::chosen(&entries, &transform.name) {
        return (e.driver.clone(), e.module.clone());
    }
    match entries.iter().find(|e| e.driver == transform.name) {
        Some(e) => (e.driver.clone(), e.module.clone()),
        None => (transform.name.clone(), "unknown".to_string()),
    }
}

/// Whether AF_ALG `kind` works here: bound to `probe_name`, or why not.
fn af_alg(kind: Kind, probe_name: &str) -> AfAlg {
    match Transform::bind(kind, probe_name) {
        Ok(_) => AfAlg {
            available: true,
            reason: None,
        },
        Err(e) => AfAlg {
            available: false,
            reason: Some(af_alg::explain(kind, probe_name, &e)),
        },
    }
}

/// The kernel crypto API on this host: AF_ALG per type and, after binding
/// every name once (which instantiates templates such as `gcm(aes)` the way
/// a first user would), the driver the kernel picks for each.
pub fn facts(arch: &str, cpu: &CpuFlags) -> Option<KernelCrypto> {
    let af_alg_skcipher = af_alg(Kind::Skcipher, "cbc(aes)");
    let af_alg_aead = af_alg(Kind::Aead, "gcm(aes)");
    for name in NAMES {
        let kind = if name.contains("gcm") || name.contains("poly1305") {
            Kind::Aead
        } else {
            Kind::Skcipher
        };
        let _ = Transform::bind(kind, name);
    }
    let text = std::fs::read_to_string("/proc/crypto").ok()?;
    let (drivers, missing) = proc_crypto::drivers(&text, arch, cpu);
    Some(KernelCrypto {
        drivers,
        missing,
        af_alg_skcipher,
        af_alg_aead,
    })
}
