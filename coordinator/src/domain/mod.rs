//! Types and rules that several layers share, with no storage or transport:
//! what the tables hand out and the analysis, the report and the services
//! take in.
//!
//! - [`job`]: a job's status.
//! - [`attempt`]: which outcome of a job counts (only its current attempt's).
//! - [`facts`]: a host's facts as stored — normalised for comparison, and their typed columns.
//! - [`labels`]: a host's labels.
//! - [`latest`]: the latest result of one point on one host, as the report reads it.
//! - [`memory`]: a result's memory figures as stored.
//! - [`selector`]: which hosts a campaign runs on.
//! - [`auth`]: enrollment and admin tokens (constant-time comparison, never logged).
//! - [`credential`]: per-host credentials — issued at enrollment, stored hashed.

pub mod attempt;
pub mod auth;
pub mod credential;
pub mod facts;
pub mod job;
pub mod labels;
pub mod latest;
pub mod memory;
pub mod selector;
