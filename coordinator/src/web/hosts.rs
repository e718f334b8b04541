//! `/hosts`: every host with its current facts, filtered by label, arch, CPU
//! model, kernel, online state and acceleration status, 50 to a page; the
//! same rows at `/api/v1/hosts`, 1,000 to a page (`?page=N`, and a
//! `Link: <…>; rel="next"` header while more follow).
//!
//! Filtering, counting and paging happen in SQL ([`host_summaries`]), over
//! each host's verdicts as the coordinator's rules judged them; the online
//! state comes from the scheduler (the live leases) and is handed to the
//! query.

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::api::{self, ApiError, FormatParam};
use super::paging::{Pager, with_query};
use super::params::{self, Choice, LabelFilter, enum_choices, plain_choices};
use super::{WebError, WebState, format};
use crate::analysis::acceleration::Acceleration;
use crate::domain::labels::Labels;
use crate::report::host_summaries::{self, ListedHost, Selection};

/// Rows per page of the hosts table.
const PER_PAGE: u64 = 50;

/// Rows per page of `/api/v1/hosts`: all of a fleet of 10,000 hosts is
/// megabytes of JSON, too much for one answer (docs/performance.md, "How it
/// got there").
const API_PER_PAGE: u64 = 1000;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/hosts", get(page))
        .route("/api/v1/hosts", get(api_hosts))
}

/// `k=v` strings of a host's labels, in key order.
pub fn label_texts(labels: &Labels) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The filters of `/hosts` as sent: blank fields (an untouched form) mean "any".
#[derive(Debug, Default, Deserialize)]
pub struct HostsQuery {
    label: Option<String>,
    arch: Option<String>,
    cpu: Option<String>,
    kernel: Option<String>,
    /// `online` or `offline`.
    status: Option<String>,
    /// An [`Acceleration`].
    accel: Option<String>,
    page: Option<String>,
}

/// The filters, checked.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct HostFilter {
    /// `key=value`, or `key` alone for "has the label".
    pub label: Option<LabelFilter>,
    pub arch: Option<String>,
    /// Exact CPU model name.
    pub cpu: Option<String>,
    /// Exact kernel release.
    pub kernel: Option<String>,
    pub online: Option<bool>,
    pub acceleration: Option<Acceleration>,
}

fn given(v: &Option<String>) -> Option<String> {
    params::given(v).map(str::to_owned)
}

impl HostFilter {
    pub fn parse(q: &HostsQuery) -> Result<Self, WebError> {
        let label = params::given(&q.label).map(params::label);
        let online = match given(&q.status).as_deref() {
            None => None,
            Some("online") => Some(true),
            Some("offline") => Some(false),
            Some(other) => {
                return Err(WebError::BadRequest(format!("status={other:?}: use online or offline")));
            }
        };
        let acceleration = params::given(&q.accel)
            .map(|a| params::require("accel", a))
            .transpose()?;
        Ok(HostFilter {
            label,
            arch: given(&q.arch),
            cpu: given(&q.cpu),
            kernel: given(&q.kernel),
            online,
            acceleration,
        })
    }

    /// The filters as the hosts query takes them.
    pub fn selection(&self) -> Selection<'_> {
        Selection {
            label: self.label.as_ref().map(|(k, v)| (k.as_str(), v.as_deref())),
            arch: self.arch.as_deref(),
            cpu: self.cpu.as_deref(),
            kernel: self.kernel.as_deref(),
            online: self.online,
            acceleration: self.acceleration,
        }
    }

    /// The filters as query parameters, for links that keep them.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("label", params::label_text(&self.label)),
            ("arch", self.arch.clone().unwrap_or_default()),
            ("cpu", self.cpu.clone().unwrap_or_default()),
            ("kernel", self.kernel.clone().unwrap_or_default()),
            (
                "status",
                self.online
                    .map(|o| if o { "online" } else { "offline" }.to_string())
                    .unwrap_or_default(),
            ),
            ("accel", self.acceleration.map(|a| a.to_string()).unwrap_or_default()),
        ]
    }
}

/// A host as a table row shows it; strings are escaped by the template.
#[derive(Debug, Clone)]
pub struct HostRow {
    pub id: i64,
    pub name: String,
    /// `k=v`, in key order.
    pub labels: Vec<String>,
    /// Missing facts (a host whose snapshot is gone) print as `–`.
    pub arch: String,
    pub cpu: String,
    pub cores: String,
    pub kernel: String,
    /// Also the badge's CSS class.
    pub acceleration: Acceleration,
    /// Connected now, per the scheduler.
    pub online: bool,
    /// Retired by an operator (`hosts retire`): shown with its history, badged.
    pub retired: bool,
    /// Labelled emulated or simulated: badged, since the numbers are not real performance.
    pub emulated: bool,
    pub simulated: bool,
    pub last_seen: String,
    /// Seconds since the epoch, for sorting.
    pub last_seen_sort: i64,
}

