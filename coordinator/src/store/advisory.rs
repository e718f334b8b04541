//! Advisory locks: what runs once across the cluster. Keys are fixed numbers
//! in one place, so two tasks never share one by accident.

use sqlx::{PgConnection, PgExecutor};

use super::Result;

/// A cluster-wide lock, by what it guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Held for a coordinator's life on a connection of its own: the leader runs
    /// the cluster's sweeps (queued time to live, orphaned sessions) and the
    /// whole-fleet findings passes.
    Leader,
    /// Taken by every findings pass for its reconciling transaction, so two
    /// coordinators' passes over the same hosts take turns.
    Findings,
}

impl Lock {
    /// The key: "cfleet" in ASCII, then the lock's number.
    const fn key(self) -> i64 {
        const BASE: i64 = 0x6366_6c65_6574 << 8;
        match self {
            Lock::Leader => BASE + 1,
            Lock::Findings => BASE + 2,
        }
    }
}

/// Takes `lock` for the connection's session without waiting; true if taken
/// (or already held by this session: it is re-entrant, and a dropped
/// connection releases it).
pub async fn try_lock_session(conn: &mut PgConnection, lock: Lock) -> Result<bool> {
    Ok(sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(lock.key())
        .fetch_one(conn)
        .await?)
}

/// Takes `lock` until the end of the current transaction, waiting for it.
pub async fn lock_transaction(tx: impl PgExecutor<'_>, lock: Lock) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(lock.key())
        .execute(tx)
        .await?;
    Ok(())
}

/// Takes the claim lock of each of `host_ids` until the end of the current
/// transaction, waiting for them: claims and adoptions of one host take
/// turns, so each sees the other's outcome ([`super::jobs`]). The locks are
/// taken in key order, so two callers locking overlapping hosts never wait on
/// each other crosswise. They live in PostgreSQL's two-key advisory space,
/// which does not overlap the one-key space of [`Lock`], and a host's key is
/// its id's low 31 bits: two hosts that share one only take turns too. One
/// definition, in SQL (`functions/cipherfleet_lock_hosts.sql`), which a
/// session's start calls as well. Unlike the host's row, this lock does not
/// wait for heartbeat flushes or hellos writing to the row.
pub async fn lock_hosts_transaction(tx: &mut PgConnection, host_ids: &[i64]) -> Result<()> {
    if host_ids.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT cipherfleet_lock_hosts($1)")
        .bind(host_ids)
        .execute(tx)
        .await?;
    Ok(())
}
