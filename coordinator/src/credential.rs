//! Per-host credentials: the secret a host is issued when it enrolls and
//! presents in every later `Hello`. 32 bytes from the operating system's RNG,
//! sent as 64 hex digits; the database keeps only their SHA-256 (a secret of
//! that entropy needs no slow hash), compared in constant time.

use std::fmt;

use sha2::{Digest, Sha256};

/// A freshly issued credential: the secret for the agent, the hash for the database.
pub struct IssuedCredential {
    secret: String,
    hash: [u8; 32],
}

impl IssuedCredential {
    /// 32 random bytes from the OS; fails only when the OS has no entropy source.
    pub fn generate() -> Result<IssuedCredential, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let hash = hash(&secret);
        Ok(IssuedCredential { secret, hash })
    }

    /// What the agent stores and presents; sent once, in `Welcome`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// What `hosts.credential_hash` keeps.
    pub fn hash(&self) -> &[u8; 32] {
        &self.hash
    }
}

impl fmt::Debug for IssuedCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IssuedCredential(<redacted>)")
    }
}

/// SHA-256 of a presented credential, as stored.
pub fn hash(presented: &str) -> [u8; 32] {
    Sha256::digest(presented.as_bytes()).into()
}

/// Whether `presented` is the credential whose hash is `stored`, in time
/// independent of where they differ. An empty presentation never matches.
pub fn matches(stored: &[u8], presented: &str) -> bool {
    if presented.is_empty() || stored.len() != 32 {
        return false;
    }
    let given = hash(presented);
    stored.iter().zip(given.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_credential_matches_its_hash_and_nothing_else() {
        let issued = IssuedCredential::generate().unwrap();
        assert_eq!(issued.secret().len(), 64);
        assert!(issued.secret().bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(matches(issued.hash(), issued.secret()));
        let mut other = issued.secret().to_string();
        other.replace_range(63.., if other.ends_with('0') { "1" } else { "0" });
        assert!(!matches(issued.hash(), &other));
        assert!(!matches(issued.hash(), ""));
        assert!(!matches(&issued.hash()[..31], issued.secret()));
    }

    #[test]
    fn two_credentials_differ_and_debug_hides_them() {
        let (a, b) = (
            IssuedCredential::generate().unwrap(),
            IssuedCredential::generate().unwrap(),
        );
        assert_ne!(a.secret(), b.secret());
        assert!(!format!("{a:?}").contains(a.secret()));
    }
}
