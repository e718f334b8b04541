//! ring's AEADs against the same published vectors as the crates: the GCM
//! spec's test cases with 96-bit IVs for AES-128 and AES-256 (ring has no
//! AES-192), and RFC 8439 §2.8.2 for ChaCha20-Poly1305.

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey};

use super::harness::{AeadUnderTest, AeadVector, aead_kat_with};
use super::{AesBits, KatOutcome, chacha, gcm};
use cipherfleet_core::algorithm::Algorithm;

/// One of ring's AEAD algorithms.
struct Ring(&'static ring::aead::Algorithm);

impl Ring {
    fn key(&self, key: &[u8]) -> Result<LessSafeKey, String> {
        UnboundKey::new(self.0, key)
            .map(LessSafeKey::new)
            .map_err(|_| format!("key of {} bytes rejected", key.len()))
    }
}

fn nonce(n: &[u8]) -> Result<Nonce, String> {
    Nonce::try_assume_unique_for_key(n).map_err(|_| format!("nonce of {} bytes rejected", n.len()))
}

impl AeadUnderTest for Ring {
    fn seal(&self, key: &[u8], n: &[u8], aad: &[u8], pt: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let mut buf = pt.to_vec();
        let tag = self
            .key(key)?
            .seal_in_place_separate_tag(nonce(n)?, Aad::from(aad), &mut buf)
            .map_err(|_| "sealing failed".to_string())?;
        Ok((buf, tag.as_ref().to_vec()))
    }

    fn open(&self, key: &[u8], n: &[u8], aad: &[u8], ct: &[u8], tag: &[u8]) -> Result<Vec<u8>, String> {
        let tag = Tag::try_from(tag).map_err(|_| format!("tag of {} bytes does not fit", tag.len()))?;
        let mut buf = ct.to_vec();
        let len = self
            .key(key)?
            .open_in_place_separate_tag(nonce(n)?, Aad::from(aad), tag, &mut buf, 0..)
            .map_err(|_| "the tag did not verify".to_string())?
            .len();
        buf.truncate(len);
        Ok(buf)
    }
}

/// The vectors of `algorithm` that ring runs, with ring's algorithm.
fn vectors(algorithm: Algorithm) -> Option<(Ring, Vec<AeadVector>)> {
    let ring_alg = crate::kernel::ring::algorithm(algorithm)?;
    let vectors = match algorithm.name() {
        "aes-128-gcm" => gcm::vectors(AesBits::B128),
        "aes-256-gcm" => gcm::vectors(AesBits::B256),
        _ => vec![chacha::rfc8439_aead_vector()],
    };
    Some((Ring(ring_alg), vectors))
}

/// ring's KATs for `algorithm` (none where ring lacks it).
pub(super) fn run_for(algorithm: Algorithm) -> Vec<KatOutcome> {
    let Some((ring, vectors)) = vectors(algorithm) else {
        return Vec::new();
    };
    vectors.iter().flat_map(|v| aead_kat_with("ring", v, &ring)).collect()
}
