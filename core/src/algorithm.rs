//! The algorithms the engine can benchmark, named as `openssl speed -evp` names them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The block cipher or stream cipher under a construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cipher {
    Aes128,
    Aes192,
    Aes256,
    ChaCha20,
    Des,
    TripleDes,
}

/// The mode of operation or AEAD construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Electronic codebook with PKCS#7 padding.
    Ecb,
    /// Cipher block chaining with PKCS#7 padding.
    Cbc,
    /// Counter mode (big-endian 128-bit counter), no padding.
    Ctr,
    Gcm,
    /// CCM with a 16-byte tag and 12-byte nonce (as TLS 1.3's AES-CCM), so a
    /// 3-byte length field: messages up to [`CCM_MAX_MESSAGE`] bytes.
    Ccm,
    /// OCB3 (RFC 7253) with a 16-byte tag and 12-byte nonce.
    Ocb,
    /// CBC with PKCS#7, then HMAC-SHA256 over IV || ciphertext (encrypt-then-MAC).
    CbcHmacSha256,
    /// The raw ChaCha20 stream (RFC 8439), no authentication.
    Stream,
    /// ChaCha20-Poly1305 (RFC 8439).
    Poly1305,
    /// XChaCha20-Poly1305 (24-byte nonce).
    XPoly1305,
}

/// CCM's length field has 15 − nonce length bytes; with the 12-byte nonce, 3
/// bytes, so one message holds at most 2^24 − 1 bytes (16 MiB − 1), enough for
/// every payload of the matrix. (The 13-byte nonce of RFC 3610 leaves 2 bytes:
/// 65,535.)
pub const CCM_MAX_MESSAGE: u64 = (1 << 24) - 1;

/// One benchmarkable algorithm: a cipher under a mode, with an OpenSSL-style name.
/// Ordered by cipher, then mode (AES-128 before AES-256 before ChaCha20 before DES).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Algorithm {
    pub cipher: Cipher,
    pub mode: Mode,
    name: &'static str,
}

macro_rules! algorithms {
    ($($name:literal => $cipher:ident $mode:ident),* $(,)?) => {
        /// Every algorithm, in the order tables list them.
        pub const ALL: &[Algorithm] = &[
            $(Algorithm { cipher: Cipher::$cipher, mode: Mode::$mode, name: $name }),*
        ];
    };
}

algorithms! {
    "aes-128-ecb" => Aes128 Ecb,
    "aes-192-ecb" => Aes192 Ecb,
    "aes-256-ecb" => Aes256 Ecb,
    "aes-128-cbc" => Aes128 Cbc,
    "aes-192-cbc" => Aes192 Cbc,
    "aes-256-cbc" => Aes256 Cbc,
    "aes-128-ctr" => Aes128 Ctr,
    "aes-192-ctr" => Aes192 Ctr,
    "aes-256-ctr" => Aes256 Ctr,
    "aes-128-gcm" => Aes128 Gcm,
    "aes-192-gcm" => Aes192 Gcm,
    "aes-256-gcm" => Aes256 Gcm,
    "aes-128-ccm" => Aes128 Ccm,
    "aes-192-ccm" => Aes192 Ccm,
    "aes-256-ccm" => Aes256 Ccm,
    "aes-128-ocb" => Aes128 Ocb,
    "aes-192-ocb" => Aes192 Ocb,
    "aes-256-ocb" => Aes256 Ocb,
    "aes-128-cbc-hmac-sha256" => Aes128 CbcHmacSha256,
    "aes-256-cbc-hmac-sha256" => Aes256 CbcHmacSha256,
    "chacha20" => ChaCha20 Stream,
    "chacha20-poly1305" => ChaCha20 Poly1305,
    "xchacha20-poly1305" => ChaCha20 XPoly1305,
    "des-ecb" => Des Ecb,
    "des-cbc" => Des Cbc,
    "des-ede3-ecb" => TripleDes Ecb,
    "des-ede3-cbc" => TripleDes Cbc,
}

impl Algorithm {
    /// The OpenSSL-style name, e.g. `aes-256-gcm`.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Whether decryption verifies a tag (AEAD or encrypt-then-MAC).
    pub fn is_authenticated(self) -> bool {
        matches!(
            self.mode,
            Mode::Gcm | Mode::Ccm | Mode::Ocb | Mode::CbcHmacSha256 | Mode::Poly1305 | Mode::XPoly1305
        )
    }

    /// Whether the algorithm uses AES (and so depends on AES-NI / ARMv8 AES).
    pub fn uses_aes(self) -> bool {
        matches!(self.cipher, Cipher::Aes128 | Cipher::Aes192 | Cipher::Aes256)
    }

    /// The longest message one operation may carry, where the construction
    /// limits it below [`crate::spec::MAX_SIZE`]: CCM's length field.
    pub fn max_message_bytes(self) -> Option<u64> {
        match self.mode {
            Mode::Ccm => Some(CCM_MAX_MESSAGE),
            _ => None,
        }
    }

    /// Encryption key length in bytes (the HMAC key of CBC-HMAC is separate and 32 bytes).
    pub fn key_len(self) -> usize {
        match self.cipher {
            Cipher::Aes128 => 16,
            Cipher::Aes192 => 24,
            Cipher::Aes256 | Cipher::ChaCha20 => 32,
            Cipher::Des => 8,
            Cipher::TripleDes => 24,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// An algorithm name that is not in [`ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown algorithm '{0}'; valid names: {names}", names = valid_names())]
pub struct UnknownAlgorithm(pub String);

/// All valid names, comma separated, for error messages and `--help`.
pub fn valid_names() -> String {
    ALL.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        // `openssl speed` also accepts 3DES under these names.
        let wanted = match wanted.as_str() {
            "des-ede3" | "3des-cbc" => "des-ede3-cbc",
            "3des-ecb" => "des-ede3-ecb",
            other => other,
        };
        ALL.iter()
            .copied()
            .find(|a| a.name == wanted)
            .ok_or_else(|| UnknownAlgorithm(s.to_string()))
    }
}

/// For a single algorithm column: `#[sqlx(try_from = "String")] algorithm: Algorithm`.
impl TryFrom<String> for Algorithm {
    type Error = UnknownAlgorithm;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name)
    }
}

impl<'de> Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_itself() {
        for a in ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), *a);
        }
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = "aes-512-gcm".parse::<Algorithm>().unwrap_err().to_string();
        assert!(err.contains("aes-512-gcm"), "{err}");
        assert!(err.contains("chacha20-poly1305"), "{err}");
    }

    #[test]
    fn names_are_case_insensitive_and_accept_openssl_aliases() {
        assert_eq!("AES-256-GCM".parse::<Algorithm>().unwrap().name(), "aes-256-gcm");
        assert_eq!("des-ede3".parse::<Algorithm>().unwrap().name(), "des-ede3-cbc");
    }
}
