//! Shared-secret tokens: the agents' enrollment token and the operators' admin
//! token. Loaded by the rule both programs share, compared in constant time,
//! never printed (`Debug` shows only that a token is set).

use std::fmt;
use std::path::Path;

use cipherfleet_core::token::{Secret, TokenError, TokenSource};
use sha2::{Digest, Sha256};

/// A secret token. Comparison hashes both sides first so that neither the
/// length nor the position of the first difference leaks through timing.
#[derive(Clone)]
pub struct Token(Secret);

impl Token {
    /// Reads a token from `file` or else from the environment variable `env`,
    /// by the rule the agent uses too (`cipherfleet_core::token`); warns when
    /// the file is readable by other users.
    pub fn load(
        what: &'static str,
        file: Option<&Path>,
        flag: &'static str,
        env: &'static str,
    ) -> Result<Token, TokenError> {
        let source = TokenSource { what, flag, file, env };
        let secret = source.load()?;
        if let Some(warning) = source.permission_warning() {
            tracing::warn!("{warning}");
        }
        Ok(Token(secret))
    }

    /// A token from a secret already in memory (tests, generated tokens).
    pub fn from_secret(secret: impl Into<String>) -> Token {
        Token(Secret::new(secret))
    }

    /// Constant-time comparison with what a client presented.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let (a, b) = (Sha256::digest(self.0.expose()), Sha256::digest(presented));
        a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// The raw secret, for a client to send.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_same_secret() {
        let t = Token::from_secret("correct horse battery staple");
        assert!(t.matches(b"correct horse battery staple"));
        assert!(!t.matches(b"correct horse battery stapl"));
        assert!(!t.matches(b""));
        assert!(!t.matches(b"correct horse battery staple "));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let t = Token::from_secret("s3cret-s3cret-s3cret");
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn loading_follows_the_shared_rule() {
        let dir = std::env::temp_dir().join(format!("cf-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (good, short) = (dir.join("good"), dir.join("short"));
        std::fs::write(&good, "0123456789abcdef0123\n").unwrap();
        std::fs::write(&short, "abc\n").unwrap();
        let t = Token::load("agent token", Some(&good), "--agent-token-file", "X_UNSET_ENV").unwrap();
        assert!(t.matches(b"0123456789abcdef0123"));
        let e = Token::load("agent token", Some(&short), "--agent-token-file", "X_UNSET_ENV").unwrap_err();
        assert!(e.to_string().contains("shorter than 16"), "{e}");
        let e = Token::load("agent token", None, "--agent-token-file", "CIPHERFLEET_SURELY_UNSET").unwrap_err();
        assert!(
            e.to_string().contains("--agent-token-file") && e.to_string().contains("CIPHERFLEET_SURELY_UNSET"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
