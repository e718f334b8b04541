//! Per-host credentials: the secret a host enrolls with and presents in
//! every later `Hello`. Normally the agent makes it (`Hello.proposed_credential`,
//! stored on its side before it is sent, so a lost `Welcome` costs nothing: the
//! retry presents the same one); for an agent that proposes none the
//! coordinator draws one. Either way it is 32 bytes from an OS's RNG as 64 hex
//! digits ([`cipherfleet_core::credential`]); the database keeps only their
//! SHA-256 (a secret of that entropy needs no slow hash), compared in constant time.

use std::fmt;

use cipherfleet_core::credential;
use sha2::{Digest, Sha256};

/// The credential a `Hello` enrolls with if it enrolls: the secret for the agent, the hash for the database.
pub struct NewCredential {
    secret: String,
    hash: [u8; 32],
}

impl NewCredential {
    /// 32 random bytes from the OS, for an agent that proposed none; fails only
    /// when the OS has no entropy source.
    pub fn generate() -> Result<NewCredential, getrandom::Error> {
        let mut bytes = [0u8; credential::BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(Self::of(credential::encode(&bytes)))
    }

    /// The agent's own proposal, if it has the form of a credential (`None` otherwise).
    pub fn proposed(secret: &str) -> Option<NewCredential> {
        credential::is_well_formed(secret).then(|| Self::of(secret.to_string()))
    }

    fn of(secret: String) -> NewCredential {
        let hash = hash(&secret);
        NewCredential { secret, hash }
    }

    /// What the agent stores and presents; sent back in `Welcome`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// What `hosts.credential_hash` keeps.
    pub fn hash(&self) -> &[u8; 32] {
        &self.hash
    }
}

impl fmt::Debug for NewCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewCredential(<redacted>)")
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
        let issued = NewCredential::generate().unwrap();
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
        let (a, b) = (NewCredential::generate().unwrap(), NewCredential::generate().unwrap());
        assert_ne!(a.secret(), b.secret());
        assert!(!format!("{a:?}").contains(a.secret()));
    }

    #[test]
    fn a_proposal_is_taken_only_in_the_form_of_a_credential() {
        let proposal = "5a".repeat(32);
        let taken = NewCredential::proposed(&proposal).expect("well formed");
        assert_eq!(taken.secret(), proposal);
        assert!(matches(taken.hash(), &proposal));
        for weak in ["", "password", &"5A".repeat(32), &"5a".repeat(16)] {
            assert!(NewCredential::proposed(weak).is_none(), "{weak:?}");
        }
    }
}
