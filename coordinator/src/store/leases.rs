//! `host_leases`: which coordinator owns each host's session. A lease is live
//! while `expires_at` is in the future. It is taken when a session starts
//! ([`super::sessions::start`], [`acquire`]); its owner renews all of its leases in
//! one statement per tick ([`renew`]), and a coordinator that dies stops
//! renewing, so its hosts are free again within a few heartbeats — or at once,
//! when a coordinator starting on its machine sees its process gone
//! ([`end_all_of`]). Online means a live lease anywhere in the cluster ([`live_hosts`]).

use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

use super::Result;

/// A coordinator as its leases name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Drawn at start: a restarted coordinator is a new holder.
    pub id: Uuid,
    /// For people: hostname and pid.
    pub name: String,
}

impl Holder {
    /// This process as a lease holder: a new id per start, and `hostname/pid` for people.
    pub fn this_process() -> Holder {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "coordinator".into());
        Holder {
            id: Uuid::new_v4(),
            name: format!("{hostname}/{}", std::process::id()),
        }
    }
}

/// A lease this coordinator still holds after a renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub host_id: i64,
    /// Set: an operator's command on some coordinator asks the owner to end the session.
    pub revoked: Option<String>,
}

/// Takes `host_id`'s lease for session `generation` of `holder` for `ttl`:
/// when nobody holds it, when its lease expired (its coordinator died), or
/// when `holder` itself holds it from an earlier session. False while another
/// coordinator holds it live. The first step of [`super::sessions::start`]
/// (`functions/cipherfleet_acquire_lease.sql`), here on its own; the
/// lease is not welcomed yet ([`welcome`]).
pub async fn acquire(
    db: impl PgExecutor<'_>,
    host_id: i64,
    holder: &Holder,
    generation: u64,
    ttl: Duration,
) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT cipherfleet_acquire_lease($1, $2, $3, $4, $5, false)")
            .bind(host_id)
            .bind(holder.id)
            .bind(generation as i64)
            .bind(&holder.name)
            .bind(ttl.as_secs_f64())
            .fetch_one(db)
            .await?,
    )
}

/// Extends the leases of `sessions` (host, generation) held by `holder` by
/// `ttl`, in one statement; returns those still held (even if a slow tick let
/// one lapse: nobody took it over meanwhile). A lease that is not
/// returned was lost (expired and taken over, or deleted): its session must
/// end. A revoked lease is returned with its reason and not extended.
pub async fn renew(
    db: impl PgExecutor<'_>,
    holder: &Holder,
    sessions: &[(i64, u64)],
    ttl: Duration,
) -> Result<Vec<Held>> {
    if sessions.is_empty() {
        return Ok(Vec::new());
    }
    let hosts: Vec<i64> = sessions.iter().map(|s| s.0).collect();
    let generations: Vec<i64> = sessions.iter().map(|s| s.1 as i64).collect();
    let rows: Vec<(i64, Option<String>)> = sqlx::query_as(
        "UPDATE host_leases l SET expires_at = CASE WHEN l.revoked IS NULL \
             THEN now() + $4 * interval '1 second' ELSE l.expires_at END \
         FROM UNNEST($2::bigint[], $3::bigint[]) AS s(host_id, generation) \
         WHERE l.host_id = s.host_id AND l.generation = s.generation AND l.coordinator = $1 \
         RETURNING l.host_id, l.revoked",
    )
    .bind(holder.id)
    .bind(hosts)
    .bind(generations)
    .bind(ttl.as_secs_f64())
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(host_id, revoked)| Held { host_id, revoked })
        .collect())
}

/// Session `generation` of `holder` was welcomed: from now on its host counts
/// as online ([`live_hosts`]). False if it no longer holds the lease.
pub async fn welcome(db: impl PgExecutor<'_>, host_id: i64, holder: &Holder, generation: u64) -> Result<bool> {
    on_session(
        db,
        "UPDATE host_leases SET welcomed = true WHERE host_id = $1 AND coordinator = $2 AND generation = $3",
        host_id,
        holder,
        generation,
    )
    .await
}

/// Gives back the lease of session `generation` of `holder`, if it still
/// holds it; a newer session's lease is left alone.
pub async fn release(db: impl PgExecutor<'_>, host_id: i64, holder: &Holder, generation: u64) -> Result<bool> {
    on_session(
        db,
        "DELETE FROM host_leases WHERE host_id = $1 AND coordinator = $2 AND generation = $3",
        host_id,
        holder,
        generation,
    )
    .await
}

/// Runs `statement` (host `$1`, coordinator `$2`, generation `$3`) on the lease
/// of one session; true if that session still held it.
async fn on_session(
    db: impl PgExecutor<'_>,
    statement: &'static str,
    host_id: i64,
    holder: &Holder,
    generation: u64,
) -> Result<bool> {
    let done = sqlx::query(statement)
        .bind(host_id)
        .bind(holder.id)
        .bind(generation as i64)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Gives back every lease of `holder` (a clean shutdown: its agents may
/// reconnect to another coordinator at once). Returns how many there were.
pub async fn release_all(db: impl PgExecutor<'_>, holder: &Holder) -> Result<u64> {
    let done = sqlx::query("DELETE FROM host_leases WHERE coordinator = $1")
        .bind(holder.id)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// Ends every lease of the coordinators `ids` at once: they are known dead
/// (`cluster::take_over`), so their hosts need not wait for the leases to
/// expire. Returns how many there were.
pub async fn end_all_of(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<u64> {
    let done = sqlx::query("DELETE FROM host_leases WHERE coordinator = ANY($1)")
        .bind(ids)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// Forgets every lease (a private PostgreSQL cluster: no other coordinator
/// can be using it, so leases left there are of this coordinator's earlier run).
pub async fn clear(db: impl PgExecutor<'_>) -> Result<u64> {
    Ok(sqlx::query("DELETE FROM host_leases")
        .execute(db)
        .await?
        .rows_affected())
}

/// Asks the owner of `host_id`'s live lease, wherever it runs, to end the
/// session with `reason` (at its next renewal). False when no live lease.
pub async fn revoke(db: impl PgExecutor<'_>, host_id: i64, reason: &str) -> Result<bool> {
    let done = sqlx::query("UPDATE host_leases SET revoked = $2 WHERE host_id = $1 AND expires_at > now()")
        .bind(host_id)
        .bind(reason)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Hosts with a live lease of a welcomed session anywhere: the hosts online in the cluster.
pub async fn live_hosts(db: impl PgExecutor<'_>) -> Result<Vec<i64>> {
    Ok(
        sqlx::query_scalar("SELECT host_id FROM host_leases WHERE expires_at > now() AND welcomed ORDER BY host_id")
            .fetch_all(db)
            .await?,
    )
}

/// Whether `host_id` has a live lease of a welcomed session anywhere.
pub async fn is_live(db: impl PgExecutor<'_>, host_id: i64) -> Result<bool> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM host_leases WHERE host_id = $1 AND expires_at > now() AND welcomed)",
    )
    .bind(host_id)
    .fetch_one(db)
    .await?)
}

/// Live leases per coordinator (name, count), for `/metrics`.
pub async fn count_by_holder(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT coordinator_name, count(*) FROM host_leases WHERE expires_at > now() \
         GROUP BY coordinator_name ORDER BY coordinator_name",
    )
    .fetch_all(db)
    .await?)
}
