//! AES-GCM: test cases from McGrew & Viega, "The Galois/Counter Mode of
//! Operation (GCM)", Appendix B (the vectors NIST's SP 800-38D validation
//! builds on). The cases with 96-bit IVs are used, since that is the engine's
//! nonce size: per key size one case with a zero key and one block, one with a
//! 64-byte plaintext and no AAD, and one with a 60-byte plaintext and 20 bytes
//! of AAD (a partial final block on both).

use aead::consts::U12;
use aes::{Aes128, Aes192, Aes256};
use aes_gcm::AesGcm;

use super::harness::{AeadVector, aead_kat, hex};
use super::{AesBits, KatOutcome};

type Aes128Gcm = AesGcm<Aes128, U12>;
type Aes192Gcm = AesGcm<Aes192, U12>;
type Aes256Gcm = AesGcm<Aes256, U12>;

const SPEC_IV: &str = "cafebabefacedbaddecaf888";
const SPEC_AAD: &str = "feedfacedeadbeeffeedfacedeadbeefabaddad2";
const SPEC_PT_64: &str = "d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72
                          1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b391aafd255";

/// One Appendix B test case with a 96-bit IV.
struct Case {
    number: u32,
    key: &'static str,
    /// Zero IV and one zero plaintext block (cases 2, 8, 14); otherwise the
    /// spec's IV and plaintext.
    zero_case: bool,
    /// With the 20-byte AAD and the plaintext cut to 60 bytes (cases 4, 10, 16).
    with_aad: bool,
    ct: &'static str,
    tag: &'static str,
}

fn cases(bits: AesBits) -> [Case; 3] {
    match bits {
        AesBits::B128 => [
            Case {
                number: 2,
                key: "00000000000000000000000000000000",
                zero_case: true,
                with_aad: false,
                ct: "0388dace60b6a392f328c2b971b2fe78",
                tag: "ab6e47d42cec13bdf53a67b21257bddf",
            },
            Case {
                number: 3,
                key: "feffe9928665731c6d6a8f9467308308",
                zero_case: false,
                with_aad: false,
                ct: "42831ec2217774244b7221b784d0d49c e3aa212f2c02a4e035c17e2329aca12e
                     21d514b25466931c7d8f6a5aac84aa05 1ba30b396a0aac973d58e091473f5985",
                tag: "4d5c2af327cd64a62cf35abd2ba6fab4",
            },
            Case {
                number: 4,
                key: "feffe9928665731c6d6a8f9467308308",
                zero_case: false,
                with_aad: true,
                ct: "42831ec2217774244b7221b784d0d49c e3aa212f2c02a4e035c17e2329aca12e
                     21d514b25466931c7d8f6a5aac84aa05 1ba30b396a0aac973d58e091",
                tag: "5bc94fbc3221a5db94fae95ae7121a47",
            },
        ],
        AesBits::B192 => [
            Case {
                number: 8,
                key: "000000000000000000000000000000000000000000000000",
                zero_case: true,
                with_aad: false,
                ct: "98e7247c07f0fe411c267e4384b0f600",
                tag: "2ff58d80033927ab8ef4d4587514f0fb",
            },
            Case {
                number: 9,
                key: "feffe9928665731c6d6a8f9467308308feffe9928665731c",
                zero_case: false,
                with_aad: false,
                ct: "3980ca0b3c00e841eb06fac4872a2757 859e1ceaa6efd984628593b40ca1e19c
                     7d773d00c144c525ac619d18c84a3f47 18e2448b2fe324d9ccda2710acade256",
                tag: "9924a7c8587336bfb118024db8674a14",
            },
            Case {
                number: 10,
                key: "feffe9928665731c6d6a8f9467308308feffe9928665731c",
                zero_case: false,
                with_aad: true,
                ct: "3980ca0b3c00e841eb06fac4872a2757 859e1ceaa6efd984628593b40ca1e19c
                     7d773d00c144c525ac619d18c84a3f47 18e2448b2fe324d9ccda2710",
                tag: "2519498e80f1478f37ba55bd6d27618c",
            },
        ],
        AesBits::B256 => [
            Case {
                number: 14,
                key: "0000000000000000000000000000000000000000000000000000000000000000",
                zero_case: true,
                with_aad: false,
                ct: "cea7403d4d606b6e074ec5d3baf39d18",
                tag: "d0d1c8a799996bf0265b98b5d48ab919",
            },
            Case {
                number: 15,
                key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                zero_case: false,
                with_aad: false,
                ct: "522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa
                     8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662898015ad",
                tag: "b094dac5d93471bdec1a502270e3cc6c",
            },
            Case {
                number: 16,
                key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                zero_case: false,
                with_aad: true,
                ct: "522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa
                     8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662",
                tag: "76fc6ece0f4e1768cddf8853bb2d551b",
            },
        ],
    }
}

fn vector(bits: AesBits, c: &Case) -> AeadVector {
    let (nonce, pt, aad) = if c.zero_case {
        (vec![0u8; 12], vec![0u8; 16], Vec::new())
    } else {
        let mut pt = hex(SPEC_PT_64);
        let aad = if c.with_aad {
            // The AAD cases drop the last four plaintext bytes.
            pt.truncate(60);
            hex(SPEC_AAD)
        } else {
            Vec::new()
        };
        (hex(SPEC_IV), pt, aad)
    };
    AeadVector {
        name: format!("GCM spec test case {} AES-{}-GCM", c.number, bits.bits()),
        key: hex(c.key),
        nonce,
        aad,
        pt,
        ct: hex(c.ct),
        tag: hex(c.tag),
    }
}

/// The three published vectors of `bits` (for the other providers' KATs).
pub(super) fn vectors(bits: AesBits) -> Vec<AeadVector> {
    cases(bits).iter().map(|c| vector(bits, c)).collect()
}

pub(super) fn run(bits: AesBits) -> Vec<KatOutcome> {
    cases(bits)
        .iter()
        .flat_map(|c| {
            let v = vector(bits, c);
            match bits {
                AesBits::B128 => aead_kat::<Aes128Gcm>(&v),
                AesBits::B192 => aead_kat::<Aes192Gcm>(&v),
                AesBits::B256 => aead_kat::<Aes256Gcm>(&v),
            }
        })
        .collect()
}
