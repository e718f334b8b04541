//! `/api/v1/results/{id}`: one stored result, with the measurement exactly
//! as the agent reported it (schema `cipherfleet.measurement/2`, `/1` from
//! older agents: every sample, latency percentile and CPU figure). The
//! report's tables link each number here so a reader can check where it came from.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::api::ApiError;
use super::paging::parse_id;
use super::{WebError, WebState};
use crate::store::results;

pub fn routes() -> Router<WebState> {
    Router::new().route("/api/v1/results/{id}", get(raw_result))
}

async fn raw_result(State(state): State<WebState>, Path(raw_id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&raw_id, "result")?;
    let r = results::stored(&state.pool, id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no result with id {id}")))?;
    Ok(Json(json!({
        "id": r.id,
        "job_id": r.job_id,
        "campaign_id": r.campaign_id,
        "host_id": r.host_id,
        "host_name": r.host_name,
        "snapshot_id": r.snapshot_id,
        "created_at": r.created_at,
        "measurement": r.measurement,
    }))
    .into_response())
}
