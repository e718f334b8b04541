//! The cipherfleet coordinator: pushes benchmark jobs to agents and stores
//! every result in PostgreSQL. Its modules are layers, each importing only
//! from its own layer and those below (bottom first; `layers.rs` checks it):
//!
//! 1. Infrastructure, importing nothing of the crate: [`pg`] (a private
//!    PostgreSQL cluster from the system's binaries, for a coordinator started
//!    without `--database-url`), [`tls`] (`--tls-cert`/`--tls-key`,
//!    `--self-signed`; plain gRPC only on loopback unless `--insecure-plaintext`),
//!    [`guard`] (bounds before a client is known: connection admission, token
//!    buckets, the one failed-authentication limit for every kind of secret).
//! 2. [`domain`]: types and rules several layers share — job status and the
//!    attempt rule, stored facts, labels, the latest-result row, selectors,
//!    tokens, per-host credentials.
//! 3. [`analysis`]: pure functions — fallback reasons, slow paths, classes,
//!    capacity, the statistics of a cell.
//! 4. [`store`]: the tables, and the schema (migrations and stored procedures).
//! 5. [`report`]: the pages' read-models and their background refresh.
//! 6. The work: [`ingest`] (results and job starts, batched), [`scheduler`]
//!    (connected hosts and dispatch, one job at a time per host), [`findings`]
//!    (the deriver), [`watch`] (schedules, verification on change, the
//!    webhook), [`cluster`] (several coordinators on one database), [`seen`]
//!    (hosts' `last_seen`, coalesced), [`launch`] (points × selector → a campaign),
//!    [`retention`] (raw results past `--keep-raw` folded into daily and monthly summaries).
//! 7. The boundaries: [`grpc`] (the agents' session stream, the admin API),
//!    [`web`] (the HTML report, its CSV/JSON API, `/healthz`), [`metrics`]
//!    (`/metrics` in the Prometheus text format).
//! 8. [`server`]: `serve` wires it all; `run(listeners, shutdown)`.
//! 9. [`cli`]: `serve`, `campaign start|status|cancel`, `hosts`, `check`, `schedule add|list|remove`.

pub mod analysis;
pub mod cli;
pub mod cluster;
pub mod domain;
pub mod findings;
pub mod grpc;
pub mod guard;
pub mod ingest;
pub mod launch;
pub mod metrics;
pub mod pg;
pub mod report;
pub mod retention;
pub mod scheduler;
pub mod seen;
pub mod server;
pub mod store;
pub mod tls;
pub mod watch;
pub mod web;

#[cfg(test)]
mod layers;
