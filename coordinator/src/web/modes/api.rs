//! `/api/v1/modes`: every point of a `/modes` view as JSON or CSV.

use axum::extract::{Query, State};
use axum::response::Response;
use serde::Serialize;

use cipherfleet_core::Point;
use cipherfleet_core::spec::{KeyMode, Nonce};

use super::curves::merge;
use super::params::{ModesParams, ModesQuery};
use super::{Fleet, resolve};
use crate::domain::memory::StoredMemory;
use crate::report::matrix;
use crate::web::api::{self, ApiError, FormatParam};
use crate::web::{WebError, WebState};

/// One point as `/api/v1/modes` sends it.
#[derive(Debug, Serialize)]
struct ModeRow {
    /// Host name or class label.
    subject: String,
    emulated: bool,
    simulated: bool,
    /// The merged point (one static key, no object-storage concurrency).
    #[serde(flatten)]
    point: Point,
    throughput_mb_s: f64,
    latency_p99_ns: f64,
    cv: Option<f64>,
    /// Some host's result behind the point had too few samples to trust.
    low_samples: bool,
    /// One host's memory figures, or the class's by the cells rule.
    #[serde(flatten)]
    memory: StoredMemory,
    hosts: usize,
    result_id: Option<i64>,
}

pub(super) async fn modes(
    State(state): State<WebState>,
    Query(q): Query<ModesQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let params = ModesParams::parse(&q)?;
    let subject = params
        .subject
        .as_ref()
        .ok_or_else(|| WebError::BadRequest("give host=ID or class=KEY".into()))?;
    let who = resolve(subject, &Fleet::read(&state).await?)?;
    let results = matrix::host_points(
        &state.pool,
        &who.host_ids,
        params.direction,
        params.path,
        params.provider,
    )
    .await?;
    let rows: Vec<ModeRow> = merge(&results, &params.algorithms)
        .into_iter()
        .map(|m| ModeRow {
            subject: who.label.clone(),
            emulated: who.emulated,
            simulated: who.simulated,
            point: Point {
                algorithm: m.algorithm,
                direction: params.direction,
                size_bytes: m.size_bytes,
                threads: m.threads,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: params.path,
                nonce: Nonce::Counter,
                provider: params.provider,
            },
            throughput_mb_s: m.throughput_mb_s,
            latency_p99_ns: m.latency_p99_ns,
            cv: m.cv,
            low_samples: m.low_samples,
            memory: m.memory,
            hosts: m.hosts,
            result_id: m.result_id,
        })
        .collect();
    api::table("modes", &rows, format.format)
}
