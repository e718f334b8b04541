//! Known-answer tests (KATs) for every algorithm the benchmark engine can run.
//!
//! Each family lives in its own file and checks the RustCrypto crates the engine
//! uses against published vectors (NIST SP 800-38A/C/D, FIPS 81, SP 800-67,
//! RFC 3610, RFC 7253, RFC 8439, RFC 4231, RFC 5869, ...). AEAD vectors are
//! checked in both directions, and a flipped tag bit must be rejected. Where the
//! published vectors do not use the engine's exact parameterisation (CCM with a
//! 16-byte tag and 13-byte nonce, OCB with AES-192/256, CBC-HMAC-SHA256), a
//! round trip with tamper rejection on that parameterisation is added.
//!
//! Only the crates' public API is used, so the same KATs exercise whichever
//! backend (AES-NI, ARMv8, bitsliced software, ...) the crates pick at run time
//! or were forced to at build time.

mod aes_modes;
mod ccm;
mod chacha;
mod des;
mod gcm;
mod mac;
mod ocb;

use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};

use aead::{AeadInOut, KeyInit, Nonce, Tag};

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};

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
    guarded(&label, || match group {
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

/// Runs `f`, turning a panic inside a crypto crate into a failed outcome rather
/// than taking the caller down with it.
fn guarded(label: &str, f: impl FnOnce() -> Vec<KatOutcome>) -> Vec<KatOutcome> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(outcomes) => outcomes,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_string());
            vec![KatOutcome::fail(format!("{label} KATs"), format!("panicked: {msg}"))]
        }
    }
}

/// Runs every KAT that covers `alg` (for CBC-HMAC-SHA256 that includes the CBC,
/// HMAC-SHA256 and HKDF-SHA256 KATs plus the construction's own checks).
pub fn run_for(alg: Algorithm) -> Vec<KatOutcome> {
    groups_for(alg).into_iter().flat_map(run_group).collect()
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

// ---------------------------------------------------------------------------
// Shared helpers for the family files.
// ---------------------------------------------------------------------------

/// Decodes a hex string; ASCII whitespace is ignored so vectors can be split
/// the way the documents print them. Panics on malformed input (the vectors are
/// constants, so that is a bug caught by the unit tests).
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd-length hex literal: {s}");
    digits
        .chunks(2)
        .map(|pair| {
            let nibble = |c: u8| match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => panic!("bad hex digit {:?} in {s}", c as char),
            };
            (nibble(pair[0]) << 4) | nibble(pair[1])
        })
        .collect()
}

/// Lower-case hex, for mismatch details.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `None` when equal, else a description of the mismatch.
pub(crate) fn mismatch(what: &str, got: &[u8], expected: &[u8]) -> Option<String> {
    if got == expected {
        None
    } else {
        Some(format!("{what}: expected {} got {}", to_hex(expected), to_hex(got)))
    }
}

/// Outcome of comparing `got` with `expected`.
pub(crate) fn compare(name: impl Into<String>, what: &str, got: &[u8], expected: &[u8]) -> KatOutcome {
    match mismatch(what, got, expected) {
        None => KatOutcome::pass(name),
        Some(d) => KatOutcome::fail(name, d),
    }
}

/// Outcome of comparing a computed value (or the error that prevented it) with `expected`.
pub(crate) fn result_outcome(name: &str, what: &str, got: Result<Vec<u8>, String>, expected: &[u8]) -> KatOutcome {
    match got {
        Ok(bytes) => compare(name, what, &bytes, expected),
        Err(e) => KatOutcome::fail(name, e),
    }
}

/// A published AEAD vector: ciphertext and tag are given separately.
#[derive(Clone, Debug)]
pub(crate) struct AeadVector {
    pub name: String,
    pub key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub aad: Vec<u8>,
    pub pt: Vec<u8>,
    pub ct: Vec<u8>,
    pub tag: Vec<u8>,
}

