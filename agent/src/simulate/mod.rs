//! `cipherfleet-agent simulate --count N`: many simulated agents in one
//! process, for load tests of a coordinator and for demonstrating the report
//! without a fleet. Each simulated host is a task with its own connection,
//! gRPC stream, name and host credential (proposed by the host and admitted
//! by the coordinator as for a real agent, so a lost `Welcome` is retried
//! rather than refused), speaking the protocol through the agent's own
//! session engine ([`crate::session`]); a job is answered after a delay with
//! a synthetic measurement of its template. Every host carries the label
//! `simulated=true`, which the report and the capacity planner leave out of
//! their figures unless asked.
//!
//! - [`template`]: machine classes and the facts each simulated host says hello with.
//! - [`figures`]: a plausible measurement of a point on a template.
//! - [`host`]: one simulated host: what it plugs into the session engine.
//! - [`stats`]: counters, result→ack latency, the progress and summary lines.
//! - [`rng`]: the small deterministic generator behind identities and noise.

pub mod figures;
pub mod host;
pub mod rng;
pub mod stats;
pub mod template;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use cipherfleet_core::wire;
use cipherfleet_proto::v1;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::daemon::{self, ConfigError, ConnectArgs};
use host::{Behaviour, Fleet, Host};
use stats::Stats;

/// The label every simulated host carries (the coordinator's `marks::SIMULATED_LABEL`).
pub const SIMULATED_LABEL: &str = "simulated";
/// Most simulated hosts in one process.
pub const MAX_COUNT: u64 = 100_000;

/// Flags of `cipherfleet-agent simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
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

/// Everything [`run`] needs, checked.
pub struct SimConfig {
    fleet: Arc<Fleet>,
    count: u64,
    first: u64,
    name_prefix: String,
    state_dir: Option<PathBuf>,
    ramp: Duration,
    progress: Duration,
    duration: Option<Duration>,
    stats_file: Option<PathBuf>,
}

impl SimulateArgs {
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

/// Runs the simulated fleet until shutdown (or `--duration`), then prints the
/// summary on stderr. Returns the final counters.
pub async fn run(config: SimConfig) -> anyhow::Result<stats::Snapshot> {
    raise_open_files(config.count + 256)?;
    let fleet = config.fleet.clone();
    let (shutdown, stats) = (fleet.shutdown.clone(), fleet.stats.clone());
    if let Some(limit) = config.duration {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            shutdown.cancel();
        });
    }
    tracing::info!(
        "simulating {} hosts ({}{:05} …) against {}",
        config.count,
        config.name_prefix,
        config.first,
        fleet
            .coordinators
            .iter()
            .map(|c| c.url.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut hosts = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now();
    for n in 0..config.count {
        let index = config.first + n;
        let name = format!("{}{:05}", config.name_prefix, index);
        let at = start + config.ramp.mul_f64(n as f64 / config.count as f64);
        let (fleet, state_dir) = (fleet.clone(), config.state_dir.clone());
        hosts.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = fleet.shutdown.cancelled() => return,
            }
            let made = tokio::task::spawn_blocking({
                let fleet = fleet.clone();
                move || Host::new(index, name, state_dir.as_deref(), fleet)
            })
            .await;
            match made {
                Ok(Ok(host)) => host.run().await,
                Ok(Err(e)) => {
                    fleet.stats.bump(|s| &s.refused);
                    tracing::error!("{e:#}");
                }
                Err(e) => tracing::error!("a simulated host's setup panicked: {e}"),
            }
        });
    }
    let peak = report(&config, &stats, &shutdown).await;
    // Sessions end when their hosts see the shutdown; give them a moment.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while hosts.join_next().await.is_some() {}
    })
    .await;
    let last = stats.snapshot();
    eprintln!("{}", last.progress_line());
    eprintln!("{}", last.summary_line(peak));
    if let Some(path) = &config.stats_file {
        write_stats(path, &last.summary_line(peak));
    }
    Ok(last)
}

/// Every second until shutdown: the stats file, the peak rate of new sessions,
/// and a progress line every `--progress`. Returns that peak per second.
async fn report(config: &SimConfig, stats: &Stats, shutdown: &CancellationToken) -> u64 {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut peak, mut last_welcomed, mut since_progress) = (0, 0, Duration::ZERO);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return peak,
        }
        let now = stats.snapshot();
        peak = peak.max(now.welcomed - last_welcomed);
        last_welcomed = now.welcomed;
        if let Some(path) = &config.stats_file {
            write_stats(path, &now.summary_line(peak));
        }
        since_progress += Duration::from_secs(1);
        if !config.progress.is_zero() && since_progress >= config.progress {
            since_progress = Duration::ZERO;
            let mut line = now.progress_line();
            if now.errors > 0 {
                line.push_str(&format!(" (last: {})", stats.last_error()));
            }
            eprintln!("{line}");
        }
    }
}

/// Replaces `path` with `line` (a temporary file renamed over it, so a reader never sees half).
fn write_stats(path: &std::path::Path, line: &str) {
    let tmp = path.with_extension("tmp");
    let written = std::fs::write(&tmp, format!("{line}\n")).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}

/// Raises the soft limit of open files to at least `needed` (one connection per host).
fn raise_open_files(needed: u64) -> anyhow::Result<()> {
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error()).context("reading the open-files limit");
        }
        if limit.rlim_cur as u64 >= needed {
            return Ok(());
        }
        if (limit.rlim_max as u64) < needed {
            bail!(
                "--count: {} hosts need about {needed} open files (one connection each, 256 for the rest) and \
                 the hard limit is {}, so at most {} fit in one process: raise it (ulimit -Hn, LimitNOFILE= \
                 in a unit) or split the fleet over several processes (--first, --count)",
                needed - 256,
                limit.rlim_max,
                (limit.rlim_max as u64).saturating_sub(256)
            );
        }
        limit.rlim_cur = needed as libc::rlim_t;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
            return Err(std::io::Error::last_os_error()).context("raising the open-files limit");
        }
    }
    Ok(())
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
