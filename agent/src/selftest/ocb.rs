//! AES-OCB3 (RFC 7253) with the engine's 12-byte nonce and 16-byte tag.
//!
//! - AES-128: the sixteen AEAD_AES_128_OCB_TAGLEN128 sample results of
//!   RFC 7253 Appendix A (A and P ranging over 0..40 bytes).
//! - Every key size: the Appendix A iterated test ("more sample results"),
//!   whose published outputs exist for AEAD_AES_{128,192,256}_OCB_TAGLEN128.
//!   It chains 384 encryptions over every message length from 0 to 127 bytes
//!   and authenticates them all with one final tag.
//! - AES-192/256 also get a round trip with tamper rejection.

use aead::consts::{U12, U16};
use aead::{AeadInOut, KeyInit, Nonce, Tag};
use aes::{Aes128, Aes192, Aes256};
use ocb3::Ocb3;

use super::harness::{AeadVector, aead_kat, aead_round_trip, hex, mismatch};
use super::{AesBits, KatOutcome};

/// The engine's parameterisation.
type EngineOcb<C> = Ocb3<C, U12, U16>;

/// RFC 7253 Appendix A, key 000102..0f, nonce BBAA99887766554433221100 + i:
/// (|A|, |P|, C || T). A and P are prefixes of 00 01 02 .. 27.
const RFC7253_SAMPLES: [(usize, usize, &str); 16] = [
    (0, 0, "785407BFFFC8AD9EDCC5520AC9111EE6"),
    (8, 8, "6820B3657B6F615A5725BDA0D3B4EB3A257C9AF1F8F03009"),
    (8, 0, "81017F8203F081277152FADE694A0A00"),
    (0, 8, "45DD69F8F5AAE72414054CD1F35D82760B2CD00D2F99BFA9"),
    (
        16,
        16,
        "571D535B60B277188BE5147170A9A22C3AD7A4FF3835B8C5701C1CCEC8FC3358",
    ),
    (16, 0, "8CF761B6902EF764462AD86498CA6B97"),
    (
        0,
        16,
        "5CE88EC2E0692706A915C00AEB8B2396F40E1C743F52436BDF06D8FA1ECA343D",
    ),
    (
        24,
        24,
        "1CA2207308C87C010756104D8840CE1952F09673A448A122C92C62241051F57356D7F3C90BB0E07F",
    ),
    (24, 0, "6DC225A071FC1B9F7C69F93B0F1E10DE"),
    (
        0,
        24,
        "221BD0DE7FA6FE993ECCD769460A0AF2D6CDED0C395B1C3CE725F32494B9F914D85C0B1EB38357FF",
    ),
    (
        32,
        32,
        "BD6F6C496201C69296C11EFD138A467ABD3C707924B964DEAFFC40319AF5A485
         40FBBA186C5553C68AD9F592A79A4240",
    ),
    (32, 0, "FE80690BEE8A485D11F32965BC9D2A32"),
    (
        0,
        32,
        "2942BFC773BDA23CABC6ACFD9BFD5835BD300F0973792EF46040C53F1432BCDF
         B5E1DDE3BC18A5F840B52E653444D5DF",
    ),
    (
        40,
        40,
        "D5CA91748410C1751FF8A2F618255B68A0A12E093FF454606E59F9C1D0DDC54B
         65E8628E568BAD7AED07BA06A4A69483A7035490C5769E60",
    ),
    (40, 0, "C5CD9D1850C141E358649994EE701B68"),
    (
        0,
        40,
        "4412923493C57D5DE0D700F753CCE0D1D2D95060122E9F15A5DDBFC5787E50B5
         CC55EE507BCB084E479AD363AC366B95A98CA5F3000B1479",
    ),
];

fn rfc7253_samples() -> Vec<KatOutcome> {
    let key = hex("000102030405060708090A0B0C0D0E0F");
    let s40: Vec<u8> = (0u8..40).collect();
    RFC7253_SAMPLES
        .iter()
        .enumerate()
        .flat_map(|(i, &(a_len, p_len, out))| {
            let out = hex(out);
            let (ct, tag) = out.split_at(out.len() - 16);
            let mut nonce = hex("BBAA99887766554433221100");
            nonce[11] = i as u8;
            let v = AeadVector {
                name: format!(
                    "RFC 7253 A AES-128-OCB sample N=BBAA998877665544332211{i:02X} \
                     (|A| {a_len}, |P| {p_len})"
                ),
                key: key.clone(),
                nonce,
                aad: s40[..a_len].to_vec(),
                pt: s40[..p_len].to_vec(),
                ct: ct.to_vec(),
                tag: tag.to_vec(),
            };
            aead_kat::<EngineOcb<Aes128>>(&v)
        })
        .collect()
}

