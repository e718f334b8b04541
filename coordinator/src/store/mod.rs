//! Storage: the tables, one file per table or aggregate. It hands out domain
//! types ([`crate::domain`]) and calls nothing above it: the report's
//! read-models live in [`crate::report`]. Functions take a pool when they
//! need a transaction of their own, any
//! executor (pool, connection, transaction) otherwise. SQL is checked at run
//! time; values always travel as bind parameters.
//!
//! - [`hosts`]: machines and their hello (`upsert_host_with_facts`).
//! - [`identity`]: who a host is — enrollment, its credential, reset and retirement.
//! - [`snapshots`]: the history of each host's facts.
//! - [`sessions`]: agent connections.
//! - [`leases`]: which coordinator owns each host's session (several coordinators on one database).
//! - [`coordinators`]: the processes behind the leases, so a dead one's leases end at once.
//! - [`advisory`]: advisory locks, for what runs once across the cluster.
//! - [`campaigns`]: suites run on a set of hosts, and their progress.
//! - [`capabilities`]: the paths each host's agent can run, and the campaign points skipped for lack of one.
//! - [`jobs`]: the queue — claim, start, fail, requeue after a lost agent.
//! - [`results`]: idempotent result writes; one stored result, the total.
//! - [`points`]: points as bind arrays, and the latest result of each point on each host (what the report reads).
//! - [`rollups`]: results past the raw window folded into daily and monthly summaries, and a host's history read from both.
//! - [`findings`]: derived findings, open and resolved, and their counts.
//! - [`series`]: what the finding deriver reads — current facts, latest results per series, what ran last per accelerated point.
//! - [`schedules`]: schedules, their due times and firings.
//! - [`verifications`]: the last verification campaign per host, and the points it ran before.
//! - [`outbox`]: findings events waiting for the webhook.
//! - [`schema`]: the migrations and the stored procedures, applied at start.
//! - [`raw`]: JSON members as slices of the text, compared without a tree.

pub mod advisory;
pub mod campaign_folds;
pub mod campaigns;
pub mod capabilities;
pub mod coordinators;
pub mod findings;
pub mod hosts;
pub mod identity;
pub mod jobs;
pub mod leases;
pub mod outbox;
pub mod partitions;
pub mod points;
pub mod raw;
pub mod results;
pub mod rollups;
pub mod schedules;
pub mod schema;
pub mod series;
pub mod sessions;
pub mod snapshots;
pub mod verifications;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use uuid::Uuid;

