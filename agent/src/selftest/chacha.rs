//! ChaCha20 and its AEADs.
//!
//! - RFC 8439 §2.3.2 (block function) and §2.4.2 (encryption), both starting at
//!   block counter 1, i.e. 64 bytes into the stream the `chacha20` crate starts
//!   at counter 0.
//! - RFC 8439 §2.8.2 ChaCha20-Poly1305.
//! - draft-irtf-cfrg-xchacha-03 §A.3.1 XChaCha20-Poly1305.

use chacha20::ChaCha20;
use chacha20poly1305::{ChaCha20Poly1305, XChaCha20Poly1305};
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};

use super::KatOutcome;
use super::harness::{AeadVector, aead_kat, hex, result_outcome};

/// The plaintext of RFC 8439 §2.4.2 and §2.8.2 (and the XChaCha draft's A.3.1).
pub(super) const SUNSCREEN: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for \
the future, sunscreen would be it.";

/// ChaCha20 from byte offset `offset` of the key stream over `input`.
fn chacha20_at(key: &[u8], nonce: &[u8], offset: u64, input: &[u8]) -> Result<Vec<u8>, String> {
    let mut c = ChaCha20::new_from_slices(key, nonce).map_err(|_| "key or nonce rejected".to_string())?;
    c.try_seek(offset).map_err(|e| format!("seek failed: {e}"))?;
    let mut buf = input.to_vec();
    c.try_apply_keystream(&mut buf)
        .map_err(|e| format!("keystream error: {e}"))?;
    Ok(buf)
}

/// RFC 8439 §2.4.2: the nonce (with block counter 1 and key 00..1f) and the ciphertext.
pub(super) const RFC8439_2_4_2_NONCE: &str = "000000000000004a00000000";
pub(super) const RFC8439_2_4_2_CIPHERTEXT: &str = "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b
         f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8
         07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736
         5af90bbf74a35be6b40b8eedf2785e42874d";

pub(super) fn chacha20() -> Vec<KatOutcome> {
    let key: Vec<u8> = (0u8..32).collect();
    let mut out = Vec::new();

    // §2.3.2: the serialized block for counter 1 is the key stream itself.
    let block = hex("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e
         d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e");
    out.push(result_outcome(
        "RFC 8439 2.3.2 ChaCha20 block function (counter 1)",
        "key stream block",
        chacha20_at(&key, &hex("000000090000004a00000000"), 64, &[0u8; 64]),
        &block,
    ));

    // §2.4.2: encryption of the sunscreen text, counter 1.
    let nonce = hex(RFC8439_2_4_2_NONCE);
    let ct = hex(RFC8439_2_4_2_CIPHERTEXT);
    out.push(result_outcome(
        "RFC 8439 2.4.2 ChaCha20.Encrypt",
        "ciphertext",
        chacha20_at(&key, &nonce, 64, SUNSCREEN),
        &ct,
    ));
    out.push(result_outcome(
        "RFC 8439 2.4.2 ChaCha20.Decrypt",
        "plaintext",
        chacha20_at(&key, &nonce, 64, &ct),
        SUNSCREEN,
    ));
    out
}

/// RFC 8439 §2.8.2.
pub(super) fn rfc8439_aead_vector() -> AeadVector {
    AeadVector {
        name: "RFC 8439 2.8.2 ChaCha20-Poly1305".to_string(),
        key: hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"),
        nonce: hex("070000004041424344454647"),
        aad: hex("50515253c0c1c2c3c4c5c6c7"),
        pt: SUNSCREEN.to_vec(),
        ct: hex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6
             3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36
             92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc
             3ff4def08e4b7a9de576d26586cec64b6116"),
        tag: hex("1ae10b594f09e26a7e902ecbd0600691"),
    }
}

pub(super) fn chacha20_poly1305() -> Vec<KatOutcome> {
    aead_kat::<ChaCha20Poly1305>(&rfc8439_aead_vector())
}

pub(super) fn xchacha20_poly1305() -> Vec<KatOutcome> {
    let v = AeadVector {
        name: "draft-irtf-cfrg-xchacha-03 A.3.1 XChaCha20-Poly1305".to_string(),
        key: hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"),
        nonce: hex("404142434445464748494a4b4c4d4e4f5051525354555657"),
        aad: hex("50515253c0c1c2c3c4c5c6c7"),
        pt: SUNSCREEN.to_vec(),
        ct: hex("bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb
             731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452
             2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9
             21f9664c97637da9768812f615c68b13b52e"),
        tag: hex("c0875924c1c7987947deafd8780acf49"),
    };
    aead_kat::<XChaCha20Poly1305>(&v)
}
