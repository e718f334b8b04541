//! `agent_sessions`: one row per agent connection, for host history and for
//! telling which hosts are online.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::Result;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Session {
    pub id: i64,
    pub host_id: i64,
    pub snapshot_id: Option<i64>,
    pub connected_at: DateTime<Utc>,
    /// `None` while connected.
    pub disconnected_at: Option<DateTime<Utc>>,
    pub peer_address: Option<String>,
    pub agent_version: Option<String>,
}

/// Records a new connection of `host_id`'s agent; returns the session id. The
/// host's other open sessions end now: its lease allows one live session in
/// the cluster, so they are of a coordinator that died without closing them.
pub async fn open(
    db: impl PgExecutor<'_>,
    host_id: i64,
    snapshot_id: Option<i64>,
    peer_address: Option<&str>,
    agent_version: Option<&str>,
) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "WITH stale AS (UPDATE agent_sessions SET disconnected_at = greatest(now(), connected_at) \
             WHERE host_id = $1 AND disconnected_at IS NULL) \
         INSERT INTO agent_sessions (host_id, snapshot_id, peer_address, agent_version) \
         VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(host_id)
    .bind(snapshot_id)
    .bind(peer_address)
    .bind(agent_version)
    .fetch_one(db)
    .await?)
}

/// Marks a session ended; closing it twice keeps the first time.
pub async fn close(db: impl PgExecutor<'_>, session_id: i64) -> Result<()> {
    sqlx::query(
        "UPDATE agent_sessions SET disconnected_at = now() \
         WHERE id = $1 AND disconnected_at IS NULL",
    )
    .bind(session_id)
    .execute(db)
    .await?;
    Ok(())
}

/// Closes sessions left open by a coordinator that stopped without closing
/// them: open sessions of hosts with no live lease (`host_leases`), so the
/// sessions other coordinators serve stay open. Run at start and by the
/// cluster's sweep. Returns how many there were.
pub async fn close_orphaned(db: impl PgExecutor<'_>) -> Result<u64> {
    let done = sqlx::query(
        "UPDATE agent_sessions s SET disconnected_at = greatest(now(), s.connected_at) \
         WHERE s.disconnected_at IS NULL AND NOT EXISTS ( \
             SELECT 1 FROM host_leases l WHERE l.host_id = s.host_id AND l.expires_at > now())",
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// A host's sessions, newest first.
pub async fn for_host(db: impl PgExecutor<'_>, host_id: i64, limit: i64) -> Result<Vec<Session>> {
    Ok(sqlx::query_as(
        "SELECT id, host_id, snapshot_id, connected_at, disconnected_at, peer_address, agent_version \
         FROM agent_sessions WHERE host_id = $1 ORDER BY connected_at DESC, id DESC LIMIT $2",
    )
    .bind(host_id)
    .bind(limit)
    .fetch_all(db)
    .await?)
}
