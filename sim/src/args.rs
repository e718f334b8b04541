//! The simulator's flags (the connection flags are the agent's own,
//! [`ConnectArgs`]) and the configuration [`crate::run`] takes, checked.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cipherfleet_agent::daemon::{self, ConfigError, ConnectArgs};
use cipherfleet_core::wire;
use cipherfleet_proto::v1;
use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::host::{Behaviour, Fleet};
use crate::stats::Stats;

/// The label every simulated host carries (the coordinator's `marks::SIMULATED_LABEL`).
pub const SIMULATED_LABEL: &str = "simulated";
/// Most simulated hosts in one process.
pub const MAX_COUNT: u64 = 100_000;

/// Flags of `cipherfleet-sim`.
#[derive(Parser, Debug)]
#[command(
    name = "cipherfleet-sim",
    version,
    about = "Simulate many cipherfleet agents in one process (load tests, demos): each with its own \
             connection, name and host credential, labelled simulated=true, answering jobs with synthetic results",
    after_help = "Exits 0 after SIGTERM/SIGINT or --duration, 2 on a usage error, 3 when the coordinator \
                  refused every simulated host."
)]
pub struct Args {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Simulated hosts in this process (1 to 100000); each holds one connection (one open file).
    #[arg(long, default_value_t = 100)]
    pub count: u64,
    /// Host names are this prefix and the index in five digits: sim-00000, sim-00001, …
    #[arg(long, value_name = "PREFIX", default_value = "sim-")]
    pub name_prefix: String,
    /// Index of the first host, so that several simulators can share a coordinator without
    /// sharing hosts (e.g. --first 10000 --count 10000). An index always gives the same template.
    #[arg(long, value_name = "INDEX", default_value_t = 0)]
    pub first: u64,
    /// Source address of the hosts' connections (repeatable, or comma-separated): host index i
    /// dials from the (i mod n)-th. Connections to one coordinator address share one source
    /// address's ephemeral ports (about 28,000 with Linux's default net.ipv4.ip_local_port_range),
    /// so 50,000 hosts on one machine need two or more: on Linux every 127.0.0.0/8 address is
    /// loopback, e.g. --local-address 127.0.0.2,127.0.0.3,127.0.0.4 for a coordinator on 127.0.0.1.
    #[arg(long = "local-address", value_name = "IP", value_delimiter = ',')]
    pub local_addresses: Vec<IpAddr>,
    /// Extra label for every simulated host (repeatable), besides simulated=true and
    /// sim-template=<template>.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = daemon::parse_label)]
    pub labels: Vec<v1::Label>,
    /// Keep each host's credential in DIR/<name>/credential, so that a restarted simulator
    /// is the same hosts. Without it credentials live in memory only, and the coordinator
    /// refuses these names after a restart (they are enrolled under the lost credentials).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Spread the hosts' first connections evenly over this long: 30s, 500ms, 2m (0: all at once).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub ramp: Duration,
    /// Time from a RunJob to its outcome; each job takes 0.5 to 1.5 times this (0: at once).
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    pub job_delay: Duration,
    /// Probability that a job fails (JobFailed "simulated failure") instead of measuring.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_probability)]
    pub fail_prob: f64,
    /// Probability that the session drops while a job runs; the host reconnects (backoff with
    /// jitter, as `run` does) and reports the job on its next session.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_probability)]
    pub disconnect_prob: f64,
    /// Probability that a job takes ten times --job-delay.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_probability)]
    pub slow_prob: f64,
    /// Print a progress line on stderr this often (0: only the summary).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub progress: Duration,
    /// Stop after this long (default: run until SIGTERM or SIGINT), then print the summary.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Rewrite FILE every second with the summary line's key=value counters, for scripts that
    /// follow the fleet (deploy/bench-scale.sh).
    #[arg(long, value_name = "FILE")]
    pub stats_file: Option<PathBuf>,
    /// Threads running the simulated hosts (1 to 64). One thread wakes no other for each
    /// heartbeat: a simulator that shares its machine with what it loads spends less CPU per
    /// heartbeat on one; split a fleet larger than a thread keeps up with over processes.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => t.split_at(at),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?}; accepted: ms, s, m, h (e.g. 30s, 500ms)"
            ));
        }
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n >= 0.0 && (n * scale) <= 86_400.0 * 30.0 => Ok(Duration::from_secs_f64(n * scale)),
        _ => Err(format!(
            "{s:?} is not a duration from 0 to 30 days (e.g. 30s, 500ms, 2m)"
        )),
    }
}

fn parse_probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a probability from 0 to 1")),
    }
}

/// Everything [`crate::run`] needs, checked.
pub struct SimConfig {
    pub(crate) fleet: Arc<Fleet>,
    pub(crate) count: u64,
    pub(crate) first: u64,
    pub(crate) name_prefix: String,
    pub(crate) state_dir: Option<PathBuf>,
    pub(crate) ramp: Duration,
    pub(crate) progress: Duration,
    pub(crate) duration: Option<Duration>,
    pub(crate) stats_file: Option<PathBuf>,
}

impl Args {
    /// Checks the flags; reads the token. `shutdown` stops every simulated host.
    pub fn into_config(self, shutdown: CancellationToken) -> Result<SimConfig, ConfigError> {
        let bad = |flag, message: String| ConfigError { flag, message };
        if !(1..=MAX_COUNT).contains(&self.count) {
            return Err(bad("--count", format!("{}: accepted 1 to {MAX_COUNT}", self.count)));
        }
        let last = format!("{}{:05}", self.name_prefix, self.first.saturating_add(self.count - 1));
        wire::check_text("--name-prefix", &last, wire::MAX_NAME_LEN, false)
            .map_err(|e| bad("--name-prefix", e.message))?;
        let mut labels = self.labels;
        if labels
            .iter()
            .any(|l| l.key == SIMULATED_LABEL || l.key == "sim-template")
        {
            return Err(bad(
                "--label",
                "simulated and sim-template are set by the simulator".into(),
            ));
        }
        labels.push(v1::Label {
            key: SIMULATED_LABEL.into(),
            value: "true".into(),
        });
        // One more, sim-template, is added per host.
        if labels.len() >= wire::MAX_LABELS {
            return Err(bad(
                "--label",
                format!("at most {} labels besides the simulator's", wire::MAX_LABELS - 2),
            ));
        }
        daemon::check_labels(&labels)?;
        // An address this machine does not have fails every connection alike: say so once, here.
        for ip in &self.local_addresses {
            std::net::UdpSocket::bind((*ip, 0))
                .map_err(|e| bad("--local-address", format!("{ip} is no address of this machine: {e}")))?;
        }
        let coordinators = self.connect.coordinators(None, None)?;
        let token = self.connect.token()?;
        Ok(SimConfig {
            fleet: Arc::new(Fleet {
                coordinators,
                local_addresses: self.local_addresses,
                token,
                labels,
                behaviour: Behaviour {
                    job_delay: self.job_delay,
                    fail_prob: self.fail_prob,
                    disconnect_prob: self.disconnect_prob,
                    slow_prob: self.slow_prob,
                },
                stats: Arc::new(Stats::new(self.count)),
                shutdown,
            }),
            count: self.count,
            first: self.first,
            name_prefix: self.name_prefix,
            state_dir: self.state_dir,
            ramp: self.ramp,
            progress: self.progress,
            duration: self.duration,
            stats_file: self.stats_file,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_bare_seconds() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["-1s", "ten", "5 parsecs", "40d", "99999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_probability("1.5").is_err() && parse_probability("0.25") == Ok(0.25));
    }
}
