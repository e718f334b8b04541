//! `store::connect`.

use cipherfleet_coordinator::store::schema::{self, MIGRATOR};
use cipherfleet_coordinator::store::{self, hosts};

use crate::helpers::{fresh_db, url_of};

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

/// After every start the stored procedures are exactly those of `functions/`,
/// each as its file defines it: a definition a migration (or a person) left
/// behind is replaced, and applying the schema again changes nothing.
#[tokio::test]
async fn the_stored_procedures_are_their_files_after_every_start() {
    let pool = fresh_db().await;
    sqlx::raw_sql(
        "CREATE OR REPLACE FUNCTION webhook_finding_opened() RETURNS trigger LANGUAGE plpgsql \
         AS $$ BEGIN RETURN NULL; END $$",
    )
    .execute(&pool)
    .await
    .unwrap();
    let connected = store::connect(&url_of(&pool)).await.expect("connecting by URL");
    schema::apply(&connected).await.expect("applying the schema again");
    assert_eq!(
        schema::database_migration(&connected).await.unwrap(),
        schema::newest_migration(),
        "the database has every migration of this build, and no newer one"
    );
    let live: Vec<(String, String)> = sqlx::query_as(
        "SELECT p.proname::text, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = 'public' ORDER BY 1",
    )
    .fetch_all(&connected)
    .await
    .unwrap();
    let names: Vec<&str> = live.iter().map(|(name, _)| name.as_str()).collect();
    let mut files: Vec<&str> = schema::FUNCTIONS.iter().map(|f| f.name).collect();
    files.sort_unstable();
    assert_eq!(
        names, files,
        "the database's functions are functions/'s, no more and no fewer"
    );
    for (name, body) in &live {
        let file = schema::FUNCTIONS.iter().find(|f| f.name == name).unwrap();
        assert!(
            file.sql.contains(body.as_str()),
            "{name} is not as functions/{name}.sql defines it"
        );
    }
    connected.close().await;
}
