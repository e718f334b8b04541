//! The coordinator's HTTP side. For now a health check; the report and
//! `/metrics` come with the web work.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::scheduler::Scheduler;

pub async fn serve(listener: TcpListener, scheduler: Arc<Scheduler>, shutdown: CancellationToken) {
    let app = Router::new().route("/healthz", get(healthz)).with_state(scheduler);
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
    {
        tracing::warn!(error = %e, "HTTP server");
    }
}

/// `ok` when the database answers, with the number of connected agents.
async fn healthz(State(scheduler): State<Arc<Scheduler>>) -> (axum::http::StatusCode, String) {
    match sqlx::query_scalar::<_, i32>("SELECT 1")
        .fetch_one(scheduler.pool())
        .await
    {
        Ok(_) => (
            axum::http::StatusCode::OK,
            format!("ok agents_online={}\n", scheduler.online_hosts().len()),
        ),
        Err(_) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "database unavailable\n".into(),
        ),
    }
}
