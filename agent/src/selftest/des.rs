//! DES and three-key TDEA (EDE3) in ECB and CBC.
//!
//! - FIPS 81 Appendix B Table B1 (ECB) and Appendix C Table C1 (CBC):
//!   "Now is the time for all " under key 0123456789abcdef.
//! - NIST SP 800-20 Table A.1 (variable plaintext KAT, KEY1 = KEY2 = KEY3 =
//!   0101010101010101, so TDEA reduces to single DES): first entries, for both.
//! - NIST SP 800-67 (TDEA) worked example, three-key ECB.
//! - NIST "Cryptographic Standards and Guidelines" examples TDES_ECB.pdf and
//!   TDES_CBC.pdf (three-key bundle 0123456789ABCDEF 23456789ABCDEF01
//!   456789ABCDEF0123 over the SP 800-38A plaintext).
//!
//! Like AES, the engine pads with PKCS#7, so each mode also gets a padded check.

use des::{Des, TdesEde3};

use super::KatOutcome;
use super::aes_modes::{cbc_pkcs7, cbc_vector, ecb_pkcs7, ecb_vector};
use super::harness::hex;

const FIPS81_KEY: &str = "0123456789abcdef";
const FIPS81_IV: &str = "1234567890abcdef";
/// "Now is the time for all "
const FIPS81_PT: &str = "4e6f772069732074 68652074696d6520 666f7220616c6c20";

const TDES_KEY: &str = "0123456789abcdef 23456789abcdef01 456789abcdef0123";
/// The first two SP 800-38A plaintext blocks (four DES blocks).
const TDES_EXAMPLE_PT: &str = "6bc1bee22e409f96 e93d7e117393172a ae2d8a571e03ac9c 9eb76fac45af8e51";

/// SP 800-20 Table A.1, first three rounds: (plaintext, ciphertext).
const SP800_20_A1: [(&str, &str); 3] = [
    ("8000000000000000", "95f8a5e5dd31d900"),
    ("4000000000000000", "dd7f121ca5015619"),
    ("2000000000000000", "2e8653104f3834ea"),
];

fn sp800_20_a1<C>(cipher: &str, key: &[u8]) -> Vec<KatOutcome>
where
    C: cipher::BlockCipherEncrypt + cipher::BlockCipherDecrypt + cipher::KeyInit,
{
    SP800_20_A1
        .iter()
        .enumerate()
        .flat_map(|(i, (pt, ct))| {
            let round = i + 1;
            ecb_vector::<C>(
                (
                    &format!("SP 800-20 A.1 variable plaintext #{round} {cipher}-ECB.Encrypt"),
                    &format!("SP 800-20 A.1 variable plaintext #{round} {cipher}-ECB.Decrypt"),
                ),
                key,
                &hex(pt),
                &hex(ct),
            )
        })
        .collect()
}

pub(super) fn des_ecb() -> Vec<KatOutcome> {
    let key = hex(FIPS81_KEY);
    let pt = hex(FIPS81_PT);
    let ct = hex("3fa40e8a984d4815 6a271787ab8883f9 893d51ec4b563b53");
    let mut out = ecb_vector::<Des>(
        ("FIPS 81 Table B1 DES-ECB.Encrypt", "FIPS 81 Table B1 DES-ECB.Decrypt"),
        &key,
        &pt,
        &ct,
    );
    out.push(ecb_pkcs7::<Des>("FIPS 81 Table B1 DES-ECB with PKCS#7", &key, &pt, &ct));
    out.extend(sp800_20_a1::<Des>("DES", &hex("0101010101010101")));
    out
}

pub(super) fn des_cbc() -> Vec<KatOutcome> {
    let key = hex(FIPS81_KEY);
    let iv = hex(FIPS81_IV);
    let pt = hex(FIPS81_PT);
    let ct = hex("e5c7cdde872bf27c 43e934008c389c0f 683788499a7c05f6");
    let mut out = cbc_vector::<Des>(
        ("FIPS 81 Table C1 DES-CBC.Encrypt", "FIPS 81 Table C1 DES-CBC.Decrypt"),
        &key,
        &iv,
        &pt,
        &ct,
    );
    out.push(cbc_pkcs7::<Des>(
        "FIPS 81 Table C1 DES-CBC with PKCS#7",
        &key,
        &iv,
        &pt,
        &ct,
    ));
    out
}

pub(super) fn tdes_ecb() -> Vec<KatOutcome> {
    let key = hex(TDES_KEY);
    // SP 800-67: "The qufck brown fox jump" (sic).
    let mut out = ecb_vector::<TdesEde3>(
        (
            "SP 800-67 example TDEA-ECB.Encrypt",
            "SP 800-67 example TDEA-ECB.Decrypt",
        ),
        &key,
        b"The qufck brown fox jump",
        &hex("a826fd8ce53b855f cce21c8112256fe6 68d5c05dd9b6b900"),
    );
    let pt = hex(TDES_EXAMPLE_PT);
    let ct = hex("714772f339841d34 267fcc4bd2949cc3 ee11c22a576a3038 76183f99c0b6de87");
    out.extend(ecb_vector::<TdesEde3>(
        (
            "NIST example TDES_ECB TDEA-ECB.Encrypt",
            "NIST example TDES_ECB TDEA-ECB.Decrypt",
        ),
        &key,
        &pt,
        &ct,
    ));
    out.push(ecb_pkcs7::<TdesEde3>(
        "NIST example TDES_ECB TDEA-ECB with PKCS#7",
        &key,
        &pt,
        &ct,
    ));
    out.extend(sp800_20_a1::<TdesEde3>("TDEA", &[0x01; 24]));
    out
}

pub(super) fn tdes_cbc() -> Vec<KatOutcome> {
    let key = hex(TDES_KEY);
    let iv = hex("f69f2445df4f9b17");
    let pt = hex(TDES_EXAMPLE_PT);
    let ct = hex("2079c3d53aa763e1 93b79e2569ab5262 516570481f25b50f 73c0bda85c8e0da7");
    let mut out = cbc_vector::<TdesEde3>(
        (
            "NIST example TDES_CBC TDEA-CBC.Encrypt",
            "NIST example TDES_CBC TDEA-CBC.Decrypt",
        ),
        &key,
        &iv,
        &pt,
        &ct,
    );
    out.push(cbc_pkcs7::<TdesEde3>(
        "NIST example TDES_CBC TDEA-CBC with PKCS#7",
        &key,
        &iv,
        &pt,
        &ct,
    ));
    out
}
