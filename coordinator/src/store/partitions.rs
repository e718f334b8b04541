//! `results`' partitions (migrations/0040): the latest results kept past
//! their week's fold (`results_kept`), and the raw ones by UTC week
//! (`results_raw`), the oldest of which may be `results_before`, everything
//! stored before the first week, and its default partition, `results_later`,
//! where a result waits whose week was not made ahead (migrations/0041).
//! Weeks are made ahead of need here and dropped by retention once folded
//! ([`crate::store::rollups::fold_week`]).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::Result;

/// How many weeks after this one have a partition made ahead: a coordinator
/// makes them at start and every hour, so a month without one still stores.
pub const WEEKS_AHEAD: i32 = 4;

/// A partition of `results_raw`: a UTC week from `from`, or `results_before`
/// (`from` none: everything before `to`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RawPartition {
    pub name: String,
    pub from: Option<DateTime<Utc>>,
    pub to: DateTime<Utc>,
}

/// Makes the week partitions missing up to [`WEEKS_AHEAD`] weeks after this
/// one (functions/cipherfleet_results_weeks.sql), and those of any result
/// waiting in the default partition, which it moves into them; returns how
/// many it made. Fails after waiting 10 s for its lock on `results_raw`.
pub async fn ensure_weeks(db: impl PgExecutor<'_>) -> Result<i32> {
    Ok(sqlx::query_scalar("SELECT cipherfleet_results_weeks($1)")
        .bind(WEEKS_AHEAD)
        .fetch_one(db)
        .await?)
}

/// The partitions of `results_raw` but its default, `results_later`
/// (migrations/0041: results waiting for their week), oldest first.
pub async fn raw(db: impl PgExecutor<'_>) -> Result<Vec<RawPartition>> {
    Ok(sqlx::query_as(
        "SELECT c.relname::text AS name, \
             (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz AS \"from\", \
             (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz AS \"to\" \
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'results_raw'::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT' \
         ORDER BY 3",
    )
    .fetch_all(db)
    .await?)
}

/// Where the weeks begin, of `raw` ([`raw`]): the results stored before it
/// (`results_before`), and those kept past their week's fold, fold by day
/// ([`crate::store::rollups::fold_day`]); a week folds whole. `None` without
/// a partition.
pub fn weeks_from(raw: &[RawPartition]) -> Option<DateTime<Utc>> {
    raw.iter()
        .find(|w| w.from.is_none())
        .map(|w| w.to)
        .or_else(|| raw.iter().filter_map(|w| w.from).min())
}
