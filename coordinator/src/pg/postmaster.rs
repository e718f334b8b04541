//! What a `postmaster.pid` in the data directory stands for: nothing (the
//! server is gone, and the file is removed rather than trusted), a server a
//! coordinator started and then lost (adopted), or a server someone else
//! started (refused: stopping it on exit, or changing its settings, is not
//! ours to do).
//!
//! The PID alone proves little: after a crash or a reboot it may name any
//! process, even one of the cluster's own account. A live postmaster is a
//! process whose working directory is this data directory (PostgreSQL changes
//! into it at start); the coordinator's servers also carry [`MARK`] on their
//! command line, which PostgreSQL records in `postmaster.opts`.

use std::io;
use std::path::{Path, PathBuf};

use super::PgError;
use super::data_dir::read_file;

/// `pg_ctl start -o` options that mark a server as started by a coordinator
/// (a custom setting that PostgreSQL keeps and ignores).
pub(super) const MARK: &str = "-c cipherfleet.started_by=coordinator";

/// The socket directory and port of a coordinator's server still running on
/// `data_dir`; `None` when none runs (a stale `postmaster.pid` is removed).
pub(super) fn running_server(data_dir: &Path) -> Result<Option<(PathBuf, u16)>, PgError> {
    let pid_file = data_dir.join("postmaster.pid");
    let text = match read_file(&pid_file) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PgError::io(format!("reading {}", pid_file.display()), e)),
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    // Negative for a single-user backend, which is as live as a postmaster.
    let pid = lines.first().and_then(|l| l.parse::<i64>().ok()).map(i64::unsigned_abs);
    let Some(pid) = pid.filter(|&pid| pid > 0 && runs_in(pid, data_dir)) else {
        std::fs::remove_file(&pid_file)
            .map_err(|e| PgError::io(format!("removing the stale {}", pid_file.display()), e))?;
        tracing::info!(
            file = %pid_file.display(),
            pid = lines.first().copied().unwrap_or(""),
            "removed the postmaster.pid of a PostgreSQL server that is no longer running"
        );
        return Ok(None);
    };
    let opts = read_file(&data_dir.join("postmaster.opts")).unwrap_or_default();
    let setting = MARK.trim_start_matches("-c ");
    if !opts.contains(setting) {
        return Err(PgError::DataDir {
            path: data_dir.to_path_buf(),
            problem: format!(
                "a PostgreSQL server that cipherfleet-coordinator did not start is running on it (PID {pid}); \
                 stop it (pg_ctl stop -D {}) or give the coordinator another --data-dir",
                data_dir.display()
            ),
        });
    }
    // Line 4 is the port, line 5 the first socket directory.
    let port = lines.get(3).and_then(|l| l.parse().ok());
    let socket_dir = lines.get(4).filter(|s| !s.is_empty());
    match (socket_dir, port) {
        (Some(dir), Some(port)) => Ok(Some((PathBuf::from(dir), port))),
        _ => Err(PgError::DataDir {
            path: data_dir.to_path_buf(),
            problem: format!(
                "a server (PID {pid}) is running here without a unix socket; stop it first (pg_ctl stop -D {})",
                data_dir.display()
            ),
        }),
    }
}

/// Whether process `pid` is alive with `dir` as its working directory.
fn runs_in(pid: u64, dir: &Path) -> bool {
    let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
        return false;
    };
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    cwd == dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_counts_only_in_its_own_working_directory() {
        let here = std::env::current_dir().unwrap();
        let me = u64::from(std::process::id());
        assert!(runs_in(me, &here));
        assert!(!runs_in(me, Path::new("/")) || here == Path::new("/"));
        // PID 0 never names a process in /proc.
        assert!(!runs_in(0, &here));
    }

    #[test]
    fn a_pid_file_of_a_process_elsewhere_is_removed_and_means_no_server() {
        let dir = std::env::temp_dir().join(format!("cipherfleet-stale-pid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("postmaster.pid");
        // This test's own PID: alive, but not a server in `dir`.
        let text = format!(
            "{}\n{}\n1700000000\n5432\n{}\n\n",
            std::process::id(),
            dir.display(),
            dir.display()
        );
        std::fs::write(&pid_file, text).unwrap();
        assert_eq!(running_server(&dir).unwrap(), None);
        assert!(!pid_file.exists(), "the stale postmaster.pid is still there");
        assert_eq!(running_server(&dir).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
