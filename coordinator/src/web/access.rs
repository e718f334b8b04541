//! Who may read the report: the `Host` check against DNS rebinding, and the
//! optional token (`--http-auth-token-file`).
//!
//! DNS rebinding makes a page on an attacker's domain load this report: the
//! browser then sends that domain in `Host`. An IP address or `localhost` cannot
//! be rebound, so those are always accepted, and other names only when listed
//! with `--http-allowed-host`; the rest get 421 before anything else happens.
//!
//! The token, when set, is asked of every request but `/healthz` (load
//! balancers and probes): as `Authorization: Bearer TOKEN` (curl, Prometheus'
//! `authorization.credentials_file`) or as HTTP Basic with any user name and the
//! token as password, which every browser prompts for on the 401 answer and
//! then sends by itself. No cookie, so no cross-site request carries it.
//!
//! A wrong token counts against its address's allowance of report-token
//! failures ([`crate::guard::auth`]); past it, requests that present a token
//! are answered 429 with `Retry-After`, without the token being looked at.
//! A request that presents none (a browser's first visit) costs nothing.

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::domain::auth::Token;
use crate::guard::auth::{FailedAuth, Limited, SecretKind};

/// The report's checks, from `serve`'s flags; the default lets everything in.
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// `--http-allowed-host` names, lower case, each with its port if one was given.
    allowed: Vec<(String, Option<u16>)>,
    token: Option<Token>,
    /// Failed tokens, shared with the gRPC side ([`Access::limited_by`]).
    failed_auth: Arc<FailedAuth>,
}

impl Access {
    /// Checks the `--http-allowed-host` values (`NAME` or `NAME:PORT`).
    pub fn new(allowed_hosts: &[String], token: Option<Token>) -> Result<Access, String> {
        let mut allowed = Vec::new();
        for raw in allowed_hosts {
            let entry = raw.trim().to_ascii_lowercase();
            let (name, port) = split_port(&entry);
            // Addresses need no entry (they are always accepted), so names only.
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            if !valid_name || (entry.contains(':') && port.is_none()) {
                return Err(format!(
                    "--http-allowed-host {raw:?}: expected a host name as browsers send it, NAME or NAME:PORT \
                     (e.g. report.example or report.example:8080), without scheme or path"
                ));
            }
            allowed.push((name.to_string(), port));
        }
        Ok(Access {
            allowed,
            token,
            failed_auth: Arc::default(),
        })
    }

    /// Counts failed tokens in `failed_auth` (the coordinator's one limit) instead of its own.
    pub fn limited_by(mut self, failed_auth: Arc<FailedAuth>) -> Access {
        self.failed_auth = failed_auth;
        self
    }

    /// Whether a request with this `Host` header may be answered.
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let (name, port) = split_port(&host);
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        if bare == "localhost" || bare.parse::<std::net::IpAddr>().is_ok() {
            return true;
        }
        self.allowed
            .iter()
            .any(|(n, p)| n == name && (p.is_none() || *p == port))
    }

    /// Whether the request's `Authorization` header carries the token (always, without one).
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let (scheme, credentials) = value.trim().split_once(' ').unwrap_or((value, ""));
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return token.matches(credentials.as_bytes());
        }
        if scheme.eq_ignore_ascii_case("basic")
            && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials)
        {
            // `user:password`; the user name is not checked.
            let password = decoded
                .iter()
                .position(|&b| b == b':')
                .map_or(&decoded[..], |i| &decoded[i + 1..]);
            return token.matches(password);
        }
        false
    }
}

/// `name` and port of `host:port`, `[v6]:port`, `name` or `[v6]`.
fn split_port(host: &str) -> (&str, Option<u16>) {
    if let Some((name, port)) = host.rsplit_once(':')
        && (!name.contains(':') || name.ends_with(']'))
        && let Ok(port) = port.parse()
    {
        return (name, Some(port));
    }
    (host, None)
}

