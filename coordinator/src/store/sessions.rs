//! `agent_sessions`: one row per agent connection, for host history and for
//! telling which hosts are online; and a session's start ([`start`]): its
//! host's lease, its row and the adoption of the agent's running job, in one
//! round trip.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::leases::Holder;
use super::{Result, campaigns, jobs};

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

/// How a session's start names its lease: the coordinator, its session of
/// the host and how long the lease lives unrenewed.
#[derive(Debug, Clone, Copy)]
pub struct LeaseOf<'a> {
    pub holder: &'a Holder,
    pub generation: u64,
    pub ttl: Duration,
}

/// What a hello brings to its session's start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opening<'a> {
    /// Nothing else of the hello is left to store: the lease is marked
    /// welcomed at once ([`super::leases::welcome`] otherwise, once it is).
    pub welcomed: bool,
    pub peer_address: Option<&'a str>,
    pub agent_version: Option<&'a str>,
    /// The job and attempt the agent still runs.
    pub running: Option<(Uuid, Uuid)>,
    /// The jobs whose outcome the agent has spooled, to send after `Welcome`:
    /// when it runs none, such a job of the host stays running, not re-queued.
    pub spooled: &'a [Uuid],
}

/// What [`start`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub session_id: i64,
    /// The job the agent runs is the host's running job again (with a fresh
    /// deadline, no attempt counted). False when it had none, or that job
    /// finished, is another host's, or was dispatched again since that attempt.
    pub adopted: bool,
    /// What the host had running that its agent no longer runs (none when it runs one).
    pub lost: jobs::Requeued,
    /// The host has a queued job of a running campaign.
    pub queued_work: bool,
}

/// Starts a session of `host_id` in one round trip (`functions/cipherfleet_start_session.sql`): takes the host's lease for `lease` (when nobody holds it
/// live, or the same coordinator did), ends its other open sessions (of a
/// coordinator that died: the lease allows one live session in the cluster)
/// and records this one, with the host's current facts snapshot; then adopts
/// the job the agent still runs, under the host's claim lock, putting any
/// other running job of the host back in the queue, or, when it runs none,
/// re-queues what the host had running ([`jobs::requeue_lost`]'s rule) but a
/// job whose outcome it has spooled, which keeps running
/// with a fresh deadline until that outcome, sent after `Welcome`, ends it.
/// `None`, with nothing changed, while another coordinator holds the lease live.
pub async fn start(pool: &PgPool, host_id: i64, lease: LeaseOf<'_>, opening: Opening<'_>) -> Result<Option<Started>> {
    type Row = (
        Option<i64>,
        Option<bool>,
        Option<Vec<Uuid>>,
        Option<Vec<Uuid>>,
        Option<Vec<i64>>,
        Option<bool>,
    );
    let (job, attempt) = opening.running.unzip();
    let row: Row = sqlx::query_as(
        "SELECT session_id, adopted, requeued, failed, failed_campaigns, queued_work \
         FROM cipherfleet_start_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(host_id)
    .bind(lease.holder.id)
    .bind(lease.generation as i64)
    .bind(&lease.holder.name)
    .bind(lease.ttl.as_secs_f64())
    .bind(opening.welcomed)
    .bind(opening.peer_address)
    .bind(opening.agent_version)
    .bind(job)
    .bind(attempt)
    .bind(opening.spooled)
    .bind(jobs::MAX_ATTEMPTS)
    .bind(jobs::lost_error())
    .fetch_one(pool)
    .await?;
    let (Some(session_id), adopted, requeued, failed, failed_campaigns, queued_work) = row else {
        return Ok(None);
    };
    // The campaigns of jobs failed after their last attempt may have nothing else left.
    campaigns::close_if_complete(pool, failed_campaigns.as_deref().unwrap_or_default()).await?;
    Ok(Some(Started {
        session_id,
        adopted: adopted.unwrap_or(false),
        lost: jobs::Requeued {
            requeued: requeued.unwrap_or_default(),
            failed: failed.unwrap_or_default(),
        },
        queued_work: queued_work.unwrap_or(false),
    }))
}

/// The session's facts are those of snapshot `snapshot_id` (stored by its
/// hello after the session started).
pub async fn set_snapshot(db: impl PgExecutor<'_>, session_id: i64, snapshot_id: i64) -> Result<()> {
    sqlx::query("UPDATE agent_sessions SET snapshot_id = $2 WHERE id = $1")
        .bind(session_id)
        .bind(snapshot_id)
        .execute(db)
        .await?;
    Ok(())
}

/// Records a new connection of `host_id`'s agent; returns the session id. The
/// host's other open sessions end now: its lease allows one live session in
/// the cluster, so they are of a coordinator that died without closing them.
/// A step of [`start`] (`cipherfleet_open_session`), here on its own.
pub async fn open(
    db: impl PgExecutor<'_>,
    host_id: i64,
    snapshot_id: Option<i64>,
    peer_address: Option<&str>,
    agent_version: Option<&str>,
) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT cipherfleet_open_session($1, $2, $3, $4)")
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
