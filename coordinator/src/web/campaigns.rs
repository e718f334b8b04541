//! `/campaigns`: every campaign, newest first, 25 to a page, with its
//! progress; the same rows at `/api/v1/campaigns` (`?page=` too).

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::api::{self, ApiError, FormatParam};
use super::paging::Pager;
use super::{WebError, WebState, format};
use crate::report::campaign_summaries::{self, CampaignSummary};

/// Campaigns per page of the list, and per request of the API.
const PER_PAGE: u64 = 25;
const API_PER_PAGE: u64 = 500;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/campaigns", get(page))
        .route("/api/v1/campaigns", get(api_campaigns))
}

/// A campaign as the lists (this page, the overview) show it.
#[derive(Debug, Clone)]
pub struct CampaignRow {
    pub id: i64,
    pub name: String,
    pub suite: String,
    /// `running`, `finished` or `cancelled`: also the badge's CSS class.
    pub status: String,
    /// Operator name or token id, as the admin API recorded it.
    pub started_by: String,
    pub created: String,
    /// Seconds since the epoch, for sorting.
    pub created_sort: i64,
    /// Empty while running.
    pub finished: String,
    /// Hosts the campaign has jobs on.
    pub hosts: i64,
    /// Jobs in the campaign.
    pub total: i64,
    /// Done, failed or cancelled jobs: what the progress bar fills.
    pub settled: i64,
    pub done: i64,
    pub failed: i64,
    pub running: i64,
    pub queued: i64,
    /// `settled / total` as a percentage, e.g. `75.0 %`.
    pub percent: String,
}

impl CampaignRow {
    pub fn new(c: &CampaignSummary) -> Self {
        CampaignRow {
            id: c.id,
            name: c.name.clone(),
            suite: c.suite.clone(),
            status: c.status.clone(),
            started_by: c.started_by.clone(),
            created: format::timestamp(c.created_at),
            created_sort: c.created_at.timestamp(),
            finished: c.finished_at.map(format::timestamp).unwrap_or_default(),
            hosts: c.hosts,
            total: c.total(),
            settled: c.settled(),
            done: c.done,
            failed: c.failed,
            running: c.running,
            queued: c.queued,
            percent: progress_percent(c.settled(), c.total()),
        }
    }

    /// `max` of the `<progress>` element, which must be positive.
    pub fn progress_max(&self) -> i64 {
        self.total.max(1)
    }
}

/// Share of settled jobs; a campaign without jobs is complete.
pub fn progress_percent(settled: i64, total: i64) -> String {
    if total <= 0 {
        return format::percent(1.0);
    }
    format::percent(settled as f64 / total as f64)
}

/// `?page=` as text, so a bad value gets the error page rather than axum's plain rejection.
#[derive(Debug, Default, Deserialize)]
struct PageQuery {
    page: Option<String>,
}

#[derive(Template)]
#[template(path = "campaigns.html")]
struct CampaignsPage {
    rows: Vec<CampaignRow>,
    /// Running campaigns among all (not only this page's).
    running: i64,
    summary: String,
    prev: Option<String>,
    next: Option<String>,
}

async fn page(State(state): State<WebState>, Query(q): Query<PageQuery>) -> Result<Html<String>, WebError> {
    let page = Pager::parse_page(q.page.as_deref())?;
    let (total, running) = campaign_summaries::count(&state.pool).await?;
    let pager = Pager::new(page, PER_PAGE, total as u64);
    let rows = campaign_summaries::list(&state.pool, PER_PAGE as i64, pager.offset() as i64).await?;
    let view = CampaignsPage {
        rows: rows.iter().map(CampaignRow::new).collect(),
        running,
        summary: pager.summary(),
        prev: pager.prev_href("/campaigns", &[]),
        next: pager.next_href("/campaigns", &[]),
    };
    Ok(Html(view.render()?))
}

/// A row of `/api/v1/campaigns`; `jobs` is the total, the rest its split by status.
#[derive(Debug, Serialize)]
struct CampaignApiRow {
    id: i64,
    name: String,
    suite: String,
    status: String,
    started_by: String,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    hosts: i64,
    jobs: i64,
    queued: i64,
    running: i64,
    done: i64,
    failed: i64,
    cancelled: i64,
}

/// `?page=N`: 500 campaigns per page, newest first.
async fn api_campaigns(
    State(state): State<WebState>,
    Query(q): Query<PageQuery>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let page = Pager::parse_page(q.page.as_deref())?;
    let (total, _) = campaign_summaries::count(&state.pool).await?;
    let pager = Pager::new(page, API_PER_PAGE, total as u64);
    let rows: Vec<CampaignApiRow> = campaign_summaries::list(&state.pool, API_PER_PAGE as i64, pager.offset() as i64)
        .await?
        .into_iter()
        .map(|c| CampaignApiRow {
            jobs: c.total(),
            id: c.id,
            name: c.name,
            suite: c.suite,
            status: c.status,
            started_by: c.started_by,
            created_at: c.created_at,
            finished_at: c.finished_at,
            hosts: c.hosts,
            queued: c.queued,
            running: c.running,
            done: c.done,
            failed: c.failed,
            cancelled: c.cancelled,
        })
        .collect();
    api::table("campaigns", &rows, f.format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_the_share_of_settled_jobs() {
        for (settled, total, want) in [
            (0, 4, "0 %"),
            (3, 4, "75.0 %"),
            (4, 4, "100 %"),
            (1, 3, "33.3 %"),
            (0, 0, "100 %"),
        ] {
            assert_eq!(progress_percent(settled, total), want, "{settled}/{total}");
        }
    }
}
