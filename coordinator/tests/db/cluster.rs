//! The private cluster itself. Each test runs its own cluster: these stop and
//! restart servers, which the shared one must not see.

use std::os::unix::fs::MetadataExt;

use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::store::hosts;
use cipherfleet_coordinator::store::schema;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::helpers::{TempDir, facts};

async fn host_names(pool: &PgPool) -> Vec<String> {
    hosts::list(pool).await.unwrap().into_iter().map(|h| h.name).collect()
}

#[tokio::test]
async fn cluster_keeps_data_across_stop_and_start() {
    let dir = TempDir::new("cluster-restart");
    let data_dir = dir.path().join("pg");

    let cluster = PrivateCluster::start(&data_dir).await.unwrap();
    let pid_file = data_dir.join("postmaster.pid");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let owner = std::fs::metadata(&pid_file).unwrap().uid();
        assert_ne!(owner, 0, "the server runs as root");
    }
    let pool = PgPool::connect(cluster.url()).await.unwrap();
    schema::apply(&pool).await.unwrap();
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();
    pool.close().await;
    cluster.stop().await.unwrap();
    assert!(!pid_file.exists(), "the server is still running");

    let cluster = PrivateCluster::start(&data_dir).await.unwrap();
    let pool = PgPool::connect(cluster.url()).await.unwrap();
    schema::apply(&pool).await.unwrap();
    assert_eq!(host_names(&pool).await, ["bench-01"]);
    pool.close().await;
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn pool_recovers_after_restart() {
    let dir = TempDir::new("cluster-pool");
    let cluster = PrivateCluster::start(&dir.path().join("pg")).await.unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(cluster.url())
        .await
        .unwrap();
    schema::apply(&pool).await.unwrap();
    // Several connections open and idle in the pool when the server goes away.
    let held: Vec<_> = acquire_several(&pool, 3).await;
    drop(held);

    cluster.restart().await.unwrap();

    for name in ["bench-01", "bench-02", "bench-03", "bench-04", "bench-05"] {
        hosts::upsert_host_with_facts(&pool, name, None, &facts("6.1.0-18-amd64"))
            .await
            .unwrap_or_else(|e| panic!("query after restart failed: {e}"));
    }
    assert_eq!(host_names(&pool).await.len(), 5);
    pool.close().await;
    cluster.stop().await.unwrap();
}

async fn acquire_several(pool: &PgPool, n: usize) -> Vec<sqlx::pool::PoolConnection<sqlx::Postgres>> {
    let mut conns = Vec::new();
    for _ in 0..n {
        let mut conn = pool.acquire().await.unwrap();
        sqlx::query("SELECT 1").execute(&mut *conn).await.unwrap();
        conns.push(conn);
    }
    conns
}

#[tokio::test]
async fn a_server_left_running_by_a_crashed_coordinator_is_adopted() {
    let dir = TempDir::new("cluster-adopt");
    let data_dir = dir.path().join("pg");
    let crashed = PrivateCluster::start(&data_dir).await.unwrap();
    let pool = PgPool::connect(crashed.url()).await.unwrap();
    schema::apply(&pool).await.unwrap();
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();
    pool.close().await;
    // The coordinator dies without stopping its server.
    std::mem::forget(crashed);

    let cluster = PrivateCluster::start(&data_dir).await.unwrap();
    let pool = PgPool::connect(cluster.url()).await.unwrap();
    assert_eq!(host_names(&pool).await, ["bench-01"]);
    pool.close().await;
    cluster.stop().await.unwrap();
    assert!(
        !data_dir.join("postmaster.pid").exists(),
        "the adopted server is still running"
    );
}

#[tokio::test]
async fn a_data_dir_too_long_for_a_socket_path_still_works() {
    let dir = TempDir::new("cluster-long");
    let data_dir = dir
        .path()
        .join("a-directory-name-long-enough-that-the-socket-path-would-not-fit");
    assert!(data_dir.as_os_str().len() > 100);

    let cluster = PrivateCluster::start(&data_dir).await.unwrap();
    let pool = PgPool::connect(cluster.url()).await.unwrap();
    schema::apply(&pool).await.unwrap();
    assert!(host_names(&pool).await.is_empty());
    pool.close().await;
    let socket_dir = cluster.connect_options("postgres").get_socket().cloned().unwrap();
    assert_ne!(socket_dir, data_dir);
    cluster.stop().await.unwrap();
    assert!(!socket_dir.exists(), "the socket directory was left behind");
}

#[tokio::test]
async fn a_failed_start_reports_the_end_of_the_server_log() {
    let dir = TempDir::new("cluster-bad-conf");
    let data_dir = dir.path().join("pg");
    PrivateCluster::start(&data_dir).await.unwrap().stop().await.unwrap();
    let conf = data_dir.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("shared_buffers = 'plenty'\n");
    std::fs::write(&conf, text).unwrap();

    let err = PrivateCluster::start(&data_dir).await.unwrap_err().to_string();

    assert!(err.contains("starting PostgreSQL"), "{err}");
    assert!(err.contains("shared_buffers"), "the log tail is missing: {err}");
}