/// RFC 7253 Appendix A iterated test for TAGLEN 128: `[encrypt, verify]` outcomes.
fn iterated<A: AeadInOut + KeyInit>(bits: AesBits, expected: &str) -> Vec<KatOutcome> {
    let b = bits.bits();
    let enc_name = format!("RFC 7253 A iterated AEAD_AES_{b}_OCB_TAGLEN128.Encrypt");
    let dec_name = format!("RFC 7253 A iterated AEAD_AES_{b}_OCB_TAGLEN128.Decrypt");
    let expected = hex(expected);

    // K = zeros(KEYLEN-8) || num2str(TAGLEN, 8)
    let mut key = vec![0u8; (b / 8) as usize];
    *key.last_mut().expect("non-empty key") = 128;
    let Ok(cipher) = A::new_from_slice(&key) else {
        let detail = format!("key of {} bytes rejected", key.len());
        return vec![
            KatOutcome::fail(enc_name, detail.clone()),
            KatOutcome::fail(dec_name, detail),
        ];
    };
    // N = num2str(n, 96)
    let nonce = |n: u32| {
        let mut bytes = [0u8; 12];
        bytes[8..].copy_from_slice(&n.to_be_bytes());
        Nonce::<A>::try_from(&bytes[..]).expect("OCB nonce is 12 bytes")
    };
    let seal = |n: u32, aad: &[u8], pt: &[u8]| -> Result<Vec<u8>, String> {
        let mut buf = pt.to_vec();
        let tag = cipher
            .encrypt_inout_detached(&nonce(n), aad, buf.as_mut_slice().into())
            .map_err(|e| format!("encryption error: {e}"))?;
        buf.extend_from_slice(&tag);
        Ok(buf)
    };

    let mut c = Vec::with_capacity(22_400);
    let mut first_error = None;
    for i in 0..128u32 {
        let s = vec![0u8; i as usize];
        for (n, aad, pt) in [
            (3 * i + 1, &s[..], &s[..]),
            (3 * i + 2, &[][..], &s[..]),
            (3 * i + 3, &s[..], &[][..]),
        ] {
            match seal(n, aad, pt) {
                Ok(out) => c.extend_from_slice(&out),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    if let Some(e) = first_error {
        return vec![KatOutcome::fail(enc_name, e.clone()), KatOutcome::fail(dec_name, e)];
    }
    let encrypt = match seal(385, &c, &[]) {
        Ok(tag) => {
            let mut problems: Vec<String> = Vec::new();
            if c.len() != 22_400 {
                problems.push(format!("C is {} bytes, expected 22400", c.len()));
            }
            problems.extend(mismatch("output", &tag, &expected));
            KatOutcome::from_problems(enc_name, problems)
        }
        Err(e) => KatOutcome::fail(enc_name, e),
    };

    // The final step authenticates C with an empty message: the published tag
    // must verify, and with one bit flipped must not.
    let decrypt = match Tag::<A>::try_from(expected.as_slice()) {
        Err(_) => KatOutcome::fail(dec_name, "published output is not a 16-byte tag"),
        Ok(tag) => {
            let mut bad = tag.clone();
            bad[15] ^= 0x01;
            let good_ok = cipher
                .decrypt_inout_detached(&nonce(385), &c, (&mut [][..]).into(), &tag)
                .is_ok();
            let bad_ok = cipher
                .decrypt_inout_detached(&nonce(385), &c, (&mut [][..]).into(), &bad)
                .is_ok();
            let mut problems = Vec::new();
            if !good_ok {
                problems.push("the published tag was rejected".to_string());
            }
            if bad_ok {
                problems.push("a tag with its last bit flipped was accepted".to_string());
            }
            KatOutcome::from_problems(dec_name, problems)
        }
    };
    vec![encrypt, decrypt]
}

pub(super) fn run(bits: AesBits) -> Vec<KatOutcome> {
    let round_trip = format!(
        "AES-{}-OCB (nonce 12, tag 16) round trip and tamper rejection",
        bits.bits()
    );
    match bits {
        AesBits::B128 => {
            let mut out = rfc7253_samples();
            out.extend(iterated::<EngineOcb<Aes128>>(bits, "67E944D23256C5E0B6C61FA22FDF1EA2"));
            out
        }
        AesBits::B192 => {
            let mut out = iterated::<EngineOcb<Aes192>>(bits, "F673F2C3E7174AAE7BAE986CA9F29E17");
            out.push(aead_round_trip::<EngineOcb<Aes192>>(&round_trip, 24));
            out
        }
        AesBits::B256 => {
            let mut out = iterated::<EngineOcb<Aes256>>(bits, "D90EB8E9C977C88B79DD793D7FFA161C");
            out.push(aead_round_trip::<EngineOcb<Aes256>>(&round_trip, 32));
            out
        }
    }
}
