//! Which operating-system account runs the private cluster.
//!
//! `initdb`, `pg_ctl` and `postgres` all refuse to run as root. An ordinary user
//! runs them as itself. Root runs them as the owner of an existing cluster or,
//! for a new one, as the dedicated system user [`SYSTEM_USER`] (created with
//! `useradd` when missing), not the distribution's shared `postgres` account,
//! which would let every other cluster on the host read ours. The child process
//! gets that uid and gid (and no supplementary groups) before it executes, and
//! the data directory is chowned to it.

use std::fs::Metadata;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::PgError;

/// The system user a root coordinator runs its private cluster as.
pub const SYSTEM_USER: &str = "cipherfleet-pg";

/// The identity the server processes run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Account {
    /// The coordinator's own (non-root) user.
    Current,
    /// Another user, when the coordinator runs as root.
    Other { name: String, uid: u32, gid: u32 },
}

impl Account {
    /// Picks the account for the cluster in `data_dir` (which may not exist yet).
    pub fn choose(data_dir: &Path) -> Result<Self, PgError> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(Account::Current);
        }
        // The link itself, never its target: the cluster's owner controls this directory.
        if let Ok(meta) = std::fs::symlink_metadata(data_dir.join("PG_VERSION"))
            && meta.uid() != 0
        {
            let name = user_name(meta.uid()).unwrap_or_else(|| meta.uid().to_string());
            return Ok(Account::Other {
                name,
                uid: meta.uid(),
                gid: meta.gid(),
            });
        }
        let (uid, gid) = match lookup_user(SYSTEM_USER) {
            Some(ids) => ids,
            None => create_system_user()?,
        };
        Ok(Account::Other {
            name: SYSTEM_USER.to_string(),
            uid,
            gid,
        })
    }

    /// Makes `cmd` run under this account, from a working directory every user
    /// can enter, in a process group of its own: a Ctrl-C (or a closing
    /// terminal) meant for the coordinator must not cut a `pg_ctl start` or
    /// `stop` short and leave a server the coordinator does not know it runs;
    /// the coordinator stops the server itself.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.current_dir("/").process_group(0);
        if let Account::Other { uid, gid, .. } = self {
            // std drops supplementary groups too when root changes the uid.
            cmd.uid(*uid).gid(*gid);
        }
    }

    /// Same as [`Account::apply`] for a blocking command (used from `Drop`).
    pub fn apply_std(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        cmd.current_dir("/").process_group(0);
        if let Account::Other { uid, gid, .. } = self {
            cmd.uid(*uid).gid(*gid);
        }
    }

    /// Gives `path` to this account (no-op for [`Account::Current`]). Opened
    /// with `O_NOFOLLOW` and changed through the descriptor, so a link planted
    /// at `path` is refused rather than its target handed over.
    pub fn take_ownership(&self, path: &Path) -> Result<(), PgError> {
        if matches!(self, Account::Other { .. }) {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(path)
                .map_err(|e| PgError::io(format!("opening {} to give it to {self}", path.display()), e))?;
            self.take_ownership_of(&file, path)?;
        }
        Ok(())
    }

    /// Gives the open `file` (at `path`, for the message) to this account.
    pub fn take_ownership_of(&self, file: &impl AsFd, path: &Path) -> Result<(), PgError> {
        if let Account::Other { uid, gid, .. } = self {
            std::os::unix::fs::fchown(file, Some(*uid), Some(*gid))
                .map_err(|source| PgError::io(format!("giving {} to {self}", path.display()), source))?;
        }
        Ok(())
    }

    /// Checks that this account can walk down to `dir`: a data directory under
    /// `/root` (mode 0700) would otherwise fail deep inside `initdb`.
    pub fn check_reachable(&self, dir: &Path) -> Result<(), PgError> {
        let Account::Other { uid, gid, .. } = self else {
            return Ok(());
        };
        for ancestor in dir.ancestors().skip(1) {
            let Ok(meta) = std::fs::metadata(ancestor) else {
                continue;
            };
            if !searchable(&meta, *uid, *gid) {
                return Err(PgError::DataDir {
                    path: dir.to_path_buf(),
                    problem: format!(
                        "the `{self}` user that runs PostgreSQL cannot enter {} (mode {:o}); \
                         choose a data directory outside it or allow access (chmod o+x)",
                        ancestor.display(),
                        meta.mode() & 0o7777
                    ),
                });
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Account::Current => f.write_str("current"),
            Account::Other { name, .. } => f.write_str(name),
        }
    }
}

/// Whether a user may traverse a directory, judged by owner/group/other bits
/// (supplementary groups are dropped for the server, so they do not count).
fn searchable(meta: &Metadata, uid: u32, gid: u32) -> bool {
    let mode = meta.mode();
    if meta.uid() == uid {
        mode & 0o100 != 0
    } else if meta.gid() == gid {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    }
}

/// Creates [`SYSTEM_USER`]: a system account with its own group, no home and no
/// login shell. Another coordinator starting at the same time may win the race;
/// the account it made is as good.
fn create_system_user() -> Result<(u32, u32), PgError> {
    let shell = ["/usr/sbin/nologin", "/sbin/nologin"]
        .into_iter()
        .find(|s| Path::new(s).exists())
        .unwrap_or("/bin/false");
    let out = std::process::Command::new("useradd")
        .args([
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
        ])
        .args([
            "--shell",
            shell,
            "--comment",
            "cipherfleet private PostgreSQL",
            SYSTEM_USER,
        ])
        .output();
    if let Some(ids) = lookup_user(SYSTEM_USER) {
        tracing::info!(
            user = SYSTEM_USER,
            "created the system user that runs the private PostgreSQL"
        );
        return Ok(ids);
    }
    let why = match out {
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    Err(PgError::NoUnprivilegedUser { why })
}

/// uid and gid of a local user from `/etc/passwd` (system users live there,
/// not in a directory service).
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    parse_passwd(&passwd)
        .find(|(n, _, _)| *n == name)
        .map(|(_, uid, gid)| (uid, gid))
}

fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    parse_passwd(&passwd)
        .find(|(_, u, _)| *u == uid)
        .map(|(n, _, _)| n.to_string())
}

/// `(name, uid, gid)` of each well-formed `/etc/passwd` line.
fn parse_passwd(passwd: &str) -> impl Iterator<Item = (&str, u32, u32)> {
    passwd.lines().filter_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let uid = fields.next()?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some((name, uid, gid))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lines_give_name_uid_and_gid() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # comment\n\
                      postgres:x:101:104:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash\n\
                      broken:x:notanumber:1::/:/bin/sh\n";
        let users: Vec<_> = parse_passwd(passwd).collect();
        assert_eq!(users, [("root", 0, 0), ("postgres", 101, 104)]);
    }
}
