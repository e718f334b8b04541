//! One coordinator per data directory: an exclusive `flock` on
//! `<data-dir>/coordinator.lock`, held for the life of the process. A second
//! coordinator on the same directory would otherwise adopt the first one's
//! PostgreSQL server and stop it under it on exit. The kernel drops the lock
//! when the process dies, however it dies, so a crash never leaves it stale.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::PgError;

/// The lock file's name inside `--data-dir`.
pub const LOCK_FILE: &str = "coordinator.lock";

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Creates `data_dir` if needed and takes its lock, or says which process holds it.
    pub fn acquire(data_dir: &Path) -> Result<Self, PgError> {
        Self::try_acquire(data_dir)?.map_err(|held| PgError::DataDir {
            path: data_dir.to_path_buf(),
            problem: format!(
                "another cipherfleet-coordinator{} is running on it and holds {}; stop that one, or \
                 give this one its own --data-dir (or --database-url)",
                held.by(),
                held.path.display()
            ),
        })
    }

    /// [`DataDirLock::acquire`], answering [`Held`] rather than an error when a
    /// running coordinator holds the lock.
    pub fn try_acquire(data_dir: &Path) -> Result<Result<Self, Held>, PgError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(data_dir)
            .map_err(|e| PgError::io(format!("creating --data-dir {}", data_dir.display()), e))?;
        let path = data_dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            // A link planted here would make root open (and write) its target.
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| PgError::io(format!("opening the lock file {}", path.display()), e))?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(PgError::io(format!("locking {}", path.display()), err));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Ok(Err(Held {
                path,
                pid: holder.trim().to_string(),
            }));
        }
        // Who holds it, for the message above; the lock itself is the flock.
        let pid = std::process::id().to_string();
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(pid.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %path.display(), "could not note our PID in the lock file");
        }
        Ok(Ok(DataDirLock { _file: file, path }))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The lock of a data directory that a running coordinator holds.
#[derive(Debug)]
pub struct Held {
    /// The lock file.
    pub path: PathBuf,
    /// The holder's PID as it noted it (empty if it could not).
    pub pid: String,
}

impl Held {
    /// ` (PID n)`, or nothing when the holder is not known.
    pub fn by(&self) -> String {
        if self.pid.is_empty() {
            String::new()
        } else {
            format!(" (PID {})", self.pid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("cipherfleet-lock-{}", std::process::id()));
        let first = DataDirLock::acquire(&dir).unwrap();
        // flock locks belong to the open file: a second open in this process conflicts too.
        let err = DataDirLock::acquire(&dir).unwrap_err().to_string();
        assert!(
            err.contains("another cipherfleet-coordinator") && err.contains(&std::process::id().to_string()),
            "{err}"
        );
        assert!(err.contains("--data-dir"), "{err}");
        drop(first);
        let again = DataDirLock::acquire(&dir).unwrap();
        assert_eq!(again.path(), dir.join(LOCK_FILE));
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
