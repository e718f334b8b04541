//! The KAT harness the family files share: hex vectors in and out, comparing an
//! answer with the expected one, the three-way AEAD check against a published
//! vector, the round trip for parameterisations no document covers, and the
//! panic guard around a whole group. Which KATs run for which algorithm is
//! decided in the parent module; what each family checks, in its own file.

use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};

use aead::{AeadInOut, KeyInit, Nonce, Tag};

use super::KatOutcome;

/// Runs `f`, turning a panic inside a crypto crate into a failed outcome rather
/// than taking the caller down with it.
pub(super) fn guarded(label: &str, f: impl FnOnce() -> Vec<KatOutcome>) -> Vec<KatOutcome> {
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

/// Decodes a hex string; ASCII whitespace is ignored so vectors can be split
/// the way the documents print them. Panics on malformed input (the vectors are
/// constants, so that is a bug caught by the unit tests).
pub(super) fn hex(s: &str) -> Vec<u8> {
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
pub(super) fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `None` when equal, else a description of the mismatch.
pub(super) fn mismatch(what: &str, got: &[u8], expected: &[u8]) -> Option<String> {
    if got == expected {
        None
    } else {
        Some(format!("{what}: expected {} got {}", to_hex(expected), to_hex(got)))
    }
}

/// Outcome of comparing `got` with `expected`.
pub(super) fn compare(name: impl Into<String>, what: &str, got: &[u8], expected: &[u8]) -> KatOutcome {
    match mismatch(what, got, expected) {
        None => KatOutcome::pass(name),
        Some(d) => KatOutcome::fail(name, d),
    }
}

/// Outcome of comparing a computed value (or the error that prevented it) with `expected`.
pub(super) fn result_outcome(name: &str, what: &str, got: Result<Vec<u8>, String>, expected: &[u8]) -> KatOutcome {
    match got {
        Ok(bytes) => compare(name, what, &bytes, expected),
        Err(e) => KatOutcome::fail(name, e),
    }
}

/// A published AEAD vector: ciphertext and tag are given separately.
#[derive(Clone, Debug)]
pub(super) struct AeadVector {
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
pub(super) fn aead_kat<A: AeadInOut + KeyInit>(v: &AeadVector) -> Vec<KatOutcome> {
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

/// An AEAD reached through another API than the `aead` traits: ring, AF_ALG.
pub(super) trait AeadUnderTest {
    /// Ciphertext and tag of `pt`.
    fn seal(&self, key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String>;
    /// The plaintext, or an error when the tag does not verify.
    fn open(&self, key: &[u8], nonce: &[u8], aad: &[u8], ct: &[u8], tag: &[u8]) -> Result<Vec<u8>, String>;
}

/// [`aead_kat`] for an [`AeadUnderTest`]; the outcomes' names start with `label: `.
pub(super) fn aead_kat_with(label: &str, v: &AeadVector, aead: &dyn AeadUnderTest) -> Vec<KatOutcome> {
    let name = |what: &str| format!("{label}: {}.{what}", v.name);
    let encrypt = match aead.seal(&v.key, &v.nonce, &v.aad, &v.pt) {
        Ok((ct, tag)) => KatOutcome::from_problems(
            name("Encrypt"),
            [mismatch("ciphertext", &ct, &v.ct), mismatch("tag", &tag, &v.tag)]
                .into_iter()
                .flatten()
                .collect(),
        ),
        Err(e) => KatOutcome::fail(name("Encrypt"), e),
    };
    let decrypt = match aead.open(&v.key, &v.nonce, &v.aad, &v.ct, &v.tag) {
        Ok(pt) => compare(name("Decrypt"), "plaintext", &pt, &v.pt),
        Err(e) => KatOutcome::fail(
            name("Decrypt"),
            format!("the published ciphertext and tag were rejected: {e}"),
        ),
    };
    let mut bad_tag = v.tag.clone();
    if let Some(last) = bad_tag.last_mut() {
        *last ^= 0x01;
    }
    let tamper = match aead.open(&v.key, &v.nonce, &v.aad, &v.ct, &bad_tag) {
        Err(_) => KatOutcome::pass(name("TamperedTagRejected")),
        Ok(_) => KatOutcome::fail(
            name("TamperedTagRejected"),
            "a tag with its last bit flipped was accepted",
        ),
    };
    vec![encrypt, decrypt, tamper]
}

/// Deterministic filler bytes for round-trip checks.
pub(super) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Round trip on the engine's own parameterisation when no published vector
/// uses it: encrypt, decrypt back, and reject a flipped tag bit and a flipped
/// ciphertext bit. One outcome named `name`.
pub(super) fn aead_round_trip<A: AeadInOut + KeyInit>(name: &str, key_len: usize) -> KatOutcome {
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

    #[test]
    fn wrong_expected_aead_tag_is_reported() {
        // RFC 8439 2.8.2 with one tag bit altered: encrypt and decrypt must fail.
        let mut v = crate::selftest::chacha::rfc8439_aead_vector();
        v.tag[0] ^= 0x10;
        let outcomes = aead_kat::<chacha20poly1305::ChaCha20Poly1305>(&v);
        assert_eq!(outcomes.len(), 3);
        assert!(!outcomes[0].passed, "{outcomes:?}");
        assert!(outcomes[0].detail.as_deref().unwrap().contains("tag"));
        assert!(!outcomes[1].passed, "{outcomes:?}");
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