/// Who runs the cluster in `data_dir`: the owner of its files (`pg_ctl` must run as it).
fn owner(data_dir: &std::path::Path) -> (u32, u32) {
    let meta = std::fs::metadata(data_dir.join("PG_VERSION")).unwrap();
    (meta.uid(), meta.gid())
}

/// `program args…` as the cluster's account, from `/`.
fn as_owner(data_dir: &std::path::Path, program: &std::path::Path) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let (uid, gid) = owner(data_dir);
    let mut command = std::process::Command::new(program);
    command.current_dir("/");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        command.uid(uid).gid(gid);
    }
    command
}

/// The `pg_ctl` of the installed server (the one the coordinator finds first, for a 15 cluster).
fn pg_ctl(data_dir: &std::path::Path) -> std::path::PathBuf {
    let major = std::fs::read_to_string(data_dir.join("PG_VERSION")).unwrap();
    let versioned = std::path::Path::new("/usr/lib/postgresql")
        .join(major.trim())
        .join("bin/pg_ctl");
    if versioned.is_file() {
        return versioned;
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("pg_ctl"))
        .find(|p| p.is_file())
        .expect("pg_ctl")
}

#[tokio::test]
async fn a_link_planted_in_the_data_directory_is_not_followed() {
    let dir = TempDir::new("cluster-links");
    let data_dir = dir.path().join("pg");
    PrivateCluster::start(&data_dir).await.unwrap().stop().await.unwrap();
    // What the cluster's account could plant: links to files only root may write.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let conf = data_dir.join("cipherfleet.conf");
    std::fs::remove_file(&conf).unwrap();
    std::os::unix::fs::symlink(&victim, &conf).unwrap();

    let cluster = PrivateCluster::start(&data_dir).await.unwrap();
    cluster.stop().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "written through the link"
    );
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    assert_eq!(
        std::fs::metadata(&victim).unwrap().uid(),
        me,
        "the link's target was handed over"
    );
    let replaced = std::fs::symlink_metadata(&conf).unwrap();
    assert!(replaced.is_file(), "the link is still there");
    assert_eq!((replaced.uid(), replaced.gid()), owner(&data_dir));

    // A link where the coordinator must read (and then rewrite) is refused, naming it.
    let main_conf = data_dir.join("postgresql.conf");
    std::fs::rename(&main_conf, dir.path().join("postgresql.conf.real")).unwrap();
    std::os::unix::fs::symlink(&victim, &main_conf).unwrap();
    let err = PrivateCluster::start(&data_dir).await.unwrap_err().to_string();
    assert!(err.contains("postgresql.conf"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "written through the link"
    );
}

#[tokio::test]
async fn the_postmaster_pid_of_a_server_that_is_gone_is_removed_not_adopted() {
    let dir = TempDir::new("cluster-stale-pid");
    let data_dir = dir.path().join("pg");
    PrivateCluster::start(&data_dir).await.unwrap().stop().await.unwrap();
    // After a crash and a reboot the old PID may be any live process, even one
    // of the cluster's own account: here a `sleep` run as it.
    let mut sleeper = as_owner(&data_dir, std::path::Path::new("sleep"))
        .arg("60")
        .spawn()
        .unwrap();
    let pid_file = data_dir.join("postmaster.pid");
    let stale = format!(
        "{}\n{}\n1700000000\n5432\n{}\n\n  5432001         0\nready   \n",
        sleeper.id(),
        data_dir.display(),
        data_dir.display()
    );
    std::fs::write(&pid_file, stale).unwrap();
    let (uid, gid) = owner(&data_dir);
    std::os::unix::fs::chown(&pid_file, Some(uid), Some(gid)).unwrap();

    let started = PrivateCluster::start(&data_dir).await;
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let cluster = started.unwrap();
    let pool = PgPool::connect(cluster.url()).await.unwrap();
    schema::apply(&pool).await.unwrap();
    pool.close().await;
    let now = std::fs::read_to_string(&pid_file).unwrap();
    assert_ne!(
        now.lines().next(),
        Some(sleeper.id().to_string().as_str()),
        "the stale PID was kept"
    );
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn a_server_started_by_hand_on_the_data_directory_is_refused() {
    let dir = TempDir::new("cluster-foreign");
    let data_dir = dir.path().join("pg");
    PrivateCluster::start(&data_dir).await.unwrap().stop().await.unwrap();
    let pg_ctl = pg_ctl(&data_dir);
    let log = dir.path().join("by-hand.log");
    std::fs::write(&log, "").unwrap();
    let (uid, gid) = owner(&data_dir);
    std::os::unix::fs::chown(&log, Some(uid), Some(gid)).unwrap();
    let started = as_owner(&data_dir, &pg_ctl)
        .args(["start", "-w", "-D"])
        .arg(&data_dir)
        .arg("-l")
        .arg(&log)
        .output()
        .unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));

    let err = PrivateCluster::start(&data_dir).await.unwrap_err().to_string();
    let stopped = as_owner(&data_dir, &pg_ctl)
        .args(["stop", "-w", "-m", "fast", "-D"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(stopped.status.success(), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert!(err.contains("did not start") && err.contains("pg_ctl stop"), "{err}");
}
