//! The host credential on disk: `<state dir>/credential`, issued by the
//! coordinator in `Welcome` when the host enrolls and presented in every later
//! `Hello`. Without it the coordinator refuses this host's name, so it is
//! written atomically (temporary file, fsync, rename, fsync of the directory)
//! with mode 0600 in a 0700 directory, and it records the host name it
//! belongs to: an agent started under another name on the same state
//! directory stops with a clear error instead of presenting, or overwriting,
//! another host's credential.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use cipherfleet_core::token::Secret;
use serde::{Deserialize, Serialize};

const FILE: &str = "credential";

/// What the file holds.
#[derive(Serialize, Deserialize)]
struct Stored {
    /// The `--name` the credential was issued to.
    host: String,
    credential: String,
}

/// This agent's credential file.
#[derive(Debug, Clone)]
pub struct CredentialFile {
    dir: PathBuf,
    host: String,
}

impl CredentialFile {
    /// Creates the state directory (mode 0700) if needed and reads the
    /// credential of `host`, if it has one yet. Fails when the file is
    /// unreadable or belongs to another host name.
    pub fn open(state_dir: &Path, host: &str) -> anyhow::Result<(CredentialFile, Option<Secret>)> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir)
            .with_context(|| format!("creating the state directory {}", state_dir.display()))?;
        let file = CredentialFile {
            dir: state_dir.to_path_buf(),
            host: host.to_string(),
        };
        let path = file.path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((file, None)),
            Err(e) => return Err(e).with_context(|| format!("reading the host credential {}", path.display())),
        };
        let stored: Stored = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a credential file; move it away to enroll this host anew \
                 (an operator then runs `cipherfleet-coordinator hosts reset-credential {host}`)",
                path.display()
            )
        })?;
        if stored.host != host {
            bail!(
                "{} holds the credential of host {:?}, and this agent runs as {host:?}: give each agent \
                 its own --state-dir (a cloned machine: delete the copied file)",
                path.display(),
                stored.host
            );
        }
        if let Ok(meta) = fs::metadata(&path)
            && meta.mode() & 0o077 != 0
        {
            tracing::warn!(
                "{} is readable by other users (mode {:o}): whoever reads it can act as this host; chmod 600 it",
                path.display(),
                meta.mode() & 0o777
            );
        }
        Ok((file, Some(Secret::new(stored.credential))))
    }

    /// Where the credential lives.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Stores a newly issued credential durably, replacing the old one.
    pub fn store(&self, credential: &str) -> io::Result<()> {
        let stored = Stored {
            host: self.host.clone(),
            credential: credential.to_string(),
        };
        let bytes = serde_json::to_vec(&stored).map_err(io::Error::other)?;
        let tmp = self.dir.join(format!(".tmp-{FILE}"));
        let _ = fs::remove_file(&tmp);
        let mut out = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        out.write_all(&bytes)?;
        out.sync_all()?;
        drop(out);
        fs::rename(&tmp, self.path())?;
        File::open(&self.dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cipherfleet-credential-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_stored_credential_is_private_and_read_back_by_the_same_host() {
        let dir = dir("same");
        let (file, none) = CredentialFile::open(&dir, "host-a").unwrap();
        assert!(none.is_none());
        file.store("c0ffee").unwrap();
        assert_eq!(fs::metadata(file.path()).unwrap().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let (_, read) = CredentialFile::open(&dir, "host-a").unwrap();
        assert_eq!(read.unwrap().expose(), "c0ffee");
        file.store("beef").unwrap();
        let (_, read) = CredentialFile::open(&dir, "host-a").unwrap();
        assert_eq!(read.unwrap().expose(), "beef", "replaced, not appended");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_hosts_credential_is_neither_presented_nor_overwritten() {
        let dir = dir("other");
        let (file, _) = CredentialFile::open(&dir, "host-a").unwrap();
        file.store("c0ffee").unwrap();
        let err = CredentialFile::open(&dir, "host-b").unwrap_err().to_string();
        assert!(err.contains("host-a") && err.contains("--state-dir"), "{err}");
        assert!(!err.contains("c0ffee"), "{err}");
        fs::write(file.path(), b"garbage").unwrap();
        let err = format!("{:#}", CredentialFile::open(&dir, "host-a").unwrap_err());
        assert!(err.contains("reset-credential host-a"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
