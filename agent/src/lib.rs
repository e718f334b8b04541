//! cipherfleet agent: measures symmetric-crypto performance on the host it runs on.
//!
//! - [`algorithm`]: the benchmarkable algorithms and their OpenSSL-style names.
//! - [`backend`]: which implementation the crypto crates pick here, and the build flavour.
//! - [`probe`]: host facts (CPU, features advertised vs usable, kernel, virtualization).
//! - [`selftest`]: known-answer tests for every algorithm, run before measuring.
//! - [`spec`]: a measurement point (`JobSpec`), its validation, sizes and named suites.
//! - [`kernel`]: one file per cipher family; each turns a spec into a tight per-operation loop body.
//! - [`engine`]: warm-up, timed batches, samples, threads and the object-storage scenario.
//! - [`measurement`]: the versioned result schema (`cipherfleet.measurement/1`).
//! - [`stats`]: median, percentiles, coefficient of variation.
//! - [`worker`]: runs each measurement in a child process with a time limit.
//! - [`report`]: table, JSON and CSV output.
//! - [`wire`]: conversions to and from the gRPC protocol, and the bounds both ends check.
//! - [`daemon`]: `run`, the coordinator session: jobs pushed over gRPC, outcomes spooled until acknowledged.
//! - [`cli`]: the `probe | bench | selftest | run` commands.

pub mod algorithm;
pub mod backend;
pub mod cli;
pub mod daemon;
pub mod engine;
pub mod kernel;
pub mod measurement;
pub mod probe;
pub mod report;
pub mod selftest;
pub mod spec;
pub mod stats;
pub mod wire;
pub mod worker;
