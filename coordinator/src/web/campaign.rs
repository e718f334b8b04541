//! `/campaigns/{id}`: one campaign — overall progress, progress per host
//! ([`PER_PAGE`] hosts to a page: a campaign may run on 10,000), and the
//! failed jobs with the error their agent reported. While it runs the
//! page asks the browser to reload every few seconds (a `Refresh` header: no
//! script needed). Tables at `/api/v1/campaigns/{id}/hosts` (paged as the
//! page is: `?page=N`, a `Link: <…>; rel="next"` header while more follow)
//! and `…/failures`.

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderName;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Serialize;

use cipherfleet_core::Point;

use super::api::{self, ApiError, FormatParam};
use super::campaigns::progress_percent;
use super::paging::{Pager, parse_id};
use super::{WebError, WebState, format};
use crate::report::campaign_summaries;
use crate::store::campaigns::{self, Campaign, CampaignStatus, JobCounts};
use crate::store::jobs::{self, Job};

/// Failed jobs listed; a campaign failing more than this has one cause
/// worth fixing first, and the API has the same cap.
const FAILURES_SHOWN: i64 = 500;
/// Hosts per page of the progress table.
const PER_PAGE: u64 = 100;
/// Seconds between reloads of a running campaign's page.
const REFRESH_SECONDS: &str = "5";

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/campaigns/{id}", get(page))
        .route("/api/v1/campaigns/{id}/hosts", get(api_hosts))
        .route("/api/v1/campaigns/{id}/failures", get(api_failures))
}

/// Job counts of one host (or the whole campaign) as a progress row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostProgress {
    pub host_id: i64,
    pub host_name: String,
    pub queued: i64,
    pub running: i64,
    pub done: i64,
    pub failed: i64,
    pub cancelled: i64,
    pub total: i64,
}

impl HostProgress {
    fn new(host_id: i64, host_name: String, c: &JobCounts) -> Self {
        HostProgress {
            host_id,
            host_name,
            queued: c.queued,
            running: c.running,
            done: c.done,
            failed: c.failed,
            cancelled: c.cancelled,
            total: c.total(),
        }
    }

    /// Jobs that will not change any more: the progress bar's value.
    pub fn settled(&self) -> i64 {
        self.done + self.failed + self.cancelled
    }

    /// `max` of `<progress>`, which must be positive even with no jobs.
    pub fn progress_max(&self) -> i64 {
        self.total.max(1)
    }

    pub fn percent(&self) -> String {
        progress_percent(self.settled(), self.total)
    }
}

/// A failed job: which point, on which host, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub job_id: uuid::Uuid,
    pub host_id: i64,
    /// The host's name as its agent reported it: untrusted text.
    pub host_name: String,
    /// The job's point (its path is the one asked for).
    #[serde(flatten)]
    pub point: Point,
    /// Runs lost with the agent before this outcome.
    pub attempts: i32,
    pub finished_at: Option<DateTime<Utc>>,
    /// As the agent (or the scheduler, for a lost agent) reported it: untrusted text.
    pub error: String,
}

impl Failure {
    fn new(job: Job, host_name: String) -> Self {
        Failure {
            job_id: job.id,
            host_id: job.host_id,
            host_name,
            point: job.point,
            attempts: job.attempts,
            finished_at: job.finished_at,
            error: job.error.unwrap_or_default(),
        }
    }

    pub fn size(&self) -> String {
        format::bytes(self.point.size_bytes)
    }

    pub fn when(&self) -> String {
        self.finished_at.map(format::timestamp).unwrap_or_default()
    }
}

#[derive(Template)]
#[template(path = "campaign.html")]
struct CampaignPage {
    id: i64,
    name: String,
    /// A suite name, or `matrix` for an explicit matrix.
    suite: String,
    status: &'static str,
    started_by: String,
    created: String,
    /// Empty while running.
    finished: String,
    /// The whole campaign's counts, in the shape of a host's.
    overall: HostProgress,
    /// This page of the per-host progress.
    hosts: Vec<HostProgress>,
    /// "showing 1–100 of N".
    hosts_summary: String,
    prev: Option<String>,
    next: Option<String>,
    failures: Vec<Failure>,
    /// Jobs that failed whose errors retention deleted with the campaign's old
    /// jobs (`serve --keep-raw`): the count outlives them.
    failures_folded: i64,
    /// Its counts per host were folded into one row for all its hosts
    /// (`serve --keep-daily`): the totals are all there is.
    counts_folded: bool,
    /// Points skipped per path: their hosts lack the path ([`super::campaign_skips`]).
    skipped: Vec<super::campaign_skips::SkipRow>,
    /// The matrix and selector as the operator gave them, pretty-printed.
    matrix: String,
    selector: String,
    refreshing: bool,
    /// The campaign created before this one: "compare with the previous campaign".
    previous: Option<i64>,
}

/// `?page=` of the per-host progress (the page's and the API's).
#[derive(Debug, Default, serde::Deserialize)]
struct PageQuery {
    page: Option<String>,
}