impl HostRow {
    pub fn new(h: &ListedHost) -> Self {
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "–".into());
        HostRow {
            id: h.host.id,
            name: h.host.name.clone(),
            labels: label_texts(&h.host.labels.0),
            arch: text(&h.arch),
            cpu: text(&h.cpu_model_name),
            cores: h.logical_cores.map(|c| c.to_string()).unwrap_or_else(|| "–".into()),
            kernel: text(&h.kernel_release),
            acceleration: h.acceleration,
            online: h.online,
            retired: h.host.retired_at.is_some(),
            emulated: h.emulated,
            simulated: h.simulated,
            last_seen: format::timestamp(h.host.last_seen),
            last_seen_sort: h.host.last_seen.timestamp(),
        }
    }
}

#[derive(Template)]
#[template(path = "hosts.html")]
struct HostsPage {
    /// The filters as given, shown back in the form.
    label: String,
    cpu: String,
    kernel: String,
    /// The arches present in the fleet, the current one selected.
    arch_choices: Vec<Choice>,
    status_choices: Vec<Choice>,
    accel_choices: Vec<Choice>,
    /// Some filter is set: the page offers to clear them.
    filtered: bool,
    /// Hosts before filtering, to tell "no host yet" from "none matches".
    fleet_size: usize,
    rows: Vec<HostRow>,
    /// "showing 1–50 of N".
    summary: String,
    prev: Option<String>,
    next: Option<String>,
    /// The same filters at `/api/v1/hosts`.
    csv_href: String,
    json_href: String,
}

/// Bad filter values are a 400 page naming what is accepted, not an empty table.
async fn page(State(state): State<WebState>, Query(q): Query<HostsQuery>) -> Result<Html<String>, WebError> {
    let filter = HostFilter::parse(&q)?;
    let page = Pager::parse_page(q.page.as_deref())?;
    let online = state.scheduler.online_in_cluster().await?;
    let selection = filter.selection();
    let (matching, (fleet_size, arches)) = tokio::try_join!(
        host_summaries::count(&state.pool, &online, &selection),
        host_summaries::fleet(&state.pool)
    )?;
    let pager = Pager::new(page, PER_PAGE, matching);
    let rows = host_summaries::list(&state.pool, &online, &selection, Some((PER_PAGE, pager.offset())))
        .await?
        .iter()
        .map(HostRow::new)
        .collect();
    let pairs = filter.query_pairs();
    let mut csv = pairs.clone();
    csv.push(("format", "csv".into()));
    let status = filter.online.map(|o| if o { "online" } else { "offline" });
    let view = HostsPage {
        label: pairs[0].1.clone(),
        cpu: filter.cpu.clone().unwrap_or_default(),
        kernel: filter.kernel.clone().unwrap_or_default(),
        arch_choices: plain_choices(
            &arches.iter().map(String::as_str).collect::<Vec<_>>(),
            filter.arch.as_deref().unwrap_or_default(),
        ),
        status_choices: plain_choices(&["online", "offline"], status.unwrap_or_default()),
        accel_choices: enum_choices(filter.acceleration),
        filtered: filter != HostFilter::default(),
        fleet_size: usize::try_from(fleet_size).unwrap_or(usize::MAX),
        rows,
        summary: pager.summary(),
        prev: pager.prev_href("/hosts", &pairs),
        next: pager.next_href("/hosts", &pairs),
        csv_href: with_query("/api/v1/hosts", &csv),
        json_href: with_query("/api/v1/hosts", &pairs),
    };
    Ok(Html(view.render()?))
}

/// A row of `/api/v1/hosts`; labels as `k=v` joined by `;` so CSV stays one
/// cell per field (label keys cannot contain `;` or `=`, see the agent's `--label`).
#[derive(Debug, Serialize)]
struct HostApiRow {
    id: i64,
    name: String,
    labels: String,
    arch: Option<String>,
    cpu_model: Option<String>,
    logical_cores: Option<i32>,
    kernel: Option<String>,
    acceleration: Acceleration,
    online: bool,
    emulated: bool,
    first_seen: DateTime<Utc>,
    last_seen: DateTime<Utc>,
}

