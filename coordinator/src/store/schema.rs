//! The schema: the migrations in `migrations/`, applied once each and never
//! edited (sqlx checks each applied one against its file), and the stored
//! procedures in `functions/`, one file and one current definition each,
//! applied after the migrations on every start (`CREATE OR REPLACE`). A
//! migration that creates a function, or a trigger on one, stays as it was;
//! the function's current definition is its file, which replaces it.
//! Changing a function is editing its file; adding one is a file here and,
//! when a migration already needs it (a trigger), a definition in that
//! migration too; removing one is a migration that drops it and its file gone.
//!
//! **Coordinators of two releases on one database** (a rolling upgrade): the
//! newer one applies its migrations, which must be additive for one release
//! (docs/operations.md, "Upgrading"), and the older one keeps serving on
//! them, also across a restart: migrations it does not know, newer than its
//! own, are no reason to stop. Stored procedures are ordered by migrations:
//! a coordinator replaces them only when it knows every migration the database
//! has applied, so an older one restarting leaves the newer definitions alone
//! instead of putting its own back. That holds while every change to
//! `functions/` comes with a migration of its own (the test
//! `functions_change_only_with_a_migration` keeps it).

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{Acquire, Connection, Postgres};

use super::Result;

/// The migrations, embedded.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// A stored procedure: its name and its file's SQL.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    pub name: &'static str,
    pub sql: &'static str,
}

macro_rules! function {
    ($name:literal) => {
        Function {
            name: $name,
            sql: include_str!(concat!("../../../functions/", $name, ".sql")),
        }
    };
}

/// Every file of `functions/`, by name (a test checks the list against the folder).
pub const FUNCTIONS: &[Function] = &[
    function!("cipherfleet_acquire_lease"),
    function!("cipherfleet_adopt"),
    function!("cipherfleet_campaign_host_jobs_add"),
    function!("cipherfleet_campaign_host_jobs_delete"),
    function!("cipherfleet_campaign_host_jobs_insert"),
    function!("cipherfleet_campaign_host_jobs_update"),
    function!("cipherfleet_fallback_pairs_clear"),
    function!("cipherfleet_fallback_pairs_truncate"),
    function!("cipherfleet_fallback_pairs_write"),
    function!("cipherfleet_host_summaries_count"),
    function!("cipherfleet_host_summaries_findings_deleted"),
    function!("cipherfleet_host_summaries_findings_inserted"),
    function!("cipherfleet_host_summaries_findings_updated"),
    function!("cipherfleet_host_summaries_host_updated"),
    function!("cipherfleet_host_summaries_hosts_inserted"),
    function!("cipherfleet_host_summaries_snapshots_updated"),
    function!("cipherfleet_lock_hosts"),
    function!("cipherfleet_notify_campaign_cancelled"),
    function!("cipherfleet_notify_jobs_queued"),
    function!("cipherfleet_open_session"),
    function!("cipherfleet_requeue_lost"),
    function!("cipherfleet_results_drop"),
    function!("cipherfleet_results_hosts_deleted"),
    function!("cipherfleet_results_snapshots_deleted"),
    function!("cipherfleet_results_weeks"),
    function!("cipherfleet_start_session"),
    function!("refresh_result_points"),
    function!("result_points_summaries"),
    function!("result_points_truncated"),
    function!("webhook_finding_opened"),
    function!("webhook_finding_resolved"),
];

/// What [`apply`] did with the stored procedures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Functions {
    /// Replaced by this build's files.
    Applied,
    /// Left as they are: the database has applied migration `database`, newer
    /// than `known`, the newest this build has, so a newer coordinator shares
    /// the database and its definitions stay.
    LeftToNewer { database: i64, known: i64 },
}

