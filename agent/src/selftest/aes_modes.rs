//! AES in ECB, CBC and CTR: NIST SP 800-38A Appendix F (F.1, F.2, F.5) and the
//! FIPS 197 Appendix C single-block examples.
//!
//! The ECB/CBC helpers are generic over the block cipher; `des.rs` reuses them.
//! The engine pads ECB and CBC with PKCS#7, which the published vectors do not
//! use, so each key size also gets a padded check: with PKCS#7 the first blocks
//! must still be the published ciphertext (a whole extra padding block follows)
//! and decryption must strip the padding back to the published plaintext.

use aes::{Aes128, Aes192, Aes256};
use cipher::block_padding::{NoPadding, Pkcs7};
use cipher::typenum::Unsigned;
use cipher::{
    BlockCipherDecrypt, BlockCipherEncrypt, BlockModeDecrypt, BlockModeEncrypt, KeyInit, KeyIvInit, StreamCipher,
};

use super::harness::{hex, mismatch, result_outcome};
use super::{AesBits, KatOutcome};

/// The four plaintext blocks every SP 800-38A example encrypts.
pub(super) const SP800_38A_PLAINTEXT: &str = "6bc1bee22e409f96e93d7e117393172a
     ae2d8a571e03ac9c9eb76fac45af8e51
     30c81c46a35ce411e5fbc1191a0a52ef
     f69f2445df4f9b17ad2b417be66c3710";

/// SP 800-38A example keys.
pub(super) fn sp800_38a_key(bits: AesBits) -> Vec<u8> {
    hex(match bits {
        AesBits::B128 => "2b7e151628aed2a6abf7158809cf4f3c",
        AesBits::B192 => "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
        AesBits::B256 => "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
    })
}

/// SP 800-38A F.2 CBC initialisation vector.
pub(super) const SP800_38A_CBC_IV: &str = "000102030405060708090a0b0c0d0e0f";

/// SP 800-38A F.2.1/F.2.3/F.2.5 CBC ciphertext.
pub(super) fn sp800_38a_cbc_ciphertext(bits: AesBits) -> Vec<u8> {
    hex(match bits {
        AesBits::B128 => {
            "7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2
             73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7"
        }
        AesBits::B192 => {
            "4f021db243bc633d7178183a9fa071e8 b4d9ada9ad7dedf4e5e738763f69145a
             571b242012fb7ae07fa9baac3df102e0 08b0e27988598881d920a9e64f5615cd"
        }
        AesBits::B256 => {
            "f58c4c04d6e5f1ba779eabfb5f7bfbd6 9cfc4e967edb808d679f777bc6702c7d
             39f23369a9d9bacfa530e26304231461 b2eb05e2c39be9fcda6c19078c6a9d1b"
        }
    })
}

/// SP 800-38A F.5 CTR initial counter block.
pub(super) const SP800_38A_CTR_COUNTER: &str = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/// SP 800-38A F.5.1/F.5.3/F.5.5 CTR ciphertext.
pub(super) fn sp800_38a_ctr_ciphertext(bits: AesBits) -> Vec<u8> {
    hex(match bits {
        AesBits::B128 => {
            "874d6191b620e3261bef6864990db6ce 9806f66b7970fdff8617187bb9fffdff
             5ae4df3edbd5d35e5b4f09020db03eab 1e031dda2fbe03d1792170a0f3009cee"
        }
        AesBits::B192 => {
            "1abc932417521ca24f2b0459fe7e6e0b 090339ec0aa6faefd5ccc2c6f4ce8e94
             1e36b26bd1ebc670d1bd1d665620abf7 4f78a7f6d29809585a97daec58c6b050"
        }
        AesBits::B256 => {
            "601ec313775789a5b7a7f504bbf3d228 f443e3ca4d62b59aca84e990cacaf5c5
             2b0930daa23de94ce87017ba2d84988d dfc9c58db67aada613c2dd08457941a6"
        }
    })
}

