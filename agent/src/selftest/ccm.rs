//! AES-CCM. The engine runs CCM with a 16-byte tag and a 12-byte nonce (as TLS
//! 1.3's AES-CCM): 15 − 12 = 3 bytes of length field, so one message holds up
//! to 16 MiB − 1, where RFC 3610's 13-byte nonce stops at 65,535 bytes.
//!
//! - Wycheproof `aes_ccm_test.json` (group ivSize 96, tagSize 128): one valid
//!   vector per key size with exactly the engine's parameterisation (Tlen = 16,
//!   Nlen = 12, empty associated data as the engine uses).
//! - NIST CAVP `DVPT128/192/256.rsp`: one vector per key size with Tlen = 16,
//!   Nlen = 13 (24-byte payload, 32-byte associated data).
//! - AES-128 only, other parameterisations as published: RFC 3610 packet
//!   vector #1 (8-byte tag, 13-byte nonce) and NIST SP 800-38C Appendix C
//!   examples 1-3 (4/7, 6/8 and 8/12 tag/nonce bytes).
//! - A round trip with tag and ciphertext tamper rejection on `Ccm<Aes, U16, U12>`.
//!
//! The unit tests also check the engine's parameterisation over messages longer
//! than 64 KiB against CCM built by hand from the block cipher (SP 800-38C A.2).

use aead::consts::{U4, U6, U7, U8, U12, U13, U16};
use aes::{Aes128, Aes192, Aes256};
use ccm::Ccm;

use super::harness::{AeadVector, aead_kat, aead_round_trip, hex};
use super::{AesBits, KatOutcome};

/// The engine's parameterisation (the kernel's `Ccm` alias).
type EngineCcm<C> = crate::kernel::Ccm<C>;

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