/// `GET /api/v1/hosts`: the matching hosts by name, [`API_PER_PAGE`] to a
/// page, the next page linked as RFC 8288 writes it.
async fn api_hosts(
    State(state): State<WebState>,
    Query(q): Query<HostsQuery>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let filter = HostFilter::parse(&q)?;
    let page = Pager::parse_page(q.page.as_deref())?;
    let online = state.scheduler.online_in_cluster().await?;
    let selection = filter.selection();
    let pager = Pager::new(
        page,
        API_PER_PAGE,
        host_summaries::count(&state.pool, &online, &selection).await?,
    );
    let rows: Vec<HostApiRow> =
        host_summaries::list(&state.pool, &online, &selection, Some((API_PER_PAGE, pager.offset())))
            .await?
            .into_iter()
            .map(|h| HostApiRow {
                id: h.host.id,
                labels: label_texts(&h.host.labels.0).join(";"),
                acceleration: h.acceleration,
                emulated: h.emulated,
                online: h.online,
                first_seen: h.host.first_seen,
                last_seen: h.host.last_seen,
                name: h.host.name,
                arch: h.arch,
                cpu_model: h.cpu_model_name,
                logical_cores: h.logical_cores,
                kernel: h.kernel_release,
            })
            .collect();
    let mut answer = api::table("hosts", &rows, f.format)?;
    let mut pairs = filter.query_pairs();
    if matches!(f.format, api::Format::Csv) {
        pairs.push(("format", "csv".to_string()));
    }
    api::link_next(&mut answer, pager.next_href("/api/v1/hosts", &pairs));
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sqlx::types::Json;

    use super::*;
    use crate::store::hosts::Host;

    fn host(labels: &[(&str, &str)], arch: &str) -> ListedHost {
        ListedHost {
            host: Host {
                id: 1,
                name: "h".into(),
                labels: Json(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                first_seen: Utc::now(),
                last_seen: Utc::now(),
                current_snapshot_id: Some(1),
                retired_at: None,
            },
            arch: Some(arch.into()),
            cpu_model_name: Some("Xeon".into()),
            kernel_release: Some("6.1.0".into()),
            logical_cores: Some(4),
            acceleration: Acceleration::Software,
            emulated: false,
            simulated: false,
            online: true,
        }
    }

    fn query(pairs: &[(&str, &str)]) -> HostsQuery {
        params::query_from(pairs)
    }

    #[test]
    fn filters_become_the_selection_they_name() {
        // (query, the selection it makes)
        type Case = (&'static [(&'static str, &'static str)], Selection<'static>);
        let cases: [Case; 7] = [
            (&[], Selection::default()),
            // An untouched form sends blank fields.
            (&[("label", ""), ("arch", " "), ("status", "")], Selection::default()),
            (
                &[("label", "class=gen3")],
                Selection {
                    label: Some(("class", Some("gen3"))),
                    ..Selection::default()
                },
            ),
            (
                &[("label", "emulated")],
                Selection {
                    label: Some(("emulated", None)),
                    ..Selection::default()
                },
            ),
            (
                &[("accel", "accelerated"), ("arch", "aarch64")],
                Selection {
                    arch: Some("aarch64"),
                    acceleration: Some(Acceleration::Accelerated),
                    ..Selection::default()
                },
            ),
            (
                &[("status", "offline")],
                Selection {
                    online: Some(false),
                    ..Selection::default()
                },
            ),
            (
                &[("cpu", "Xeon"), ("kernel", "6.1.0")],
                Selection {
                    cpu: Some("Xeon"),
                    kernel: Some("6.1.0"),
                    ..Selection::default()
                },
            ),
        ];
        for (pairs, want) in cases {
            let filter = HostFilter::parse(&query(pairs)).unwrap();
            assert_eq!(filter.selection(), want, "{pairs:?}");
        }
    }

    #[test]
    fn unknown_status_values_are_bad_requests_that_say_what_is_accepted() {
        let err = HostFilter::parse(&query(&[("status", "up")])).unwrap_err();
        assert!(err.to_string().contains("online or offline"), "{err}");
        let err = HostFilter::parse(&query(&[("accel", "fast")])).unwrap_err();
        assert!(
            err.to_string().contains("accelerated, partial, software, unknown"),
            "{err}"
        );
    }

    #[test]
    fn filters_survive_the_round_trip_through_links() {
        let pairs = [
            ("label", "class=gen3"),
            ("arch", "x86_64"),
            ("status", "online"),
            ("accel", "partial"),
        ];
        let filter = HostFilter::parse(&query(&pairs)).unwrap();
        let back: Vec<(String, String)> = filter
            .query_pairs()
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let again = HostsQuery {
            label: back.iter().find(|(k, _)| k == "label").map(|(_, v)| v.clone()),
            arch: back.iter().find(|(k, _)| k == "arch").map(|(_, v)| v.clone()),
            status: back.iter().find(|(k, _)| k == "status").map(|(_, v)| v.clone()),
            accel: back.iter().find(|(k, _)| k == "accel").map(|(_, v)| v.clone()),
            ..HostsQuery::default()
        };
        assert_eq!(HostFilter::parse(&again).unwrap(), filter);
    }

    #[test]
    fn pager_links_go_both_ways_and_escape_the_href() {
        let page = HostsPage {
            label: String::new(),
            cpu: String::new(),
            kernel: String::new(),
            arch_choices: Vec::new(),
            status_choices: Vec::new(),
            accel_choices: Vec::new(),
            filtered: false,
            fleet_size: 1,
            rows: vec![HostRow::new(&host(&[], "x86_64"))],
            summary: "showing 51–100 of 120".into(),
            prev: Some("/hosts?arch=x&page=1".into()),
            next: Some("/hosts?page=3".into()),
            csv_href: String::new(),
            json_href: String::new(),
        };
        let html = page.render().unwrap();
        assert!(
            html.contains(
                "<p class=\"pager\">showing 51–100 of 120 hosts.\n\
                 <a href=\"/hosts?arch=x&#38;page=1\" rel=\"prev\">← previous</a>\n\
                 <a href=\"/hosts?page=3\" rel=\"next\">next →</a></p>"
            ),
            "{html}"
        );
    }
}