/// Section numbers (encrypt, decrypt) of an SP 800-38A example, e.g. ("F.2.5", "F.2.6").
pub(super) fn sections(appendix: &str, bits: AesBits) -> (String, String) {
    let n = match bits {
        AesBits::B128 => 1,
        AesBits::B192 => 3,
        AesBits::B256 => 5,
    };
    (format!("{appendix}.{n}"), format!("{appendix}.{}", n + 1))
}

pub(super) fn ecb(bits: AesBits) -> Vec<KatOutcome> {
    match bits {
        AesBits::B128 => ecb_kats::<Aes128>(bits),
        AesBits::B192 => ecb_kats::<Aes192>(bits),
        AesBits::B256 => ecb_kats::<Aes256>(bits),
    }
}

pub(super) fn cbc(bits: AesBits) -> Vec<KatOutcome> {
    match bits {
        AesBits::B128 => cbc_kats::<Aes128>(bits),
        AesBits::B192 => cbc_kats::<Aes192>(bits),
        AesBits::B256 => cbc_kats::<Aes256>(bits),
    }
}

pub(super) fn ctr(bits: AesBits) -> Vec<KatOutcome> {
    match bits {
        AesBits::B128 => ctr_kats::<ctr::Ctr128BE<Aes128>>(bits),
        AesBits::B192 => ctr_kats::<ctr::Ctr128BE<Aes192>>(bits),
        AesBits::B256 => ctr_kats::<ctr::Ctr128BE<Aes256>>(bits),
    }
}

fn ecb_kats<C>(bits: AesBits) -> Vec<KatOutcome>
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let b = bits.bits();
    // FIPS 197 Appendix C: key 00 01 02 .., plaintext 00 11 22 .. ff, one block.
    let (fips, fips_key, fips_ct) = match bits {
        AesBits::B128 => (
            "C.1",
            "000102030405060708090a0b0c0d0e0f",
            "69c4e0d86a7b0430d8cdb78070b4c55a",
        ),
        AesBits::B192 => (
            "C.2",
            "000102030405060708090a0b0c0d0e0f1011121314151617",
            "dda97ca4864cdfe06eaf70a0ec0d7191",
        ),
        AesBits::B256 => (
            "C.3",
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
            "8ea2b7ca516745bfeafc49904b496089",
        ),
    };
    let key = sp800_38a_key(bits);
    let pt = hex(SP800_38A_PLAINTEXT);
    let ct = hex(match bits {
        AesBits::B128 => {
            "3ad77bb40d7a3660a89ecaf32466ef97 f5d3d58503b9699de785895a96fdbaaf
             43b1cd7f598ece23881b00e3ed030688 7b0c785e27e8ad3f8223207104725dd4"
        }
        AesBits::B192 => {
            "bd334f1d6e45f25ff712a214571fa5cc 974104846d0ad3ad7734ecb3ecee4eef
             ef7afd2270e2e60adce0ba2face6444e 9a4b41ba738d6c72fb16691603c18e0e"
        }
        AesBits::B256 => {
            "f3eed1bdb5d2a03c064b5a7e3db181f8 591ccb10d410ed26dc5ba74a31362870
             b6ed21b99ca6f4f9f153e7b1beafed1d 23304b7a39f9f3ff067d8d8f9e24ecc7"
        }
    });
    let (enc, dec) = sections("F.1", bits);

    let mut out = ecb_vector::<C>(
        (
            &format!("FIPS 197 {fips} AES-{b}.Cipher"),
            &format!("FIPS 197 {fips} AES-{b}.InvCipher"),
        ),
        &hex(fips_key),
        &hex("00112233445566778899aabbccddeeff"),
        &hex(fips_ct),
    );
    out.extend(ecb_vector::<C>(
        (
            &format!("SP 800-38A {enc} ECB-AES{b}.Encrypt"),
            &format!("SP 800-38A {dec} ECB-AES{b}.Decrypt"),
        ),
        &key,
        &pt,
        &ct,
    ));
    out.push(ecb_pkcs7::<C>(
        &format!("SP 800-38A {enc} ECB-AES{b} with PKCS#7"),
        &key,
        &pt,
        &ct,
    ));
    out
}

