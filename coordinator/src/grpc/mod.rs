//! The gRPC side of the coordinator: the agents' session stream
//! ([`agent::AgentSvc`]) and the operators' admin API ([`admin::AdminSvc`]);
//! each session's bounded queue to its agent ([`crate::scheduler::outbound`]), the rate
//! limit of agents' messages and the answer past the failed-authentication
//! limit ([`rate`], the limit itself in [`crate::guard::auth`]), and the
//! caps on connections, streams and sessions ([`limits`]), the handshakes'
//! turns at the database ([`turns`]) and when each must be answered
//! ([`deadline`]), and pages of the admin API's lists ([`paging`]); the paths
//! a hello says the agent can run ([`capabilities`]).

pub mod admin;
pub mod agent;
mod capabilities;
pub mod deadline;
pub mod limits;
pub mod paging;
pub mod rate;
pub mod turns;

use tonic::Status;

use crate::{ingest, store};

/// Largest message accepted from a client: a measurement with its raw
/// samples and host facts is ~20 KiB; anything near this limit is abuse.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The one conversion point from storage errors to gRPC status: a database
/// that is away is `UNAVAILABLE` (clients retry); a bug in our query
/// ([`store::Error::is_query_bug`]) is `INTERNAL`, logged as an error, since a
/// retry would fail the same way; a value the database refuses to hold
/// ([`store::Error::is_bad_input`]) is `INVALID_ARGUMENT`, the sender's to
/// fix, never "unavailable"; a job of another host is `PERMISSION_DENIED`.
pub fn db_status(e: store::Error) -> Status {
    status_of(&e)
}

fn status_of(e: &store::Error) -> Status {
    match e {
        store::Error::UnknownJob(id) => Status::not_found(format!("job {id} does not exist")),
        store::Error::JobOfAnotherHost { job, .. } => {
            Status::permission_denied(format!("job {job} is not assigned to this host"))
        }
        refused if refused.is_bad_input() => {
            let why = refused.refused_value().unwrap_or_default();
            tracing::info!(sqlstate = refused.sqlstate(), why, "a value the database refuses");
            Status::invalid_argument(format!("a value the coordinator's database cannot store: {why}"))
        }
        bug if bug.is_query_bug() => {
            tracing::error!(sqlstate = bug.sqlstate(), error = %bug, "database query failed: a bug in the query");
            Status::internal("internal error in the coordinator; see its log")
        }
        other => {
            tracing::warn!(error = %other, "database error");
            Status::unavailable("the coordinator's database is unavailable; retry later")
        }
    }
}

/// A result or job start that ingest could not store: the session ends with
/// this status and the agent resends it.
impl From<ingest::Error> for Status {
    fn from(e: ingest::Error) -> Status {
        match e {
            ingest::Error::Stopped => Status::unavailable("the coordinator is shutting down; retry"),
            ingest::Error::Store(e) => status_of(&e),
        }
    }
}
