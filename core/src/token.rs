//! Shared-secret tokens (the agents' enrollment token, the operators' admin
//! token), loaded by one rule in both programs: from a file, else from an
//! environment variable; surrounding white space trimmed; one printable line
//! of [`MIN_TOKEN_LEN`] to [`MAX_TOKEN_LEN`] bytes. Never printed: `Debug`
//! shows only that a secret is set.

use std::fmt;
use std::path::Path;

/// Tokens shorter than this are refused: they are guessable.
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest token, in bytes (also the bound on `Hello.enrollment_token`).
pub const MAX_TOKEN_LEN: usize = 1024;

/// A loaded secret. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret already in memory (tests, generated tokens); not checked.
    pub fn new(secret: impl Into<String>) -> Secret {
        Secret(secret.into())
    }

    /// The secret itself, to send or to compare, and for nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Why a token could not be loaded; every message names the flag or variable.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{flag}: cannot read the {what} from {path}: {source}")]
    Read {
        what: &'static str,
        flag: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{flag}: no {what}: give {flag} PATH or set {env}")]
    Missing {
        what: &'static str,
        flag: &'static str,
        env: &'static str,
    },
    #[error("{source_name}: the {what} is empty")]
    Empty {
        what: &'static str,
        source_name: &'static str,
    },
    #[error(
        "{source_name}: the {what} is shorter than {MIN_TOKEN_LEN} characters; use a long random value (e.g. `openssl rand -hex 32`)"
    )]
    TooShort {
        what: &'static str,
        source_name: &'static str,
    },
    #[error("{source_name}: the {what} must be one printable line of at most {MAX_TOKEN_LEN} bytes")]
    Malformed {
        what: &'static str,
        source_name: &'static str,
    },
}

impl TokenError {
    /// The flag or environment variable the error is about.
    pub fn source_name(&self) -> &'static str {
        match self {
            TokenError::Read { flag, .. } | TokenError::Missing { flag, .. } => flag,
            TokenError::Empty { source_name, .. }
            | TokenError::TooShort { source_name, .. }
            | TokenError::Malformed { source_name, .. } => source_name,
        }
    }
}

/// Where a token comes from: `file` (given with `flag`) or else the variable `env`.
#[derive(Debug, Clone, Copy)]
pub struct TokenSource<'a> {
    /// What the token is, for messages: `enrollment token`, `admin token`.
    pub what: &'static str,
    pub flag: &'static str,
    pub file: Option<&'a Path>,
    pub env: &'static str,
}

impl TokenSource<'_> {
    /// Loads the token from the file, else from the process environment.
    pub fn load(&self) -> Result<Secret, TokenError> {
        self.load_with_env(std::env::var(self.env).ok())
    }

    /// As [`load`](Self::load), with the variable's value given (for tests).
    pub fn load_with_env(&self, env_value: Option<String>) -> Result<Secret, TokenError> {
        let what = self.what;
        let (source_name, raw) = match (self.file, env_value) {
            (Some(path), _) => {
                let raw = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
                    what,
                    flag: self.flag,
                    path: path.display().to_string(),
                    source,
                })?;
                (self.flag, raw)
            }
            (None, Some(value)) => (self.env, value),
            (None, None) => {
                return Err(TokenError::Missing {
                    what,
                    flag: self.flag,
                    env: self.env,
                });
            }
        };
        let token = raw.trim();
        if token.is_empty() {
            return Err(TokenError::Empty { what, source_name });
        }
        if token.len() > MAX_TOKEN_LEN || token.chars().any(char::is_control) {
            return Err(TokenError::Malformed { what, source_name });
        }
        if token.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort { what, source_name });
        }
        Ok(Secret(token.to_string()))
    }

    /// A warning when the token file can be read by group or others.
    pub fn permission_warning(&self) -> Option<String> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.file?;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        (mode & 0o044 != 0).then(|| {
            format!(
                "the {} file {} is readable by other users (mode {:o}); chmod 600 it",
                self.what,
                path.display(),
                mode & 0o777
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(file: Option<&Path>) -> TokenSource<'_> {
        TokenSource {
            what: "enrollment token",
            flag: "--token-file",
            file,
            env: "CIPHERFLEET_TEST_TOKEN",
        }
    }

    #[test]
    fn one_rule_for_files_and_the_environment() {
        let dir = std::env::temp_dir().join(format!("cf-core-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "  file-secret-0123456789\r\n").unwrap();
        let s = source(Some(&path));
        // The file wins over the environment; surrounding white space goes.
        assert_eq!(
            s.load_with_env(Some("env-secret-0123456789".into())).unwrap().expose(),
            "file-secret-0123456789"
        );
        assert_eq!(
            source(None)
                .load_with_env(Some(" env-secret-0123456789\n".into()))
                .unwrap()
                .expose(),
            "env-secret-0123456789"
        );
        let cases: &[(&str, &str)] = &[
            ("\n", "is empty"),
            ("short\n", "shorter than 16"),
            ("two-lines-0123456789\nsecond-line-0123456789\n", "one printable line"),
        ];
        for (content, want) in cases {
            std::fs::write(&path, content).unwrap();
            let e = s.load_with_env(None).unwrap_err().to_string();
            assert!(e.starts_with("--token-file:") && e.contains(want), "{content:?}: {e}");
        }
        let e = source(None).load_with_env(None).unwrap_err().to_string();
        assert!(
            e.contains("--token-file") && e.contains("CIPHERFLEET_TEST_TOKEN"),
            "{e}"
        );
        let e = source(None).load_with_env(Some("x".repeat(2000))).unwrap_err();
        assert_eq!(e.source_name(), "CIPHERFLEET_TEST_TOKEN");
        let e = source(Some(&dir.join("missing")))
            .load_with_env(None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read") && e.contains("missing"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn loose_permissions_are_warned_about_and_secrets_never_shown() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("cf-core-token-mode-{}", std::process::id()));
        std::fs::write(&path, "mode-secret-0123456789").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(source(Some(&path)).permission_warning(), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let w = source(Some(&path)).permission_warning().unwrap();
        assert!(w.contains("640") && w.contains("chmod 600"), "{w}");
        let secret = source(Some(&path)).load_with_env(None).unwrap();
        assert!(!format!("{secret:?}").contains("mode-secret"));
        std::fs::remove_file(&path).ok();
    }
}
