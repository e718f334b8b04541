//! Command line: `serve`, `backup` and `restore` of its private cluster, and the operator commands (`campaign start|status|cancel`,
//! `hosts`, `hosts reset-credential|retire` in [`hosts`], `check` in [`check`],
//! `schedule` in [`schedule`]) that talk to a running coordinator's admin API.
//!
//! - [`serve`]: `serve`'s flags and the binary's side of starting a coordinator;
//! - [`backup`]: `backup` and `restore`, the private cluster's database to a file and back;
//! - [`admin`]: the flags, client and output format every operator command shares;
//! - [`campaign`], [`hosts`], [`check`], [`schedule`]: one operator command each;
//! - [`out`]: their standard output: a closed pipe ends them quietly, tables escape what
//!   would act on the terminal.

use clap::{Parser, Subcommand};

mod admin;
mod backup;
mod campaign;
mod check;
mod hosts;
mod out;
mod schedule;
mod serve;
mod watch_args;

use admin::{AdminArgs, Format, admin_client, proto_selector, status_error};
pub use check::Exit;

#[derive(Parser, Debug)]
#[command(
    name = "cipherfleet-coordinator",
    version,
    about = "Schedule crypto benchmarks on a fleet of agents and keep every result"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the coordinator: gRPC for agents and operators, results in PostgreSQL.
    Serve(Box<serve::ServeArgs>),
    /// Dump the private cluster's database into a file, while its coordinator runs or not
    /// (with --database-url, use pg_dump: docs/operations.md, "Backups").
    Backup(backup::BackupArgs),
    /// Restore a dump into a new private cluster under --data-dir, for `serve --data-dir`.
    Restore(backup::RestoreArgs),
    /// Start, watch or cancel a campaign (a suite run on selected hosts).
    #[command(subcommand)]
    Campaign(campaign::CampaignCommand),
    /// List known hosts with their online state and acceleration status; or reset a host's
    /// credential, or retire a host.
    Hosts(hosts::HostsArgs),
    /// Print open findings; exit 1 when any is at or above --min-severity (for cron and CI).
    #[command(after_help = check::EXIT_STATUS)]
    Check(check::CheckArgs),
    /// Start a suite on selected hosts every period: schedule add|list|remove.
    #[command(subcommand, after_help = schedule::ABOUT)]
    Schedule(schedule::ScheduleCommand),
}

/// The exit status of a command that failed with `e`, after saying why on stderr: a
/// command's own status ([`Exit`]), success when only its reader went away, else 1.
pub fn exit_status(e: anyhow::Error) -> std::process::ExitCode {
    if out::closed(&e) {
        return std::process::ExitCode::SUCCESS;
    }
    match e.downcast::<Exit>() {
        Ok(exit) => exit.report(),
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            std::process::ExitCode::from(1)
        }
    }
}

/// `e` and its causes, each said once (layers of the transport repeat their inner
/// error's words: "tcp connect error: tcp connect error: …").
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    cipherfleet_proto::client::error_chain(e.as_ref())
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::serve(*args).await,
        Command::Backup(args) => backup::backup(args).await,
        Command::Restore(args) => backup::restore(args).await,
        Command::Hosts(hosts::HostsArgs { action: None, admin }) => hosts::list(admin).await,
        Command::Hosts(hosts::HostsArgs {
            action: Some(command), ..
        }) => hosts::run(command).await,
        Command::Campaign(c) => campaign::run(c).await,
        Command::Check(args) => check::run(args).await,
        Command::Schedule(c) => schedule::run(c).await,
    }
}

/// A token the first SIGTERM, SIGINT or SIGHUP (its terminal closing) cancels.
/// The handlers are in place when it returns, so a signal that comes while the
/// private PostgreSQL is starting still ends in a clean stop, never in the
/// default action's death that would leave that server running.
pub fn shutdown_on_signal() -> std::io::Result<tokio_util::sync::CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => "SIGHUP",
        };
        tracing::info!("{name}: shutting down");
        on_signal.cancel();
    });
    Ok(shutdown)
}
