//! `/`: the fleet at a glance — how many hosts, how many online, how many
//! accelerated; the machine configurations (arch × CPU model × kernel ×
//! acceleration) with their hosts; open findings; recent campaigns. With no
//! host yet, it says how to connect the first agent and start a campaign.
//! The configurations table is also `/api/v1/host-groups`.

use std::collections::BTreeMap;

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use serde::Serialize;

use super::api::{self, ApiError, FormatParam};
use super::campaigns::CampaignRow;
use super::hosts;
use super::paging::with_query;
use super::{WebError, WebState, format};
use crate::analysis::acceleration::Acceleration;
use crate::db::findings::{self, Finding};
use crate::db::hosts::HostWithFacts;
use crate::db::{campaign_summaries, results};

/// Recent campaigns on the overview.
const RECENT_CAMPAIGNS: i64 = 5;
/// Open findings listed; the rest are counted.
const FINDINGS_SHOWN: usize = 20;
/// Host names listed per configuration; the rest are counted.
const NAMES_SHOWN: usize = 6;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/", get(page))
        .route("/api/v1/host-groups", get(api_groups))
}

/// Hosts sharing arch, CPU model, kernel and acceleration status: a machine
/// configuration. Missing facts group as `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostGroup {
    pub arch: Option<String>,
    pub cpu_model: Option<String>,
    pub kernel: Option<String>,
    pub acceleration: Acceleration,
    pub hosts: usize,
    pub online: usize,
    pub emulated: usize,
    /// Host (id, name), by name.
    #[serde(skip)]
    pub members: Vec<(i64, String)>,
}

/// The configurations of `hosts`, ordered by arch, CPU model, kernel, status.
pub fn group_hosts(hosts: &[(HostWithFacts, bool)]) -> Vec<HostGroup> {
    // The status sorts best first (its declaration order), not
    // alphabetically, so one configuration's rows read best to worst.
    type Key = (Option<String>, Option<String>, Option<String>, Acceleration);
    let mut groups: BTreeMap<Key, HostGroup> = BTreeMap::new();
    for (h, online) in hosts {
        let acceleration = h.acceleration();
        let key = (
            h.arch.clone(),
            h.cpu_model_name.clone(),
            h.kernel_release.clone(),
            acceleration,
        );
        let g = groups.entry(key).or_insert_with(|| HostGroup {
            arch: h.arch.clone(),
            cpu_model: h.cpu_model_name.clone(),
            kernel: h.kernel_release.clone(),
            acceleration,
            hosts: 0,
            online: 0,
            emulated: 0,
            members: Vec::new(),
        });
        g.hosts += 1;
        g.online += usize::from(*online);
        g.emulated += usize::from(h.emulated());
        g.members.push((h.host.id, h.host.name.clone()));
    }
    groups.into_values().collect()
}

/// A configuration as the overview prints it: missing facts as `–`.
#[derive(Debug, Clone)]
struct GroupRow {
    arch: String,
    cpu: String,
    kernel: String,
    acceleration: Acceleration,
    hosts: usize,
    online: usize,
    /// Hosts of this configuration labelled emulated: marked, since their
    /// timings are not real performance.
    emulated: usize,
    /// The first [`NAMES_SHOWN`] hosts (id, name) ...
    members: Vec<(i64, String)>,
    /// ... and how many more the filtered `/hosts` link leads to.
    more: usize,
    /// `/hosts` filtered to this configuration.
    href: String,
}

impl GroupRow {
    fn new(g: &HostGroup) -> Self {
        // A missing fact cannot be filtered on: its parameter is left out,
        // so the link shows a superset rather than nothing.
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "–".into());
        let param = |v: &Option<String>| v.clone().unwrap_or_default();
        GroupRow {
            arch: text(&g.arch),
            cpu: text(&g.cpu_model),
            kernel: text(&g.kernel),
            acceleration: g.acceleration,
            hosts: g.hosts,
            online: g.online,
            emulated: g.emulated,
            members: g.members.iter().take(NAMES_SHOWN).cloned().collect(),
            more: g.members.len().saturating_sub(NAMES_SHOWN),
            href: with_query(
                "/hosts",
                &[
                    ("arch", param(&g.arch)),
                    ("cpu", param(&g.cpu_model)),
                    ("kernel", param(&g.kernel)),
                    ("accel", g.acceleration.to_string()),
                ],
            ),
        }
    }
}

/// Hosts per acceleration status, with the link to them.
#[derive(Debug, Clone)]
struct StatusCount {
    status: Acceleration,
    hosts: usize,
    href: String,
}

/// An open finding as the overview lists it.
#[derive(Debug, Clone)]
struct FindingRow {
    host_id: i64,
    host: String,
    severity: &'static str,
    reason: String,
    subject: String,
    summary: String,
    since: String,
}

