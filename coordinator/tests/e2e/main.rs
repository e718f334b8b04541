//! End to end: the real coordinator binary, real agents (the agent binary,
//! measuring for real, briefly), real gRPC over loopback, a real PostgreSQL.
//! `deploy/build.sh` must have built `target/debug/cipherfleet-agent` (and the
//! simulator, `cipherfleet-sim`) first (the test command does).

mod app;
mod attack;
mod backup;
mod bounds;
mod browser;
mod campaigns;
mod chromium;
mod cluster;
#[allow(dead_code)]
#[path = "../db/helpers.rs"]
mod db_helpers;
mod detection;
mod faults;
mod findings;
mod fleet;
mod guessing;
mod hostile;
mod html;
mod http;
mod identity;
mod idle;
mod mtls;
mod old_kernel;
mod operator_cli;
mod pace;
mod paths;
mod providers;
mod rejections;
mod report_access;
mod report_capacity;
mod report_compare;
mod report_fallback;
mod report_fleet;
mod report_memory;
mod report_paging;
mod report_providers;
mod retention;
mod scenarios;
mod simulate;
mod tls;
mod transport;
mod upgrade;
mod watch;
mod xss;
