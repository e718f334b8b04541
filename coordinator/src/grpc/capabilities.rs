//! What a `Hello` says the agent can run (`Capabilities.paths`): stored for the
//! host, and its queued jobs on a path it lacks skipped before the session's
//! first dispatch, so a host without the software-build sibling is never sent
//! a software-path job that would fail at once.

use cipherfleet_core::path::Path;
use cipherfleet_core::provider::facts::Capability;
use cipherfleet_proto::v1;
use serde_json::Value;
use sqlx::PgPool;
use tonic::Status;
use uuid::Uuid;

use super::db_status;
use crate::store;
use crate::watch::verify;

/// Stores the paths the agent advertised and skips the host's queued jobs on
/// the others ([`store::capabilities::advertise`]), except the one it runs and
/// those it holds outcomes of. `validate_hello` has refused unknown or
/// repeated names with `INVALID_ARGUMENT` already. Returns the change as
/// [`verify::paths_change`] when the paths differ from what the host said before.
pub(super) async fn advertised(pool: &PgPool, hello: &v1::Hello, host_id: i64) -> Result<Option<Value>, Status> {
    let paths = paths_of(hello);
    if paths.is_empty() {
        tracing::warn!(
            host = host_id,
            "the agent offers no path: every point queued for it is skipped"
        );
    }
    let keep = held_jobs(hello);
    let done = store::capabilities::advertise(pool, host_id, &paths, &keep)
        .await
        .map_err(db_status)?;
    if done.skipped > 0 {
        tracing::info!(
            host = host_id, ?paths, skipped = done.skipped, finished = ?done.finished,
            "queued jobs on paths the agent lacks are skipped"
        );
    }
    Ok(done.changed_from.map(|before| {
        tracing::info!(host = host_id, ?before, after = ?paths, "the agent's paths changed");
        verify::paths_change(&before, &paths)
    }))
}

/// The jobs the agent still runs or holds the outcome of: never skipped.
fn held_jobs(hello: &v1::Hello) -> Vec<Uuid> {
    std::iter::once(&hello.running_job_id)
        .chain(&hello.spooled_job_ids)
        .filter_map(|id| Uuid::parse_str(id).ok())
        .collect()
}

/// Skips the host's queued jobs on a provider its agent cannot run by the
/// providers' capabilities in the facts of its hello (`facts`), with the
/// agent's reason ([`store::capabilities::skip_unrunnable_providers`]): a
/// campaign is checked against the facts it was created with, and an agent
/// that lost a provider since says so here.
pub(super) async fn providers_advertised(
    pool: &PgPool,
    hello: &v1::Hello,
    host_id: i64,
    facts: &Value,
) -> Result<(), Status> {
    let capabilities: Option<Vec<Capability>> = facts
        .pointer("/providers/capabilities")
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    let (skipped, finished) =
        store::capabilities::skip_unrunnable_providers(pool, host_id, capabilities.as_deref(), &held_jobs(hello))
            .await
            .map_err(db_status)?;
    if skipped > 0 {
        tracing::info!(
            host = host_id, skipped, finished = ?finished,
            "queued jobs on providers the agent lacks are skipped"
        );
    }
    Ok(())
}

/// The paths `hello` advertises, in its order.
fn paths_of(hello: &v1::Hello) -> Vec<Path> {
    let advertised = hello
        .capabilities
        .as_ref()
        .map(|c| c.paths.as_slice())
        .unwrap_or_default();
    advertised.iter().filter_map(|p| p.parse().ok()).collect()
}

/// Whether the paths stored for the host (`hosts.paths`, `None` before it
/// said) are the ones `hello` advertises: [`advertised`] would change nothing,
/// since the host's queued jobs were made for these paths.
pub(super) fn as_stored(hello: &v1::Hello, stored: Option<&[String]>) -> bool {
    stored.is_some_and(|stored| {
        let advertised = paths_of(hello);
        stored
            .iter()
            .map(String::as_str)
            .eq(advertised.iter().map(|p| p.as_str()))
    })
}