/// Errors of the storage layer. Callers branch on the job variants (an agent
/// reporting on a job that is not its own); everything else is a database failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("job {0} does not exist")]
    UnknownJob(Uuid),
    #[error("job {job} is not assigned to host {host}")]
    JobOfAnotherHost { job: Uuid, host: i64 },
    #[error("applying database migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// TLS to PostgreSQL: the server's certificate was refused. Retrying
    /// cannot help; the operator's settings or the server's certificate must change.
    #[error(
        "TLS to PostgreSQL: the server's certificate was refused ({0}); check that sslrootcert is the CA \
         that signed it and that the certificate names the host dialled (sslmode=verify-ca does not check the name)"
    )]
    Certificate(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl Error {
    /// `e` from opening a connection: a refused server certificate is told
    /// apart (sqlx reports it as an I/O error, as it does a network that is away).
    fn connecting(e: sqlx::Error) -> Error {
        if let sqlx::Error::Io(io) = &e
            && let Some(tls) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<tokio_rustls::rustls::Error>())
            && matches!(tls, tokio_rustls::rustls::Error::InvalidCertificate(_))
        {
            return Error::Certificate(tls.to_string());
        }
        Error::Database(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A mistake in our own SQL or row types, not a database that is away:
    /// SQLSTATE class 42 (syntax error or access rule violation — an undefined
    /// column, table or function, a type mismatch) or a row that does not
    /// decode into its struct. Retrying cannot help, so it is answered as an
    /// internal error and logged as a bug. The one place this is decided.
    pub fn is_query_bug(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(e)) => e.code().is_some_and(|c| c.starts_with("42")),
            Error::Database(
                sqlx::Error::ColumnDecode { .. }
                | sqlx::Error::ColumnNotFound(_)
                | sqlx::Error::ColumnIndexOutOfBounds { .. }
                | sqlx::Error::TypeNotFound { .. },
            ) => true,
            _ => false,
        }
    }

    /// The database is away for now (not reachable, restarting, shutting down,
    /// or no connection came free in time): the same work can succeed later.
    /// A closed pool is not away: it is this coordinator shutting down.
    pub fn is_database_away(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(e)) => e
                .code()
                // 08: connection exception; 57P01-03: shutting down or starting up.
                .is_some_and(|c| c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03")),
            Error::Database(
                sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed,
            ) => true,
            _ => false,
        }
    }

    /// A value the database refuses to hold, whatever the query or the
    /// database's state: SQLSTATE class 22 (data exception: text with a NUL,
    /// `\u0000` in JSON, a number out of range) or a violated check constraint
    /// (23514, a negative figure). It came from what a client sent, so it is
    /// answered as that client's mistake, never as an outage worth a retry:
    /// the same value would be refused again. The one place this is decided.
    pub fn is_bad_input(&self) -> bool {
        self.refused_value().is_some()
    }

    /// What the database said of a value it refuses ([`Error::is_bad_input`]),
    /// with the constraint or column it names.
    pub fn refused_value(&self) -> Option<String> {
        let Error::Database(sqlx::Error::Database(e)) = self else {
            return None;
        };
        let code = e.code()?;
        if !(code.starts_with("22") || code == "23514") {
            return None;
        }
        let pg = e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>();
        let named = pg.and_then(|pg| pg.constraint().or(pg.column()));
        Some(match named {
            Some(name) => format!("{} ({name})", e.message()),
            None => e.message().to_string(),
        })
    }

    /// The SQLSTATE PostgreSQL answered with, if the error came from the server.
    pub fn sqlstate(&self) -> Option<String> {
        match self {
            Error::Database(sqlx::Error::Database(e)) => e.code().map(String::from),
            _ => None,
        }
    }
}

/// Longest wait for a connection from the pool: past it a query fails
/// (`UNAVAILABLE` to the agent, which retries) instead of queueing for ever.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a statement may run before PostgreSQL cancels it.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one fold of retention ([`rollups`], [`campaign_folds`]) may
/// run: a day of a large fleet's results can take longer than the pool's
/// [`STATEMENT_TIMEOUT`] (docs/performance.md, "A year of history under
/// retention"), and would then fail on every pass. It runs in the background
/// and locks only rows no one else writes.
const FOLD_TIMEOUT: &str = "30min";

