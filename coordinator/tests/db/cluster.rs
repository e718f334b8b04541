//! The private cluster itself. Each test runs its own cluster: these stop and
//! restart servers, which the shared one must not see.

use std::os::unix::fs::MetadataExt;

use cipherfleet_coordinator::MIGRATOR;
use cipherfleet_coordinator::db::hosts;
use cipherfleet_coordinator::pg::PrivateCluster;
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
    MIGRATOR.run(&pool).await.unwrap();
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();
    pool.close().await;
    cluster.stop().await.unwrap();
    assert!(!pid_file.exists(), "the server is still running");

    let cluster = PrivateCluster::start(&data_dir).await.unwrap();
    let pool = PgPool::connect(cluster.url()).await.unwrap();
    MIGRATOR.run(&pool).await.unwrap();
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
    MIGRATOR.run(&pool).await.unwrap();
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
    MIGRATOR.run(&pool).await.unwrap();
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
    MIGRATOR.run(&pool).await.unwrap();
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
