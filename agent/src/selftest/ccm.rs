//! AES-CCM. The engine runs CCM with a 16-byte tag and a 13-byte nonce.
//!
//! - NIST CAVP `DVPT128/192/256.rsp` (CCM decryption-verification process
//!   tests): one vector per key size with exactly the engine's parameterisation
//!   (Tlen = 16, Nlen = 13, 24-byte payload, 32-byte associated data).
//! - AES-128 only, other parameterisations as published: RFC 3610 packet
//!   vector #1 (8-byte tag, 13-byte nonce) and NIST SP 800-38C Appendix C
//!   examples 1-3 (4/7, 6/8 and 8/12 tag/nonce bytes).
//! - A round trip with tag and ciphertext tamper rejection on `Ccm<Aes, U16, U13>`.

use aead::consts::{U4, U6, U7, U8, U12, U13, U16};
use aes::{Aes128, Aes192, Aes256};
use ccm::Ccm;

use super::harness::{AeadVector, aead_kat, aead_round_trip, hex};
use super::{AesBits, KatOutcome};

/// The engine's parameterisation.
type EngineCcm<C> = Ccm<C, U16, U13>;

fn vector(name: &str, key: &str, nonce: &str, aad: &str, pt: &str, ct: &str, tag: &str) -> AeadVector {
    AeadVector {
        name: name.to_string(),
        key: hex(key),
        nonce: hex(nonce),
        aad: hex(aad),
        pt: hex(pt),
        ct: hex(ct),
        tag: hex(tag),
    }
}

/// CAVP DVPT vector with Tlen = 16, Nlen = 13 for each key size.
fn cavp_dvpt(bits: AesBits) -> AeadVector {
    match bits {
        AesBits::B128 => vector(
            "NIST CAVP DVPT128 AES-128-CCM (Tlen 16, Nlen 13)",
            "26511fb51fcfa75cb4b44da75a6e5a0e",
            "5a8aa485c316e9403aff859fbb",
            "a16a2e741f1cd9717285b6d882c1fc53655e9773761ad697a7ee6410184c7982",
            "8739b4bea1a099fe547499cbc6d1b13d849b8084c9b6acc5",
            "50038b5fdd364ee747b70d00bd36840ece4ea19998123375",
            "c0a458bfcafa3b2609afe0f825cbf503",
        ),
        AesBits::B192 => vector(
            "NIST CAVP DVPT192 AES-192-CCM (Tlen 16, Nlen 13)",
            "26511fb51fcfa75cb4b44da75a6e5a0eb8d9c8f3b906f886",
            "5a8aa485c316e9403aff859fbb",
            "a16a2e741f1cd9717285b6d882c1fc53655e9773761ad697a7ee6410184c7982",
            "8739b4bea1a099fe547499cbc6d1b13d849b8084c9b6acc5",
            "c5b0b2ef17498c5570eb335df4588032958ba3d69bf6f317",
            "8464a6f7fa2b76744e8e8d95691cecb8",
        ),
        AesBits::B256 => vector(
            "NIST CAVP DVPT256 AES-256-CCM (Tlen 16, Nlen 13)",
            "314a202f836f9f257e22d8c11757832ae5131d357a72df88f3eff0ffcee0da4e",
            "a544218dadd3c10583db49cf39",
            "3c0e2815d37d844f7ac240ba9d6e3a0b2a86f706e885959e09a1005e024f6907",
            "e8de970f6ee8e80ede933581b5bcf4d837e2b72baa8b00c3",
            "8d34cdca37ce77be68f65baf3382e31efa693e63f914a781",
            "367f30f2eaad8c063ca50795acd90203",
        ),
    }
}

/// AES-128 vectors with the tag/nonce sizes the documents use.
fn aes128_published() -> Vec<KatOutcome> {
    let mut out = Vec::new();
    out.extend(aead_kat::<Ccm<Aes128, U8, U13>>(&vector(
        "RFC 3610 packet vector #1 AES-128-CCM (M 8, L 2)",
        "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf",
        "00000003020100a0a1a2a3a4a5",
        "0001020304050607",
        "08090a0b0c0d0e0f101112131415161718191a1b1c1d1e",
        "588c979a61c663d2f066d0c2c0f989806d5f6b61dac384",
        "17e8d12cfdf926e0",
    )));
    let key = "404142434445464748494a4b4c4d4e4f";
    out.extend(aead_kat::<Ccm<Aes128, U4, U7>>(&vector(
        "SP 800-38C C.1 example 1 AES-128-CCM (Tlen 4, Nlen 7)",
        key,
        "10111213141516",
        "0001020304050607",
        "20212223",
        "7162015b",
        "4dac255d",
    )));
    out.extend(aead_kat::<Ccm<Aes128, U6, U8>>(&vector(
        "SP 800-38C C.2 example 2 AES-128-CCM (Tlen 6, Nlen 8)",
        key,
        "1011121314151617",
        "000102030405060708090a0b0c0d0e0f",
        "202122232425262728292a2b2c2d2e2f",
        "d2a1f0e051ea5f62081a7792073d593d",
        "1fc64fbfaccd",
    )));
    out.extend(aead_kat::<Ccm<Aes128, U8, U12>>(&vector(
        "SP 800-38C C.3 example 3 AES-128-CCM (Tlen 8, Nlen 12)",
        key,
        "101112131415161718191a1b",
        "000102030405060708090a0b0c0d0e0f10111213",
        "202122232425262728292a2b2c2d2e2f3031323334353637",
        "e3b201a9f5b71a7a9b1ceaeccd97e70b6176aad9a4428aa5",
        "484392fbc1b09951",
    )));
    out
}

pub(super) fn run(bits: AesBits) -> Vec<KatOutcome> {
    let b = bits.bits();
    let round_trip = format!("AES-{b}-CCM (tag 16, nonce 13) round trip and tamper rejection");
    let mut out = Vec::new();
    match bits {
        AesBits::B128 => {
            out.extend(aead_kat::<EngineCcm<Aes128>>(&cavp_dvpt(bits)));
            out.push(aead_round_trip::<EngineCcm<Aes128>>(&round_trip, 16));
            out.extend(aes128_published());
        }
        AesBits::B192 => {
            out.extend(aead_kat::<EngineCcm<Aes192>>(&cavp_dvpt(bits)));
            out.push(aead_round_trip::<EngineCcm<Aes192>>(&round_trip, 24));
        }
        AesBits::B256 => {
            out.extend(aead_kat::<EngineCcm<Aes256>>(&cavp_dvpt(bits)));
            out.push(aead_round_trip::<EngineCcm<Aes256>>(&round_trip, 32));
        }
    }
    out
}