fn cbc_kats<C>(bits: AesBits) -> Vec<KatOutcome>
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let b = bits.bits();
    let key = sp800_38a_key(bits);
    let iv = hex(SP800_38A_CBC_IV);
    let pt = hex(SP800_38A_PLAINTEXT);
    let ct = sp800_38a_cbc_ciphertext(bits);
    let (enc, dec) = sections("F.2", bits);

    let mut out = cbc_vector::<C>(
        (
            &format!("SP 800-38A {enc} CBC-AES{b}.Encrypt"),
            &format!("SP 800-38A {dec} CBC-AES{b}.Decrypt"),
        ),
        &key,
        &iv,
        &pt,
        &ct,
    );
    out.push(cbc_pkcs7::<C>(
        &format!("SP 800-38A {enc} CBC-AES{b} with PKCS#7"),
        &key,
        &iv,
        &pt,
        &ct,
    ));
    out
}

fn ctr_kats<S>(bits: AesBits) -> Vec<KatOutcome>
where
    S: KeyIvInit + StreamCipher,
{
    let b = bits.bits();
    let key = sp800_38a_key(bits);
    let counter = hex(SP800_38A_CTR_COUNTER);
    let pt = hex(SP800_38A_PLAINTEXT);
    let ct = sp800_38a_ctr_ciphertext(bits);
    let (enc, dec) = sections("F.5", bits);
    ctr_vector::<S>(
        (
            &format!("SP 800-38A {enc} CTR-AES{b}.Encrypt"),
            &format!("SP 800-38A {dec} CTR-AES{b}.Decrypt"),
        ),
        &key,
        &counter,
        &pt,
        &ct,
    )
}

// ---------------------------------------------------------------------------
// Generic helpers (also used by des.rs).
// ---------------------------------------------------------------------------

/// ECB without padding against a published vector: `[encrypt, decrypt]` outcomes.
pub(super) fn ecb_vector<C>(names: (&str, &str), key: &[u8], pt: &[u8], ct: &[u8]) -> Vec<KatOutcome>
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let (enc_name, dec_name) = names;
    let encrypted = ecb::Encryptor::<C>::new_from_slice(key)
        .map_err(|_| "key rejected".to_string())
        .and_then(|e| {
            let mut buf = pt.to_vec();
            e.encrypt_padded::<NoPadding>(&mut buf, pt.len())
                .map(<[u8]>::to_vec)
                .map_err(|_| "encryption failed".to_string())
        });
    let decrypted = ecb::Decryptor::<C>::new_from_slice(key)
        .map_err(|_| "key rejected".to_string())
        .and_then(|d| {
            let mut buf = ct.to_vec();
            d.decrypt_padded::<NoPadding>(&mut buf)
                .map(<[u8]>::to_vec)
                .map_err(|_| "decryption failed".to_string())
        });
    vec![
        result_outcome(enc_name, "ciphertext", encrypted, ct),
        result_outcome(dec_name, "plaintext", decrypted, pt),
    ]
}

/// CBC without padding against a published vector: `[encrypt, decrypt]` outcomes.
pub(super) fn cbc_vector<C>(names: (&str, &str), key: &[u8], iv: &[u8], pt: &[u8], ct: &[u8]) -> Vec<KatOutcome>
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let (enc_name, dec_name) = names;
    let encrypted = cbc::Encryptor::<C>::new_from_slices(key, iv)
        .map_err(|_| "key or IV rejected".to_string())
        .and_then(|e| {
            let mut buf = pt.to_vec();
            e.encrypt_padded::<NoPadding>(&mut buf, pt.len())
                .map(<[u8]>::to_vec)
                .map_err(|_| "encryption failed".to_string())
        });
    let decrypted = cbc::Decryptor::<C>::new_from_slices(key, iv)
        .map_err(|_| "key or IV rejected".to_string())
        .and_then(|d| {
            let mut buf = ct.to_vec();
            d.decrypt_padded::<NoPadding>(&mut buf)
                .map(<[u8]>::to_vec)
                .map_err(|_| "decryption failed".to_string())
        });
    vec![
        result_outcome(enc_name, "ciphertext", encrypted, ct),
        result_outcome(dec_name, "plaintext", decrypted, pt),
    ]
}

