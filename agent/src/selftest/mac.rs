//! HMAC-SHA256 (RFC 4231), HKDF-SHA256 (RFC 5869) and the engine's
//! AES-CBC-HMAC-SHA256 encrypt-then-MAC construction.
//!
//! The construction has no published vector of its own. Its CBC half is the
//! SP 800-38A F.2 example (so the first four ciphertext blocks are published
//! values) and its MAC half is covered by the RFC 4231 KATs; on top of that it
//! gets a self-consistency check: the tag over IV || ciphertext verifies, the
//! plaintext comes back, and any flipped bit in IV, ciphertext or tag (or a
//! wrong MAC key) is rejected.

use aes::{Aes128, Aes192, Aes256};
use cipher::block_padding::Pkcs7;
use cipher::typenum::Unsigned;
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, KeyInit, KeyIvInit};
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::aes_modes::{SP800_38A_CBC_IV, SP800_38A_PLAINTEXT, sp800_38a_cbc_ciphertext, sp800_38a_key};
use super::harness::{hex, mismatch, pattern};
use super::{AesBits, KatOutcome};

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 of `data` under `key`, or why it could not be computed.
fn hmac(key: &[u8], parts: &[&[u8]]) -> Result<Vec<u8>, String> {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(key).map_err(|_| "HMAC key rejected".to_string())?;
    for p in parts {
        m.update(p);
    }
    Ok(m.finalize().into_bytes().to_vec())
}

/// One RFC 4231 style case. A 16-byte `expected` is a truncated tag (test case 5).
/// Besides the computed tag, `verify` must accept the expected tag and reject
/// it with one bit flipped.
pub(super) fn hmac_sha256_case(name: &str, key: &[u8], data: &[u8], expected: &[u8]) -> KatOutcome {
    let full = match hmac(key, &[data]) {
        Ok(t) => t,
        Err(e) => return KatOutcome::fail(name, e),
    };
    let mut problems: Vec<String> = mismatch("tag", &full[..expected.len().min(full.len())], expected)
        .into_iter()
        .collect();
    let verify = |tag: &[u8]| {
        <HmacSha256 as KeyInit>::new_from_slice(key).is_ok_and(|mut m| {
            m.update(data);
            if tag.len() == full.len() {
                m.verify_slice(tag).is_ok()
            } else {
                m.verify_truncated_left(tag).is_ok()
            }
        })
    };
    if !verify(expected) {
        problems.push("verification rejected the published tag".to_string());
    }
    let mut flipped = expected.to_vec();
    if let Some(last) = flipped.last_mut() {
        *last ^= 0x01;
    }
    if verify(&flipped) {
        problems.push("verification accepted a tag with its last bit flipped".to_string());
    }
    KatOutcome::from_problems(name, problems)
}

