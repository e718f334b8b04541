//! `webhook_outbox`: findings opening and resolving, waiting for delivery to
//! `serve --webhook`. Rows are written by triggers in the transaction that
//! opened or resolved the finding (migrations/0009), so no transition is lost.
//! A delivery is claimed with a lease (`FOR UPDATE SKIP LOCKED`, then
//! `next_attempt_at` pushed out), so several coordinators deliver each event
//! once, and one that dies mid-delivery leaves it to be retried.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgExecutor;

use super::Result;

/// An event claimed for delivery, with the finding and host it concerns.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Event {
    pub id: i64,
    /// `opened` or `resolved`.
    pub event: String,
    pub created_at: DateTime<Utc>,
    /// Attempts so far, this one included.
    pub attempts: i32,
    pub finding_id: i64,
    pub host_id: i64,
    pub host_name: String,
    pub reason: String,
    pub kind: Option<String>,
    pub subject: String,
    pub severity: String,
    pub summary: String,
    pub evidence: Value,
    pub fact_changes: Value,
    pub first_seen: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// Claims the oldest event due for an attempt (created within the last
/// `max_age_seconds`) for `lease_seconds`; `None` when none is due. A
/// finding's resolve waits until its open was delivered (or expired).
pub async fn claim(db: impl PgExecutor<'_>, lease_seconds: f64, max_age_seconds: f64) -> Result<Option<Event>> {
    Ok(sqlx::query_as(
        "WITH claimed AS ( \
             UPDATE webhook_outbox SET attempts = attempts + 1, \
                 next_attempt_at = now() + make_interval(secs => $1) \
             WHERE id = (SELECT id FROM webhook_outbox \
                         WHERE delivered_at IS NULL AND next_attempt_at <= now() \
                           AND created_at > now() - make_interval(secs => $2) \
                           AND NOT EXISTS (SELECT 1 FROM webhook_outbox e \
                               WHERE e.finding_id = webhook_outbox.finding_id AND e.id < webhook_outbox.id \
                                 AND e.delivered_at IS NULL AND e.created_at > now() - make_interval(secs => $2)) \
                         ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) \
             RETURNING id, event, created_at, attempts, finding_id) \
         SELECT c.id, c.event, c.created_at, c.attempts, c.finding_id, f.host_id, h.name AS host_name, \
             f.reason, f.kind, f.subject, f.severity, f.summary, f.evidence, f.fact_changes, \
             f.first_seen, f.resolved_at \
         FROM claimed c JOIN findings f ON f.id = c.finding_id JOIN hosts h ON h.id = f.host_id",
    )
    .bind(lease_seconds)
    .bind(max_age_seconds)
    .fetch_optional(db)
    .await?)
}

/// The receiver took the event.
pub async fn delivered(db: impl PgExecutor<'_>, id: i64) -> Result<()> {
    sqlx::query("UPDATE webhook_outbox SET delivered_at = now(), last_error = NULL WHERE id = $1")
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}

/// The attempt failed with `error`: try again in `retry_in_seconds`.
pub async fn failed(db: impl PgExecutor<'_>, id: i64, error: &str, retry_in_seconds: f64) -> Result<()> {
    sqlx::query(
        "UPDATE webhook_outbox SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3) \
         WHERE id = $1",
    )
    .bind(id)
    .bind(error)
    .bind(retry_in_seconds)
    .execute(db)
    .await?;
    Ok(())
}

/// Deletes events older than `seconds`, delivered or given up on.
pub async fn prune(db: impl PgExecutor<'_>, seconds: f64) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM webhook_outbox WHERE created_at < now() - make_interval(secs => $1)")
            .bind(seconds)
            .execute(db)
            .await?
            .rows_affected(),
    )
}

/// One outbox row as stored, for `/metrics`-style counts and tests.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Stored {
    pub id: i64,
    pub finding_id: i64,
    pub event: String,
    pub attempts: i32,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// Every outbox row, oldest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Stored>> {
    Ok(sqlx::query_as(
        "SELECT id, finding_id, event, attempts, delivered_at, last_error FROM webhook_outbox ORDER BY id",
    )
    .fetch_all(db)
    .await?)
}
