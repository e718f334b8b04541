//! Known-answer tests (KATs) for every algorithm the benchmark engine can run.
//!
//! Each family lives in its own file and checks the RustCrypto crates the engine
//! uses against published vectors (NIST SP 800-38A/C/D, FIPS 81, SP 800-67,
//! RFC 3610, RFC 7253, RFC 8439, RFC 4231, RFC 5869, Wycheproof, ...). AEAD
//! vectors are checked in both directions, and a flipped tag bit must be
//! rejected. Where the published vectors do not use the engine's exact
//! parameterisation (OCB with AES-192/256, CBC-HMAC-SHA256), a round trip with
//! tamper rejection on that parameterisation is added.
//!
//! Only the crates' public API is used, so the same KATs exercise whichever
//! backend (AES-NI, ARMv8, bitsliced software, ...) the crates pick at run time
//! or were forced to at build time.
//!
//! - this file: the public API ([`KatOutcome`], [`run_for`], [`run_hkdf`],
//!   [`run_all`], [`check`]) and which groups of KATs cover which algorithm.
//! - `harness`: what every family shares: hex vectors, comparisons, the AEAD
//!   check against a published vector, the AEAD round trip, the panic guard.
//! - `aes_modes`: AES ECB, CBC and CTR (SP 800-38A, FIPS 197), plus the
//!   block-mode helpers DES reuses.
//! - `gcm`, `ccm`, `ocb`: the AES AEAD modes (McGrew & Viega / SP 800-38D;
//!   RFC 3610, SP 800-38C, NIST CAVP; RFC 7253).
//! - `chacha`: ChaCha20, ChaCha20-Poly1305 and XChaCha20-Poly1305 (RFC 8439).
//! - `mac`: HMAC-SHA256, HKDF-SHA256 and the CBC-HMAC-SHA256 construction.
//! - `des`: DES and three-key triple DES in ECB and CBC (FIPS 81, SP 800-20,
//!   SP 800-67).
//! - `ring`: ring's AEADs against the GCM and RFC 8439 vectors ([`run_for_provider`]).

mod aes_modes;
mod ccm;
mod chacha;
mod des;
mod gcm;
mod harness;
mod kernel;
mod mac;
mod ocb;
mod openssl;
mod ring;

use std::fmt::Write as _;

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::provider::Provider;

/// One known-answer test's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KatOutcome {
    /// What was checked, e.g. `SP 800-38A F.2.5 CBC-AES256.Encrypt`.
    pub name: String,
    /// Whether the implementation produced the expected answer.
    pub passed: bool,
    /// What mismatched, when it failed.
    pub detail: Option<String>,
}

impl KatOutcome {
    pub(crate) fn pass(name: impl Into<String>) -> Self {
        KatOutcome {
            name: name.into(),
            passed: true,
            detail: None,
        }
    }

    pub(crate) fn fail(name: impl Into<String>, detail: impl Into<String>) -> Self {
        KatOutcome {
            name: name.into(),
            passed: false,
            detail: Some(detail.into()),
        }
    }

    /// Passed when `problems` is empty; otherwise failed with the problems joined.
    pub(crate) fn from_problems(name: impl Into<String>, problems: Vec<String>) -> Self {
        if problems.is_empty() {
            Self::pass(name)
        } else {
            Self::fail(name, problems.join("; "))
        }
    }
}

/// A group of KATs; several algorithms may share one (e.g. CBC and CBC-HMAC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    AesEcb(AesBits),
    AesCbc(AesBits),
    AesCtr(AesBits),
    AesGcm(AesBits),
    AesCcm(AesBits),
    AesOcb(AesBits),
    CbcHmacSha256(AesBits),
    HmacSha256,
    HkdfSha256,
    ChaCha20,
    ChaCha20Poly1305,
    XChaCha20Poly1305,
    DesEcb,
    DesCbc,
    TdesEcb,
    TdesCbc,
}

/// AES key size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AesBits {
    B128,
    B192,
    B256,
}

impl AesBits {
    pub(crate) fn bits(self) -> u32 {
        match self {
            AesBits::B128 => 128,
            AesBits::B192 => 192,
            AesBits::B256 => 256,
        }
    }
}

