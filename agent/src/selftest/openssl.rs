//! The host's OpenSSL answers through `openssl enc`: the AES of the point's
//! key size (SP 800-38A CBC, which every AES mode of OpenSSL runs on) and
//! ChaCha20 (RFC 8439 §2.4.2, under ChaCha20-Poly1305 too). `openssl enc` has
//! no AEAD mode, so GCM's and Poly1305's own arithmetic is not checked here.

use std::path::Path;

use cipherfleet_core::algorithm::{Algorithm, Cipher};

use super::aes_modes::{SP800_38A_CBC_IV, SP800_38A_PLAINTEXT, sections, sp800_38a_cbc_ciphertext, sp800_38a_key};
use super::chacha::{RFC8439_2_4_2_CIPHERTEXT, RFC8439_2_4_2_NONCE, SUNSCREEN};
use super::harness::{compare, hex, to_hex};
use super::{AesBits, KatOutcome};
use crate::provider::openssl::run;

/// `openssl enc` of `input`, or the error as the "answer" (so it shows as a mismatch).
fn enc(binary: &Path, cipher: &str, decrypt: bool, key: &[u8], iv: &[u8], input: &[u8]) -> Vec<u8> {
    let (key, iv) = (to_hex(key), to_hex(iv));
    let mut args = vec![
        "enc",
        if decrypt { "-d" } else { "-e" },
        cipher,
        "-K",
        &key,
        "-iv",
        &iv,
        "-nosalt",
    ];
    if cipher.contains("cbc") {
        args.push("-nopad");
    }
    run(binary, &args, input).unwrap_or_else(String::into_bytes)
}

/// The KATs of `alg`'s underlying cipher on `binary`; none for DES.
pub(super) fn run_for(binary: &Path, alg: Algorithm) -> Vec<KatOutcome> {
    let aes = match alg.cipher {
        Cipher::Aes128 => AesBits::B128,
        Cipher::Aes192 => AesBits::B192,
        Cipher::Aes256 => AesBits::B256,
        Cipher::ChaCha20 => {
            // OpenSSL's ChaCha20 IV is the 32-bit block counter (little-endian), then the nonce.
            let mut iv = 1u32.to_le_bytes().to_vec();
            iv.extend(hex(RFC8439_2_4_2_NONCE));
            let key: Vec<u8> = (0u8..32).collect();
            let ct = hex(RFC8439_2_4_2_CIPHERTEXT);
            return vec![
                compare(
                    "openssl enc: RFC 8439 2.4.2 ChaCha20.Encrypt",
                    "ciphertext",
                    &enc(binary, "-chacha20", false, &key, &iv, SUNSCREEN),
                    &ct,
                ),
                compare(
                    "openssl enc: RFC 8439 2.4.2 ChaCha20.Decrypt",
                    "plaintext",
                    &enc(binary, "-chacha20", true, &key, &iv, &ct),
                    SUNSCREEN,
                ),
            ];
        }
        Cipher::Des | Cipher::TripleDes => return Vec::new(),
    };
    let cipher = format!("-aes-{}-cbc", aes.bits());
    let (key, iv, pt, ct) = (
        sp800_38a_key(aes),
        hex(SP800_38A_CBC_IV),
        hex(SP800_38A_PLAINTEXT),
        sp800_38a_cbc_ciphertext(aes),
    );
    let (e, d) = sections("F.2", aes);
    vec![
        compare(
            format!("openssl enc: SP 800-38A {e} CBC-AES{}.Encrypt", aes.bits()),
            "ciphertext",
            &enc(binary, &cipher, false, &key, &iv, &pt),
            &ct,
        ),
        compare(
            format!("openssl enc: SP 800-38A {d} CBC-AES{}.Decrypt", aes.bits()),
            "plaintext",
            &enc(binary, &cipher, true, &key, &iv, &ct),
            &pt,
        ),
    ]
}
