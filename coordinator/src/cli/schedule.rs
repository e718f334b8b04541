//! `schedule add|list|remove`: campaigns started every period by the
//! coordinator itself, stored in its database.

use anyhow::Context;
use chrono::{DateTime, Utc};
use cipherfleet_proto::v1;
use clap::Subcommand;

use super::out::{outln, printable};
use super::{AdminArgs, Format, admin_client, proto_selector, status_error};
use crate::domain::selector::Selector;
use crate::watch::schedule::human;
use crate::watch::timing::{parse_duration, parse_time_of_day};

/// What `schedule --help` adds below the commands.
pub const ABOUT: &str = "\
A schedule starts a campaign of --suite on the hosts --select picks (chosen again at each \
firing) every --every. Without --at the first firing is at once; with --at HH:MM (UTC) the due \
times are that time of day plus whole periods. --jitter delays each firing by a random part of \
it, so many coordinators' fleets do not start together. While a schedule's previous campaign \
still runs, a due time is skipped (--if-running skip, the default) or waits for it to end \
(--if-running delay); `schedule list` shows which, and what the last due time did. Due times \
missed while no coordinator ran fire once, not in a burst. With several coordinators on one \
database each firing happens once.";

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Add a schedule; prints its id.
    Add {
        /// Named suite: quick, standard or full.
        #[arg(long, default_value = "quick")]
        suite: String,
        /// Host selector terms, all must hold: arch=aarch64, cpu-model=EPYC, host=NAME, or LABEL=VALUE. Repeatable.
        #[arg(long = "select", value_name = "KEY=VALUE")]
        select: Vec<String>,
        /// The period: 30s, 15m, 24h, 7d or combined (1h30m); 1 s to 366 days.
        #[arg(long, value_name = "DURATION", value_parser = every)]
        every: i64,
        /// Time of day (UTC, HH:MM) the due times keep to, e.g. 02:00.
        #[arg(long, value_name = "HH:MM", value_parser = at)]
        at: Option<i32>,
        /// Delay each firing by a random part of this (shorter than --every), e.g. 1h.
        #[arg(long, value_name = "DURATION", value_parser = jitter, default_value = "0s")]
        jitter: i64,
        /// While the previous campaign runs: skip the due time, or delay it until the campaign ends.
        #[arg(long, value_parser = ["skip", "delay"], default_value = "skip")]
        if_running: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// List schedules: period, next due time, last outcome.
    List {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Remove a schedule; the campaigns it started stay.
    Remove {
        /// The schedule's id, from `schedule list`.
        id: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

fn every(s: &str) -> Result<i64, String> {
    parse_duration("--every", s).map_err(|e| e.message)
}

fn jitter(s: &str) -> Result<i64, String> {
    parse_duration("--jitter", s).map_err(|e| e.message)
}

fn at(s: &str) -> Result<i32, String> {
    parse_time_of_day(s).map_err(|e| e.message)
}

pub async fn run(command: ScheduleCommand) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Add {
            suite,
            select,
            every,
            at,
            jitter,
            if_running,
            admin,
        } => {
            let mut selector = Selector::default();
            for term in &select {
                selector.add_term(term).map_err(anyhow::Error::msg)?;
            }
            let request = v1::AddScheduleRequest {
                suite,
                hosts: Some(proto_selector(selector)),
                every_seconds: every,
                at_minute: at,
                jitter_seconds: jitter,
                if_running,
                created_by: std::env::var("USER").unwrap_or_else(|_| "operator".into()),
            };
            let mut client = admin_client(&admin).await?;
            let s = client
                .add_schedule(request)
                .await
                .map_err(|s| status_error("adding the schedule", s))?
                .into_inner();
            match admin.format {
                Format::Json => outln!("{}", json(&s))?,
                Format::Table => outln!("{}", s.id)?,
            }
            Ok(())
        }
        ScheduleCommand::List { admin } => {
            let mut client = admin_client(&admin).await?;
            let schedules = client
                .list_schedules(v1::ListSchedulesRequest {})
                .await
                .map_err(|s| status_error("listing schedules", s))?
                .into_inner()
                .schedules;
            if admin.format == Format::Json {
                let rows: Vec<_> = schedules.iter().map(json).collect();
                outln!("{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(());
            }
            outln!(
                "{:<4} {:<9} {:<14} {:<8} {:<10} {:<21} {:>5} {:>5}  last outcome",
                "id",
                "suite",
                "every",
                "jitter",
                "if-running",
                "next due (UTC)",
                "runs",
                "skips"
            )?;
            for s in schedules {
                let every = match s.at_minute {
                    Some(m) => format!("{} at {:02}:{:02}", human(s.every_seconds), m / 60, m % 60),
                    None => human(s.every_seconds),
                };
                outln!(
                    "{:<4} {:<9} {:<14} {:<8} {:<10} {:<21} {:>5} {:>5}  {}",
                    s.id,
                    s.suite,
                    every,
                    human(s.jitter_seconds),
                    s.if_running,
                    time(s.next_fire_unix_ms),
                    s.runs,
                    s.skips,
                    printable(&s.last_outcome)
                )?;
            }
            Ok(())
        }
        ScheduleCommand::Remove { id, admin } => {
            let mut client = admin_client(&admin).await?;
            client
                .remove_schedule(v1::RemoveScheduleRequest { id: id.clone() })
                .await
                .map_err(|s| status_error("removing the schedule", s))
                .with_context(|| format!("schedule {id}"))?;
            if admin.format == Format::Json {
                outln!("{}", serde_json::json!({"removed": id}))?;
            } else {
                outln!("schedule {id} removed")?;
            }
            Ok(())
        }
    }
}

fn time(unix_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(unix_ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

fn json(s: &v1::ScheduleInfo) -> serde_json::Value {
    let hosts = s.hosts.clone().unwrap_or_default();
    serde_json::json!({
        "id": s.id, "suite": s.suite, "every_seconds": s.every_seconds, "at_minute": s.at_minute,
        "jitter_seconds": s.jitter_seconds, "if_running": s.if_running, "created_by": s.created_by,
        "select": {
            "labels": hosts.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect::<std::collections::BTreeMap<_, _>>(),
            "arch": hosts.arch, "cpu_model": hosts.cpu_model, "host_names": hosts.host_names,
        },
        "next_due_unix_ms": s.next_due_unix_ms, "next_fire_unix_ms": s.next_fire_unix_ms,
        "last_campaign_id": s.last_campaign_id, "last_outcome": s.last_outcome, "runs": s.runs, "skips": s.skips,
    })
}
