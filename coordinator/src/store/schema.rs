//! The schema: the migrations in `migrations/`, applied once each and never
//! edited (sqlx checks each applied one against its file), and the stored
//! procedures in `functions/`, one file and one current definition each,
//! applied after the migrations on every start (`CREATE OR REPLACE`). A
//! migration that creates a function, or a trigger on one, stays as it was;
//! the function's current definition is its file, which replaces it.
//! Changing a function is editing its file; adding one is a file here and,
//! when a migration already needs it (a trigger), a definition in that
//! migration too; removing one is a migration that drops it and its file gone.

use sqlx::migrate::Migrator;
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
    function!("cipherfleet_start_session"),
    function!("refresh_result_points"),
    function!("result_points_summaries"),
    function!("result_points_truncated"),
    function!("webhook_finding_opened"),
    function!("webhook_finding_resolved"),
];

/// Applies the migrations not applied yet, then every function of
/// [`FUNCTIONS`], in one transaction under an advisory lock: coordinators
/// starting together replace them one after the other, never concurrently.
pub async fn apply<'a, A>(db: A) -> Result<()>
where
    A: Acquire<'a, Database = Postgres>,
{
    let mut conn = db.acquire().await?;
    MIGRATOR.run(&mut *conn).await?;
    let mut tx = Connection::begin(&mut *conn).await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('cipherfleet_functions'))")
        .execute(&mut *tx)
        .await?;
    for f in FUNCTIONS {
        sqlx::raw_sql(f.sql).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

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
