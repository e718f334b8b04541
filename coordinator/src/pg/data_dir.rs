//! The data directory: recognising a cluster, creating one with `initdb`, and
//! the settings and log files the coordinator keeps in it.
//!
//! The cluster's account owns this directory and can plant links in it. A
//! coordinator running as root must not follow one (a `cipherfleet.conf`
//! pointing at `/etc/shadow` would be overwritten, a `server.log` pointing at
//! it would be printed in an error), so every file here is opened with
//! `O_NOFOLLOW` ([`read_file`]) or replaced by a new file renamed over it and
//! handed over with `fchown` ([`replace_file`]).

use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use tokio::process::Command;

use super::account::Account;
use super::binaries::Binaries;
use super::{LOG_FILE, PORT, PgError, SUPERUSER, output_text, run};

/// Settings rewritten at every start, included from `postgresql.conf`.
const CONF_FILE: &str = "cipherfleet.conf";
/// A log larger than this is moved to `server.log.1` at start.
const LOG_ROTATE_BYTES: u64 = 16 << 20;

/// Major version of the cluster in `data_dir`, `None` if there is none yet
/// (directory missing or empty); an error if the directory holds something else.
pub(super) fn cluster_major(data_dir: &Path) -> Result<Option<u32>, PgError> {
    let version_file = data_dir.join("PG_VERSION");
    match read_file(&version_file) {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| PgError::DataDir {
            path: data_dir.to_path_buf(),
            problem: format!("unreadable PG_VERSION {:?}", text.trim()),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let empty = match std::fs::read_dir(data_dir) {
                Ok(mut entries) => entries.next().is_none(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => true,
                Err(e) => {
                    return Err(PgError::io(format!("reading {}", data_dir.display()), e));
                }
            };
            if empty {
                Ok(None)
            } else {
                Err(PgError::DataDir {
                    path: data_dir.to_path_buf(),
                    problem: "not empty and not a PostgreSQL cluster; \
                              point the coordinator at an empty or new directory"
                        .to_string(),
                })
            }
        }
        Err(e) => Err(PgError::io(format!("reading {}", version_file.display()), e)),
    }
}

/// Creates a new cluster in the (missing or empty) `data_dir`.
pub(super) async fn init(data_dir: &Path, binaries: &Binaries, account: &Account) -> Result<(), PgError> {
    tracing::info!(data_dir = %data_dir.display(), version = binaries.major, "creating a new PostgreSQL cluster");
    // Refuse before creating anything the server could not use.
    account.check_reachable(data_dir)?;
    // Parents get the default mode (the server's user must traverse them),
    // the data directory itself only its owner's.
    if let Some(parent) = data_dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| PgError::io(format!("creating {}", parent.display()), e))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(data_dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            return Err(PgError::io(format!("creating {}", data_dir.display()), e));
        }
        _ => {}
    }
    account.take_ownership(data_dir)?;

    let mut cmd = Command::new(binaries.initdb());
    cmd.arg("-D")
        .arg(data_dir)
        .args(["--username", SUPERUSER])
        .args(["--encoding", "UTF8", "--locale", "C"])
        // Only the socket is reachable, and only by the cluster's owner and root.
        .args(["--auth-local", "trust", "--auth-host", "reject"])
        .arg("--no-instructions");
    account.apply(&mut cmd);
    let out = run(&mut cmd, "running initdb").await?;
    if !out.status.success() {
        return Err(PgError::Command {
            action: format!("initdb {}", data_dir.display()),
            status: out.status,
            detail: output_text(&out),
        });
    }
    Ok(())
}

/// Makes `postgresql.conf` include [`CONF_FILE`] last, so our settings win
/// (also for a cluster that some other tool created).
pub(super) fn ensure_conf_included(data_dir: &Path, account: &Account) -> Result<(), PgError> {
    let include = format!("include_if_exists = '{CONF_FILE}'");
    let conf = data_dir.join("postgresql.conf");
    let mut text = read_file(&conf).map_err(|e| PgError::io(format!("reading {}", conf.display()), e))?;
    if text.lines().last().is_some_and(|l| l.trim() == include) {
        return Ok(());
    }
    text.push_str(&format!(
        "\n# cipherfleet-coordinator's settings (unix socket only)\n{include}\n"
    ));
    replace_file(&conf, &text, account)
}

/// Writes the settings the coordinator relies on (socket only, in
/// `socket_dir`); `postgresql.conf` includes them last.
pub(super) fn write_conf(data_dir: &Path, socket_dir: &Path, account: &Account) -> Result<(), PgError> {
    let conf = format!(
        "# Written by cipherfleet-coordinator at every start: edits here are lost.\n\
         listen_addresses = ''\n\
         port = {PORT}\n\
         unix_socket_directories = '{}'\n\
         unix_socket_permissions = 0700\n",
        conf_quote(&socket_dir.to_string_lossy())
    );
    replace_file(&data_dir.join(CONF_FILE), &conf, account)
}

/// A text file of the data directory; a link there is refused (`ELOOP`), not followed.
pub(super) fn read_file(path: &Path) -> io::Result<String> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// Replaces `path` with a new file holding `content`, owned by the cluster's
/// account: created beside it (`O_EXCL | O_NOFOLLOW`), handed over with
/// `fchown`, then renamed over `path`, which replaces whatever is there (a
/// link included) without following it.
pub(super) fn replace_file(path: &Path, content: &str, account: &Account) -> Result<(), PgError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = path.with_extension(format!("cipherfleet-{}-{nanos:08x}", std::process::id()));
    let shown = temp.display();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&temp)
        .map_err(|e| PgError::io(format!("creating {shown}"), e))?;
    let written = file
        .write_all(content.as_bytes())
        .map_err(|e| PgError::io(format!("writing {shown}"), e))
        .and_then(|()| account.take_ownership_of(&file, &temp))
        .and_then(|()| {
            std::fs::rename(&temp, path).map_err(|e| PgError::io(format!("renaming {shown} to {}", path.display()), e))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Quotes a value for a single-quoted string in `postgresql.conf`.
fn conf_quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\'', "''")
}

/// The last `lines` lines of a log file, or a note that it could not be read.
pub(super) fn log_tail(path: &Path, lines: usize) -> String {
    match read_file(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(could not read the log: {e})"),
    }
}

/// Keeps one previous log so the file does not grow without bound.
pub(super) fn rotate_log(data_dir: &Path) {
    let log = &data_dir.join(LOG_FILE);
    // rename moves a link itself; symlink_metadata does not follow one either.
    if std::fs::symlink_metadata(log).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        let _ = std::fs::rename(log, log.with_extension("log.1"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_values_are_quoted() {
        assert_eq!(conf_quote(r"/tmp/it's\here"), r"/tmp/it''s\\here");
    }

    #[test]
    fn files_are_replaced_and_read_without_following_links() {
        let dir = std::env::temp_dir().join(format!("cipherfleet-nofollow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let planted = dir.join("cipherfleet.conf");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();

        let read = read_file(&planted).unwrap_err();
        assert_eq!(read.raw_os_error(), Some(libc::ELOOP), "{read}");
        replace_file(&planted, "port = 5432\n", &Account::Current).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(&planted).unwrap().is_symlink());
        assert_eq!(read_file(&planted).unwrap(), "port = 5432\n");
        // Nothing left beside it.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_non_empty_directory_without_a_cluster_is_refused() {
        let dir = std::env::temp_dir().join(format!("cipherfleet-notpg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let got = cluster_major(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(got, Err(PgError::DataDir { .. })), "{got:?}");
        assert!(matches!(cluster_major(&dir), Ok(None)));
    }
}
