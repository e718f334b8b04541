//! `host_verifications`: the last verification campaign queued for each host
//! after its facts changed ([`crate::watch::verify`]), which is also the
//! per-host rate limit; and the points a host measured before, which the
//! verification measures again for comparison.

use chrono::{DateTime, Utc};
use cipherfleet_core::spec::JobSpec;
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};

use super::Result;

/// Takes the host's verification slot if the last one was queued at least
/// `min_interval_seconds` ago (or never); false while it is rate-limited.
/// The row lock makes concurrent hellos of one host take it once.
pub async fn claim(tx: &mut PgConnection, host_id: i64, min_interval_seconds: f64, changes: &Value) -> Result<bool> {
    let taken: Option<i64> = sqlx::query_scalar(
        "INSERT INTO host_verifications (host_id, changes) VALUES ($1, $2) \
         ON CONFLICT (host_id) DO UPDATE SET queued_at = now(), changes = EXCLUDED.changes, campaign_id = NULL \
             WHERE host_verifications.queued_at <= now() - make_interval(secs => $3) \
         RETURNING host_id",
    )
    .bind(host_id)
    .bind(changes)
    .bind(min_interval_seconds)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(taken.is_some())
}

/// Records the campaign a claimed verification queued.
pub async fn set_campaign(tx: &mut PgConnection, host_id: i64, campaign_id: i64) -> Result<()> {
    sqlx::query("UPDATE host_verifications SET campaign_id = $2 WHERE host_id = $1")
        .bind(host_id)
        .bind(campaign_id)
        .execute(tx)
        .await?;
    Ok(())
}

/// A host's last verification: when, which campaign, and the changes behind it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Verification {
    pub host_id: i64,
    pub queued_at: DateTime<Utc>,
    pub campaign_id: Option<i64>,
    pub changes: Value,
}

pub async fn get(db: impl PgExecutor<'_>, host_id: i64) -> Result<Option<Verification>> {
    Ok(
        sqlx::query_as("SELECT host_id, queued_at, campaign_id, changes FROM host_verifications WHERE host_id = $1")
            .bind(host_id)
            .fetch_optional(db)
            .await?,
    )
}

/// The distinct points the host measured (jobs done), most recently measured
/// first, at most `limit`. Specs that no longer read are left out.
pub async fn previous_points(db: impl PgExecutor<'_>, host_id: i64, limit: i64) -> Result<Vec<JobSpec>> {
    let specs: Vec<Value> = sqlx::query_scalar(
        "SELECT spec FROM (SELECT DISTINCT ON (spec) spec, finished_at FROM jobs \
             WHERE host_id = $1 AND status = 'done' ORDER BY spec, finished_at DESC) s \
         ORDER BY finished_at DESC LIMIT $2",
    )
    .bind(host_id)
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(specs
        .into_iter()
        .filter_map(|s| serde_json::from_value(s).ok())
        .collect())
}
