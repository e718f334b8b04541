//! `/metrics` in the Prometheus text format (version 0.0.4): the fleet, its
//! acceleration status, open findings, the job queue and results ingested.
//! Sized by the fleet and the campaigns running, not by the results stored:
//! hosts' statuses come from `host_summaries`, job counts from
//! `campaign_host_jobs`, a finished campaign's read once.
//!
//! Every known label value is written, zeros included, so a series that drops
//! to zero stays visible instead of vanishing (an alert on
//! `cipherfleet_findings_open{severity="critical"} > 0` then resolves cleanly).

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::Context;
use sqlx::PgPool;

use crate::analysis::acceleration::Acceleration;
use crate::domain::job::JobStatus;
use crate::findings::REASONS;
use crate::ingest::QueueStats;
use crate::report;
use crate::store;
use crate::store::findings::Severity;

/// Renders the metrics; `sessions_here` comes from the scheduler (the sessions
/// this coordinator serves live in its memory; online hosts are the cluster's leases).
pub async fn render(pool: &PgPool, sessions_here: usize) -> anyhow::Result<String> {
    // Each host's status as judged once per change of its inputs (`host_summaries`).
    let (hosts, by_acceleration) = report::host_summaries::by_acceleration(pool)
        .await
        .context("counting hosts")?;
    let online_hosts = store::leases::live_hosts(pool)
        .await
        .context("counting live leases")?
        .len();
    let open = store::findings::count_open_by(pool)
        .await
        .context("counting findings")?;
    let by_reason = store::findings::hosts_by_reason(pool)
        .await
        .context("counting findings")?;
    let jobs = report::campaign_summaries::all_jobs(pool)
        .await
        .context("counting jobs")?;

    let mut m = Exposition::default();
    m.family("cipherfleet_hosts", "gauge", "Hosts the coordinator knows.");
    m.sample("cipherfleet_hosts", &[], hosts as f64);
    m.family(
        "cipherfleet_hosts_online",
        "gauge",
        "Hosts with an open agent session on any coordinator of the cluster.",
    );
    m.sample("cipherfleet_hosts_online", &[], online_hosts as f64);
    m.family(
        "cipherfleet_coordinator_sessions",
        "gauge",
        "Agent sessions this coordinator serves (its share of the cluster's hosts).",
    );
    m.sample("cipherfleet_coordinator_sessions", &[], sessions_here as f64);
    m.family(
        "cipherfleet_host_leases",
        "gauge",
        "Live host leases per coordinator of the cluster (hostname/pid).",
    );
    for (coordinator, n) in store::leases::count_by_holder(pool).await.context("counting leases")? {
        m.sample("cipherfleet_host_leases", &[("coordinator", &coordinator)], n as f64);
    }

    let mut acceleration: BTreeMap<Acceleration, u64> = Acceleration::ALL.iter().map(|a| (*a, 0)).collect();
    acceleration.extend(by_acceleration);
    m.family(
        "cipherfleet_hosts_by_acceleration",
        "gauge",
        "Hosts by the acceleration their facts allow and their latest results ran (accelerated, partial, software, unknown).",
    );
    for (status, n) in &acceleration {
        m.sample(
            "cipherfleet_hosts_by_acceleration",
            &[("status", status.as_str())],
            *n as f64,
        );
    }

    m.family(
        "cipherfleet_hosts_with_findings",
        "gauge",
        "Hosts with at least one open finding, by reason.",
    );
    for reason in REASONS {
        let n = by_reason.iter().find(|(r, _)| r == reason).map_or(0, |(_, n)| *n);
        m.sample("cipherfleet_hosts_with_findings", &[("reason", reason)], n as f64);
    }

    m.family(
        "cipherfleet_findings_open",
        "gauge",
        "Open findings by reason and severity.",
    );
    for reason in REASONS {
        for severity in Severity::ALL {
            let n = open
                .iter()
                .find(|c| c.reason == *reason && c.severity == severity)
                .map_or(0, |c| c.findings);
            m.sample(
                "cipherfleet_findings_open",
                &[("reason", reason), ("severity", severity.as_str())],
                n as f64,
            );
        }
    }

    m.family(
        "cipherfleet_jobs",
        "gauge",
        "Jobs by status (queued, running, done, failed, cancelled).",
    );
    for status in JobStatus::ALL {
        let n = match status {
            JobStatus::Queued => jobs.queued,
            JobStatus::Running => jobs.running,
            JobStatus::Done => jobs.done,
            JobStatus::Failed => jobs.failed,
            JobStatus::Cancelled => jobs.cancelled,
        };
        m.sample("cipherfleet_jobs", &[("status", status.as_str())], n as f64);
    }

    m.family(
        "cipherfleet_results_ingested_total",
        "counter",
        "Results stored: one per job done (storing its result is what ends a job done).",
    );
    m.sample("cipherfleet_results_ingested_total", &[], jobs.done as f64);
    Ok(m.0)
}

/// The ingest queue's metrics ([`crate::ingest`]), which live in memory: appended to [`render`]'s.
pub fn render_ingest(ingest: QueueStats) -> String {
    let families = [
        (
            "cipherfleet_ingest_queued",
            "gauge",
            "Agent reports (results, job starts) waiting to be stored or being stored in a batch.",
            ingest.queued as f64,
        ),
        (
            "cipherfleet_ingest_queued_max",
            "gauge",
            "The most agent reports ever waiting at once since the coordinator started.",
            ingest.high_water as f64,
        ),
        (
            "cipherfleet_ingest_queue_capacity",
            "gauge",
            "Agent reports that may wait (--ingest-queue); when full, sessions stop reading from their agents.",
            ingest.capacity as f64,
        ),
        (
            "cipherfleet_ingest_batches_storing_max",
            "gauge",
            "The most result batches ever stored at once (--ingest-parallel; one while agents wait to be admitted).",
            ingest.most_storing as f64,
        ),
        (
            "cipherfleet_ingest_batches_total",
            "counter",
            "Result batches stored, one transaction each.",
            ingest.batches as f64,
        ),
    ];
    let mut m = Exposition::default();
    for (name, kind, help, value) in families {
        m.family(name, kind, help);
        m.sample(name, &[], value);
    }
    m.0
}

/// The exposition (the Prometheus text) being built.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let _ = write!(self.0, "{{{}}}", pairs.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// A label value as the text format wants it: backslash, double quote and
/// newline escaped. Values may come from agents (host names), so never raw.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: backslash and newline escaped (quotes are fine there).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let cases = [
            ("plain", "plain"),
            ("a\"b", "a\\\"b"),
            ("back\\slash", "back\\\\slash"),
            ("two\nlines", "two\\nlines"),
            ("\\\"\n", "\\\\\\\"\\n"),
        ];
        for (input, want) in cases {
            assert_eq!(escape_label(input), want, "{input:?}");
        }
    }

    #[test]
    fn samples_have_the_text_format() {
        let mut m = Exposition::default();
        m.family("x_total", "counter", "Things.\nMore");
        m.sample("x_total", &[("host", "a\"b"), ("k", "v")], 3.0);
        m.sample("x_total", &[], 0.5);
        assert_eq!(
            m.0,
            "# HELP x_total Things.\\nMore\n# TYPE x_total counter\nx_total{host=\"a\\\"b\",k=\"v\"} 3\nx_total 0.5\n"
        );
    }
}
