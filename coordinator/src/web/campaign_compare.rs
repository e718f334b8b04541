//! `/campaigns/{a}/compare/{b}`: what changed between two campaigns, for each
//! host and point — the earlier and later throughput, their ratio, and its
//! significance as the robust z-score the findings use
//! ([`crate::analysis::campaign_change`]): a kernel upgrade's before and
//! after at a glance. The table is also at
//! `/api/v1/campaigns/{a}/compare/{b}` (JSON, or CSV with `?format=csv`).

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use cipherfleet_core::Point;
use cipherfleet_core::path::PathUsed;
use serde::Serialize;

use super::api::{self, ApiError, FormatParam};
use super::paging::parse_id;
use super::{WebError, WebState, format};
use crate::analysis::campaign_change::{self, Verdict};
use crate::analysis::slow::Thresholds;
use crate::report::campaign_compare::{self, PointPair};
use crate::store::campaigns::{self, Campaign};

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/campaigns/{a}/compare/{b}", get(page))
        .route("/api/v1/campaigns/{a}/compare/{b}", get(api_table))
}

/// One host and point: before (campaign a), after (campaign b), the change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeRow {
    pub host_id: i64,
    /// As the agent reported it: untrusted text.
    pub host_name: String,
    #[serde(flatten)]
    pub point: Point,
    pub before_result_id: Option<i64>,
    pub before_path_used: Option<PathUsed>,
    pub before_mb_s: Option<f64>,
    pub after_result_id: Option<i64>,
    pub after_path_used: Option<PathUsed>,
    pub after_mb_s: Option<f64>,
    /// after / before.
    pub ratio: Option<f64>,
    /// Robust σ above (positive) or below (negative) the earlier result's samples.
    pub z: Option<f64>,
    /// `faster`, `slower` (past the findings' z threshold), `same` or `unmatched`.
    pub verdict: Verdict,
}

impl ChangeRow {
    fn new(p: PointPair, t: &Thresholds) -> Self {
        let samples = p.before_samples.as_deref().unwrap_or_default();
        let change = campaign_change::change(p.before_mb_s.map(|b| (b, samples)), p.after_mb_s, t);
        let path = |s: Option<String>| s.and_then(|s| s.parse().ok());
        ChangeRow {
            host_id: p.host_id,
            host_name: p.host_name,
            point: p.point,
            before_result_id: p.before_result_id,
            before_path_used: path(p.before_path_used),
            before_mb_s: p.before_mb_s,
            after_result_id: p.after_result_id,
            after_path_used: path(p.after_path_used),
            after_mb_s: p.after_mb_s,
            ratio: change.ratio,
            z: change.z,
            verdict: change.verdict,
        }
    }

    pub fn size(&self) -> String {
        format::bytes(self.point.size_bytes)
    }

    pub fn before(&self) -> String {
        self.before_mb_s.map(format::mb_s).unwrap_or_else(|| "—".into())
    }

    pub fn after(&self) -> String {
        self.after_mb_s.map(format::mb_s).unwrap_or_else(|| "—".into())
    }

    /// The change as a signed percentage.
    pub fn change(&self) -> String {
        self.ratio
            .map(|r| format!("{:+.1} %", (r - 1.0) * 100.0))
            .unwrap_or_default()
    }

    pub fn z_text(&self) -> String {
        self.z.map(|z| format!("{z:+.1}")).unwrap_or_default()
    }

    /// A sort key for the change column (unmatched rows last).
    pub fn ratio_sort(&self) -> f64 {
        self.ratio.unwrap_or(f64::MAX)
    }

    /// What ran, when it differs between the two: `accelerated → software`.
    pub fn path_change(&self) -> String {
        match (self.before_path_used, self.after_path_used) {
            (Some(a), Some(b)) if a != b => format!("{a} → {b}"),
            _ => String::new(),
        }
    }
}

#[derive(Template)]
#[template(path = "campaign_compare.html")]
struct ComparePage {
    before: Campaign,
    after: Campaign,
    rows: Vec<ChangeRow>,
    slower: usize,
    faster: usize,
    min_z: f64,
    /// Results of the two campaigns past `--keep-raw`, folded away.
    folded: i64,
}

async fn campaign_or_404(state: &WebState, raw_id: &str) -> Result<Campaign, WebError> {
    let id = parse_id(raw_id, "campaign")?;
    campaigns::get(&state.pool, id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no campaign with id {id}")))
}

/// Both campaigns (404 naming a missing one) and the table.
async fn load(state: &WebState, a: &str, b: &str) -> Result<(Campaign, Campaign, Vec<ChangeRow>), WebError> {
    let (before, after) = (campaign_or_404(state, a).await?, campaign_or_404(state, b).await?);
    let t = Thresholds::default();
    let rows = campaign_compare::pairs(&state.pool, before.id, after.id)
        .await?
        .into_iter()
        .map(|p| ChangeRow::new(p, &t))
        .collect();
    Ok((before, after, rows))
}

async fn page(State(state): State<WebState>, Path((a, b)): Path<(String, String)>) -> Result<Html<String>, WebError> {
    let (before, after, rows) = load(&state, &a, &b).await?;
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let folded = campaign_compare::folded(&state.pool, &[before.id, after.id]).await?;
    let view = ComparePage {
        folded,
        slower: count(Verdict::Slower),
        faster: count(Verdict::Faster),
        min_z: Thresholds::default().min_z,
        before,
        after,
        rows,
    };
    Ok(Html(view.render()?))
}

async fn api_table(
    State(state): State<WebState>,
    Path((a, b)): Path<(String, String)>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let (before, after, rows) = load(&state, &a, &b).await?;
    api::table(&format!("campaign-{}-compare-{}", before.id, after.id), &rows, f.format)
}