/// A transaction whose statements may run [`FOLD_TIMEOUT`].
async fn fold_transaction(pool: &PgPool) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(FOLD_TIMEOUT)
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// Connects to `url` and brings the schema up to date ([`schema::apply`]:
/// beside a newer coordinator, its stored procedures stay, and a warning says
/// so). The pool has
/// [`ACQUIRE_TIMEOUT`] and [`STATEMENT_TIMEOUT`]; migrations run before, on a
/// connection of their own without the statement timeout.
pub async fn connect(url: &str) -> Result<PgPool> {
    let options: PgConnectOptions = url.parse()?;
    let mut migrating = options.connect().await.map_err(Error::connecting)?;
    if let schema::Functions::LeftToNewer { database, known } = schema::apply(&mut migrating).await? {
        tracing::warn!(
            database_migration = database,
            known_migration = known,
            "the database has migration {database}, newer than this build's {known}: a newer coordinator \
             shares it, so its stored procedures stay as it applied them; upgrade this coordinator"
        );
    }
    migrating.close().await?;
    let options = options.options([("statement_timeout", STATEMENT_TIMEOUT.as_millis())]);
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(Error::connecting)?;
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use sqlx::error::{DatabaseError, ErrorKind};

    use super::*;

    /// What PostgreSQL answers, reduced to what the classification reads.
    #[derive(Debug)]
    struct Answer(&'static str);

    impl std::fmt::Display for Answer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for Answer {}

    impl DatabaseError for Answer {
        fn message(&self) -> &str {
            "from the server"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn answered(code: &'static str) -> Error {
        Error::Database(sqlx::Error::from(Answer(code)))
    }

    #[test]
    fn class_42_answers_are_query_bugs_and_outages_are_not() {
        let cases = [
            ("42703", true),  // undefined_column
            ("42P01", true),  // undefined_table
            ("42883", true),  // undefined_function
            ("42804", true),  // datatype_mismatch
            ("42601", true),  // syntax_error
            ("42501", true),  // insufficient_privilege
            ("57P01", false), // admin_shutdown: the server is restarting
            ("08006", false), // connection_failure
            ("53300", false), // too_many_connections
            ("40001", false), // serialization_failure
            ("23505", false), // unique_violation: callers branch on it
            ("22P02", false), // invalid_text_representation: a value, not the query
        ];
        for (code, bug) in cases {
            let e = answered(code);
            assert_eq!(e.sqlstate().as_deref(), Some(code));
            assert_eq!(e.is_query_bug(), bug, "SQLSTATE {code}");
        }
    }

    #[test]
    fn values_the_database_refuses_are_bad_input_and_nothing_else_is() {
        let cases = [
            ("22021", true),  // character_not_in_repertoire: a NUL in text
            ("22P05", true),  // untranslatable_character: \u0000 in jsonb
            ("22003", true),  // numeric_value_out_of_range
            ("22001", true),  // string_data_right_truncation
            ("22P02", true),  // invalid_text_representation
            ("23514", true),  // check_violation: a negative figure
            ("23505", false), // unique_violation: callers branch on it
            ("23503", false), // foreign_key_violation: a race or our bug, not the input
            ("42703", false), // undefined_column: our bug
            ("57P01", false), // admin_shutdown: the database is away
            ("08006", false), // connection_failure
            ("40P01", false), // deadlock_detected: worth a retry
            ("57014", false), // query_canceled: the statement timeout
        ];
        for (code, bad) in cases {
            let e = answered(code);
            assert_eq!(e.is_bad_input(), bad, "SQLSTATE {code}");
            assert_eq!(e.refused_value().is_some(), bad, "SQLSTATE {code}");
            if bad {
                assert!(!e.is_query_bug() && !e.is_database_away(), "SQLSTATE {code}");
            }
        }
        assert!(!Error::from(sqlx::Error::PoolTimedOut).is_bad_input());
    }

    #[test]
    fn rows_that_do_not_fit_their_struct_are_query_bugs() {
        let bugs = [
            sqlx::Error::ColumnNotFound("algorithm".into()),
            sqlx::Error::ColumnIndexOutOfBounds { index: 3, len: 2 },
            sqlx::Error::TypeNotFound {
                type_name: "point".into(),
            },
            sqlx::Error::ColumnDecode {
                index: "\"status\"".into(),
                source: "unknown job status \"paused\"".into(),
            },
        ];
        for e in bugs {
            let e = Error::from(e);
            assert!(e.is_query_bug(), "{e}");
            assert_eq!(e.sqlstate(), None);
        }
    }

    #[test]
    fn a_database_that_is_away_is_no_query_bug() {
        let away = [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Io(std::io::ErrorKind::ConnectionReset.into()),
            sqlx::Error::RowNotFound,
        ];
        for e in away {
            assert!(!Error::from(e).is_query_bug());
        }
        let job = Uuid::nil();
        assert!(!Error::UnknownJob(job).is_query_bug());
        assert!(!Error::JobOfAnotherHost { job, host: 1 }.is_query_bug());
    }
}
