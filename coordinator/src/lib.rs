//! The cipherfleet coordinator: pushes benchmark jobs to agents and stores
//! every result in PostgreSQL.
//!
//! - [`pg`]: a private PostgreSQL cluster run from the system's binaries, for
//!   a coordinator started without `--database-url` (one per `--data-dir`, locked).
//! - [`analysis`]: fallback and slow-path findings as pure functions.
//! - [`findings`]: the deriver — runs the analysis over stored facts and results after
//!   results and campaigns, and keeps the `findings` table (open → resolved) in step.
//! - [`metrics`]: `/metrics` in the Prometheus text format.
//! - [`guard`]: bounds before a client is known — token buckets and the one
//!   failed-authentication limit for every kind of secret.
//! - [`server`]: `serve` — wires storage, scheduler and services; `run(listeners, shutdown)`.
//! - [`grpc`]: the agents' session stream and the operators' admin API.
//! - [`scheduler`]: connected hosts and dispatch (one job at a time per host), overdue sweeps.
//! - [`cluster`]: several coordinators on one database — host leases, dispatch wake-ups, the leader.
//! - [`launch`]: points × host selector → a campaign and its jobs (admin API, schedules, verification).
//! - [`watch`]: schedules, verification campaigns on fact changes, the findings webhook.
//! - [`ingest`]: agents' results and job starts, queued (bounded) and stored in batches.
//! - [`seen`]: hosts' `last_seen`, coalesced in memory and written in batches.
//! - [`selector`]: which hosts a campaign runs on.
//! - [`auth`]: enrollment and admin tokens (constant-time comparison, never logged).
//! - [`credential`]: per-host credentials — issued at enrollment, stored hashed.
//! - [`attempt`]: which outcome of a job counts (only its current attempt's).
//! - [`tls`]: `--tls-cert` / `--tls-key`, read and checked at start; `--self-signed`;
//!   plain gRPC only on loopback unless `--insecure-plaintext`.
//! - [`web`]: the HTML report, its CSV/JSON API, `/metrics` and `/healthz`.
//! - [`cli`]: `serve`, `campaign start|status|cancel`, `hosts`, `check`, `schedule add|list|remove`.
//! - [`db`]: the storage layer — hosts and their fact history, agent sessions,
//!   campaigns, the job queue and results — over the schema in `migrations/`.

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
pub mod scheduler;
pub mod seen;
pub mod server;
pub mod store;
pub mod tls;
pub mod watch;
pub mod web;

#[cfg(test)]
mod layers;