/// The newest migration this build has.
pub fn newest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Applies the migrations not applied yet, then every function of
/// [`FUNCTIONS`] unless the database has a migration newer than this build's
/// ([`Functions::LeftToNewer`]); the functions in one transaction under an
/// advisory lock, so coordinators starting together replace them one after
/// the other, never concurrently; then makes the weeks of `results` ahead
/// ([`super::partitions::ensure_weeks`]), logging a failure there. A
/// migration applied in the database that this build lacks is refused
/// unless it is newer than all of this build's.
pub async fn apply<'a, A>(db: A) -> Result<Functions>
where
    A: Acquire<'a, Database = Postgres>,
{
    let mut conn = db.acquire().await?;
    let known = newest_migration();
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if exists {
        let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await?;
        // What sqlx checks when it does not ignore missing migrations, less the newer ones.
        if let Some(&missing) = applied
            .iter()
            .find(|&&v| v < known && !MIGRATOR.iter().any(|m| m.version == v))
        {
            return Err(MigrateError::VersionMissing(missing).into());
        }
    }
    let mut migrator = Migrator::with_migrations(MIGRATOR.iter().cloned().collect());
    migrator.set_ignore_missing(true);
    migrator.run(&mut *conn).await?;

    let mut tx = Connection::begin(&mut *conn).await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('cipherfleet_functions'))")
        .execute(&mut *tx)
        .await?;
    // Read under the lock: a newer coordinator commits its migrations before it
    // takes the lock to apply its functions, so either this sees them and
    // leaves the functions alone, or that one replaces these after.
    let database = database_migration(&mut *tx).await?;
    if database > known {
        return Ok(Functions::LeftToNewer { database, known });
    }
    for f in FUNCTIONS {
        sqlx::raw_sql(f.sql).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    // The weeks ahead, before the first result. Not a reason to stop: every
    // coordinator makes them every hour too, and a result whose week is not
    // made yet waits for it in the default partition (migrations/0041).
    if let Err(e) = super::partitions::ensure_weeks(&mut *conn).await {
        tracing::warn!(error = %e, "making the week partitions of results ahead: the hourly pass will try again");
    }
    Ok(Functions::Applied)
}

/// The newest migration the database has applied (0 for none).
pub async fn database_migration(db: impl sqlx::PgExecutor<'_>) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(db)
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use sha2::{Digest, Sha256};

    use super::*;

    /// The newest migration when `functions/` last changed, and the SHA-256 of
    /// its files then (each name and SQL, in [`FUNCTIONS`]' order).
    const FUNCTIONS_SINCE: (i64, &str) = (46, "967761b07fe88fea23775a9fbc08434554a0fe740652ea8038f88e17b7e5ccba");

    /// A coordinator that knows the database's newest migration replaces the
    /// functions, so two builds with the same newest migration must define them
    /// alike, or an older one restarting beside a newer one would put its own
    /// definitions back ([`apply`]).
    #[test]
    fn functions_change_only_with_a_migration() {
        let mut digest = Sha256::new();
        for f in FUNCTIONS {
            digest.update(f.name);
            digest.update([0]);
            digest.update(f.sql);
            digest.update([0]);
        }
        let digest: String = digest.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let newest = newest_migration();
        let (since, recorded) = FUNCTIONS_SINCE;
        assert!(
            digest == recorded || newest > since,
            "functions/ changed without a migration: coordinators order stored procedures by \
             their newest migration (store::schema), so add one (a comment saying which functions \
             changed will do), then set FUNCTIONS_SINCE to (its version, {digest:?})"
        );
        assert_eq!(
            (since, recorded),
            (if digest == recorded { since } else { newest }, digest.as_str()),
            "functions/ changed with migration {newest}: set FUNCTIONS_SINCE to ({newest}, {digest:?})"
        );
    }

    #[test]
    fn the_list_is_the_folder_and_each_file_defines_its_function_once() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../functions");
        let files: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
            .collect();
        let listed: BTreeSet<String> = FUNCTIONS.iter().map(|f| format!("{}.sql", f.name)).collect();
        assert_eq!(
            files, listed,
            "functions/ and FUNCTIONS differ: list every file, and only files"
        );
        for f in FUNCTIONS {
            let creates: Vec<&str> = f
                .sql
                .match_indices("CREATE OR REPLACE FUNCTION ")
                .map(|(at, m)| {
                    let rest = &f.sql[at + m.len()..];
                    rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or("")
                })
                .collect();
            assert_eq!(creates, [f.name], "functions/{}.sql defines {creates:?}", f.name);
            let lower = f.sql.to_ascii_lowercase();
            assert_eq!(
                lower.matches("create function").count() + lower.matches("create or replace function").count(),
                1,
                "functions/{}.sql: one definition, written CREATE OR REPLACE FUNCTION",
                f.name
            );
        }
    }
}
