//! Storage: every query the coordinator makes, one file per table or aggregate.
//! Functions take a pool when they need a transaction of their own, any
//! executor (pool, connection, transaction) otherwise. SQL is checked at run
//! time; values always travel as bind parameters.
//!
//! - [`hosts`]: machines and their hello (`upsert_host_with_facts`).
//! - [`snapshots`]: the history of each host's facts.
//! - [`sessions`]: agent connections.
//! - [`campaigns`]: suites run on a set of hosts, and their progress.
//! - [`jobs`]: the queue — claim, start, fail, requeue after a lost agent.
//! - [`results`]: idempotent result writes; one stored result, the total.
//! - [`points`]: points as bind arrays, and the latest result of each point on each host (what the report reads).
//! - [`matrix`]: the compare and modes pages' reads of those points.
//! - [`capacity`]: per-class measurements at one size, for the capacity planner.
//! - [`findings`]: derived findings, open and resolved, and their counts.
//! - [`series`]: what the finding deriver reads — current facts, latest results per series.
//! - [`campaign_summaries`]: campaigns with their job counts, as the report lists them.
//! - [`host_results`]: a host's results page by page, and its key algorithms over time.
//! - [`fallback`]: both paths of each host side by side, and findings of any status (the fallback page).

pub mod campaign_summaries;
pub mod campaigns;
pub mod capacity;
pub mod fallback;
pub mod findings;
pub mod host_results;
pub mod hosts;
pub mod jobs;
pub mod matrix;
pub mod points;
pub mod results;
pub mod series;
pub mod sessions;
pub mod snapshots;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
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
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Connects to `url` and brings the schema up to date.
pub async fn connect(url: &str) -> Result<PgPool> {
    let pool = PgPoolOptions::new().max_connections(10).connect(url).await?;
    crate::MIGRATOR.run(&pool).await?;
    Ok(pool)
}
