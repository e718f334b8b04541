//! `/capacity`: the capacity planner, and `/api/v1/capacity` (the same as
//! JSON: inputs and rows; `format=csv`: the rows).
//!
//! For each machine class ([`MachineClass`]) it reads the latest measured
//! points of the chosen algorithm at one payload size, direction and path,
//! and turns them into per-core MB/s, thread-scaling efficiency, and cores
//! and hosts needed for a target rate ([`crate::analysis::capacity`] holds
//! the formulas). Beside them: the recommended algorithm of the class, the
//! fastest measured authenticated one at that size, with its lead.
//!
//! Emulated (`emulated` label) and simulated (`simulated` label) hosts are
//! left out unless `include=emulated`; when included they form their own
//! rows, marked, so their timings never blend into a real class's figures.
//!
//! - [`inputs`]: the query string, checked, and the link back to the plan.
//! - [`rows`]: the planner's rows, one per class.
//! - [`view`]: the page as printed.

mod inputs;
mod rows;
mod view;

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use cipherfleet_core::algorithm::Algorithm;

use super::api::{self, ApiError, FormatParam};
use super::{WebError, WebState};
use crate::analysis::capacity as model;
use crate::report::capacity::{self as read, PointFilter};
pub use inputs::{CapacityQuery, Inputs};
use rows::counted;
pub use rows::{CapacityRow, Measurements, plan_rows};
use view::page_view;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/capacity", get(page))
        .route("/api/v1/capacity", get(api_capacity))
}

/// Reads what the planner needs: the hosts, and the points of the chosen
/// algorithm plus every recommendation candidate on the hosts it counts.
async fn measure(state: &WebState, inputs: &Inputs) -> Result<Measurements, WebError> {
    let mut algorithms: Vec<Algorithm> = cipherfleet_core::algorithm::ALL
        .iter()
        .copied()
        .filter(|a| model::is_candidate(*a))
        .collect();
    algorithms.push(inputs.algorithm);
    let hosts = read::hosts(&state.pool).await?;
    let counted: Vec<i64> = hosts.iter().filter(|h| counted(h, inputs)).map(|h| h.host_id).collect();
    let points = read::points(
        &state.pool,
        PointFilter {
            size_bytes: inputs.size_bytes,
            direction: inputs.direction,
            path: inputs.path,
            provider: inputs.provider,
            algorithms: &algorithms,
            hosts: &counted,
        },
    )
    .await?;
    Ok(Measurements { hosts, points })
}

/// The JSON answer: what was asked, and the rows.
#[derive(Serialize)]
struct CapacityAnswer<'a> {
    inputs: &'a Inputs,
    /// Emulated or simulated hosts left out (`include=emulated` plans with them).
    excluded_hosts: usize,
    rows: &'a [CapacityRow],
}

async fn api_capacity(
    State(state): State<WebState>,
    Query(query): Query<CapacityQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let inputs = query.inputs()?;
    let (rows, excluded_hosts) = plan_rows(&measure(&state, &inputs).await?, &inputs);
    match format.format {
        api::Format::Csv => api::table("capacity", &rows, format.format),
        api::Format::Json => Ok(axum::Json(CapacityAnswer {
            inputs: &inputs,
            excluded_hosts,
            rows: &rows,
        })
        .into_response()),
    }
}

async fn page(State(state): State<WebState>, Query(query): Query<CapacityQuery>) -> Result<Html<String>, WebError> {
    let inputs = query.inputs()?;
    let measurements = measure(&state, &inputs).await?;
    Ok(Html(page_view(inputs, &measurements).render()?))
}
