//! `check`: the open findings, for cron and CI. The exit status is the
//! answer: 0 when no open finding is at or above `--min-severity`, 1 when one
//! is, 2 when the question could not be asked (usage, connection, token).

use std::fmt;
use std::io::IsTerminal;
use std::process::ExitCode;

use cipherfleet_proto::v1;
use clap::{Args, ValueEnum};

use super::out::{self, outln, printable};
use super::{AdminArgs, Format, admin_client, status_error};
use crate::store::findings::Severity;

/// The `--help` epilogue.
pub const EXIT_STATUS: &str = "Exit status:\n  \
    0  no open finding at or above --min-severity\n  \
    1  at least one (they are printed)\n  \
    2  usage error, or the coordinator could not be asked (address, TLS, token)";

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Lowest severity that makes `check` fail: critical (lost acceleration the
    /// silicon has), warning (crypto in software or slower than it should be), info.
    #[arg(long, value_enum, default_value_t = MinSeverity::Warning)]
    min_severity: MinSeverity,
    #[command(flatten)]
    admin: AdminArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum MinSeverity {
    Critical,
    Warning,
    Info,
}

impl From<MinSeverity> for Severity {
    fn from(s: MinSeverity) -> Self {
        match s {
            MinSeverity::Critical => Severity::Critical,
            MinSeverity::Warning => Severity::Warning,
            MinSeverity::Info => Severity::Info,
        }
    }
}

/// A command that ends with a status of its own rather than success: `main`
/// exits with `code`, printing `error` first when there is one (findings
/// found is no error: the listing already said it).
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub error: Option<anyhow::Error>,
}

impl Exit {
    /// Prints the error, if any, and gives the status to exit with.
    pub fn report(&self) -> ExitCode {
        if let Some(e) = &self.error {
            eprintln!("error: {}", super::error_text(e));
        }
        ExitCode::from(self.code)
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(e) => f.write_str(&super::error_text(e)),
            None => write!(f, "exit status {}", self.code),
        }
    }
}

impl std::error::Error for Exit {}

/// Runs `check`; every failure to ask is status 2.
pub async fn run(args: CheckArgs) -> anyhow::Result<()> {
    let min = Severity::from(args.min_severity);
    let unreachable = |e: anyhow::Error| Exit {
        code: 2,
        error: Some(e),
    };
    let mut client = admin_client(&args.admin).await.map_err(unreachable)?;
    // Every page, in order.
    let mut findings = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_findings(v1::ListFindingsRequest {
                min_severity: min.as_str().to_string(),
                page_size: 0,
                page_token,
            })
            .await
            .map_err(|s| unreachable(status_error("listing findings", s)))?
            .into_inner();
        findings.extend(page.findings);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let printed = match args.admin.format {
        Format::Json => outln!("{}", serde_json::to_string_pretty(&to_json(&findings))?),
        Format::Table => print_text(&findings),
    };
    // A reader that went away (`check | head -1`) cut the listing short, not the answer:
    // the status still says whether there are findings.
    if let Err(e) = printed
        && !out::closed(&e)
    {
        return Err(Exit {
            code: 2,
            error: Some(e),
        }
        .into());
    }
    if std::io::stderr().is_terminal() {
        eprintln!("{} open finding(s) at or above {min}", findings.len());
    }
    if findings.is_empty() {
        Ok(())
    } else {
        Err(Exit { code: 1, error: None }.into())
    }
}

fn to_json(findings: &[v1::Finding]) -> serde_json::Value {
    // Evidence travels as JSON text; shown as objects so `jq` reaches into them.
    let object = |s: &str| serde_json::from_str(s).unwrap_or(serde_json::Value::Null);
    findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "id": f.id, "host_id": f.host_id, "host_name": f.host_name, "reason": f.reason,
                "kind": (!f.kind.is_empty()).then_some(&f.kind), "subject": f.subject,
                "severity": f.severity, "first_seen_unix_ms": f.first_seen_unix_ms,
                "last_seen_unix_ms": f.last_seen_unix_ms, "summary": f.summary,
                "evidence": object(&f.evidence_json), "fact_changes": object(&f.fact_changes_json),
            })
        })
        .collect()
}

/// One line per finding; cron mails whatever is printed, so nothing when all is well.
fn print_text(findings: &[v1::Finding]) -> anyhow::Result<()> {
    if findings.is_empty() {
        return Ok(());
    }
    outln!(
        "{:<9} {:<24} {:<17} {:<19} {:<16} {:<17} summary",
        "severity",
        "host",
        "reason",
        "kind",
        "subject",
        "first seen (UTC)"
    )?;
    for f in findings {
        let first_seen = chrono::DateTime::from_timestamp_millis(f.first_seen_unix_ms)
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        // Host names come from agents: their control characters escaped, so they cannot forge lines.
        outln!(
            "{:<9} {:<24} {:<17} {:<19} {:<16} {:<17} {}",
            f.severity,
            printable(&f.host_name),
            f.reason,
            if f.kind.is_empty() { "-" } else { &f.kind },
            printable(&f.subject),
            first_seen,
            printable(&f.summary)
        )?;
    }
    Ok(())
}
