//! A private PostgreSQL cluster, for a coordinator started without `--database-url`.
//!
//! The cluster lives in a directory of its own (`PGDATA`), is created with
//! `initdb` on first start and reused afterwards, so restarting the coordinator
//! keeps every result. It listens on a unix socket only (no TCP port to clash
//! or to expose), in a directory only its owner can enter, with `trust`
//! authentication: whoever can reach the socket is the coordinator (or root).
//! The server is stopped when the [`PrivateCluster`] is stopped or dropped.
//!
//! - [`backup`]: a dump of the coordinator's database, and its restore into a new cluster.
//! - `binaries`: which PostgreSQL installation to run.
//! - `account`: which OS user runs it (never root; `cipherfleet-pg` for root).
//! - `data_dir`: creating the cluster, its settings and log files (links there are never followed).
//! - `lock`: one coordinator per `--data-dir` ([`DataDirLock`]).
//! - `postmaster`: what a `postmaster.pid` left in the data directory stands for.

mod account;
pub mod backup;
mod binaries;
mod data_dir;
mod lock;
mod postmaster;

pub use account::SYSTEM_USER;
pub use lock::{DataDirLock, Held};

use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{ConnectOptions, Connection};
use tokio::process::Command;

use account::Account;
use binaries::Binaries;

/// The cluster's directory (`PGDATA`) inside a coordinator's `--data-dir`.
pub const CLUSTER_DIR: &str = "postgres";
/// Superuser role created by `initdb`, independent of the OS user running the server.
pub const SUPERUSER: &str = "cipherfleet";
/// The database the coordinator uses inside its private cluster.
pub const DATABASE: &str = "cipherfleet";
/// Names the socket file (`.s.PGSQL.5432`); no TCP port is opened.
const PORT: u16 = 5432;
/// Server log (`pg_ctl -l`), inside the data directory.
const LOG_FILE: &str = "server.log";
/// `sun_path` is 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
/// Name prefix of socket directories made under the temporary directory.
const SOCKET_DIR_PREFIX: &str = "cipherfleet-pg-";
/// How long `pg_ctl` waits for start, stop or restart.
const PG_CTL_TIMEOUT_SECONDS: &str = "120";

