//! `coordinators`: the processes behind the leases' holders. A coordinator
//! registers at start and at every lease renewal ([`register`]); a successor
//! on the same machine reads which of its neighbours' processes are gone
//! ([`on_machine`]) and ends their leases at once (`leases::end_all_of`).

use sqlx::PgExecutor;
use uuid::Uuid;

use super::Result;
use super::leases::Holder;

/// Where a coordinator runs, as far as telling its process from any other goes.
/// A field that could not be read is `None`, and a process with any `None`
/// is never judged dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// The kernel's boot: a PID means one process only within one boot.
    pub boot_id: Option<Uuid>,
    /// The PID namespace: only within it is the PID the same process.
    pub pid_namespace: Option<i64>,
    /// The effective user: `/proc` may hide other users' processes (`hidepid`).
    pub uid: Option<i64>,
    pub pid: i32,
    /// Start time in clock ticks after boot: the PID and this are one process.
    pub pid_start: Option<i64>,
}

/// A coordinator registered on the same machine (boot, PID namespace, user).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Neighbour {
    pub id: Uuid,
    pub name: String,
    pub pid: i32,
    pub pid_start: i64,
}

/// Registers `holder` as `process`, or marks it seen now if it is registered
/// (each lease renewal: a row seen lately is of a coordinator that may live).
pub async fn register(db: impl PgExecutor<'_>, holder: &Holder, process: &Process) -> Result<()> {
    sqlx::query(
        "INSERT INTO coordinators (id, name, boot_id, pid_namespace, uid, pid, pid_start) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (id) DO UPDATE SET seen_at = now()",
    )
    .bind(holder.id)
    .bind(&holder.name)
    .bind(process.boot_id)
    .bind(process.pid_namespace)
    .bind(process.uid)
    .bind(process.pid)
    .bind(process.pid_start)
    .execute(db)
    .await?;
    Ok(())
}

/// The other coordinators registered where `process` runs (same boot, PID
/// namespace and user): their PIDs can be checked here. None if a field of
/// `process` is unknown.
pub async fn on_machine(db: impl PgExecutor<'_>, holder: &Holder, process: &Process) -> Result<Vec<Neighbour>> {
    let (Some(boot_id), Some(pid_namespace), Some(uid)) = (process.boot_id, process.pid_namespace, process.uid) else {
        return Ok(Vec::new());
    };
    Ok(sqlx::query_as(
        "SELECT id, name, pid, pid_start FROM coordinators \
         WHERE boot_id = $1 AND pid_namespace = $2 AND uid = $3 AND pid_start IS NOT NULL AND id <> $4 \
         ORDER BY started_at",
    )
    .bind(boot_id)
    .bind(pid_namespace)
    .bind(uid)
    .bind(holder.id)
    .fetch_all(db)
    .await?)
}

/// Forgets the coordinators `ids` (dead, or `holder` itself at a clean shutdown).
pub async fn forget(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<u64> {
    Ok(sqlx::query("DELETE FROM coordinators WHERE id = ANY($1)")
        .bind(ids)
        .execute(db)
        .await?
        .rows_affected())
}

/// Forgets coordinators not seen for an hour (they died on another machine,
/// or in a PID namespace of their own): too old for anything to take over.
pub async fn forget_unseen(db: impl PgExecutor<'_>) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM coordinators WHERE seen_at < now() - interval '1 hour'")
            .execute(db)
            .await?
            .rows_affected(),
    )
}
