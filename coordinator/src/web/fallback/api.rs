//! `/api/v1/fallback` (the page's rows, same filters, every page) and
//! `/api/v1/findings?status=open|resolved|all`, as JSON or CSV.

use axum::extract::{Query, State};
use axum::response::Response;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, KeyMode};
use serde::{Deserialize, Serialize};

use super::super::params::given;
use super::{
    FallbackQuery, Filters, Judged, ViewHosts, explain, findings_of, judge_pair, load_all, reason_with_subject,
};
use crate::report::fallback as model;
use crate::web::api::{self, ApiError, FindingApiRow, FormatParam};
use crate::web::paging::Pager;
use crate::web::{WebError, WebState};

/// A row of `/api/v1/fallback`: the asked-for columns first, then the view's
/// point and marks. The point's fields are typed one by one rather than a
/// flattened [`cipherfleet_core::Point`]: a row pairs both paths, so it has no
/// single `path` (nor a concurrency: the view has none), and the CSV keeps
/// its column order.
#[derive(Debug, Serialize)]
struct FallbackApiRow {
    host_id: i64,
    host_name: String,
    algorithm: Algorithm,
    size_bytes: u64,
    /// MB/s (10^6 bytes/s) of the latest accelerated-path result; empty when never measured.
    accelerated_mb_s: Option<f64>,
    /// What that request ran: `partial` or `software` when it fell back.
    accelerated_path_used: Option<PathUsed>,
    software_mb_s: Option<f64>,
    /// accelerated / software; empty unless both were measured.
    ratio: Option<f64>,
    /// The explaining open findings' reasons with their subjects
    /// (`cpu-lacks: aes; cpu-lacks: pclmulqdq`), `; `-separated.
    reasons: String,
    threads: u32,
    direction: Direction,
    key_mode: KeyMode,
    /// Listed under "Accelerated path at software speed" on the page.
    at_software_speed: bool,
    /// Timings of emulated hosts are not performance; simulated ones not measured at all.
    emulated: bool,
    simulated: bool,
    /// The raw results behind the figures (`/api/v1/results/{id}`).
    accelerated_result_id: Option<i64>,
    software_result_id: Option<i64>,
    /// The view's provider (`provider=`), left out for the built-in crates as
    /// a [`cipherfleet_core::Point`] leaves it: their rows read as they did before providers.
    #[serde(skip_serializing_if = "Provider::is_rustcrypto")]
    provider: Provider,
}

/// Rows per page of `/api/v1/fallback` (`?page=N`): a fleet of 10,000 hosts
/// has 270,000 at one point, too many for one answer.
const API_PER_PAGE: u64 = 1000;

/// `GET /api/v1/fallback`: the rows of the page's view, worst ratio first,
/// [`API_PER_PAGE`] to a page (`?page=N`).
pub(super) async fn fallback(
    State(state): State<WebState>,
    Query(q): Query<FallbackQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let filters = Filters::parse(&q)?;
    let page = Pager::parse_page(q.page.as_deref())?;
    let (rows, open) = match filters.reason {
        Some(reason) => {
            let (rows, open) = load_all(&state, &filters, reason).await?;
            let pager = Pager::new(page, API_PER_PAGE, rows.len() as u64);
            let rows = rows
                .into_iter()
                .skip(pager.offset() as usize)
                .take(API_PER_PAGE as usize)
                .collect();
            (rows, open)
        }
        None => {
            let hosts = ViewHosts::load(&state.pool, filters.keep().as_deref()).await?;
            let offset = (page - 1).saturating_mul(API_PER_PAGE);
            let pairs = model::pairs(
                &state.pool,
                &filters.point(),
                hosts.kept(),
                Some(API_PER_PAGE as i64),
                i64::try_from(offset).unwrap_or(i64::MAX),
            )
            .await?;
            let mut rows: Vec<Judged> = pairs
                .into_iter()
                .filter_map(|p| judge_pair(&hosts, &filters, p))
                .collect();
            let open = findings_of(&state, rows.iter().map(|r| r.pair.host_id)).await?;
            explain(&mut rows, &open, &filters.point());
            (rows, open)
        }
    };
    let out: Vec<FallbackApiRow> = rows
        .into_iter()
        .map(|r| FallbackApiRow {
            reasons: r
                .reasons
                .iter()
                .map(|&i| reason_with_subject(&open[i]))
                .collect::<Vec<_>>()
                .join("; "),
            host_id: r.pair.host_id,
            host_name: r.host.host.name.clone(),
            algorithm: r.pair.algorithm,
            size_bytes: filters.size_bytes,
            accelerated_mb_s: r.pair.accelerated_mb_s,
            accelerated_path_used: r.pair.accelerated_path_used,
            software_mb_s: r.pair.software_mb_s,
            ratio: r.ratio,
            threads: filters.threads,
            direction: filters.direction,
            key_mode: filters.key_mode,
            at_software_speed: r.speed.is_some(),
            emulated: r.host.emulated,
            simulated: r.host.simulated,
            accelerated_result_id: r.pair.accelerated_result_id,
            software_result_id: r.pair.software_result_id,
            provider: filters.provider,
        })
        .collect();
    api::table("fallback", &out, format.format)
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct FindingsQuery {
    /// `open` (default), `resolved` or `all`.
    status: Option<String>,
    page: Option<String>,
}

/// Findings per page of `/api/v1/findings` (`?page=N`): with their evidence,
/// a large fleet's open findings are megabytes of JSON (docs/performance.md,
/// "How it got there").
const FINDINGS_PER_PAGE: u64 = 1000;

/// `GET /api/v1/findings`: open (default), resolved or all findings, most
/// severe and open first, [`FINDINGS_PER_PAGE`] to a page (`?page=N`, with a
/// `Link: <…>; rel="next"` header while more follow).
pub(super) async fn findings(
    State(state): State<WebState>,
    Query(q): Query<FindingsQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let status = match given(&q.status) {
        None | Some("open") => Some("open"),
        Some("resolved") => Some("resolved"),
        Some("all") => None,
        Some(other) => {
            return Err(WebError::BadRequest(format!("status={other:?}: use open, resolved or all")).into());
        }
    };
    let page = Pager::parse_page(q.page.as_deref())?;
    let pager = Pager::new(
        page,
        FINDINGS_PER_PAGE,
        u64::try_from(model::count_findings(&state.pool, status).await?).unwrap_or(0),
    );
    let limit = i64::try_from(FINDINGS_PER_PAGE).unwrap_or(i64::MAX);
    let offset = i64::try_from(pager.offset()).unwrap_or(i64::MAX);
    let rows: Vec<FindingApiRow> = model::findings(&state.pool, status, Some(limit), offset)
        .await?
        .into_iter()
        .map(FindingApiRow::from)
        .collect();
    let mut answer = api::table("findings", &rows, format.format)?;
    let mut pairs = vec![("status", given(&q.status).unwrap_or_default().to_string())];
    if matches!(format.format, api::Format::Csv) {
        pairs.push(("format", "csv".to_string()));
    }
    api::link_next(&mut answer, pager.next_href("/api/v1/findings", &pairs));
    Ok(answer)
}
