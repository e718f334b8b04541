//! `/`: the fleet at a glance — how many hosts, how many online, how many
//! accelerated; the machine configurations (arch × CPU model × kernel ×
//! acceleration) with their hosts; open findings; recent campaigns. With no
//! host yet, it says how to connect the first agent and start a campaign.
//! The configurations table is also `/api/v1/host-groups`.

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, Response};
use axum::routing::get;

use super::api::{self, ApiError, FormatParam};
use super::campaigns::CampaignRow;
use super::paging::with_query;
use super::{WebError, WebState, format};
use crate::analysis::acceleration::Acceleration;
use crate::report::campaign_summaries;
use crate::report::host_summaries::{self, Configuration};
use crate::store::findings::{self, Finding};

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

/// Hosts sharing arch, CPU model, kernel and acceleration status, with the
/// first [`NAMES_SHOWN`] of them: counted and grouped in SQL over the stored
/// verdicts ([`host_summaries::configurations`]).
pub type HostGroup = Configuration;

/// Every configuration, with the hosts connected now counted as online.
async fn configurations(state: &WebState) -> Result<Vec<HostGroup>, WebError> {
    let online = state.scheduler.online_in_cluster().await?;
    Ok(host_summaries::configurations(&state.pool, &online, NAMES_SHOWN).await?)
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
            more: g.hosts.saturating_sub(NAMES_SHOWN.min(g.members.len())),
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

/// Every count here is exact. The hosts are counted and grouped in SQL over
/// their stored verdicts (`host_summaries`). The recent campaigns' job
/// counts are sums of `campaign_host_jobs`, one row per host, kept on
/// ingest; the results stored are the jobs done of every campaign
/// ([`campaign_summaries::all_jobs`], a finished campaign's read once).
async fn page(State(state): State<WebState>) -> Result<Html<String>, WebError> {
    // One round trip's worth of waiting: the queries run side by side.
    let counts = async {
        Ok::<_, WebError>(tokio::try_join!(
            findings::list_open_first(&state.pool, FINDINGS_SHOWN as i64),
            findings::count_open(&state.pool),
            campaign_summaries::count(&state.pool),
            campaign_summaries::list(&state.pool, RECENT_CAMPAIGNS, 0),
            async { Ok(campaign_summaries::all_jobs(&state.pool).await?.done) }
        )?)
    };
    let (groups, (open, open_count, (campaigns_total, campaigns_running), campaigns, results)) =
        tokio::try_join!(configurations(&state), counts)?;
    let statuses = Acceleration::ALL
        .iter()
        .map(|&status| StatusCount {
            status,
            hosts: groups
                .iter()
                .filter(|g| g.acceleration == status)
                .map(|g| g.hosts)
                .sum(),
            href: with_query("/hosts", &[("accel", status.to_string())]),
        })
        .collect();
    let view = OverviewPage {
        hosts: groups.iter().map(|g| g.hosts).sum(),
        online: groups.iter().map(|g| g.online).sum(),
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
    let groups = configurations(&state).await?;
    api::table("host-groups", &groups, f.format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(kernel: Option<&str>, hosts: usize, members: &[&str]) -> HostGroup {
        HostGroup {
            arch: Some("x86_64".into()),
            cpu_model: Some("Xeon".into()),
            kernel: kernel.map(str::to_owned),
            acceleration: Acceleration::Partial,
            hosts,
            online: 0,
            emulated: 0,
            members: members
                .iter()
                .enumerate()
                .map(|(i, n)| (i as i64, n.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_configuration_links_to_its_hosts() {
        assert_eq!(
            GroupRow::new(&group(Some("6.1.0-18 #1"), 1, &["a"])).href,
            "/hosts?arch=x86_64&cpu=Xeon&kernel=6.1.0-18%20%231&accel=partial"
        );
        // A missing fact is left out of the link.
        assert_eq!(
            GroupRow::new(&group(None, 1, &["a"])).href,
            "/hosts?arch=x86_64&cpu=Xeon&accel=partial"
        );
    }

    #[test]
    fn a_configuration_lists_its_first_hosts_and_counts_the_rest() {
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        let row = GroupRow::new(&group(Some("6.1"), 9, &names));
        assert_eq!(row.members.len(), NAMES_SHOWN);
        assert_eq!(row.more, 3);
        let row = GroupRow::new(&group(Some("6.1"), 2, &names[..2]));
        assert_eq!((row.members.len(), row.more), (2, 0));
    }
}
