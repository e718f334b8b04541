//! Command line: `probe`, `bench`, `selftest`, `run` (and the hidden worker mode).
//!
//! Usage errors exit with status 2 and name the flag; `bench` exits 1 when any
//! point failed (the others are still reported), 0 otherwise. `run` exits 0
//! after SIGTERM/SIGINT/SIGHUP, 3 when the coordinator refuses the agent, 1 on a
//! local failure (e.g. an unusable spool directory).

use std::io::{self, Write};

use clap::{Parser, Subcommand, ValueEnum};

use crate::daemon::{self, RunArgs};
use crate::provider::openssl::watch::{self, WatchTarget};
use crate::{probe, runtime, selftest, worker};

mod bench;

use bench::{BenchArgs, bench};

const AFTER_HELP: &str = "\
MB/s is 10^6 bytes of plaintext per second, as `openssl speed` reports it.
Every point runs in its own worker process; the software path runs in the sibling
binary cipherfleet-agent-soft (build it with deploy/build.sh).
CIPHERFLEET_WORKER_PREFIX (e.g. \"taskset -c 2,3\") is put before every worker command.";

#[derive(Parser, Debug)]
#[command(name = "cipherfleet-agent", version, about = "Measure symmetric-crypto performance on this host", after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print host facts: CPU, crypto features advertised and usable, kernel, virtualization, build.
    Probe {
        #[arg(long, value_enum, default_value_t = ProbeFormat::Table)]
        format: ProbeFormat,
        /// The host's `openssl` binary to describe (default: the first `openssl` on PATH).
        #[arg(long, value_name = "PATH")]
        openssl: Option<std::path::PathBuf>,
        /// Also report the OpenSSL capability variable in this service's environment, as `run --watch-env`.
        #[arg(long = "watch-env", value_name = "PID|UNIT", value_parser = WatchTarget::parse)]
        watch_env: Vec<WatchTarget>,
    },
    /// Benchmark algorithms locally and print a table, JSON lines or CSV.
    Bench(BenchArgs),
    /// Run the known-answer tests for every algorithm in this build.
    Selftest {
        #[arg(long, value_enum, default_value_t = ProbeFormat::Table)]
        format: ProbeFormat,
        /// The host's `openssl` binary whose answers to check (default: the first `openssl` on PATH).
        #[arg(long, value_name = "PATH")]
        openssl: Option<std::path::PathBuf>,
    },
    /// Connect to a coordinator and run the benchmark jobs it sends (the daemon).
    Run(RunArgs),
    /// Internal: measure one point read as JSON on stdin (started by `bench`).
    #[command(name = worker::WORKER_ARG, hide = true)]
    Worker,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProbeFormat {
    Table,
    Json,
}

/// Entry point of the binary; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match cli.command {
        Command::Probe {
            format,
            openssl,
            watch_env,
        } => match watch::check_targets(&watch_env) {
            Ok(()) => print_probe(format, openssl.as_deref(), &watch_env),
            Err(e) => usage_error(format!("--watch-env: {e}")),
        },
        Command::Selftest { format, openssl } => run_selftest(format, openssl.as_deref()),
        Command::Bench(args) => bench(args),
        Command::Run(args) => run_daemon(args),
        Command::Worker => worker::worker_main(),
    }
}

/// `run`: logging to stderr, a two-thread runtime (measurements happen in
/// worker processes, not here), SIGTERM/SIGINT wired to a clean shutdown.
fn run_daemon(args: RunArgs) -> i32 {
    runtime::init_logging();
    let config = match args.into_config() {
        Ok(config) => config,
        Err(e) => return usage_error(e),
    };
    runtime::on_runtime(2, |shutdown| async move {
        match daemon::run(config, shutdown).await {
            Ok(reason) => reason.exit_code(),
            Err(e) => {
                tracing::error!("{e:#}");
                1
            }
        }
    })
}

fn print_probe(format: ProbeFormat, openssl: Option<&std::path::Path>, watch: &[WatchTarget]) -> i32 {
    let facts = probe::probe_with_providers(openssl, watch);
    let mut out = io::stdout().lock();
    let written = match format {
        ProbeFormat::Table => probe::write_table(&facts, &mut out),
        ProbeFormat::Json => serde_json::to_writer_pretty(&mut out, &facts)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out)),
    };
    if written.is_err() { 1 } else { 0 }
}

fn run_selftest(format: ProbeFormat, openssl: Option<&std::path::Path>) -> i32 {
    let mut outcomes = selftest::run_all();
    // The kernel's and the host OpenSSL's answers, where they can be reached here: an
    // `openssl` that does not run (another architecture's, on an emulated host) is left out.
    let binary = crate::provider::openssl::find(openssl)
        .ok()
        .filter(|b| crate::provider::openssl::inspect(b).is_ok());
    outcomes.extend(selftest::run_providers(binary.as_deref()));
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    let mut out = io::stdout().lock();
    let _ = match format {
        ProbeFormat::Json => serde_json::to_writer_pretty(&mut out, &outcomes)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out)),
        ProbeFormat::Table => (|| {
            for o in &outcomes {
                let status = if o.passed { "ok  " } else { "FAIL" };
                writeln!(
                    out,
                    "{status} {}{}",
                    o.name,
                    o.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
                )?;
            }
            writeln!(
                out,
                "known-answer tests ({} build): {} of {} passed",
                crate::backend::FLAVOUR.as_str(),
                outcomes.len() - failed,
                outcomes.len()
            )
        })(),
    };
    if failed == 0 && !outcomes.is_empty() { 0 } else { 1 }
}

fn usage_error(message: impl std::fmt::Display) -> i32 {
    eprintln!("error: {message}");
    2
}
