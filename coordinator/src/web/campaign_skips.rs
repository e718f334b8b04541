//! A campaign's skipped points: those its hosts' agents lack the path for
//! (the software path without the `-soft` sibling), per path, with the reason.
//! Shown on the campaign page beside its job counts, so skipped points look
//! neither failed nor missing; the table at `/api/v1/campaigns/{id}/skipped`.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;
use sqlx::PgPool;

use super::api::{self, ApiError, FormatParam};
use super::paging::parse_id;
use super::{WebError, WebState};
use crate::store::{campaigns, capabilities};

pub fn routes() -> Router<WebState> {
    Router::new().route("/api/v1/campaigns/{id}/skipped", get(api_skipped))
}

/// The points of one path a campaign skipped, over all its hosts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkipRow {
    pub path: cipherfleet_core::path::Path,
    /// Hosts that lack the path.
    pub hosts: i64,
    pub points: i64,
    pub reason: &'static str,
}

/// The campaign's skipped points per path (empty when none).
pub async fn rows(pool: &PgPool, campaign_id: i64) -> Result<Vec<SkipRow>, WebError> {
    Ok(capabilities::totals(pool, campaign_id)
        .await?
        .into_iter()
        .map(|t| SkipRow {
            path: t.path,
            hosts: t.hosts,
            points: t.points,
            reason: capabilities::reason(t.path),
        })
        .collect())
}

async fn api_skipped(
    State(state): State<WebState>,
    Path(raw_id): Path<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw_id, "campaign")?;
    campaigns::get(&state.pool, id)
        .await
        .map_err(WebError::from)?
        .ok_or_else(|| WebError::NotFound(format!("no campaign with id {id}")))?;
    api::table(
        &format!("campaign-{id}-skipped"),
        &rows(&state.pool, id).await?,
        f.format,
    )
}