fn groups_for(alg: Algorithm) -> Vec<Group> {
    let aes = match alg.cipher {
        Cipher::Aes128 => Some(AesBits::B128),
        Cipher::Aes192 => Some(AesBits::B192),
        Cipher::Aes256 => Some(AesBits::B256),
        _ => None,
    };
    match (alg.cipher, alg.mode, aes) {
        (_, Mode::Ecb, Some(b)) => vec![Group::AesEcb(b)],
        (_, Mode::Cbc, Some(b)) => vec![Group::AesCbc(b)],
        (_, Mode::Ctr, Some(b)) => vec![Group::AesCtr(b)],
        (_, Mode::Gcm, Some(b)) => vec![Group::AesGcm(b)],
        (_, Mode::Ccm, Some(b)) => vec![Group::AesCcm(b)],
        (_, Mode::Ocb, Some(b)) => vec![Group::AesOcb(b)],
        (_, Mode::CbcHmacSha256, Some(b)) => vec![
            Group::AesCbc(b),
            Group::HmacSha256,
            Group::HkdfSha256,
            Group::CbcHmacSha256(b),
        ],
        (Cipher::ChaCha20, Mode::Stream, _) => vec![Group::ChaCha20],
        (Cipher::ChaCha20, Mode::Poly1305, _) => vec![Group::ChaCha20Poly1305],
        (Cipher::ChaCha20, Mode::XPoly1305, _) => vec![Group::XChaCha20Poly1305],
        (Cipher::Des, Mode::Ecb, _) => vec![Group::DesEcb],
        (Cipher::Des, Mode::Cbc, _) => vec![Group::DesCbc],
        (Cipher::TripleDes, Mode::Ecb, _) => vec![Group::TdesEcb],
        (Cipher::TripleDes, Mode::Cbc, _) => vec![Group::TdesCbc],
        // A combination `cipherfleet_core::algorithm::ALL` does not list: nothing covers it.
        _ => Vec::new(),
    }
}

fn run_group(group: Group) -> Vec<KatOutcome> {
    let label = format!("{group:?}");
    harness::guarded(&label, || match group {
        Group::AesEcb(b) => aes_modes::ecb(b),
        Group::AesCbc(b) => aes_modes::cbc(b),
        Group::AesCtr(b) => aes_modes::ctr(b),
        Group::AesGcm(b) => gcm::run(b),
        Group::AesCcm(b) => ccm::run(b),
        Group::AesOcb(b) => ocb::run(b),
        Group::CbcHmacSha256(b) => mac::cbc_hmac_sha256(b),
        Group::HmacSha256 => mac::hmac_sha256(),
        Group::HkdfSha256 => mac::hkdf_sha256(),
        Group::ChaCha20 => chacha::chacha20(),
        Group::ChaCha20Poly1305 => chacha::chacha20_poly1305(),
        Group::XChaCha20Poly1305 => chacha::xchacha20_poly1305(),
        Group::DesEcb => des::des_ecb(),
        Group::DesCbc => des::des_cbc(),
        Group::TdesEcb => des::tdes_ecb(),
        Group::TdesCbc => des::tdes_cbc(),
    })
}

/// Runs every KAT that covers `alg` (for CBC-HMAC-SHA256 that includes the CBC,
/// HMAC-SHA256 and HKDF-SHA256 KATs plus the construction's own checks).
pub fn run_for(alg: Algorithm) -> Vec<KatOutcome> {
    groups_for(alg).into_iter().flat_map(run_group).collect()
}

/// Runs the KATs of `alg` on `provider`'s implementation: the crates' own for
/// `rustcrypto`, ring's for `ring`, AF_ALG's answers from the implementation
/// `path` binds for `kernel`, `openssl enc`'s for `openssl` (`openssl_binary`).
pub fn run_for_provider(
    provider: Provider,
    alg: Algorithm,
    path: cipherfleet_core::path::Path,
    openssl_binary: Option<&std::path::Path>,
) -> Vec<KatOutcome> {
    match provider {
        Provider::RustCrypto => run_for(alg),
        Provider::Ring => ring::run_for(alg),
        Provider::Kernel => kernel::run_for(alg, path),
        Provider::Openssl => openssl_binary.map(|b| openssl::run_for(b, alg)).unwrap_or_default(),
    }
}