/// ECB with PKCS#7 on a block-aligned published vector: the published
/// ciphertext is a prefix of the padded output, which is exactly one block
/// longer, and decrypting it strips the padding.
pub(super) fn ecb_pkcs7<C>(name: &str, key: &[u8], pt: &[u8], ct: &[u8]) -> KatOutcome
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let bs = C::BlockSize::USIZE;
    let (Ok(enc), Ok(dec)) = (
        ecb::Encryptor::<C>::new_from_slice(key),
        ecb::Decryptor::<C>::new_from_slice(key),
    ) else {
        return KatOutcome::fail(name, "key rejected");
    };
    let mut buf = vec![0u8; pt.len() + bs];
    buf[..pt.len()].copy_from_slice(pt);
    let padded = match enc.encrypt_padded::<Pkcs7>(&mut buf, pt.len()) {
        Ok(c) => c.to_vec(),
        Err(_) => return KatOutcome::fail(name, "padded encryption failed"),
    };
    padded_checks(name, bs, padded, pt, ct, |buf| {
        dec.decrypt_padded::<Pkcs7>(buf).map(<[u8]>::to_vec).ok()
    })
}

/// CBC with PKCS#7 on a block-aligned published vector (see [`ecb_pkcs7`]).
pub(super) fn cbc_pkcs7<C>(name: &str, key: &[u8], iv: &[u8], pt: &[u8], ct: &[u8]) -> KatOutcome
where
    C: BlockCipherEncrypt + BlockCipherDecrypt + KeyInit,
{
    let bs = C::BlockSize::USIZE;
    let (Ok(enc), Ok(dec)) = (
        cbc::Encryptor::<C>::new_from_slices(key, iv),
        cbc::Decryptor::<C>::new_from_slices(key, iv),
    ) else {
        return KatOutcome::fail(name, "key or IV rejected");
    };
    let mut buf = vec![0u8; pt.len() + bs];
    buf[..pt.len()].copy_from_slice(pt);
    let padded = match enc.encrypt_padded::<Pkcs7>(&mut buf, pt.len()) {
        Ok(c) => c.to_vec(),
        Err(_) => return KatOutcome::fail(name, "padded encryption failed"),
    };
    padded_checks(name, bs, padded, pt, ct, |buf| {
        dec.decrypt_padded::<Pkcs7>(buf).map(<[u8]>::to_vec).ok()
    })
}

fn padded_checks(
    name: &str,
    bs: usize,
    mut padded: Vec<u8>,
    pt: &[u8],
    ct: &[u8],
    decrypt: impl FnOnce(&mut [u8]) -> Option<Vec<u8>>,
) -> KatOutcome {
    let mut problems = Vec::new();
    if padded.len() != pt.len() + bs {
        problems.push(format!(
            "padded ciphertext is {} bytes, expected {} (one whole padding block)",
            padded.len(),
            pt.len() + bs
        ));
    }
    problems.extend(mismatch("published prefix", &padded[..ct.len().min(padded.len())], ct));
    match decrypt(&mut padded) {
        Some(back) => problems.extend(mismatch("unpadded plaintext", &back, pt)),
        None => problems.push("decryption rejected the padding it produced".to_string()),
    }
    KatOutcome::from_problems(name, problems)
}

/// A counter-mode (or any seekable stream) cipher against a published vector:
/// `[encrypt, decrypt]` outcomes.
fn ctr_vector<S>(names: (&str, &str), key: &[u8], iv: &[u8], pt: &[u8], ct: &[u8]) -> Vec<KatOutcome>
where
    S: KeyIvInit + StreamCipher,
{
    let run = |input: &[u8]| {
        S::new_from_slices(key, iv)
            .map_err(|_| "key or counter block rejected".to_string())
            .and_then(|mut s| {
                let mut buf = input.to_vec();
                s.try_apply_keystream(&mut buf)
                    .map_err(|e| format!("keystream error: {e}"))?;
                Ok(buf)
            })
    };
    vec![
        result_outcome(names.0, "ciphertext", run(pt), ct),
        result_outcome(names.1, "plaintext", run(ct), pt),
    ]
}
