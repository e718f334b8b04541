//! `campaign start|status|cancel`: a campaign (a suite or a matrix on selected
//! hosts) started, watched or cancelled through the admin API.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::bail;
use cipherfleet_proto::v1::{self, start_campaign_request::Points};
use clap::Subcommand;

use cipherfleet_core::spec::Matrix;

use super::out::{outln, printable};
use super::{AdminArgs, Format, admin_client, proto_selector, status_error};
use crate::domain::selector::Selector;

/// `campaign start|status|cancel`.
#[derive(Subcommand, Debug)]
pub enum CampaignCommand {
    /// Start a campaign; prints its id. A host whose agent lacks a path (the software path
    /// without its cipherfleet-agent-soft sibling) or a provider (no `openssl` binary, no
    /// AF_ALG in its kernel) skips those points, with the reason; they are counted as
    /// skipped, not queued.
    Start {
        /// Named suite: quick, standard, full, a scenario suite (object-storage, legacy-migration,
        /// modes, fallback, field-level; each about 15-30 s a host, see `cipherfleet-agent bench --help`),
        /// tour (what the quickstart runs: enough for every page and scenario view; emulated hosts
        /// run its quick part only), or providers (five algorithms at 16 B to 10 MiB on RustCrypto,
        /// ring, the host's OpenSSL and the kernel crypto API; the /providers page). Thread counts of "all cores" follow each host's logical cores.
        #[arg(long, default_value = "quick")]
        suite: String,
        /// An explicit matrix instead of a suite, as JSON: the lists of `cipherfleet-agent bench`'s
        /// flags, e.g. '{"algorithms":["aes-128-gcm"],"sizes":[16,1024],"directions":["encrypt"],
        /// "threads":[1],"key_modes":["static"],"paths":["accelerated"],"seconds":0.5}'; optionally
        /// "providers":["rustcrypto","ring","openssl","kernel"] (default rustcrypto), each
        /// provider measuring only the points it runs.
        #[arg(long, value_name = "JSON", value_parser = matrix_json)]
        matrix: Option<Box<Matrix>>,
        /// Host selector terms, all must hold: arch=aarch64, cpu-model=EPYC, host=NAME, or LABEL=VALUE. Repeatable.
        #[arg(long = "select", value_name = "KEY=VALUE")]
        select: Vec<String>,
        /// A name for the campaign.
        #[arg(long)]
        name: Option<String>,
        /// Also queue jobs for selected hosts that are offline now; they run when
        /// the host comes back. By default only online hosts are selected.
        #[arg(long)]
        include_offline: bool,
        /// Seconds a job may stay queued (its host offline or busy) before it fails
        /// with the reason; at most 30 days. Default: a day.
        #[arg(long, value_name = "SECONDS")]
        queued_ttl: Option<f64>,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Progress per host: done / running / queued / failed, and the points skipped because
    /// their host lacks the path (per host) or the provider (on the campaign's page).
    Status {
        id: String,
        /// Refresh until the campaign completes or is cancelled.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Cancel queued jobs and abort running ones.
    Cancel {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// `--matrix`: the JSON of a matrix; the coordinator validates what it holds.
fn matrix_json(s: &str) -> Result<Box<Matrix>, String> {
    serde_json::from_str(s).map_err(|e| {
        format!(
            "not a matrix ({e}); it takes the lists algorithms, sizes, directions, threads, key_modes and \
             paths, and seconds (concurrency, nonces and providers optional)"
        )
    })
}

/// Runs one `campaign` command.
pub async fn run(command: CampaignCommand) -> anyhow::Result<()> {
    match command {
        CampaignCommand::Start {
            suite,
            matrix,
            select,
            name,
            include_offline,
            queued_ttl,
            admin,
        } => {
            let mut selector = Selector::default();
            for term in &select {
                selector.add_term(term).map_err(anyhow::Error::msg)?;
            }
            let request = v1::StartCampaignRequest {
                points: Some(match matrix {
                    Some(m) => Points::Matrix(v1::Matrix::from(&*m)),
                    None => Points::Suite(suite),
                }),
                hosts: Some(proto_selector(selector)),
                started_by: std::env::var("USER").unwrap_or_else(|_| "operator".into()),
                name: name.unwrap_or_default(),
                include_offline,
                queued_ttl_seconds: queued_ttl.unwrap_or(0.0),
            };
            let mut client = admin_client(&admin).await?;
            let r = client
                .start_campaign(request)
                .await
                .map_err(|s| status_error("starting the campaign", s))?
                .into_inner();
            match admin.format {
                Format::Json => outln!(
                    "{}",
                    serde_json::json!({"campaign_id": r.campaign_id, "jobs_created": r.jobs_created, "points_skipped": r.points_skipped})
                )?,
                Format::Table => outln!("{}", r.campaign_id)?,
            }
            if admin.format == Format::Table && std::io::stderr().is_terminal() {
                let skipped = match r.points_skipped {
                    0 => String::new(),
                    n => {
                        format!(" ({n} points skipped: their hosts lack the path or provider; see the campaign's page)")
                    }
                };
                eprintln!(
                    "campaign {} started with {} jobs{skipped}; watch it with `campaign status {} --watch`",
                    r.campaign_id, r.jobs_created, r.campaign_id
                );
            }
            Ok(())
        }
        CampaignCommand::Status { id, watch, admin } => {
            let mut client = admin_client(&admin).await?;
            loop {
                let s = client
                    .campaign_status(v1::CampaignStatusRequest {
                        campaign_id: id.clone(),
                    })
                    .await
                    .map_err(|s| status_error("reading the campaign", s))?
                    .into_inner();
                print_status(&s, admin.format)?;
                let running = s.state == v1::CampaignState::Running as i32;
                if !watch || !running {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        CampaignCommand::Cancel { id, reason, admin } => {
            let mut client = admin_client(&admin).await?;
            let r = client
                .cancel_campaign(v1::CancelCampaignRequest {
                    campaign_id: id.clone(),
                    reason: reason.unwrap_or_default(),
                })
                .await
                .map_err(|s| status_error("cancelling the campaign", s))?
                .into_inner();
            match admin.format {
                Format::Json => outln!(
                    "{}",
                    serde_json::json!({"campaign_id": id, "jobs_cancelled": r.jobs_cancelled})
                )?,
                Format::Table => outln!("campaign {id}: {} jobs cancelled", r.jobs_cancelled)?,
            }
            Ok(())
        }
    }
}

fn counts_json(c: Option<&v1::JobCounts>) -> serde_json::Value {
    let c = c.copied().unwrap_or_default();
    serde_json::json!({"done": c.done, "running": c.running, "queued": c.queued, "failed": c.failed, "cancelled": c.cancelled})
}

fn print_status(s: &v1::CampaignStatusResponse, format: Format) -> anyhow::Result<()> {
    let state = match v1::CampaignState::try_from(s.state) {
        Ok(v1::CampaignState::Running) => "running",
        Ok(v1::CampaignState::Completed) => "completed",
        Ok(v1::CampaignState::Cancelled) => "cancelled",
        _ => "unknown",
    };
    if format == Format::Json {
        let v = serde_json::json!({
            "campaign_id": s.campaign_id, "name": s.name, "state": state, "overall": counts_json(s.overall.as_ref()),
            "hosts": s.hosts.iter().map(|h| serde_json::json!({"host_id": h.host_id, "host_name": h.host_name, "counts": counts_json(h.counts.as_ref())})).collect::<Vec<_>>(),
            "failures": s.failures.iter().map(|f| serde_json::json!({"job_id": f.job_id, "host_name": f.host_name, "error": f.error})).collect::<Vec<_>>(),
            "points_skipped": s.points_skipped,
            "skipped": s.skipped.iter().map(|k| serde_json::json!({"host_id": k.host_id, "host_name": k.host_name, "path": path_name(k.path), "provider": v1::Provider::try_from(k.provider).map(provider_name).unwrap_or("unknown"), "points": k.points, "reason": k.reason})).collect::<Vec<_>>(),
        });
        outln!("{v}")?;
        return Ok(());
    }
    let o = s.overall.unwrap_or_default();
    let total = o.done + o.running + o.queued + o.failed + o.cancelled;
    let skipped = match s.points_skipped {
        0 => String::new(),
        n => format!(", {n} points skipped"),
    };
    outln!(
        "campaign {} ({}): {state}, {}/{} done, {} running, {} queued, {} failed{skipped}",
        s.campaign_id,
        printable(&s.name),
        o.done,
        total,
        o.running,
        o.queued,
        o.failed
    )?;
    for h in &s.hosts {
        let c = h.counts.unwrap_or_default();
        let n = (c.done + c.running + c.queued + c.failed + c.cancelled).max(1);
        let width = 30usize;
        let filled = (c.done + c.failed) as usize * width / n as usize;
        outln!(
            "  {:<24} [{}{}] done {} running {} queued {} failed {}",
            printable(&h.host_name),
            "#".repeat(filled),
            ".".repeat(width - filled),
            c.done,
            c.running,
            c.queued,
            c.failed
        )?;
    }
    for f in &s.failures {
        outln!(
            "  failed {} on {}: {}",
            f.job_id,
            printable(&f.host_name),
            printable(&f.error)
        )?;
    }
    for k in &s.skipped {
        let what = match v1::Provider::try_from(k.provider) {
            Ok(v1::Provider::Rustcrypto) => format!("{}-path", path_name(k.path)),
            Ok(p) => format!("{} provider", provider_name(p)),
            Err(_) => "unknown".into(),
        };
        outln!(
            "  skipped {} {what} points on {}: {}",
            k.points,
            printable(&k.host_name),
            printable(&k.reason)
        )?;
    }
    if total == 0 && s.points_skipped == 0 {
        bail!("campaign has no jobs");
    }
    Ok(())
}

/// A wire provider's name as the rest of the output spells providers.
fn provider_name(provider: v1::Provider) -> &'static str {
    match provider {
        v1::Provider::Rustcrypto => "rustcrypto",
        v1::Provider::Ring => "ring",
        v1::Provider::Openssl => "openssl",
        v1::Provider::Kernel => "kernel",
    }
}

/// A wire path's name as the rest of the output spells paths.
fn path_name(path: i32) -> &'static str {
    match v1::Path::try_from(path) {
        Ok(v1::Path::Accelerated) => "accelerated",
        Ok(v1::Path::Software) => "software",
        // A provider's row names no path.
        Ok(v1::Path::Unspecified) => "",
        Err(_) => "unknown",
    }
}
