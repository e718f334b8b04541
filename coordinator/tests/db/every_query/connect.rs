//! `store::connect`.

use cipherfleet_coordinator::MIGRATOR;
use cipherfleet_coordinator::store::{self, hosts};
use sqlx::PgPool;

use crate::helpers::fresh_db;

/// The URL `serve` would be given for the database behind `pool`.
fn url_of(pool: &PgPool) -> String {
    let options = pool.connect_options();
    let socket = options.get_socket().expect("the test cluster listens on a unix socket");
    let host: String = socket
        .to_string_lossy()
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!(
        "postgres:///{}?host={host}&port={}&user={}&sslmode=disable",
        options.get_database().expect("a named database"),
        options.get_port(),
        options.get_username()
    )
}

#[tokio::test]
async fn connect_reaches_a_migrated_database() {
    let pool = fresh_db().await;
    crate::helpers::host(&pool, "bench-01").await;

    // The schema is there already: migrating again is a no-op, not an error.
    let connected = store::connect(&url_of(&pool)).await.expect("connecting by URL");
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(&connected)
        .await
        .unwrap();
    assert_eq!(applied, i64::try_from(MIGRATOR.iter().count()).unwrap());
    let seen = hosts::find_by_name(&connected, "bench-01").await.unwrap();
    assert_eq!(seen.map(|h| h.name).as_deref(), Some("bench-01"));
    connected.close().await;
}
