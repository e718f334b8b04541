//! A campaign's skipped points: those its hosts' agents lack the path for
//! (the software path without the `-soft` sibling), per path, and those of a
//! provider they lack (no `openssl`, no AF_ALG), per provider, with the reason.
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

/// The points of one path, or of one provider, a campaign skipped, over all its hosts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkipRow {
    /// The path lacking (the built-in crates' points), or `None` for a provider's row.
    pub path: Option<cipherfleet_core::path::Path>,
    /// The provider lacking, or `None` for a path's row.
    pub provider: Option<cipherfleet_core::provider::Provider>,
    /// Hosts that lack it.
    pub hosts: i64,
    pub points: i64,
    /// Why (a provider's: the first host's agent's words, untrusted text).
    pub reason: String,
}

impl SkipRow {
    /// What the hosts lack, as the page's first column says it.
    pub fn lacking(&self) -> String {
        match (self.path, self.provider) {
            (Some(path), _) => format!("{path} path"),
            (None, Some(provider)) => format!("{provider} provider"),
            (None, None) => String::new(),
        }
    }
}

/// The campaign's skipped points per path (empty when none).
pub async fn rows(pool: &PgPool, campaign_id: i64) -> Result<Vec<SkipRow>, WebError> {
    let paths = capabilities::totals(pool, campaign_id)
        .await?
        .into_iter()
        .map(|t| SkipRow {
            path: Some(t.path),
            provider: None,
            hosts: t.hosts,
            points: t.points,
            reason: capabilities::reason(t.path).to_string(),
        });
    let providers = capabilities::provider_totals(pool, campaign_id)
        .await?
        .into_iter()
        .map(|t| SkipRow {
            path: None,
            provider: Some(t.provider),
            hosts: t.hosts,
            points: t.points,
            reason: match t.other_reasons {
                0 => t.reason,
                n => format!("{} (and {n} other reason(s) on other hosts)", t.reason),
            },
        });
    Ok(paths.chain(providers).collect())
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
