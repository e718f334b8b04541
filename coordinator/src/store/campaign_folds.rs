//! What is left of ended campaigns as retention folds their results
//! ([`super::rollups`]; migrations/0039): their jobs deleted, those of the
//! results folded with them and the rest (failed, cancelled) once the
//! campaign is past the raw window, with the campaign's counts per host kept;
//! then, past the daily window, those counts folded into one row a campaign.
//! Each is marked on the campaign, so it is done once.

use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use super::{Result, fold_transaction};

/// Deletes the jobs `ids` of results a day's fold deleted, those of ended
/// campaigns (nothing else needs them: `campaign_host_jobs` keeps their
/// counts); returns how many. Without it `jobs` would keep a row of about
/// 500 bytes for every result folded away.
pub(super) async fn delete_jobs(conn: &mut PgConnection, ids: &[Uuid]) -> Result<i64> {
    let mut deleted = 0;
    let mut tx = keeping_job_counts(conn).await?;
    // Bounded statements: a day of a large fleet is hundreds of thousands of jobs.
    for part in ids.chunks(50_000) {
        deleted += sqlx::query(
            "DELETE FROM jobs j USING campaigns c \
             WHERE j.id = ANY($1) AND c.id = j.campaign_id AND c.status <> 'running'",
        )
        .bind(part)
        .execute(&mut *tx)
        .await?
        .rows_affected() as i64;
    }
    done_keeping_job_counts(tx).await?;
    Ok(deleted)
}

/// A transaction (a savepoint in `conn`'s) in which deleting jobs leaves
/// their campaigns' counts alone (`cipherfleet.keep_job_counts`,
/// migrations/0039): what retention deletes was counted when it ended.
async fn keeping_job_counts(conn: &mut PgConnection) -> Result<sqlx::Transaction<'_, sqlx::Postgres>> {
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT set_config('cipherfleet.keep_job_counts', 'on', true)")
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// Ends [`keeping_job_counts`]: the setting would otherwise last to the end
/// of the caller's transaction, and count none of its later deletes.
async fn done_keeping_job_counts(mut tx: sqlx::Transaction<'_, sqlx::Postgres>) -> Result<()> {
    sqlx::query("SELECT set_config('cipherfleet.keep_job_counts', 'off', true)")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// What a campaign past a window has folded once, each marked on the
/// campaign (migrations/0039).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CampaignFold {
    /// Its jobs without a raw result ([`fold_campaign_jobs`]), past the raw window.
    Jobs,
    /// Its counts per host into one row ([`fold_campaign_counts`]), past the daily window.
    Counts,
}

/// The first campaign by its end whose `$mark` is not set yet.
macro_rules! oldest_unmarked {
    ($mark:literal) => {
        concat!(
            "SELECT id FROM campaigns WHERE ",
            $mark,
            " IS NULL AND finished_at < $1 ORDER BY finished_at, id LIMIT 1"
        )
    };
}

/// The ended campaign that finished first before `before` (the window's
/// start) that has not had `fold` yet; `None` when there is none. Read from
/// the partial index of the campaigns not marked, so a pass asks it once a
/// campaign.
pub async fn oldest_campaign_to_fold(
    db: impl PgExecutor<'_>,
    fold: CampaignFold,
    before: DateTime<Utc>,
) -> Result<Option<i64>> {
    let sql = match fold {
        CampaignFold::Jobs => oldest_unmarked!("jobs_folded_at"),
        CampaignFold::Counts => oldest_unmarked!("counts_folded_at"),
    };
    Ok(sqlx::query_scalar(sql).bind(before).fetch_optional(db).await?)
}

/// Deletes the jobs of ended campaign `campaign` that finished before
/// `before` and have no result raw: its failed and cancelled jobs (their
/// errors go with them), and done ones whose results were folded before a
/// day's fold deleted jobs too; then marks the campaign folded. The jobs of
/// results kept raw (the latest of their point) stay until a day's fold
/// takes their results. The campaign keeps its counts (`campaign_host_jobs`):
/// its page still says how many ran, failed and were folded. Returns how many
/// jobs went.
pub async fn fold_campaign_jobs(conn: &mut PgConnection, campaign: i64, before: DateTime<Utc>) -> Result<i64> {
    let mut tx = keeping_job_counts(conn).await?;
    let gone = sqlx::query(
        "DELETE FROM jobs j \
         WHERE j.campaign_id = $2 AND j.status IN ('done', 'failed', 'cancelled') AND j.finished_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = j.id)",
    )
    .bind(before)
    .bind(campaign)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query("UPDATE campaigns SET jobs_folded_at = now() WHERE id = $1 AND finished_at IS NOT NULL")
        .bind(campaign)
        .execute(&mut *tx)
        .await?;
    done_keeping_job_counts(tx).await?;
    Ok(gone as i64)
}

/// [`fold_campaign_jobs`] in a transaction of its own that may run [`FOLD_TIMEOUT`](super::FOLD_TIMEOUT).
pub async fn fold_campaign_jobs_alone(pool: &PgPool, campaign: i64, before: DateTime<Utc>) -> Result<i64> {
    let mut tx = fold_transaction(pool).await?;
    let gone = fold_campaign_jobs(&mut tx, campaign, before).await?;
    tx.commit().await?;
    Ok(gone)
}

/// Folds ended campaign `campaign`'s job counts per host into one row for
/// all its hosts (`host_id` 0, `hosts` saying how many: the totals stay
/// exact), and marks it; one statement and the mark, so `conn` should be a
/// transaction. Its page then gives the totals alone. Returns the rows folded.
pub async fn fold_campaign_counts(conn: &mut PgConnection, campaign: i64) -> Result<i64> {
    let folded: i64 = sqlx::query_scalar(
        "WITH gone AS (DELETE FROM campaign_host_jobs WHERE campaign_id = $1 AND host_id <> 0 RETURNING *), \
         one AS ( \
             INSERT INTO campaign_host_jobs AS t (campaign_id, host_id, queued, running, done, failed, cancelled, hosts) \
             SELECT $1, 0, sum(queued)::bigint, sum(running)::bigint, sum(done)::bigint, sum(failed)::bigint, \
                 sum(cancelled)::bigint, sum(hosts)::integer \
             FROM gone HAVING count(*) > 0 \
             ON CONFLICT (campaign_id, host_id) DO UPDATE SET queued = t.queued + EXCLUDED.queued, \
                 running = t.running + EXCLUDED.running, done = t.done + EXCLUDED.done, \
                 failed = t.failed + EXCLUDED.failed, cancelled = t.cancelled + EXCLUDED.cancelled, \
                 hosts = t.hosts + EXCLUDED.hosts \
             RETURNING 1) \
         SELECT count(*) FROM gone",
    )
    .bind(campaign)
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query("UPDATE campaigns SET counts_folded_at = now() WHERE id = $1 AND finished_at IS NOT NULL")
        .bind(campaign)
        .execute(&mut *conn)
        .await?;
    Ok(folded)
}

/// [`fold_campaign_counts`] in a transaction of its own that may run [`FOLD_TIMEOUT`](super::FOLD_TIMEOUT).
pub async fn fold_campaign_counts_alone(pool: &PgPool, campaign: i64) -> Result<i64> {
    let mut tx = fold_transaction(pool).await?;
    let folded = fold_campaign_counts(&mut tx, campaign).await?;
    tx.commit().await?;
    Ok(folded)
}