/// The middleware: the `Host` check, then the token.
pub async fn guard(State(access): State<Access>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    match host {
        Some(host) if access.host_allowed(&host) => {}
        Some(host) => {
            let shown: String = host.chars().take(100).collect::<String>().escape_debug().to_string();
            return (
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this report does not answer to the host name {shown:?} (a guard against DNS rebinding); \
                     open it by IP address or localhost, or start the coordinator with \
                     --http-allowed-host {shown}\n"
                ),
            )
                .into_response();
        }
        None => return (StatusCode::BAD_REQUEST, "the request has no Host header\n").into_response(),
    }
    if request.uri().path() == "/healthz" || access.token.is_none() {
        return next.run(request).await;
    }
    // Only a request that presents something can present a wrong token.
    if request.headers().contains_key(header::AUTHORIZATION) {
        let peer = request
            .extensions()
            .get::<ConnectInfo<super::Peer>>()
            .map(|c| c.0.0.ip());
        match access.failed_auth.attempt(SecretKind::ReportToken, peer, "") {
            Err(limited) => {
                tracing::warn!(peer = ?peer, %limited, "report request refused before its token was checked");
                return too_many_failures(&limited);
            }
            Ok(attempt) => {
                if attempt.judge(access.authorized(request.headers())) {
                    return next.run(request).await;
                }
                tracing::warn!(peer = ?peer, "report request with a wrong token");
            }
        }
    }
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "This report needs the token from the coordinator's --http-auth-token-file.\n\
         In a browser: enter any user name and the token as the password.\n\
         From scripts: send the header `Authorization: Bearer TOKEN`.\n",
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"cipherfleet report\", charset=\"UTF-8\""),
    );
    response
}

/// 429 with `Retry-After`: the address failed the token too often lately.
fn too_many_failures(limited: &Limited) -> Response {
    let seconds = limited.retry_after.as_secs_f64().ceil().max(1.0) as u64;
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (header::RETRY_AFTER, HeaderValue::from(seconds)),
        ],
        format!("{limited}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, authorization.parse().unwrap());
        h
    }

    #[test]
    fn addresses_and_localhost_pass_other_names_only_when_allowed() {
        let access = Access::new(&["Report.Example".into(), "proxy.example:8443".into()], None).unwrap();
        for ok in [
            "127.0.0.1:8080",
            "10.0.0.5",
            "[::1]:8080",
            "localhost:8080",
            "LOCALHOST",
            "report.example",
            "report.example:9999",
            "proxy.example:8443",
        ] {
            assert!(access.host_allowed(ok), "{ok}");
        }
        for refused in [
            "attacker.example",
            "proxy.example",
            "proxy.example:80",
            "report.example.attacker.example",
            "",
        ] {
            assert!(!access.host_allowed(refused), "{refused}");
        }
        for bad in ["https://report.example", "report.example/path", "", "a b"] {
            let err = Access::new(&[bad.into()], None).unwrap_err();
            assert!(err.contains("--http-allowed-host"), "{err}");
        }
    }

    #[test]
    fn the_token_is_accepted_as_bearer_or_as_a_basic_password() {
        let open = Access::default();
        assert!(open.authorized(&HeaderMap::new()));
        let access = Access::new(&[], Some(Token::from_secret("report-token-0123456789"))).unwrap();
        assert!(!access.authorized(&HeaderMap::new()));
        assert!(access.authorized(&headers("Bearer report-token-0123456789")));
        assert!(!access.authorized(&headers("Bearer report-token-012345678")));
        let basic = |user_pass: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_pass));
        assert!(access.authorized(&headers(&basic("anyone:report-token-0123456789"))));
        assert!(access.authorized(&headers(&basic(":report-token-0123456789"))));
        assert!(!access.authorized(&headers(&basic("report-token-0123456789:wrong"))));
        assert!(!access.authorized(&headers("Basic not-base64!")));
        assert!(!access.authorized(&headers("Token report-token-0123456789")));
    }
}
