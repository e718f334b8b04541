//! The form of a per-host credential: 32 random bytes as 64 lowercase hex
//! digits. The agent makes its own for enrollment (`Hello.proposed_credential`)
//! and the coordinator makes one for an agent that proposes none; both
//! draw the bytes from the OS and spell them with [`encode`], and the
//! coordinator accepts a proposal only in this form ([`is_well_formed`]), so
//! no host enrolls with a short or guessable secret.

/// Bytes of randomness in a credential.
pub const BYTES: usize = 32;
/// Its length as sent: two hex digits a byte.
pub const LEN: usize = 2 * BYTES;

/// `bytes` (from the OS's random source) as a credential.
pub fn encode(bytes: &[u8; BYTES]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` has the form of a credential: [`LEN`] lowercase hex digits.
pub fn is_well_formed(s: &str) -> bool {
    s.len() == LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sixty_four_lowercase_hex_digits_are_a_credential() {
        let encoded = encode(&[0xab; BYTES]);
        assert_eq!(encoded.len(), LEN);
        assert!(is_well_formed(&encoded));
        assert!(is_well_formed(&encode(&[0; BYTES])));
        for bad in [
            String::new(),
            "ab".repeat(31),
            "ab".repeat(33),
            "AB".repeat(32),
            format!("{}g", "a".repeat(63)),
            format!("{} ", "a".repeat(63)),
            "é".repeat(32),
        ] {
            assert!(!is_well_formed(&bad), "{bad:?}");
        }
    }
}
