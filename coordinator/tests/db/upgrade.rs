//! `schema::apply` beside coordinators of other releases on one database: a
//! newer release's migration is no reason to stop, and its stored procedures
//! stay; a migration missing below this build's newest still is.

use cipherfleet_coordinator::store::schema::{self, Functions};
use sqlx::PgPool;
use sqlx::migrate::MigrateError;

use crate::helpers::fresh_db;

/// Records migration `version` as applied, as a release that has it would.
async fn record_migration(pool: &PgPool, version: i64) {
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'another release', true, '\\x00', 0)",
    )
    .bind(version)
    .execute(pool)
    .await
    .unwrap();
}

/// The body of the stored procedure `name` as the database holds it.
async fn body_of(pool: &PgPool, name: &str) -> String {
    sqlx::query_scalar("SELECT prosrc FROM pg_proc WHERE proname = $1")
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn beside_a_newer_release_the_functions_stay_until_this_build_knows_every_migration() {
    let pool = fresh_db().await;
    let known = schema::newest_migration();
    let name = "cipherfleet_lock_hosts";
    let file = schema::FUNCTIONS.iter().find(|f| f.name == name).unwrap().sql;
    let newer = file.replacen("BEGIN", "BEGIN -- the newer release's", 1);
    assert_ne!(newer, file, "{name} has a BEGIN to mark");
    record_migration(&pool, known + 1).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(newer)).execute(&pool).await.unwrap();

    let applied = schema::apply(&pool)
        .await
        .expect("a newer migration is no reason to stop");
    assert_eq!(
        applied,
        Functions::LeftToNewer {
            database: known + 1,
            known
        }
    );
    assert!(body_of(&pool, name).await.contains("the newer release's"));

    // That release rolled back (its migration forgotten): this build's definitions return.
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1")
        .bind(known + 1)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(schema::apply(&pool).await.unwrap(), Functions::Applied);
    assert!(!body_of(&pool, name).await.contains("the newer release's"));
}

#[tokio::test]
async fn a_migration_applied_below_this_builds_newest_that_it_lacks_is_refused() {
    let pool = fresh_db().await;
    // 7 was never a migration of this project (its number went unused).
    assert!(schema::MIGRATOR.iter().all(|m| m.version != 7));
    record_migration(&pool, 7).await;
    let refused = schema::apply(&pool).await.expect_err("refused");
    assert!(
        matches!(
            refused,
            cipherfleet_coordinator::store::Error::Migrate(MigrateError::VersionMissing(7))
        ),
        "{refused}"
    );
}
