//! What a construction stores beside the ciphertext of one message, as the
//! engine runs it (agent/src/kernel): the nonce or IV it must keep, the tag
//! or MAC, and the block padding. A fact of the format, not a measurement.

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use serde::Serialize;

/// The bytes one message of `size_bytes` stores beyond its plaintext.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overhead {
    pub algorithm: Algorithm,
    pub size_bytes: u64,
    /// Nonce (AEADs, CTR, ChaCha20) or IV (CBC) kept with the message.
    pub nonce_or_iv_bytes: u64,
    /// AEAD tag.
    pub tag_bytes: u64,
    /// HMAC-SHA256 of CBC-HMAC (encrypt-then-MAC).
    pub mac_bytes: u64,
    /// PKCS#7 padding of ECB and CBC (always at least one byte).
    pub padding_bytes: u64,
    pub total_bytes: u64,
    /// `total_bytes / size_bytes`.
    pub fraction: f64,
}

fn block_bytes(cipher: Cipher) -> u64 {
    match cipher {
        Cipher::Des | Cipher::TripleDes => 8,
        Cipher::ChaCha20 => 64,
        _ => 16,
    }
}

/// The stored overhead of one message of `size_bytes` (at least 1).
pub fn overhead(algorithm: Algorithm, size_bytes: u64) -> Overhead {
    let block = block_bytes(algorithm.cipher);
    let padding = (size_bytes / block + 1) * block - size_bytes;
    let (nonce, tag, mac, padding) = match algorithm.mode {
        Mode::Ecb => (0, 0, 0, padding),
        Mode::Cbc => (block, 0, 0, padding),
        Mode::Ctr => (16, 0, 0, 0),
        Mode::Gcm | Mode::Ccm | Mode::Ocb => (12, 16, 0, 0),
        Mode::CbcHmacSha256 => (block, 0, 32, padding),
        Mode::Stream => (12, 0, 0, 0),
        Mode::Poly1305 => (12, 16, 0, 0),
        Mode::XPoly1305 => (24, 16, 0, 0),
    };
    let total = nonce + tag + mac + padding;
    Overhead {
        algorithm,
        size_bytes,
        nonce_or_iv_bytes: nonce,
        tag_bytes: tag,
        mac_bytes: mac,
        padding_bytes: padding,
        total_bytes: total,
        fraction: total as f64 / size_bytes.max(1) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_construction_stores_its_nonce_tag_mac_and_padding() {
        let cases: &[(&str, u64, [u64; 4])] = &[
            // nonce/IV, tag, MAC, padding
            ("aes-256-gcm", 10 << 20, [12, 16, 0, 0]),
            ("chacha20-poly1305", 10 << 20, [12, 16, 0, 0]),
            ("xchacha20-poly1305", 11, [24, 16, 0, 0]),
            // 10 MiB is a whole number of blocks: PKCS#7 adds a full block.
            ("aes-128-cbc-hmac-sha256", 10 << 20, [16, 0, 32, 16]),
            ("aes-128-cbc", 11, [16, 0, 0, 5]),
            ("des-ede3-cbc", 18, [8, 0, 0, 6]),
            ("aes-256-ecb", 16, [0, 0, 0, 16]),
            ("aes-256-ctr", 18, [16, 0, 0, 0]),
        ];
        for &(name, size, [n, t, m, p]) in cases {
            let o = overhead(name.parse().unwrap(), size);
            assert_eq!(
                [o.nonce_or_iv_bytes, o.tag_bytes, o.mac_bytes, o.padding_bytes],
                [n, t, m, p],
                "{name} at {size}"
            );
            assert_eq!(o.total_bytes, n + t + m + p);
        }
        let gcm = overhead("aes-256-gcm".parse().unwrap(), 11);
        assert!((gcm.fraction - 28.0 / 11.0).abs() < 1e-12);
    }
}