pub(super) fn hmac_sha256() -> Vec<KatOutcome> {
    let aa131 = [0xaau8; 131];
    let key4: Vec<u8> = (1u8..=0x19).collect();
    let cases: [(&str, &[u8], &[u8], &str); 7] = [
        (
            "RFC 4231 test case 1 HMAC-SHA256",
            &[0x0b; 20],
            b"Hi There",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        ),
        (
            "RFC 4231 test case 2 HMAC-SHA256",
            b"Jefe",
            b"what do ya want for nothing?",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        (
            "RFC 4231 test case 3 HMAC-SHA256",
            &[0xaa; 20],
            &[0xdd; 50],
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
        ),
        (
            "RFC 4231 test case 4 HMAC-SHA256",
            &key4,
            &[0xcd; 50],
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
        ),
        (
            "RFC 4231 test case 5 HMAC-SHA256 (truncated to 128 bits)",
            &[0x0c; 20],
            b"Test With Truncation",
            "a3b6167473100ee06e0c796c2955552b",
        ),
        (
            "RFC 4231 test case 6 HMAC-SHA256",
            &aa131,
            b"Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        ),
        (
            "RFC 4231 test case 7 HMAC-SHA256",
            &aa131,
            b"This is a test using a larger than block-size key and a larger than block-size data. \
The key needs to be hashed before being used by the HMAC algorithm.",
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
        ),
    ];
    cases
        .iter()
        .map(|(name, key, data, tag)| hmac_sha256_case(name, key, data, &hex(tag)))
        .collect()
}

/// One RFC 5869 case: the PRK from extract and the OKM from expand.
fn hkdf_case(name: &str, ikm: &[u8], salt: &[u8], info: &[u8], prk: &str, okm: &str) -> KatOutcome {
    let (expected_prk, expected_okm) = (hex(prk), hex(okm));
    // RFC 5869: an absent salt is HashLen zero bytes; test case 3 uses none.
    let salt = if salt.is_empty() { None } else { Some(salt) };
    let (got_prk, hk) = Hkdf::<Sha256>::extract(salt, ikm);
    let mut problems: Vec<String> = mismatch("PRK", &got_prk, &expected_prk).into_iter().collect();
    let mut got_okm = vec![0u8; expected_okm.len()];
    match hk.expand(info, &mut got_okm) {
        Ok(()) => problems.extend(mismatch("OKM", &got_okm, &expected_okm)),
        Err(e) => problems.push(format!("expand failed: {e}")),
    }
    KatOutcome::from_problems(name, problems)
}

pub(super) fn hkdf_sha256() -> Vec<KatOutcome> {
    let range = |from: u8, to: u8| (from..=to).collect::<Vec<u8>>();
    vec![
        hkdf_case(
            "RFC 5869 A.1 test case 1 HKDF-SHA256",
            &[0x0b; 22],
            &range(0x00, 0x0c),
            &range(0xf0, 0xf9),
            "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
        ),
        hkdf_case(
            "RFC 5869 A.2 test case 2 HKDF-SHA256 (longer inputs and outputs)",
            &range(0x00, 0x4f),
            &range(0x60, 0xaf),
            &range(0xb0, 0xff),
            "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
            "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c
             59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71
             cc30c58179ec3e87c14c01d5c1f3434f1d87",
        ),
        hkdf_case(
            "RFC 5869 A.3 test case 3 HKDF-SHA256 (zero-length salt and info)",
            &[0x0b; 22],
            &[],
            &[],
            "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
        ),
    ]
}

pub(super) fn cbc_hmac_sha256(bits: AesBits) -> Vec<KatOutcome> {
    match bits {
        AesBits::B128 => construction::<Aes128>(bits),
        AesBits::B192 => construction::<Aes192>(bits),
        AesBits::B256 => construction::<Aes256>(bits),
    }
}

/// AES-CBC-PKCS7 then HMAC-SHA256 over IV || ciphertext, with a separate
/// 32-byte MAC key, as the engine does it.
fn construction<C>(bits: AesBits) -> Vec<KatOutcome>
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let b = bits.bits();
    let name = |what: &str| format!("AES-{b}-CBC-HMAC-SHA256 {what}");
    let seal_name = name("encrypt-then-MAC (CBC part is SP 800-38A F.2)");
    let open_name = name("verify-then-decrypt round trip");
    let tamper_name = name("tamper rejection");

    let enc_key = sp800_38a_key(bits);
    let mac_key = pattern(32, 0x42);
    let iv = hex(SP800_38A_CBC_IV);
    let pt = hex(SP800_38A_PLAINTEXT);
    let published = sp800_38a_cbc_ciphertext(bits);
    let bs = C::BlockSize::USIZE;

    // Seal.
    let sealed = cbc::Encryptor::<C>::new_from_slices(&enc_key, &iv)
        .map_err(|_| "key or IV rejected".to_string())
        .and_then(|e| {
            let mut buf = vec![0u8; pt.len() + bs];
            buf[..pt.len()].copy_from_slice(&pt);
            e.encrypt_padded::<Pkcs7>(&mut buf, pt.len())
                .map(<[u8]>::to_vec)
                .map_err(|_| "padding failed".to_string())
        })
        .and_then(|ct| hmac(&mac_key, &[&iv, &ct]).map(|tag| (ct, tag)));
    let (ct, tag) = match sealed {
        Ok(v) => v,
        Err(e) => {
            return vec![
                KatOutcome::fail(seal_name, e.clone()),
                KatOutcome::fail(open_name, e.clone()),
                KatOutcome::fail(tamper_name, e),
            ];
        }
    };
    let mut problems = Vec::new();
    if ct.len() != pt.len() + bs {
        problems.push(format!("ciphertext is {} bytes, expected {}", ct.len(), pt.len() + bs));
    }
    problems.extend(mismatch(
        "CBC ciphertext prefix",
        &ct[..published.len().min(ct.len())],
        &published,
    ));
    if tag.len() != 32 {
        problems.push(format!("tag is {} bytes, expected 32", tag.len()));
    }
    let seal = KatOutcome::from_problems(seal_name, problems);

    // Open: verify the tag over IV || ciphertext first, then decrypt.
    let verifies = |mac_key: &[u8], iv: &[u8], ct: &[u8], tag: &[u8]| {
        <HmacSha256 as KeyInit>::new_from_slice(mac_key).is_ok_and(|mut m| {
            m.update(iv);
            m.update(ct);
            m.verify_slice(tag).is_ok()
        })
    };
    let mut problems = Vec::new();
    if verifies(&mac_key, &iv, &ct, &tag) {
        let opened = cbc::Decryptor::<C>::new_from_slices(&enc_key, &iv).ok().and_then(|d| {
            let mut buf = ct.clone();
            d.decrypt_padded::<Pkcs7>(&mut buf).ok().map(<[u8]>::to_vec)
        });
        match opened {
            Some(back) => problems.extend(mismatch("plaintext", &back, &pt)),
            None => problems.push("decryption or unpadding failed".to_string()),
        }
    } else {
        problems.push("its own tag did not verify".to_string());
    }
    let open = KatOutcome::from_problems(open_name, problems);

    // Tampering anywhere must be caught by the MAC.
    let flip = |bytes: &[u8], at: usize| {
        let mut v = bytes.to_vec();
        v[at] ^= 0x01;
        v
    };
    let mut problems = Vec::new();
    let attempts: [(&str, bool); 5] = [
        ("a flipped IV bit", verifies(&mac_key, &flip(&iv, 0), &ct, &tag)),
        (
            "a flipped first-block ciphertext bit",
            verifies(&mac_key, &iv, &flip(&ct, 0), &tag),
        ),
        (
            "a flipped last-block ciphertext bit",
            verifies(&mac_key, &iv, &flip(&ct, ct.len() - 1), &tag),
        ),
        (
            "a flipped tag bit",
            verifies(&mac_key, &iv, &ct, &flip(&tag, tag.len() - 1)),
        ),
        ("a different MAC key", verifies(&flip(&mac_key, 7), &iv, &ct, &tag)),
    ];
    for (what, accepted) in attempts {
        if accepted {
            problems.push(format!("{what} was accepted"));
        }
    }
    let tamper = KatOutcome::from_problems(tamper_name, problems);

    vec![seal, open, tamper]
}
