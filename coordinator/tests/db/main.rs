//! Storage tests on a real PostgreSQL: a private cluster for this binary and a
//! fresh migrated database per test (see `helpers`). Needs the PostgreSQL
//! server binaries (`apt-get install postgresql`).

mod backup;
mod cluster;
mod errors;
mod every_query;
mod fallback_views;
mod findings;
mod helpers;
mod host_summaries;
mod hosts;
mod ingest;
mod jobs;
mod migrations;
mod provider_views;
mod providers;
mod results;
mod retention;
mod tls;
mod upgrade;
