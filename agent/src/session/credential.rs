//! The host credential: what the agent presents in every `Hello` once a
//! `Welcome` confirmed it, and the proposal it enrolls with. The agent makes
//! the proposal itself (32 random bytes, [`cipherfleet_core::credential`]) and
//! stores it BEFORE the `Hello` that carries it, so enrolling is idempotent: if
//! that `Welcome` is lost (a timeout in a connect storm, a dropped connection),
//! the next `Hello` carries the same proposal and the coordinator admits it
//! again instead of refusing a credential the agent never learnt.
//!
//! On disk, `<state dir>/credential` is written atomically (temporary file,
//! fsync, rename, fsync of the directory) with mode 0600 in a 0700 directory,
//! and it records the host name it belongs to: an agent started under another
//! name on the same state directory stops with a clear error instead of
//! presenting, or overwriting, another host's credential. The simulator may
//! keep a host's credential in memory only (no state directory).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use cipherfleet_core::credential;
use cipherfleet_core::token::Secret;
use serde::{Deserialize, Serialize};

const FILE: &str = "credential";

/// What the file holds. A file from before proposals has `credential` only.
#[derive(Serialize, Deserialize)]
struct Stored {
    /// The `--name` the credential belongs to.
    host: String,
    /// The host's credential, once a `Welcome` confirmed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    credential: Option<String>,
    /// What the next enrollment proposes (`Hello.proposed_credential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    proposed: Option<String>,
}

/// A host's credential and its proposal, kept in its state directory or in memory.
#[derive(Debug, Clone)]
pub struct HostCredential {
    file: Option<CredentialFile>,
    current: Option<Secret>,
    proposed: Option<Secret>,
}

/// Where a host's credential lives on disk.
#[derive(Debug, Clone)]
struct CredentialFile {
    dir: PathBuf,
    host: String,
}

impl HostCredential {
    /// Creates the state directory (mode 0700) if needed and reads the
    /// credential of `host`, if it has one yet. Fails when the file is
    /// unreadable or belongs to another host name.
    pub fn open(state_dir: &Path, host: &str) -> anyhow::Result<HostCredential> {
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
        let mut held = HostCredential {
            file: Some(file),
            current: None,
            proposed: None,
        };
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(held),
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
        held.current = stored.credential.map(Secret::new);
        // One that is not of the form the coordinator takes is replaced by `prepare`.
        held.proposed = stored
            .proposed
            .filter(|p| credential::is_well_formed(p))
            .map(Secret::new);
        Ok(held)
    }

    /// A credential held in memory only: it is gone when the process ends.
    pub fn in_memory() -> HostCredential {
        HostCredential {
            file: None,
            current: None,
            proposed: None,
        }
    }

    /// Where the credential lives on disk, if it does.
    pub fn path(&self) -> Option<PathBuf> {
        self.file.as_ref().map(CredentialFile::path)
    }

    /// The credential a `Welcome` confirmed, presented as `Hello.credential`.
    pub fn current(&self) -> Option<&Secret> {
        self.current.as_ref()
    }

    /// What the next `Hello` proposes; [`HostCredential::prepare`] first.
    pub fn proposed(&self) -> Option<&Secret> {
        self.proposed.as_ref()
    }

    /// Makes a proposal if there is none and stores it durably: called before
    /// a `Hello` goes out, so whatever that `Hello` enrolls is on disk first.
    /// Blocking (a write and two fsyncs, once).
    pub fn prepare(&mut self) -> io::Result<()> {
        if self.proposed.is_some() {
            return Ok(());
        }
        self.proposed = Some(draw()?);
        self.store()
    }

    /// A `Welcome` said `credential` is the host's: stored durably (blocking),
    /// with a fresh proposal for the next enrollment if this used the last one.
    pub fn welcomed(&mut self, credential: &str) -> io::Result<()> {
        if self.current.as_ref().is_some_and(|c| c.expose() == credential) {
            return Ok(());
        }
        if self.proposed.as_ref().is_none_or(|p| p.expose() == credential) {
            self.proposed = Some(draw()?);
        }
        self.current = Some(Secret::new(credential));
        self.store()
    }