/// Wycheproof vector with Tlen = 16, Nlen = 12 and no associated data, for each key size.
fn wycheproof(bits: AesBits) -> AeadVector {
    match bits {
        AesBits::B128 => vector(
            "Wycheproof aes_ccm_test tcId 6 AES-128-CCM (Tlen 16, Nlen 12)",
            "a8ee11b26d7ceb7f17eaa1e4b83a2cf6",
            "fbbc04fd6e025b7193eb57f6",
            "",
            "c08f085e6a9e0ef3636280c11ecfadf0c1e72919ffc17eaf",
            "fcaaa38feda3aca975ac76553c3e7ef36b887a8c4d8241f9",
            "c2c6dcaeaeb9f38a3a42d2f4e8a17de4",
        ),
        AesBits::B192 => vector(
            "Wycheproof aes_ccm_test tcId 102 AES-192-CCM (Tlen 16, Nlen 12)",
            "a61ed3b81d78560602777407759b1f2ca34cd70c6b57791b",
            "07b82497b815d16182481045",
            "",
            "ddc1862e3531622e698322f0b1ca6d222231ef14dbeea33679d31c48777c88",
            "a0c1526c88dcc265f75d4ef9b2a000fb3cce9e5d994c472c46bfac3821d611",
            "9aa6cdb85b126e1f21d066a3c05e82f6",
        ),
        AesBits::B256 => vector(
            "Wycheproof aes_ccm_test tcId 136 AES-256-CCM (Tlen 16, Nlen 12)",
            "0212a8de5007ed87b33f1a7090b6114f9e08cefd9607f2c276bdcfdbc5ce9cd7",
            "e6b1adf2fd58a8762c65f31b",
            "",
            "10f1ecf9c60584665d9ae5efe279e7f7377eea6916d2b111",
            "3c0a0b3494d75ccbcffaa917d6159294fd93e8a2ee66447a",
            "b0b07ba05167e88c24e54824a07061b9",
        ),
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
    let round_trip = format!("AES-{b}-CCM (tag 16, nonce 12) round trip and tamper rejection");
    let mut out = Vec::new();
    match bits {
        AesBits::B128 => {
            out.extend(aead_kat::<EngineCcm<Aes128>>(&wycheproof(bits)));
            out.extend(aead_kat::<Ccm<Aes128, U16, U13>>(&cavp_dvpt(bits)));
            out.push(aead_round_trip::<EngineCcm<Aes128>>(&round_trip, 16));
            out.extend(aes128_published());
        }
        AesBits::B192 => {
            out.extend(aead_kat::<EngineCcm<Aes192>>(&wycheproof(bits)));
            out.extend(aead_kat::<Ccm<Aes192, U16, U13>>(&cavp_dvpt(bits)));
            out.push(aead_round_trip::<EngineCcm<Aes192>>(&round_trip, 24));
        }
        AesBits::B256 => {
            out.extend(aead_kat::<EngineCcm<Aes256>>(&wycheproof(bits)));
            out.extend(aead_kat::<Ccm<Aes256, U16, U13>>(&cavp_dvpt(bits)));
            out.push(aead_round_trip::<EngineCcm<Aes256>>(&round_trip, 32));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use aead::{AeadInOut, KeyInit, Nonce};
    use cipher::{Block, BlockCipherEncrypt};

    use super::*;
    use crate::selftest::harness::pattern;

    /// CCM encryption (Tlen 16, Nlen 12, no associated data) written out from
    /// SP 800-38C A.2 over the bare block cipher: B0, the CBC-MAC, the counter blocks.
    fn reference_ccm(key: &[u8], nonce: &[u8; 12], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
        let aes = Aes128::new_from_slice(key).unwrap();
        let q = 15 - nonce.len(); // bytes of the length field: 3
        let block = |flags: u8, tail: u64| {
            let mut b = Block::<Aes128>::default();
            b[0] = flags;
            b[1..=nonce.len()].copy_from_slice(nonce);
            b[16 - q..].copy_from_slice(&tail.to_be_bytes()[8 - q..]);
            b
        };
        // Flags of B0: no associated data, (t − 2)/2 = 7 in bits 3-5, q − 1 in bits 0-2.
        let mut mac = block((7 << 3) | (q as u8 - 1), pt.len() as u64);
        aes.encrypt_block(&mut mac);
        for chunk in pt.chunks(16) {
            for (m, p) in mac.iter_mut().zip(chunk) {
                *m ^= p;
            }
            aes.encrypt_block(&mut mac);
        }
        let mut s0 = block(q as u8 - 1, 0);
        aes.encrypt_block(&mut s0);
        let mut ct = pt.to_vec();
        for (j, chunk) in ct.chunks_mut(16).enumerate() {
            let mut s = block(q as u8 - 1, j as u64 + 1);
            aes.encrypt_block(&mut s);
            for (c, k) in chunk.iter_mut().zip(s.iter()) {
                *c ^= k;
            }
        }
        let tag: [u8; 16] = core::array::from_fn(|i| mac[i] ^ s0[i]);
        (ct, tag)
    }

    #[test]
    fn the_engine_ccm_carries_messages_past_64_kib_as_the_standard_defines() {
        let key = pattern(16, 0x42);
        let nonce: [u8; 12] = pattern(12, 0x07).try_into().unwrap();
        let ccm = EngineCcm::<Aes128>::new_from_slice(&key).unwrap();
        // 65,535 is the 13-byte nonce's last length; past it the third length byte is used.
        for len in [100, 65_535, 65_536, 70_001] {
            let pt = pattern(len, 0x3c);
            let (want_ct, want_tag) = reference_ccm(&key, &nonce, &pt);
            let mut buf = pt.clone();
            let tag = ccm
                .encrypt_inout_detached(&Nonce::<EngineCcm<Aes128>>::from(nonce), &[], buf.as_mut_slice().into())
                .unwrap_or_else(|e| panic!("{len} bytes: {e}"));
            assert!(buf == want_ct, "{len} bytes: ciphertext differs from SP 800-38C");
            assert_eq!(tag.as_slice(), want_tag, "{len} bytes");
        }
    }

    #[test]
    fn the_reference_agrees_with_the_published_nonce_12_vector() {
        let v = wycheproof(AesBits::B128);
        let (ct, tag) = reference_ccm(&v.key, &v.nonce.clone().try_into().unwrap(), &v.pt);
        assert_eq!((ct, tag.to_vec()), (v.ct, v.tag));
    }

    #[test]
    fn every_engine_ccm_kat_passes() {
        for bits in [AesBits::B128, AesBits::B192, AesBits::B256] {
            let outcomes = run(bits);
            assert!(outcomes.len() >= 7, "{outcomes:?}");
            assert!(outcomes.iter().all(|o| o.passed), "{outcomes:?}");
        }
    }
}
