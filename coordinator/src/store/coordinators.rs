//! `coordinators`: the processes behind the leases' holders. A coordinator
//! registers at start and at every lease renewal ([`register`]); a successor
//! on the same machine reads which of its neighbours' processes are gone
//! ([`on_machine`]), or which registered coordinator listened where it now
//! listens ([`same_listener`]), and ends their leases at once
//! (`leases::end_all_of`). Any coordinator can tell who holds a host's lease
//! and how lately it renewed ([`lease_holder`]).

use std::time::Duration;

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

/// Where a coordinator listens for gRPC: a listening address is one live
/// process's at a time within a network namespace of one boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The inode of `/proc/self/ns/net`; `None`: unknown.
    pub net_namespace: Option<i64>,
    /// The bound gRPC address, as `SocketAddr` prints it.
    pub grpc: String,
}

/// The coordinator holding a host's live lease, as another one sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    pub id: Uuid,
    /// For people: hostname/pid.
    pub name: String,
    /// Its registered process; `None` when it is not registered (forgotten: gone).
    pub process: Option<Process>,
    /// Since it last renewed (was seen); `None` when it is not registered.
    pub silent_for: Option<Duration>,
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

/// Records where `holder` (registered) listens.
pub async fn set_listener(db: impl PgExecutor<'_>, holder: &Holder, listener: &Listener) -> Result<bool> {
    let done = sqlx::query("UPDATE coordinators SET net_namespace = $2, grpc_listen = $3 WHERE id = $1")
        .bind(holder.id)
        .bind(listener.net_namespace)
        .bind(&listener.grpc)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The other coordinators registered as listening where `listener` now
/// listens, in the same boot: dead, since this one could bind it. None if
/// the boot or the network namespace is unknown.
pub async fn same_listener(
    db: impl PgExecutor<'_>,
    holder: &Holder,
    boot_id: Option<Uuid>,
    listener: &Listener,
) -> Result<Vec<Uuid>> {
    let (Some(boot_id), Some(net_namespace)) = (boot_id, listener.net_namespace) else {
        return Ok(Vec::new());
    };
    Ok(sqlx::query_scalar(
        "SELECT id FROM coordinators WHERE boot_id = $1 AND net_namespace = $2 AND grpc_listen = $3 AND id <> $4 \
         ORDER BY started_at",
    )
    .bind(boot_id)
    .bind(net_namespace)
    .bind(&listener.grpc)
    .bind(holder.id)
    .fetch_all(db)
    .await?)
}

/// Who holds `host_id`'s live lease, if a coordinator other than `holder` does.
pub async fn lease_holder(db: impl PgExecutor<'_>, host_id: i64, holder: &Holder) -> Result<Option<LeaseHolder>> {
    type Row = (
        Uuid,
        String,
        Option<i32>,
        Option<Uuid>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<f64>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT l.coordinator, l.coordinator_name, c.pid, c.boot_id, c.pid_namespace, c.uid, c.pid_start, \
             extract(epoch FROM now() - c.seen_at)::float8 \
         FROM host_leases l LEFT JOIN coordinators c ON c.id = l.coordinator \
         WHERE l.host_id = $1 AND l.expires_at > now() AND l.coordinator <> $2",
    )
    .bind(host_id)
    .bind(holder.id)
    .fetch_optional(db)
    .await?;
    Ok(row.map(
        |(id, name, pid, boot_id, pid_namespace, uid, pid_start, silent)| LeaseHolder {
            id,
            name,
            process: pid.map(|pid| Process {
                boot_id,
                pid_namespace,
                uid,
                pid,
                pid_start,
            }),
            silent_for: silent.map(|s| Duration::from_secs_f64(s.max(0.0))),
        },
    ))
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