    fn store(&self) -> io::Result<()> {
        match &self.file {
            Some(file) => file.store(&Stored {
                host: file.host.clone(),
                credential: self.current.as_ref().map(|c| c.expose().to_string()),
                proposed: self.proposed.as_ref().map(|p| p.expose().to_string()),
            }),
            None => Ok(()),
        }
    }
}

/// A new proposal from the OS's random source.
fn draw() -> io::Result<Secret> {
    let mut bytes = [0u8; credential::BYTES];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("the OS random source failed: {e}")))?;
    Ok(Secret::new(credential::encode(&bytes)))
}

impl CredentialFile {
    fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Replaces the file durably.
    fn store(&self, stored: &Stored) -> io::Result<()> {
        let bytes = serde_json::to_vec(stored).map_err(io::Error::other)?;
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

    fn exposed(secret: Option<&Secret>) -> Option<&str> {
        secret.map(Secret::expose)
    }

    #[test]
    fn a_proposal_is_on_disk_before_the_hello_and_becomes_the_credential_when_welcomed() {
        let dir = dir("same");
        let mut held = HostCredential::open(&dir, "host-a").unwrap();
        assert!(held.current().is_none() && held.proposed().is_none());
        held.prepare().unwrap();
        let proposal = held.proposed().unwrap().expose().to_string();
        assert!(credential::is_well_formed(&proposal), "{proposal}");
        assert_eq!(fs::metadata(held.path().unwrap()).unwrap().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);

        // The agent dies before the Welcome: the next start proposes the same.
        let mut again = HostCredential::open(&dir, "host-a").unwrap();
        again.prepare().unwrap();
        assert_eq!(exposed(again.proposed()), Some(&proposal[..]));
        assert!(again.current().is_none());

        // Welcomed with it: it is the credential, and a fresh one waits for the next enrollment.
        again.welcomed(&proposal).unwrap();
        let read = HostCredential::open(&dir, "host-a").unwrap();
        assert_eq!(exposed(read.current()), Some(&proposal[..]));
        let next = read.proposed().unwrap().expose();
        assert!(credential::is_well_formed(next) && next != proposal);

        // A coordinator that issues its own (older ones do): that one is kept, the proposal stays.
        let mut older = read.clone();
        older.welcomed("c0ffee").unwrap();
        let read = HostCredential::open(&dir, "host-a").unwrap();
        assert_eq!(exposed(read.current()), Some("c0ffee"), "replaced, not appended");
        assert_eq!(exposed(read.proposed()), Some(next));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_from_before_proposals_is_read_and_given_one() {
        let dir = dir("old");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(FILE), br#"{"host":"host-a","credential":"c0ffee"}"#).unwrap();
        let mut held = HostCredential::open(&dir, "host-a").unwrap();
        assert_eq!(exposed(held.current()), Some("c0ffee"));
        held.prepare().unwrap();
        let read = HostCredential::open(&dir, "host-a").unwrap();
        assert_eq!(exposed(read.current()), Some("c0ffee"));
        assert_eq!(read.proposed(), held.proposed());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_hosts_credential_is_neither_presented_nor_overwritten() {
        let dir = dir("other");
        let mut held = HostCredential::open(&dir, "host-a").unwrap();
        held.welcomed("c0ffee").unwrap();
        let err = HostCredential::open(&dir, "host-b").unwrap_err().to_string();
        assert!(err.contains("host-a") && err.contains("--state-dir"), "{err}");
        assert!(!err.contains("c0ffee"), "{err}");
        fs::write(held.path().unwrap(), b"garbage").unwrap();
        let err = format!("{:#}", HostCredential::open(&dir, "host-a").unwrap_err());
        assert!(err.contains("reset-credential host-a"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn in_memory_the_same_rules_hold_without_a_file() {
        let mut held = HostCredential::in_memory();
        held.prepare().unwrap();
        let proposal = held.proposed().unwrap().clone();
        held.prepare().unwrap();
        assert_eq!(held.proposed(), Some(&proposal), "kept until welcomed");
        held.welcomed(proposal.expose()).unwrap();
        assert_eq!(held.current(), Some(&proposal));
        assert!(held.path().is_none());
    }
}