/// What went wrong running the private cluster.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "no PostgreSQL server binaries found (looked for pg_ctl, initdb and postgres on PATH \
         and in /usr/lib/postgresql/*/bin); install them (`apt-get install postgresql`) \
         or pass --database-url"
    )]
    NoBinaries,
    #[error(
        "the cluster was created by PostgreSQL {cluster} but only PostgreSQL {found} is \
         installed; install version {cluster} (`apt-get install postgresql-{cluster}`) \
         or upgrade the cluster with pg_upgrade"
    )]
    VersionMismatch { cluster: u32, found: String },
    #[error(
        "PostgreSQL refuses to run as root and the `cipherfleet-pg` user to run it as could not be \
         created ({why}); create it (`useradd --system --user-group --no-create-home cipherfleet-pg`) \
         or run the coordinator as an ordinary user"
    )]
    NoUnprivilegedUser { why: String },
    #[error("data directory {path}: {problem}")]
    DataDir { path: PathBuf, problem: String },
    #[error("{action}: {source}")]
    Io {
        action: String,
        #[source]
        source: io::Error,
    },
    /// A PostgreSQL program exited unsuccessfully; `detail` holds its output
    /// and, for a failed start, the end of the server log.
    #[error("{action} failed ({status}):\n{detail}")]
    Command {
        action: String,
        status: ExitStatus,
        detail: String,
    },
    #[error("{action}: {source}")]
    Sql {
        action: String,
        #[source]
        source: sqlx::Error,
    },
}

impl PgError {
    fn io(action: impl Into<String>, source: io::Error) -> Self {
        PgError::Io {
            action: action.into(),
            source,
        }
    }
}

/// A running PostgreSQL server owned by this process.
#[derive(Debug)]
pub struct PrivateCluster {
    data_dir: PathBuf,
    binaries: Binaries,
    account: Account,
    socket_dir: PathBuf,
    /// Names the socket file; [`PORT`] unless an adopted server says otherwise.
    port: u16,
    /// The socket directory is ours to delete (the data directory's path was too long).
    own_socket_dir: bool,
    url: String,
    /// False once stopped, so `Drop` does not stop it again.
    running: bool,
}

impl PrivateCluster {
    /// Starts the cluster in `data_dir`, creating it first if the directory is
    /// missing or empty, and creates the [`DATABASE`] if missing. A server
    /// already running there that a coordinator started (left by one that
    /// crashed) is adopted; one started otherwise is refused; the
    /// `postmaster.pid` of a server that is gone is removed.
    pub async fn start(data_dir: &Path) -> Result<Self, PgError> {
        let data_dir =
            std::path::absolute(data_dir).map_err(|e| PgError::io(format!("resolving {}", data_dir.display()), e))?;
        let existing_major = data_dir::cluster_major(&data_dir)?;
        let binaries = Binaries::find(existing_major).await?;
        let account = Account::choose(&data_dir)?;
        if existing_major.is_none() {
            data_dir::init(&data_dir, &binaries, &account).await?;
        }

        let mut cluster = PrivateCluster {
            socket_dir: data_dir.clone(),
            port: PORT,
            own_socket_dir: false,
            url: String::new(),
            running: false,
            data_dir,
            binaries,
            account,
        };
        if let Some((socket_dir, port)) = postmaster::running_server(&cluster.data_dir)? {
            tracing::warn!(data_dir = %cluster.data_dir.display(), "adopting a PostgreSQL server that was already running");
            // A fallback socket directory of ours is still ours to remove.
            cluster.own_socket_dir = socket_dir != cluster.data_dir
                && socket_dir
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(SOCKET_DIR_PREFIX));
            cluster.socket_dir = socket_dir;
            cluster.port = port;
        } else {
            cluster.choose_socket_dir()?;
            data_dir::write_conf(&cluster.data_dir, &cluster.socket_dir, &cluster.account)?;
            data_dir::ensure_conf_included(&cluster.data_dir, &cluster.account)?;
            data_dir::rotate_log(&cluster.data_dir);
            cluster.pg_ctl("starting PostgreSQL", &["start"]).await?;
        }
        cluster.url = url(&cluster.socket_dir, cluster.port);
        cluster.running = true;
        tracing::info!(
            version = cluster.binaries.major,
            data_dir = %cluster.data_dir.display(),
            user = %cluster.account,
            "private PostgreSQL running"
        );
        cluster.create_database().await?;
        Ok(cluster)
    }

    /// Connection URL of the coordinator's database, e.g.
    /// `postgres:///cipherfleet?host=%2Fvar%2Flib%2Fcipherfleet%2Fpostgres&port=5432&user=cipherfleet&sslmode=disable`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Connect options for `database` in this cluster (tests make one database each).
    pub fn connect_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new_without_pgpass()
            .socket(&self.socket_dir)
            .port(self.port)
            .username(SUPERUSER)
            .database(database)
            .ssl_mode(PgSslMode::Disable)
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Stops and starts the server, cutting every open connection (pools
    /// reconnect). For tests of the coordinator surviving a database restart.
    pub async fn restart(&self) -> Result<(), PgError> {
        self.pg_ctl("restarting PostgreSQL", &["restart", "-m", "fast"])
            .await
            .map(drop)
    }

    /// Stops the server for `down`, then starts it again (same socket, same
    /// URL): clients find it away that long. For tests of the coordinator
    /// waiting out a database outage.
    pub async fn stop_for(&self, down: std::time::Duration) -> Result<(), PgError> {
        self.pg_ctl("stopping PostgreSQL", &["stop", "-m", "fast"]).await?;
        tokio::time::sleep(down).await;
        self.pg_ctl("starting PostgreSQL", &["start"]).await.map(drop)
    }

    /// Stops the server (fast shutdown: open transactions are rolled back).
    pub async fn stop(mut self) -> Result<(), PgError> {
        self.running = false;
        self.pg_ctl("stopping PostgreSQL", &["stop", "-m", "fast"]).await?;
        self.remove_own_socket_dir();
        Ok(())
    }

    /// Runs `pg_ctl <args> -D <data> -l <log> -w` as the cluster's account; a
    /// start marks the server as the coordinator's ([`postmaster::MARK`]).
    async fn pg_ctl(&self, action: &str, args: &[&str]) -> Result<Output, PgError> {
        let log = self.data_dir.join(LOG_FILE);
        let mut cmd = Command::new(self.binaries.pg_ctl());
        cmd.args(args);
        if args[0] == "start" {
            cmd.args(["-o", postmaster::MARK]);
        }
        cmd.arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", PG_CTL_TIMEOUT_SECONDS]);
        self.account.apply(&mut cmd);
        let out = run(&mut cmd, action).await?;
        if out.status.success() {
            return Ok(out);
        }
        let mut detail = output_text(&out);
        if args[0] != "stop" {
            detail.push_str(&format!("\nlast lines of {}:\n", log.display()));
            detail.push_str(&data_dir::log_tail(&log, 30));
        }
        Err(PgError::Command {
            action: format!("{action} ({})", self.data_dir.display()),
            status: out.status,
            detail,
        })
    }

    /// The socket goes in the data directory unless its path would be too
    /// long for a unix socket; then in a fresh private directory under the
    /// system temporary directory.
    fn choose_socket_dir(&mut self) -> Result<(), PgError> {
        let socket_name_len = format!("/.s.PGSQL.{PORT}").len();
        if self.data_dir.as_os_str().len() + socket_name_len <= MAX_SOCKET_PATH {
            return Ok(());
        }
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("{SOCKET_DIR_PREFIX}{}-{nanos:08x}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| PgError::io(format!("creating socket directory {}", dir.display()), e))?;
        self.account.take_ownership(&dir)?;
        self.socket_dir = dir;
        self.own_socket_dir = true;
        Ok(())
    }

    async fn create_database(&self) -> Result<(), PgError> {
        let sql_err = |action: &str| {
            let action = action.to_string();
            move |source| PgError::Sql { action, source }
        };
        let mut conn = self
            .connect_options("postgres")
            .connect()
            .await
            .map_err(sql_err("connecting to the private PostgreSQL"))?;
        let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(DATABASE)
            .fetch_one(&mut conn)
            .await
            .map_err(sql_err("looking for the coordinator's database"))?;
        if !exists {
            // DATABASE is a constant identifier; CREATE DATABASE takes no bind parameters.
            sqlx::query("CREATE DATABASE cipherfleet")
                .execute(&mut conn)
                .await
                .map_err(sql_err("creating the coordinator's database"))?;
        }
        conn.close().await.ok();
        Ok(())
    }

    fn remove_own_socket_dir(&self) {
        if self.own_socket_dir
            && let Err(e) = std::fs::remove_dir_all(&self.socket_dir)
        {
            tracing::warn!(dir = %self.socket_dir.display(), error = %e, "could not remove socket directory");
        }
    }
}

impl Drop for PrivateCluster {
    /// A cluster that was not stopped explicitly is stopped here, blocking, so
    /// that no server outlives the process that started it.
    fn drop(&mut self) {
        if !self.running {
            return;
        }
        let mut cmd = std::process::Command::new(self.binaries.pg_ctl());
        cmd.args(["stop", "-m", "fast", "-w", "-t", PG_CTL_TIMEOUT_SECONDS, "-D"])
            .arg(&self.data_dir);
        self.account.apply_std(&mut cmd);
        match cmd.output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => tracing::error!(
                data_dir = %self.data_dir.display(),
                output = %output_text(&out),
                "could not stop the private PostgreSQL"
            ),
            Err(e) => tracing::error!(
                data_dir = %self.data_dir.display(),
                error = %e,
                "could not run pg_ctl to stop the private PostgreSQL"
            ),
        }
        self.remove_own_socket_dir();
    }
}

async fn run(cmd: &mut Command, action: &str) -> Result<Output, PgError> {
    cmd.kill_on_drop(true)
        .output()
        .await
        .map_err(|e| PgError::io(action, e))
}

/// The connection URL for a server listening in `socket_dir`.
fn url(socket_dir: &Path, port: u16) -> String {
    format!(
        "postgres:///{DATABASE}?host={}&port={port}&user={SUPERUSER}&sslmode=disable",
        percent_encode(&socket_dir.to_string_lossy())
    )
}

/// Percent-encodes everything but unreserved characters (`/` too, as libpq and sqlx decode it).
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn output_text(out: &Output) -> String {
    let mut text = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.trim().is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(stderr.trim_end());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_names_the_socket_directory_database_and_user() {
        let url = url(Path::new("/var/lib/cipher fleet/pg+1"), 5432);
        assert_eq!(
            url,
            "postgres:///cipherfleet?host=%2Fvar%2Flib%2Fcipher%20fleet%2Fpg%2B1&port=5432\
             &user=cipherfleet&sslmode=disable"
        );
        let opts: PgConnectOptions = url.parse().unwrap();
        assert_eq!(opts.get_socket(), Some(&PathBuf::from("/var/lib/cipher fleet/pg+1")));
        assert_eq!(opts.get_database(), Some("cipherfleet"));
        assert_eq!(opts.get_username(), "cipherfleet");
    }
}