/// The pager of `?page=` over a campaign's `host_count` hosts.
fn host_pager(q: &PageQuery, host_count: i64) -> Result<Pager, WebError> {
    let asked = Pager::parse_page(q.page.as_deref())?;
    Ok(Pager::new(asked, PER_PAGE, u64::try_from(host_count).unwrap_or(0)))
}

/// The campaign and its counts, or a 404 naming the id (400 for a non-number).
async fn progress_or_404(state: &WebState, raw_id: &str) -> Result<(Campaign, JobCounts, i64), WebError> {
    let id = parse_id(raw_id, "campaign")?;
    let campaign = campaigns::get(&state.pool, id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no campaign with id {id}")))?;
    let (jobs, hosts) = campaign_summaries::totals(&state.pool, id).await?;
    Ok((campaign, jobs, hosts))
}

/// Per-host progress by host name, the hosts of `pager`'s page.
async fn host_rows(state: &WebState, campaign_id: i64, pager: &Pager) -> Result<Vec<HostProgress>, WebError> {
    let limit = i64::try_from(pager.per_page).unwrap_or(i64::MAX);
    let offset = i64::try_from(pager.offset()).unwrap_or(i64::MAX);
    Ok(
        campaign_summaries::host_progress(&state.pool, campaign_id, Some(limit), offset)
            .await?
            .into_iter()
            .map(|(id, name, counts)| HostProgress::new(id, name, &counts))
            .collect(),
    )
}

async fn failure_rows(state: &WebState, campaign_id: i64) -> Result<Vec<Failure>, WebError> {
    Ok(jobs::failures(&state.pool, campaign_id, FAILURES_SHOWN)
        .await?
        .into_iter()
        .map(|(job, host_name)| Failure::new(job, host_name))
        .collect())
}

/// The `Refresh` header (honoured by every browser) reloads a running
/// campaign without a script or an inline `<meta>`; it stops once finished.
async fn page(
    State(state): State<WebState>,
    Path(raw_id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Result<Response, WebError> {
    let (c, jobs, host_count) = progress_or_404(&state, &raw_id).await?;
    let pager = host_pager(&q, host_count)?;
    let base = format!("/campaigns/{}", c.id);
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let refreshing = c.status == CampaignStatus::Running;
    let failures = failure_rows(&state, c.id).await?;
    let hosts = host_rows(&state, c.id, &pager).await?;
    let view = CampaignPage {
        id: c.id,
        overall: HostProgress::new(0, "all hosts".into(), &jobs),
        counts_folded: hosts.is_empty() && jobs.total() > 0,
        hosts,
        hosts_summary: pager.summary(),
        prev: pager.prev_href(&base, &[]),
        next: pager.next_href(&base, &[]),
        failures_folded: if failures.is_empty() { jobs.failed } else { 0 },
        failures,
        skipped: super::campaign_skips::rows(&state.pool, c.id).await?,
        status: c.status.as_str(),
        created: format::timestamp(c.created_at),
        finished: c.finished_at.map(format::timestamp).unwrap_or_default(),
        matrix: pretty(&c.matrix),
        selector: pretty(&c.selector),
        name: c.name,
        suite: c.suite,
        started_by: c.started_by,
        refreshing,
        previous: campaigns::previous(&state.pool, c.id).await?,
    };
    let html = Html(view.render()?);
    if refreshing {
        Ok(([(HeaderName::from_static("refresh"), REFRESH_SECONDS)], html).into_response())
    } else {
        Ok(html.into_response())
    }
}

/// `GET /api/v1/campaigns/{id}/hosts`: the per-host progress, [`PER_PAGE`]
/// hosts to a page by name as on the page (a large fleet in one answer was
/// slow: docs/performance.md, "Coordinator queries and sessions"), with a
/// `Link: <…>; rel="next"` header (RFC 8288) while more follow.
async fn api_hosts(
    State(state): State<WebState>,
    Path(raw_id): Path<String>,
    Query(q): Query<PageQuery>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let (campaign, _, host_count) = progress_or_404(&state, &raw_id).await?;
    let id = campaign.id;
    let pager = host_pager(&q, host_count)?;
    let mut answer = api::table(
        &format!("campaign-{id}-hosts"),
        &host_rows(&state, id, &pager).await?,
        f.format,
    )?;
    let mut pairs = Vec::new();
    if f.format == api::Format::Csv {
        pairs.push(("format", "csv".to_string()));
    }
    api::link_next(
        &mut answer,
        pager.next_href(&format!("/api/v1/campaigns/{id}/hosts"), &pairs),
    );
    Ok(answer)
}

async fn api_failures(
    State(state): State<WebState>,
    Path(raw_id): Path<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let (campaign, _, _) = progress_or_404(&state, &raw_id).await?;
    let id = campaign.id;
    api::table(
        &format!("campaign-{id}-failures"),
        &failure_rows(&state, id).await?,
        f.format,
    )
}
