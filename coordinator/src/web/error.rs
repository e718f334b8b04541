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
    /// A value the database refuses to hold is the request's mistake (400);
    /// any other database error is the server's.
    #[error("{}", database_message(.0))]
    Database(#[from] crate::store::Error),
    #[error("rendering the page: {0}")]
    Template(#[from] askama::Error),
}

fn database_message(e: &crate::store::Error) -> String {
    match e.refused_value() {
        Some(why) => format!("a value the database cannot store: {why}"),
        None => format!("database: {e}"),
    }
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
    /// The status a client gets; the page and the `/api/` answer share it.
    pub(super) fn status(&self) -> StatusCode {
        match self {
            WebError::NotFound(_) => StatusCode::NOT_FOUND,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            // The request carried a value the database cannot hold: the same again fails again.
            WebError::Database(e) if e.is_bad_input() => StatusCode::BAD_REQUEST,
            // Our query does not fit the schema: retrying will not help.
            WebError::Database(e) if e.is_query_bug() => StatusCode::INTERNAL_SERVER_ERROR,
            // Most likely the database is restarting: worth a retry.
            WebError::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::Template(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Logs a failure on the server's side in full (a bug at error level, the
    /// database being away at warn) and says whether there was one; a problem
    /// with the request is not logged, and its message is the client's to read.
    pub(super) fn log_server_side(&self, what: &str) -> bool {
        match self {
            WebError::Database(e) if e.is_bad_input() => return false,
            WebError::Database(e) if e.is_query_bug() => {
                tracing::error!(sqlstate = e.sqlstate(), error = %e, "{what}: a bug in the query");
            }
            WebError::Database(e) => tracing::warn!(error = %e, "{what}: database unavailable"),
            WebError::Template(e) => tracing::error!(error = %e, "{what}: rendering the page"),
            WebError::NotFound(_) | WebError::BadRequest(_) => return false,
        }
        true
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = self.status();
        // Server-side failures are logged in full and shown in short.
        let message = if !self.log_server_side("report page") {
            self.to_string()
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            "The database did not answer; the page will work again once it is back.".to_string()
        } else {
            "The page could not be built; the error is in the coordinator's log.".to_string()
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
