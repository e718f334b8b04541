//! `/api/v1/compare`: the rows of a compare view as JSON or CSV, paged as
//! the page is (`page=`, a `Link` header to the next page); class rows come whole.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::Response;
use serde::Serialize;

use cipherfleet_core::Point;
use cipherfleet_core::path::PathUsed;

use super::params::{CompareParams, CompareQuery, Rows};
use super::{load, view_point};
use crate::domain::latest::LatestResult;
use crate::web::WebState;
use crate::web::api::{self, ApiError, FormatParam};

/// The header `/api/v1/compare` sends when its class figures (class rows,
/// and the range behind host rows' colours) miss newer results: when they
/// were computed (RFC 3339). They are refreshed in the background meanwhile.
pub const CELLS_AS_OF: &str = "cipherfleet-class-cells-as-of";

/// A cell of host rows, as `/api/v1/compare` sends it.
#[derive(Debug, Serialize)]
struct HostCellRow {
    host_id: i64,
    host_name: String,
    emulated: bool,
    simulated: bool,
    class_key: String,
    #[serde(flatten)]
    point: Point,
    path_used: PathUsed,
    throughput_mb_s: f64,
    latency_p99_ns: i64,
    cv: Option<f64>,
    samples: i32,
    result_id: i64,
    measured_at: String,
}

/// A cell of class rows: medians over the class's hosts.
#[derive(Debug, Serialize)]
struct ClassCellRow {
    class_key: String,
    class: String,
    emulated: bool,
    simulated: bool,
    hosts: usize,
    #[serde(flatten)]
    point: Point,
    median_throughput_mb_s: f64,
    median_latency_p99_ns: f64,
    /// Spread of the hosts' throughputs (coefficient of variation), when two or more.
    cv_across_hosts: Option<f64>,
    /// Hosts whose worker ran wholly another path than asked (software for accelerated).
    hosts_fell_back: usize,
    /// Hosts whose worker ran partly in software (`partial`).
    hosts_partial: usize,
}

pub(super) async fn compare(
    State(state): State<WebState>,
    Query(q): Query<CompareQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let params = CompareParams::parse(&q)?;
    let loaded = load(&state, &params).await?;
    let m = &loaded.grid;
    let mut answer = match params.rows {
        Rows::Hosts => {
            let class_of: HashMap<i64, &str> = loaded
                .classes
                .iter()
                .flat_map(|r| r.host_ids.iter().map(|id| (*id, r.key.as_str())))
                .collect();
            let by_result: HashMap<i64, &LatestResult> = loaded.points.iter().map(|p| (p.result_id, p)).collect();
            let mut rows = Vec::new();
            for (head, cells) in &m.rows {
                let Ok(host_id) = head.id.parse::<i64>() else { continue };
                for cell in cells {
                    let Some(c) = cell else { continue };
                    let Some(p) = c.result_id.and_then(|id| by_result.get(&id)) else {
                        continue;
                    };
                    rows.push(HostCellRow {
                        host_id,
                        host_name: head.label.clone(),
                        emulated: head.emulated,
                        simulated: head.simulated,
                        class_key: class_of.get(&host_id).copied().unwrap_or_default().to_string(),
                        point: p.point,
                        path_used: p.path_used,
                        throughput_mb_s: p.throughput_mb_s,
                        latency_p99_ns: p.latency_p99_ns,
                        cv: p.cv,
                        samples: p.samples,
                        result_id: p.result_id,
                        measured_at: p.measured_at.to_rfc3339(),
                    });
                }
            }
            api::table("compare", &rows, format.format)?
        }
        Rows::Classes => {
            let mut rows = Vec::new();
            for (head, cells) in &m.rows {
                for (algorithm, cell) in m.columns.iter().zip(cells) {
                    let Some(c) = cell else { continue };
                    rows.push(ClassCellRow {
                        class_key: head.id.split('-').next().unwrap_or_default().to_string(),
                        class: head.label.clone(),
                        emulated: head.emulated,
                        simulated: head.simulated,
                        hosts: c.hosts,
                        point: view_point(&params.view, *algorithm),
                        median_throughput_mb_s: c.throughput_mb_s,
                        median_latency_p99_ns: c.latency_p99_ns,
                        cv_across_hosts: if c.hosts > 1 { c.cv } else { None },
                        hosts_fell_back: c.fell_back,
                        hosts_partial: c.partial,
                    });
                }
            }
            api::table("compare-classes", &rows, format.format)?
        }
    };
    // The rows are paged as the page's are: a link to the next page, as RFC 8288 writes it.
    let mut pairs = params.query_pairs();
    if matches!(format.format, api::Format::Csv) {
        pairs.push(("format", "csv".to_string()));
    }
    api::link_next(&mut answer, loaded.pager.next_href("/api/v1/compare", &pairs));
    if let Some(at) = loaded.cells_as_of
        && let Ok(value) = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true).parse()
    {
        // Class figures read as stored while newer results are folded in.
        answer.headers_mut().insert(CELLS_AS_OF, value);
    }
    Ok(answer)
}