/// The KATs of the providers outside the binary, where they run here: the
/// kernel's through AF_ALG for each of its algorithms, and `openssl enc`'s.
pub fn run_providers(openssl_binary: Option<&std::path::Path>) -> Vec<KatOutcome> {
    let mut out: Vec<KatOutcome> = Provider::Kernel
        .algorithms()
        .into_iter()
        .flat_map(|a| kernel::run_for(a, cipherfleet_core::path::Path::Accelerated))
        .collect();
    if let Some(binary) = openssl_binary {
        for alg in ["aes-128-gcm", "aes-192-gcm", "aes-256-gcm", "chacha20-poly1305"] {
            out.extend(openssl::run_for(binary, alg.parse().expect("a known algorithm")));
        }
    }
    out
}

/// Runs the HKDF-SHA256 KATs (RFC 5869), used by the engine's hkdf-per-user key mode.
pub fn run_hkdf() -> Vec<KatOutcome> {
    run_group(Group::HkdfSha256)
}

/// Runs every KAT once (each KAT appears once even if several algorithms share it).
pub fn run_all() -> Vec<KatOutcome> {
    let mut groups: Vec<Group> = Vec::new();
    let wanted = cipherfleet_core::algorithm::ALL
        .iter()
        .flat_map(|a| groups_for(*a))
        .chain(std::iter::once(Group::HkdfSha256));
    for g in wanted {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let mut out: Vec<KatOutcome> = Vec::new();
    // ring is built in too: its KATs run wherever the crates' do.
    out.extend(Provider::Ring.algorithms().into_iter().flat_map(ring::run_for));
    for g in groups {
        for o in run_group(g) {
            // Groups never share names, but keep the promise even if one is added that does.
            if !out.iter().any(|seen| seen.name == o.name) {
                out.push(o);
            }
        }
    }
    out
}

/// Convenience: Ok(()) when every outcome for `alg` passed, else Err with a
/// one-line description of the failures.
pub fn check(alg: Algorithm) -> Result<(), String> {
    summarize(alg.name(), &run_for(alg))
}

fn summarize(what: &str, outcomes: &[KatOutcome]) -> Result<(), String> {
    if outcomes.is_empty() {
        return Err(format!("no known-answer tests cover {what}"));
    }
    let failed: Vec<&KatOutcome> = outcomes.iter().filter(|o| !o.passed).collect();
    if failed.is_empty() {
        return Ok(());
    }
    let mut line = format!(
        "{} of {} known-answer tests failed for {what}: ",
        failed.len(),
        outcomes.len()
    );
    for (i, o) in failed.iter().enumerate() {
        if i > 0 {
            line.push_str("; ");
        }
        line.push_str(&o.name);
        if let Some(d) = &o.detail {
            let _ = write!(line, " ({d})");
        }
    }
    // Keep it to one line whatever a detail contains.
    Err(line.replace(['\n', '\r'], " "))
}

#[cfg(test)]
mod tests {
    use super::harness::hex;
    use super::*;
    use cipherfleet_core::algorithm::ALL;

    fn failures(outcomes: &[KatOutcome]) -> Vec<String> {
        outcomes
            .iter()
            .filter(|o| !o.passed)
            .map(|o| format!("{}: {}", o.name, o.detail.as_deref().unwrap_or("")))
            .collect()
    }

    #[test]
    fn every_kat_passes() {
        let all = run_all();
        assert!(all.len() > 50, "suspiciously few KATs: {}", all.len());
        let failed = failures(&all);
        assert!(failed.is_empty(), "failed KATs:\n{}", failed.join("\n"));
    }

    #[test]
    fn run_all_lists_each_kat_once() {
        let all = run_all();
        let mut names: Vec<&str> = all.iter().map(|o| o.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate KAT names in run_all()");
    }

    #[test]
    fn every_algorithm_is_covered_and_passes() {
        for alg in ALL {
            let outcomes = run_for(*alg);
            assert!(!outcomes.is_empty(), "no KATs for {}", alg.name());
            let failed = failures(&outcomes);
            assert!(failed.is_empty(), "{}: {}", alg.name(), failed.join(" | "));
            assert_eq!(check(*alg), Ok(()), "{}", alg.name());
        }
    }

    #[test]
    fn run_for_is_a_subset_of_run_all() {
        let all: Vec<String> = run_all().into_iter().map(|o| o.name).collect();
        for alg in ALL {
            for o in run_for(*alg) {
                assert!(all.contains(&o.name), "{} missing from run_all()", o.name);
            }
        }
    }

    #[test]
    fn ring_passes_the_published_vectors_of_its_three_aeads() {
        for alg in Provider::Ring.algorithms() {
            let outcomes = run_for_provider(Provider::Ring, alg, cipherfleet_core::path::Path::Accelerated, None);
            assert!(outcomes.len() >= 3, "{alg}: {outcomes:?}");
            assert!(outcomes.iter().all(|o| o.name.starts_with("ring: ")), "{outcomes:?}");
            let failed = failures(&outcomes);
            assert!(failed.is_empty(), "{alg}: {}", failed.join(" | "));
        }
        let aes192: Algorithm = "aes-192-gcm".parse().unwrap();
        assert!(
            run_for_provider(Provider::Ring, aes192, cipherfleet_core::path::Path::Accelerated, None).is_empty(),
            "ring has no AES-192"
        );
    }

    #[test]
    fn cbc_hmac_includes_hmac_and_hkdf() {
        let alg: Algorithm = "aes-256-cbc-hmac-sha256".parse().unwrap();
        let names: Vec<String> = run_for(alg).into_iter().map(|o| o.name).collect();
        assert!(names.iter().any(|n| n.contains("RFC 4231")), "{names:?}");
        assert!(names.iter().any(|n| n.contains("RFC 5869")), "{names:?}");
        assert!(names.iter().any(|n| n.contains("CBC-AES256")), "{names:?}");
    }

    #[test]
    fn hkdf_kats_pass() {
        let outcomes = run_hkdf();
        assert!(outcomes.len() >= 2);
        let failed = failures(&outcomes);
        assert!(failed.is_empty(), "{}", failed.join("\n"));
    }

    #[test]
    fn wrong_expected_block_value_is_reported() {
        // SP 800-38A F.1.1 with the last ciphertext byte altered.
        let mut ct = hex("3ad77bb40d7a3660a89ecaf32466ef97");
        ct[15] ^= 1;
        let outcomes = aes_modes::ecb_vector::<aes::Aes128>(
            ("altered F.1.1.Encrypt", "altered F.1.2.Decrypt"),
            &hex("2b7e151628aed2a6abf7158809cf4f3c"),
            &hex("6bc1bee22e409f96e93d7e117393172a"),
            &ct,
        );
        assert!(outcomes.iter().all(|o| !o.passed), "{outcomes:?}");
        assert!(outcomes.iter().all(|o| o.detail.is_some()));
        assert!(summarize("aes-128-ecb", &outcomes).is_err());
    }

    #[test]
    fn wrong_expected_mac_is_reported() {
        let outcome = mac::hmac_sha256_case(
            "altered RFC 4231 TC2",
            b"Jefe",
            b"what do ya want for nothing?",
            &hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3844"),
        );
        assert!(!outcome.passed);
    }

    #[test]
    fn summary_is_one_line_and_names_the_failure() {
        let outcomes = vec![KatOutcome::pass("a"), KatOutcome::fail("b", "expected 00\ngot 01")];
        let err = summarize("x", &outcomes).unwrap_err();
        assert!(err.contains("1 of 2"), "{err}");
        assert!(err.contains('b'), "{err}");
        assert!(!err.contains('\n'), "{err}");
        assert!(summarize("x", &[]).is_err());
        assert_eq!(summarize("x", &[KatOutcome::pass("a")]), Ok(()));
    }
}
