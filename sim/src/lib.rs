//! `cipherfleet-sim --count N`: many simulated agents in one process, for
//! load tests of a coordinator and for demonstrating the report without a
//! fleet. Each simulated host is a task with its own connection, gRPC stream,
//! name and host credential (proposed by the host and admitted by the
//! coordinator as for a real agent, so a lost `Welcome` is retried rather than
//! refused), speaking the protocol through the agent's own session engine
//! ([`cipherfleet_agent::session`]); a job is answered after a delay with a
//! synthetic measurement of its template. Every host carries the label
//! `simulated=true`, which the report and the capacity planner leave out of
//! their figures unless asked. Its own binary keeps it out of the static
//! production agent.
//!
//! - [`args`]: the flags, checked into a [`SimConfig`].
//! - [`host`]: one simulated host: what it plugs into the session engine.
//! - [`template`]: machine classes and the facts each simulated host says hello with.
//! - [`figures`]: a plausible measurement of a point on a template.
//! - [`stats`]: counters, result→ack latency, the progress and summary lines.
//! - [`rng`]: the small deterministic generator behind identities and noise.

pub mod args;
pub mod figures;
pub mod host;
pub mod rng;
pub mod stats;
pub mod template;

use std::time::Duration;

use anyhow::{Context as _, bail};
use cipherfleet_agent::runtime;
use tokio_util::sync::CancellationToken;

pub use args::{Args, SimConfig};
use host::Host;
use stats::Stats;

/// The command: checks the flags, then runs the fleet on a runtime of
/// `--threads` threads until SIGTERM/SIGINT or `--duration`. Returns the exit
/// status: 0, 2 on a usage error, 3 when the coordinator refused every host, 1
/// on a local failure.
pub fn main(args: Args) -> i32 {
    let shutdown = CancellationToken::new();
    let threads = usize::from(args.threads);
    let config = match args.into_config(shutdown.clone()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    runtime::on_runtime(threads, |signalled| async move {
        tokio::spawn(async move {
            signalled.cancelled().await;
            shutdown.cancel();
        });
        match run(config).await {
            Ok(last) if last.count > 0 && last.refused == last.count => 3,
            Ok(_) => 0,
            Err(e) => {
                tracing::error!("{e:#}");
                1
            }
        }
    })
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
