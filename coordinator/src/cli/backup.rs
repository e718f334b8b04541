//! `backup` and `restore`: the private cluster's database into one file and
//! back into a new cluster ([`crate::pg::backup`]). An external database is
//! backed up with PostgreSQL's own tools (docs/operations.md, "Backups").

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::out::outln;
use crate::pg::backup;

/// Flags of `backup`.
#[derive(Args, Debug)]
pub struct BackupArgs {
    /// The coordinator's --data-dir, whose private cluster is dumped (its coordinator may be
    /// running: it keeps serving).
    #[arg(long, default_value = "/var/lib/cipherfleet")]
    data_dir: PathBuf,
    /// The file to write (pg_dump's custom format, mode 0600; replaced once complete).
    #[arg(long, value_name = "PATH")]
    file: PathBuf,
}

/// Flags of `restore`.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// A new --data-dir for the restored cluster (missing or empty; no coordinator may run on it).
    #[arg(long)]
    data_dir: PathBuf,
    /// A dump made by `backup`, or by pg_dump --format=custom of an external database.
    #[arg(long, value_name = "PATH")]
    file: PathBuf,
}

/// Runs `backup`.
pub async fn backup(args: BackupArgs) -> anyhow::Result<()> {
    backup::dump(&args.data_dir, &args.file)
        .await
        .with_context(|| format!("backing up the private cluster under {}", args.data_dir.display()))?;
    let bytes = std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0);
    outln!(
        "backed up {} into {} ({bytes} bytes)",
        args.data_dir.display(),
        args.file.display()
    )
}

/// Runs `restore`.
pub async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let restored = backup::restore(&args.data_dir, &args.file)
        .await
        .with_context(|| format!("restoring {} under {}", args.file.display(), args.data_dir.display()))?;
    outln!(
        "restored {} into {}: migration {}, {} hosts, {} campaigns, {} results; \
         start the coordinator with --data-dir {}",
        args.file.display(),
        args.data_dir.display(),
        restored.migration,
        restored.hosts,
        restored.campaigns,
        restored.results,
        args.data_dir.display()
    )
}
