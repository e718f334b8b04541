//! A host's whole history of its key points, past the raw window too: the
//! daily (and, past `--keep-daily`, monthly) summaries retention folds raw
//! results into ([`crate::retention`]), joined with the raw results of the
//! window summarised per UTC day. The chart on `/hosts/{id}` and
//! `/api/v1/hosts/{id}/history`.

use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::response::Response;
use axum::routing::get;

use super::api::{self, ApiError, FormatParam};
use super::host::{KEY_ALGORITHMS, KEY_SIZE, host_or_404};
use super::svg::{LineChart, XAxis, time_x};
use super::{WebState, format};
use crate::store::rollups::{self, HistoryRow};

pub fn routes() -> Router<WebState> {
    Router::new().route("/api/v1/hosts/{id}/history", get(api_history))
}

/// The whole-history chart: one dot per UTC day (the median of its results),
/// per month before the daily window; `None` when no algorithm has two
/// periods (the chart of each result says it all then).
pub fn chart(rows: &[HistoryRow], algorithms: &[&str], size_bytes: u64) -> Option<String> {
    let periods = |alg: &str| rows.iter().filter(|r| r.algorithm == alg).count();
    if algorithms.iter().all(|a| periods(a) < 2) {
        return None;
    }
    let monthly_until = rows
        .iter()
        .filter(|r| r.resolution == "month")
        .map(|r| r.period_start)
        .max();
    let resolution = match monthly_until {
        Some(last) => format!(
            "one dot per month to {}, per UTC day after (the median of its results)",
            last.format("%Y-%m")
        ),
        None => "one dot per UTC day (the median of its results)".to_string(),
    };
    let mut chart = LineChart::new(
        format!(
            "Whole history: {} encrypt, 1 thread, accelerated path; {resolution}",
            format::bytes(size_bytes)
        ),
        XAxis::Time,
    );
    for alg in algorithms {
        let line: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.algorithm == *alg)
            .map(|r| (time_x(r.period_start), r.median_mb_s))
            .collect();
        if !line.is_empty() {
            chart = chart.series(*alg, line);
        }
    }
    Some(chart.render())
}

/// `GET /api/v1/hosts/{id}/history`: every period of the host's key points
/// (the algorithms and size of the host page's charts), oldest first per
/// algorithm, with its resolution, count, quantiles and path mix.
async fn api_history(
    State(state): State<WebState>,
    UrlPath(raw_id): UrlPath<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let host = host_or_404(&state, &raw_id).await?;
    let rows = rollups::history(&state.pool, host.id, &KEY_ALGORITHMS, KEY_SIZE).await?;
    api::table(&format!("host-{}-history", host.id), &rows, f.format)
}