/// Checks an AEAD against a published vector: encryption gives the published
/// ciphertext and tag, decryption gives the plaintext back, and a single flipped
/// tag bit is rejected. Three outcomes: `<name>.Encrypt`, `<name>.Decrypt`,
/// `<name>.TamperedTagRejected`.
pub(crate) fn aead_kat<A: AeadInOut + KeyInit>(v: &AeadVector) -> Vec<KatOutcome> {
    let enc_name = format!("{}.Encrypt", v.name);
    let dec_name = format!("{}.Decrypt", v.name);
    let tamper_name = format!("{}.TamperedTagRejected", v.name);
    let setup_failure = |detail: String| {
        vec![
            KatOutcome::fail(enc_name.clone(), detail.clone()),
            KatOutcome::fail(dec_name.clone(), detail.clone()),
            KatOutcome::fail(tamper_name.clone(), detail),
        ]
    };

    let Ok(cipher) = A::new_from_slice(&v.key) else {
        return setup_failure(format!("key of {} bytes rejected", v.key.len()));
    };
    let Ok(nonce) = Nonce::<A>::try_from(v.nonce.as_slice()) else {
        return setup_failure(format!("nonce of {} bytes rejected", v.nonce.len()));
    };
    let Ok(tag) = Tag::<A>::try_from(v.tag.as_slice()) else {
        return setup_failure(format!("tag of {} bytes does not fit", v.tag.len()));
    };

    let mut out = Vec::with_capacity(3);

    // Encrypt.
    let mut buf = v.pt.clone();
    out.push(
        match cipher.encrypt_inout_detached(&nonce, &v.aad, buf.as_mut_slice().into()) {
            Ok(got_tag) => {
                let problems: Vec<String> = [
                    mismatch("ciphertext", &buf, &v.ct),
                    mismatch("tag", got_tag.as_slice(), &v.tag),
                ]
                .into_iter()
                .flatten()
                .collect();
                KatOutcome::from_problems(enc_name, problems)
            }
            Err(e) => KatOutcome::fail(enc_name, format!("encryption returned an error: {e}")),
        },
    );

    // Decrypt.
    let mut buf = v.ct.clone();
    out.push(
        match cipher.decrypt_inout_detached(&nonce, &v.aad, buf.as_mut_slice().into(), &tag) {
            Ok(()) => compare(dec_name, "plaintext", &buf, &v.pt),
            Err(_) => KatOutcome::fail(dec_name, "the published ciphertext and tag were rejected"),
        },
    );

    // Flipped tag bit.
    let mut bad_tag = tag.clone();
    let last = bad_tag.len() - 1;
    bad_tag[last] ^= 0x01;
    let mut buf = v.ct.clone();
    out.push(
        match cipher.decrypt_inout_detached(&nonce, &v.aad, buf.as_mut_slice().into(), &bad_tag) {
            Err(_) => KatOutcome::pass(tamper_name),
            Ok(()) => KatOutcome::fail(tamper_name, "a tag with its last bit flipped was accepted"),
        },
    );

    out
}

/// Deterministic filler bytes for round-trip checks.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Round trip on the engine's own parameterisation when no published vector
/// uses it: encrypt, decrypt back, and reject a flipped tag bit and a flipped
/// ciphertext bit. One outcome named `name`.
pub(crate) fn aead_round_trip<A: AeadInOut + KeyInit>(name: &str, key_len: usize) -> KatOutcome {
    let key = pattern(key_len, 0x11);
    let Ok(cipher) = A::new_from_slice(&key) else {
        return KatOutcome::fail(name, format!("key of {key_len} bytes rejected"));
    };
    let nonce_bytes = pattern(<A::NonceSize as aead::array::typenum::Unsigned>::USIZE, 0x5a);
    let Ok(nonce) = Nonce::<A>::try_from(nonce_bytes.as_slice()) else {
        return KatOutcome::fail(name, "nonce size mismatch");
    };
    let aad = pattern(21, 0xa5);
    // 100 bytes: six whole blocks and a partial one.
    let pt = pattern(100, 0x3c);

    let mut problems = Vec::new();
    let mut buf = pt.clone();
    let tag = match cipher.encrypt_inout_detached(&nonce, &aad, buf.as_mut_slice().into()) {
        Ok(t) => t,
        Err(e) => return KatOutcome::fail(name, format!("encryption returned an error: {e}")),
    };
    if buf == pt {
        problems.push("ciphertext equals plaintext".to_string());
    }
    let ct = buf.clone();
    match cipher.decrypt_inout_detached(&nonce, &aad, buf.as_mut_slice().into(), &tag) {
        Ok(()) => problems.extend(mismatch("round-trip plaintext", &buf, &pt)),
        Err(_) => problems.push("its own ciphertext and tag were rejected".to_string()),
    }
    let mut bad_tag = tag.clone();
    bad_tag[0] ^= 0x80;
    let mut buf = ct.clone();
    if cipher
        .decrypt_inout_detached(&nonce, &aad, buf.as_mut_slice().into(), &bad_tag)
        .is_ok()
    {
        problems.push("a tag with a flipped bit was accepted".to_string());
    }
    let mut buf = ct.clone();
    buf[ct.len() / 2] ^= 0x04;
    if cipher
        .decrypt_inout_detached(&nonce, &aad, buf.as_mut_slice().into(), &tag)
        .is_ok()
    {
        problems.push("a ciphertext with a flipped bit was accepted".to_string());
    }
    KatOutcome::from_problems(name, problems)
}

#[cfg(test)]
mod tests {
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
    fn wrong_expected_aead_tag_is_reported() {
        // RFC 8439 2.8.2 with one tag bit altered: encrypt and decrypt must fail.
        let mut v = chacha::rfc8439_aead_vector();
        v.tag[0] ^= 0x10;
        let outcomes = aead_kat::<chacha20poly1305::ChaCha20Poly1305>(&v);
        assert_eq!(outcomes.len(), 3);
        assert!(!outcomes[0].passed, "{outcomes:?}");
        assert!(outcomes[0].detail.as_deref().unwrap().contains("tag"));
        assert!(!outcomes[1].passed, "{outcomes:?}");
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

    #[test]
    fn a_panicking_kat_becomes_a_failure() {
        let outcomes = guarded("boom", || panic!("kaboom"));
        assert_eq!(outcomes.len(), 1);
        assert!(!outcomes[0].passed);
        assert!(outcomes[0].detail.as_deref().unwrap().contains("kaboom"));
    }

    #[test]
    fn hex_round_trips_and_ignores_whitespace() {
        assert_eq!(hex("00 ff\n10Ab"), vec![0x00, 0xff, 0x10, 0xab]);
        assert_eq!(to_hex(&[0x00, 0xff, 0x10, 0xab]), "00ff10ab");
    }
}
