//! [`WebError`]: the one place where a failure becomes a response — an HTML
//! page for browsers, the same message as JSON under `/api/`.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

/// Why a request could not be answered. Messages name the problem and may
/// quote what the client sent; templates escape them like any other text.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("{0}")]
    NotFound(String),
    /// A query parameter or form field the page cannot use.
    #[error("{0}")]
    BadRequest(String),
    #[error("database: {0}")]
    Database(#[from] crate::db::Error),
    #[error("rendering the page: {0}")]
    Template(#[from] askama::Error),
}

impl From<sqlx::Error> for WebError {
    fn from(e: sqlx::Error) -> Self {
        WebError::Database(e.into())
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    message: &'a str,
}

impl WebError {
    fn status(&self) -> StatusCode {
        match self {
            WebError::NotFound(_) => StatusCode::NOT_FOUND,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            // Most likely the database is restarting: worth a retry.
            WebError::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::Template(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = self.status();
        // Server-side failures are logged in full and shown in short.
        let message = match &self {
            WebError::Database(e) => {
                tracing::warn!(error = %e, "report query failed");
                "The database did not answer; the page will work again once it is back.".to_string()
            }
            WebError::Template(e) => {
                tracing::error!(error = %e, "rendering a report page");
                "The page could not be rendered.".to_string()
            }
            other => other.to_string(),
        };
        let page = ErrorPage {
            status: status.as_u16(),
            title: status.canonical_reason().unwrap_or("Error"),
            message: &message,
        };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, message).into_response(),
        }
    }
}