impl FindingRow {
    fn new(f: &Finding) -> Self {
        FindingRow {
            host_id: f.host_id,
            host: f.host_name.clone(),
            severity: f.severity.as_str(),
            reason: f.reason.clone(),
            subject: f.subject.clone(),
            summary: f.summary.clone(),
            since: format::timestamp(f.first_seen),
        }
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    /// Known hosts; zero switches the page to its getting-started text.
    hosts: usize,
    /// Connected to this coordinator now (the scheduler's view, not `last_seen`).
    online: usize,
    emulated: usize,
    /// Results stored in total.
    results: i64,
    campaigns_total: i64,
    campaigns_running: i64,
    statuses: Vec<StatusCount>,
    groups: Vec<GroupRow>,
    /// All open findings; the first [`FINDINGS_SHOWN`] are listed.
    open_findings: usize,
    findings: Vec<FindingRow>,
    campaigns: Vec<CampaignRow>,
}

/// Every count here is exact; the only query that grows with the history is
/// the results count (an index-only scan). The recent campaigns' job counts
/// are sums of `campaign_host_jobs`, one row per host, kept on ingest.
async fn page(State(state): State<WebState>) -> Result<Html<String>, WebError> {
    // One round trip's worth of waiting: the queries run side by side.
    let counts = async {
        Ok::<_, WebError>(tokio::try_join!(
            findings::list_open_first(&state.pool, FINDINGS_SHOWN as i64),
            findings::count_open(&state.pool),
            campaign_summaries::count(&state.pool),
            campaign_summaries::list(&state.pool, RECENT_CAMPAIGNS, 0),
            results::count(&state.pool)
        )?)
    };
    let (all, (open, open_count, (campaigns_total, campaigns_running), campaigns, results)) =
        tokio::try_join!(hosts::load(&state), counts)?;
    let groups = group_hosts(&all);
    let statuses = Acceleration::ALL
        .iter()
        .map(|&status| StatusCount {
            status,
            hosts: all.iter().filter(|(h, _)| h.acceleration() == status).count(),
            href: with_query("/hosts", &[("accel", status.to_string())]),
        })
        .collect();
    let view = OverviewPage {
        hosts: all.len(),
        online: all.iter().filter(|(_, on)| *on).count(),
        emulated: groups.iter().map(|g| g.emulated).sum(),
        results,
        campaigns_total,
        campaigns_running,
        statuses,
        groups: groups.iter().map(GroupRow::new).collect(),
        open_findings: usize::try_from(open_count).unwrap_or(usize::MAX),
        findings: open.iter().map(FindingRow::new).collect(),
        campaigns: campaigns.iter().map(CampaignRow::new).collect(),
    };
    Ok(Html(view.render()?))
}

/// `/api/v1/host-groups`: the configurations table (member names left out:
/// `/api/v1/hosts` filtered by the same facts lists them).
async fn api_groups(State(state): State<WebState>, Query(f): Query<FormatParam>) -> Result<Response, ApiError> {
    let groups = group_hosts(&hosts::load(&state).await?);
    api::table("host-groups", &groups, f.format)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sqlx::types::Json;

    use super::*;
    use crate::db::hosts::Host;

    fn host(id: i64, name: &str, kernel: &str, usable: &[&str], emulated: bool) -> HostWithFacts {
        let labels = if emulated {
            [("emulated".to_string(), "qemu".to_string())].into()
        } else {
            Default::default()
        };
        HostWithFacts {
            host: Host {
                id,
                name: name.into(),
                labels: Json(labels),
                first_seen: Utc::now(),
                last_seen: Utc::now(),
                current_snapshot_id: Some(id),
                retired_at: None,
            },
            arch: Some("x86_64".into()),
            cpu_model_name: Some("Xeon".into()),
            kernel_release: Some(kernel.into()),
            logical_cores: Some(8),
            features_usable: Some(usable.iter().map(|s| s.to_string()).collect()),
            build_flavour: Some("accelerated".into()),
            hypervisor: None,
            cpuinfo_foreign: None,
            ran_in_software: Vec::new(),
        }
    }

    #[test]
    fn hosts_group_by_configuration_with_online_and_emulated_counts() {
        let full = ["aes", "avx", "avx2", "pclmulqdq"];
        let hosts = [
            (host(1, "a", "6.1", &full, false), true),
            (host(2, "b", "6.1", &full, false), false),
            (host(3, "c", "6.1", &["aes"], true), true),
            (host(4, "d", "3.10", &[], false), true),
        ];
        // (kernel, status, hosts, online, emulated, names)
        type Row = (String, Acceleration, usize, usize, usize, Vec<String>);
        let got: Vec<Row> = group_hosts(&hosts)
            .into_iter()
            .map(|g| {
                let names = g.members.iter().map(|(_, n)| n.clone()).collect();
                (g.kernel.unwrap(), g.acceleration, g.hosts, g.online, g.emulated, names)
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "3.10".to_string(),
                    Acceleration::Software,
                    1,
                    1,
                    0,
                    vec!["d".to_string()]
                ),
                (
                    "6.1".to_string(),
                    Acceleration::Accelerated,
                    2,
                    1,
                    0,
                    vec!["a".to_string(), "b".to_string()]
                ),
                ("6.1".to_string(), Acceleration::Partial, 1, 1, 1, vec!["c".to_string()]),
            ]
        );
    }

    #[test]
    fn a_configuration_links_to_its_hosts() {
        let g = &group_hosts(&[(host(1, "a", "6.1.0-18 #1", &["aes"], false), true)])[0];
        assert_eq!(
            GroupRow::new(g).href,
            "/hosts?arch=x86_64&cpu=Xeon&kernel=6.1.0-18%20%231&accel=partial"
        );
    }
}
