//! End to end: the real coordinator binary, real agents (the agent binary,
//! measuring for real, briefly), real gRPC over loopback, a real PostgreSQL.
//! `deploy/build.sh` must have built `target/debug/cipherfleet-agent` first
//! (the test command does).

mod app;
mod campaigns;
#[allow(dead_code)]
#[path = "../db/helpers.rs"]
mod db_helpers;
mod faults;
mod rejections;
mod tls;
