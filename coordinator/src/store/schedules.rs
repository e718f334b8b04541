//! `schedules`: suites started on selected hosts every period
//! ([`crate::watch::schedule`] decides when). A due schedule is locked with
//! `FOR UPDATE SKIP LOCKED`, so each firing happens once however many
//! coordinators share the database.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};

use super::Result;

/// One stored schedule.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Schedule {
    pub id: i64,
    pub suite: String,
    /// The host selector, as campaigns store it.
    pub selector: Value,
    pub every_seconds: i64,
    /// `--at HH:MM`, as minutes after midnight UTC.
    pub at_minute: Option<i32>,
    pub jitter_seconds: i64,
    /// `skip` or `delay`.
    pub if_running: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    /// The next due time.
    pub due_at: DateTime<Utc>,
    /// When that due time fires (due plus its jitter).
    pub fire_at: DateTime<Utc>,
    pub last_campaign_id: Option<i64>,
    pub last_fired_at: Option<DateTime<Utc>>,
    pub last_outcome: Option<String>,
    pub runs: i64,
    pub skips: i64,
}

/// The columns of [`Schedule`], as a literal for `concat!`.
macro_rules! schedule_columns {
    () => {
        "id, suite, selector, every_seconds, at_minute, jitter_seconds, if_running, created_by, \
         created_at, due_at, fire_at, last_campaign_id, last_fired_at, last_outcome, runs, skips"
    };
}

/// A schedule to create.
#[derive(Debug, Clone)]
pub struct NewSchedule<'a> {
    pub suite: &'a str,
    pub selector: &'a Value,
    pub every_seconds: i64,
    pub at_minute: Option<i32>,
    pub jitter_seconds: i64,
    pub if_running: &'a str,
    pub created_by: &'a str,
    pub due_at: DateTime<Utc>,
    pub fire_at: DateTime<Utc>,
}

/// Stores a schedule; returns it as stored.
pub async fn insert(db: impl PgExecutor<'_>, new: &NewSchedule<'_>) -> Result<Schedule> {
    Ok(sqlx::query_as(concat!(
        "INSERT INTO schedules (suite, selector, every_seconds, at_minute, jitter_seconds, if_running, \
             created_by, due_at, fire_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ",
        schedule_columns!()
    ))
    .bind(new.suite)
    .bind(new.selector)
    .bind(new.every_seconds)
    .bind(new.at_minute)
    .bind(new.jitter_seconds)
    .bind(new.if_running)
    .bind(new.created_by)
    .bind(new.due_at)
    .bind(new.fire_at)
    .fetch_one(db)
    .await?)
}

/// Every schedule, by id.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Schedule>> {
    Ok(
        sqlx::query_as(concat!("SELECT ", schedule_columns!(), " FROM schedules ORDER BY id"))
            .fetch_all(db)
            .await?,
    )
}

/// Deletes a schedule (its campaigns stay); false if there was none.
pub async fn remove(db: impl PgExecutor<'_>, id: i64) -> Result<bool> {
    Ok(sqlx::query("DELETE FROM schedules WHERE id = $1")
        .bind(id)
        .execute(db)
        .await?
        .rows_affected()
        == 1)
}

/// Locks the schedules due to fire by the transaction's time and returns them
/// with that time. Rows another coordinator holds are skipped: it is firing them.
pub async fn lock_due(tx: &mut PgConnection) -> Result<(DateTime<Utc>, Vec<Schedule>)> {
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()").fetch_one(&mut *tx).await?;
    let due = sqlx::query_as(concat!(
        "SELECT ",
        schedule_columns!(),
        " FROM schedules WHERE fire_at <= now() ORDER BY fire_at, id FOR UPDATE SKIP LOCKED"
    ))
    .fetch_all(&mut *tx)
    .await?;
    Ok((now, due))
}

/// Whether campaign `id` is still running (false when it was deleted).
pub async fn campaign_running(db: impl PgExecutor<'_>, id: i64) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM campaigns WHERE id = $1 AND status = 'running')")
            .bind(id)
            .fetch_one(db)
            .await?,
    )
}

/// What a locked due schedule did.
#[derive(Debug, Clone, PartialEq)]
pub enum Firing {
    /// It started `campaign_id` (whose `schedule_id` is set here).
    Fired { campaign_id: i64 },
    /// It skipped this due time (`outcome` says why).
    Skipped,
    /// It stays due and fires later (delayed while its campaign runs).
    Waiting,
    /// Something that is not the database failed (no host matched; `outcome` says what).
    Failed,
}

/// Records a firing of a locked schedule: its next due and fire times, the
/// outcome in words, the counters.
pub async fn record_firing(
    tx: &mut PgConnection,
    id: i64,
    firing: &Firing,
    outcome: &str,
    next: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Result<()> {
    let (campaign, ran, skipped) = match firing {
        Firing::Fired { campaign_id } => {
            sqlx::query("UPDATE campaigns SET schedule_id = $2 WHERE id = $1")
                .bind(campaign_id)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            (Some(*campaign_id), 1, 0)
        }
        Firing::Skipped | Firing::Failed => (None, 0, 1),
        Firing::Waiting => (None, 0, 0),
    };
    sqlx::query(
        "UPDATE schedules SET last_outcome = $2, \
             due_at = COALESCE($3, due_at), fire_at = COALESCE($4, fire_at), \
             last_campaign_id = COALESCE($5, last_campaign_id), \
             last_fired_at = CASE WHEN $5::bigint IS NULL THEN last_fired_at ELSE now() END, \
             runs = runs + $6, skips = skips + $7 \
         WHERE id = $1",
    )
    .bind(id)
    .bind(outcome)
    .bind(next.map(|n| n.0))
    .bind(next.map(|n| n.1))
    .bind(campaign)
    .bind(ran)
    .bind(skipped)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The campaigns a schedule started, oldest first: (id, created at).
pub async fn campaigns_of(db: impl PgExecutor<'_>, id: i64) -> Result<Vec<(i64, DateTime<Utc>)>> {
    Ok(
        sqlx::query_as("SELECT id, created_at FROM campaigns WHERE schedule_id = $1 ORDER BY created_at, id")
            .bind(id)
            .fetch_all(db)
            .await?,
    )
}
