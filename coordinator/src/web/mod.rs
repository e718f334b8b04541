//! The report: server-rendered pages (askama templates in `web/templates`),
//! their tables as CSV/JSON under `/api/v1`, `/metrics`, and `/healthz`.
//! Templates and `web/static` are compiled in, so the binary is the deployment.
//!
//! One file (or folder) per page or resource; each exposes `routes()`, merged in [`router`]:
//! `overview` (`/`), `hosts` and `host` (+ `host_facts`: facts and their change
//! history), `compare` (the matrix), `modes` (payload-size and thread curves),
//! `fallback` (accelerated vs software path, findings), `capacity` (the
//! planner), `campaigns`, `campaign` (+ `campaign_skips`: points skipped for lack of a path) and `campaign_compare` (two campaigns' change per host and point), `scenarios` (the scenario suites' answers per class), `providers` (which library per machine class, and what each loses without acceleration), `result` (`/api/v1/results/{id}`).
//! Shared by the pages:
//! - [`access`]: the `Host` check (DNS rebinding) and the optional token.
//! - [`listener`]: connections under a cap and timeouts, each request counted on its connection.
//! - [`error`]: [`WebError`], the one conversion of failures into responses.
//! - [`api`]: `?format=json|csv` answers for every table.
//! - [`format`]: numbers, sizes and times as the pages print them (units always stated).
//! - [`svg`]: server-rendered line charts (payload size, threads, time).
//! - [`paging`]: `?page=`, "showing 51–100 of N", links that keep the filters.
//! - [`params`]: query values read one way on every page (blank = absent,
//!   sizes, threads, labels) and the `<select>` options offered back.
//!
//! Every agent-supplied string (hostnames, labels, CPU model names, errors)
//! is untrusted: templates escape it (askama escapes `.html` by default; no
//! `|safe` on agent data), SVG text goes through [`format::xml_escape`], CSV
//! cells are neutralised against spreadsheet formulas, and a strict
//! Content-Security-Policy forbids inline scripts, so even an escaping bug
//! could not run one.

mod access;
pub mod api;
mod campaign;
mod campaign_compare;
mod campaign_skips;
mod campaigns;
mod capacity;
mod compare;
mod error;
mod fallback;
pub mod format;
mod host;
mod host_facts;
mod host_history;
pub(crate) mod hosts;
mod listener;
mod modes;
mod overview;
mod paging;
mod params;
mod providers;
mod result;
mod scenarios;
pub mod shell;
pub mod svg;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::guard::conn::{Connections, DEFAULT_HTTP_CONNECTIONS, DEFAULT_TIMEOUTS};
use crate::ingest::Ingest;
use crate::report::refresh::Wanted;
use crate::scheduler::Scheduler;
pub use access::Access;
pub use error::WebError;
pub use listener::Peer;

/// What every handler can reach.
#[derive(Clone)]
pub struct WebState {
    pub pool: PgPool,
    /// Which hosts are connected here (the pages' "online").
    pub scheduler: Arc<Scheduler>,
    /// The ingest queue, for `/metrics`.
    pub ingest: Ingest,
    /// Asks the background refresh ([`crate::report::refresh`]) for a round
    /// when a page showed stored figures that miss newer results.
    pub refresh: Wanted,
}

/// The whole HTTP side.
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/static/{file}", get(static_file))
        .merge(hosts::routes())
        .merge(compare::routes())
        .merge(modes::routes())
        .merge(fallback::routes())
        .merge(host::routes())
        .merge(result::routes())
        .merge(overview::routes())
        .merge(campaigns::routes())
        .merge(campaign::routes())
        .merge(campaign_skips::routes())
        .merge(campaign_compare::routes())
        .merge(capacity::routes())
        .merge(scenarios::routes())
        .merge(providers::routes())
        .fallback(not_found)
        .layer(axum::middleware::from_fn(params::refuse_unstorable))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

/// Serves [`router`] on `listener` until `shutdown`, open to whoever reaches it.
pub async fn serve(listener: TcpListener, state: WebState, shutdown: CancellationToken) {
    serve_with(listener, state, Access::default(), shutdown).await
}

/// [`serve`], behind `access`: the `Host` check and the token when one is set.
pub async fn serve_with(listener: TcpListener, state: WebState, access: Access, shutdown: CancellationToken) {
    let conns = Connections::new("HTTP", DEFAULT_HTTP_CONNECTIONS, DEFAULT_TIMEOUTS);
    serve_guarded(listener, state, access, conns, shutdown).await
}

/// [`serve_with`], its connections admitted by `conns` (a cap, timeouts for
/// connections that send no request).
pub async fn serve_guarded(
    listener: TcpListener,
    state: WebState,
    access: Access,
    conns: Arc<Connections>,
    shutdown: CancellationToken,
) {
    // The security headers again outside the guard, for its own 401 and 421 answers.
    let app = router(state)
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
        .layer(axum::middleware::map_response(security_headers))
        .layer(axum::middleware::from_fn_with_state(conns.clone(), listener::track));
    // The peer's address reaches the guard: failed tokens are counted by it.
    let listener = listener::Admitting::new(listener, conns);
    if let Err(e) = axum::serve(listener, app.into_make_service_with_connect_info::<listener::Peer>())
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
    {
        tracing::warn!(error = %e, "HTTP server");
    }
}

/// Scripts and styles only from this origin: an injected `<script>` or
/// `onerror=` attribute would not run even if it reached a page.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// `web/static`, compiled in.
async fn static_file(Path(file): Path<String>) -> Response {
    let (body, mime): (&'static str, &'static str) = match file.as_str() {
        "style.css" => (include_str!("../../../web/static/style.css"), "text/css; charset=utf-8"),
        "report.js" => (
            include_str!("../../../web/static/report.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return WebError::NotFound(format!("no static file {file:?}")).into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn not_found(uri: axum::http::Uri) -> WebError {
    WebError::NotFound(format!("no page at {}", uri.path()))
}

/// Prometheus text format ([`crate::metrics`]).
async fn metrics(State(state): State<WebState>) -> Response {
    match crate::metrics::render(&state.pool, state.scheduler.online_hosts().len())
        .await
        .map(|text| text + &crate::metrics::render_ingest(state.ingest.stats()))
    {
        Ok(text) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "rendering /metrics");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "metrics unavailable: database did not answer\n",
            )
                .into_response()
        }
    }
}

/// How long `/healthz` waits for the database: a health check must answer
/// in time for its prober (a load balancer, Kubernetes) whatever the database
/// does, not after the pool's [`crate::store::ACQUIRE_TIMEOUT`].
pub const HEALTH_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(800);

/// `ok` when the database answers within [`HEALTH_TIMEOUT`], with the number
/// of agents connected to this coordinator; 503 otherwise.
async fn healthz(State(state): State<WebState>) -> (StatusCode, String) {
    let check = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&state.pool);
    match tokio::time::timeout(HEALTH_TIMEOUT, check).await {
        Ok(Ok(_)) => (
            StatusCode::OK,
            format!("ok agents_online={}\n", state.scheduler.online_hosts().len()),
        ),
        Ok(Err(_)) => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n".into()),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "database unavailable: no answer within {} ms\n",
                HEALTH_TIMEOUT.as_millis()
            ),
        ),
    }
}
