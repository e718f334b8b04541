//! Backups of a private cluster: the coordinator's database dumped into one
//! file (`pg_dump`'s custom format), and such a file restored into a new
//! cluster. What `cipherfleet-coordinator backup` and `restore` run.
//!
//! A dump is taken from the server a running coordinator holds (a consistent
//! snapshot; the coordinator keeps serving), or, with none running, from the
//! cluster started for the dump and stopped after. The tools run as the caller
//! (root, or the cluster's own user: both reach its socket) with the binaries
//! of the cluster's major version.

use std::path::{Path, PathBuf};

use sqlx::{ConnectOptions, Connection};
use tokio::process::Command;

use super::binaries::Binaries;
use super::lock::DataDirLock;
use super::{CLUSTER_DIR, DATABASE, PgError, PrivateCluster, SUPERUSER, data_dir, output_text, postmaster, run};

/// What a restored database holds, for the operator to check against the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// The newest migration applied in it.
    pub migration: i64,
    pub hosts: i64,
    pub campaigns: i64,
    pub results: i64,
}

/// Dumps the database of the private cluster under `data_dir` (a
/// coordinator's `--data-dir`) into `file`, written as `file.partial` and
/// renamed once complete, readable by its owner only.
pub async fn dump(data_dir: &Path, file: &Path) -> Result<(), PgError> {
    let cluster_dir = data_dir.join(CLUSTER_DIR);
    let Some(major) = data_dir::cluster_major(&cluster_dir)? else {
        return Err(PgError::DataDir {
            path: data_dir.to_path_buf(),
            problem: format!(
                "holds no PostgreSQL cluster ({} is missing or empty)",
                cluster_dir.display()
            ),
        });
    };
    match DataDirLock::try_acquire(data_dir)? {
        Ok(_lock) => {
            let cluster = PrivateCluster::start(&cluster_dir).await?;
            let dumped = pg_dump(&cluster.binaries, &cluster.socket_dir, cluster.port, file).await;
            cluster.stop().await?;
            dumped
        }
        Err(held) => {
            let Some((socket_dir, port)) = postmaster::running_server(&cluster_dir)? else {
                return Err(PgError::DataDir {
                    path: data_dir.to_path_buf(),
                    problem: format!(
                        "the coordinator holding it{} runs no PostgreSQL server (starting or stopping?); \
                         try again",
                        held.by()
                    ),
                });
            };
            pg_dump(&Binaries::find(Some(major)).await?, &socket_dir, port, file).await
        }
    }
}

/// Restores `file`, a dump of a coordinator's database (of a private cluster
/// or an external database), into a new private cluster under `data_dir`,
/// which must hold none yet; on failure the new cluster is removed again.
pub async fn restore(data_dir: &Path, file: &Path) -> Result<Restored, PgError> {
    std::fs::File::open(file).map_err(|e| PgError::io(format!("opening the dump {}", file.display()), e))?;
    let _lock = DataDirLock::acquire(data_dir)?;
    let cluster_dir = data_dir.join(CLUSTER_DIR);
    if data_dir::cluster_major(&cluster_dir)?.is_some() {
        return Err(PgError::DataDir {
            path: data_dir.to_path_buf(),
            problem: format!(
                "already holds a cluster ({}); a restore makes a new one: give it a new --data-dir, \
                 or move that directory aside",
                cluster_dir.display()
            ),
        });
    }
    let cluster = PrivateCluster::start(&cluster_dir).await?;
    let restored = match pg_restore(&cluster, file).await {
        Ok(()) => contents(&cluster).await,
        Err(e) => Err(e),
    };
    cluster.stop().await?;
    if restored.is_err()
        && let Err(e) = std::fs::remove_dir_all(&cluster_dir)
    {
        tracing::warn!(dir = %cluster_dir.display(), error = %e, "could not remove the cluster of a failed restore");
    }
    restored
}

async fn pg_dump(binaries: &Binaries, socket_dir: &Path, port: u16, file: &Path) -> Result<(), PgError> {
    use std::os::unix::fs::OpenOptionsExt;
    let partial = PathBuf::from(format!("{}.partial", file.display()));
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .map_err(|e| PgError::io(format!("creating {}", partial.display()), e))?;
    let mut cmd = client(binaries, "pg_dump", socket_dir, port);
    cmd.arg("--format=custom").stdout(out);
    let action = format!("pg_dump into {}", file.display());
    // Not `output()`, which would pipe stdout away from the file.
    let child = cmd
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| PgError::io(action.clone(), e))?;
    let done = child
        .wait_with_output()
        .await
        .map_err(|e| PgError::io(action.clone(), e));
    let dumped = done.and_then(|done| succeeded(&done, action));
    match dumped {
        Ok(()) => std::fs::rename(&partial, file)
            .map_err(|e| PgError::io(format!("renaming {} to {}", partial.display(), file.display()), e)),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// `pg_restore` of `file` into the new cluster's empty database, in one
/// transaction. Ownership and grants are left out: the dump may come from an
/// external database whose roles this cluster has not; here everything
/// belongs to the cluster's one role.
async fn pg_restore(cluster: &PrivateCluster, file: &Path) -> Result<(), PgError> {
    let mut cmd = client(&cluster.binaries, "pg_restore", &cluster.socket_dir, cluster.port);
    cmd.args([
        "--exit-on-error",
        "--single-transaction",
        "--no-owner",
        "--no-privileges",
    ])
    .arg(file);
    let action = format!("pg_restore of {}", file.display());
    let done = run(&mut cmd, &action).await?;
    succeeded(&done, action)
}

/// `tool` (`pg_dump`, `pg_restore`) of `binaries`, connecting to the
/// coordinator's database on the server listening in `socket_dir`.
fn client(binaries: &Binaries, tool: &str, socket_dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new(binaries.dir.join(tool));
    cmd.args(["--no-password", "--username", SUPERUSER, "--dbname", DATABASE])
        .arg("--host")
        .arg(socket_dir)
        .arg("--port")
        .arg(port.to_string());
    cmd
}

/// `Ok` if the tool run as `action` exited 0, else what it said.
fn succeeded(done: &std::process::Output, action: String) -> Result<(), PgError> {
    if done.status.success() {
        return Ok(());
    }
    Err(PgError::Command {
        action,
        status: done.status,
        detail: output_text(done),
    })
}

/// What the restored database holds; an error if it is no coordinator's.
async fn contents(cluster: &PrivateCluster) -> Result<Restored, PgError> {
    let sql = |action: &'static str| {
        move |source| PgError::Sql {
            action: action.into(),
            source,
        }
    };
    let mut conn = cluster
        .connect_options(DATABASE)
        .connect()
        .await
        .map_err(sql("connecting to the restored database"))?;
    let migration: Option<i64> = sqlx::query_scalar(
        "SELECT CASE WHEN to_regclass('_sqlx_migrations') IS NOT NULL \
         THEN (SELECT max(version) FROM _sqlx_migrations WHERE success) END",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(sql("reading the restored migrations"))?;
    let Some(migration) = migration else {
        return Err(PgError::DataDir {
            path: cluster.data_dir.clone(),
            problem: "the dump holds no cipherfleet database (no applied migrations)".into(),
        });
    };
    let (hosts, campaigns, results) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM hosts), (SELECT count(*) FROM campaigns), (SELECT count(*) FROM results)",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(sql("counting what was restored"))?;
    conn.close().await.ok();
    Ok(Restored {
        migration,
        hosts,
        campaigns,
        results,
    })
}
