//! `serve --webhook URL`: findings opening and resolving, POSTed as JSON and
//! signed with the shared secret. Events come from the outbox
//! ([`crate::store::outbox`]), written in the transaction that changed the
//! finding; each is claimed with a lease, retried with exponential backoff
//! while the receiver fails, and kept across restarts for [`MAX_AGE`].
//!
//! The signature is `X-Cipherfleet-Signature: sha256=<hex>`, the HMAC-SHA256
//! of the exact body bytes under the secret; `X-Cipherfleet-Delivery` is the
//! event's id, the same on every retry, so a receiver can drop duplicates.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cipherfleet_core::token::Secret;
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use sha2::Sha256;
use sqlx::PgPool;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

use crate::store::{self, outbox::Event};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-cipherfleet-signature";
/// The event's id, stable across retries.
pub const DELIVERY_HEADER: &str = "x-cipherfleet-delivery";
/// `finding.opened` or `finding.resolved`.
pub const EVENT_HEADER: &str = "x-cipherfleet-event";

/// How often the outbox is looked at when nothing is due.
const POLL: Duration = Duration::from_secs(1);
/// One attempt's limit: connect, send, and the receiver's answer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// A claimed event is not retried by another coordinator before this.
const LEASE: Duration = Duration::from_secs(30);
/// First retry after this; doubled per failed attempt up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// Events older than this are no longer delivered (a receiver away for a
/// day gets a fresh start, not a flood), and are deleted after a week.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where and how to deliver.
pub struct Webhook {
    url: Uri,
    secret: Secret,
    /// The report's base URL, for each event's `report_url`; empty until
    /// [`Webhook::default_report_url`] when `--report-url` was not given.
    report_url: String,
    tls: Option<TlsConnector>,
}

/// A `--webhook` URL that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("--webhook {0:?}: {1}")]
    Url(String, String),
    #[error("--webhook: reading the system's CA certificates for https://: {0}")]
    Roots(String),
    #[error("--webhook-ca-cert {0}: {1}")]
    Ca(String, String),
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url.to_string())
            .field("report_url", &self.report_url)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// Checks the URL (http:// or https://, a host, no user info) and, for
    /// https://, loads the CA certificates it trusts: `ca` (PEM), else the system's.
    pub fn new(url: &str, secret: Secret, report_url: Option<&str>, ca: Option<&Path>) -> Result<Self, WebhookError> {
        let bad = |why: &str| WebhookError::Url(url.to_string(), why.to_string());
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("expected an http:// or https:// URL")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad(
                "user info in the URL would travel in every request's Host; the signature authenticates us",
            ));
        }
        let tls = if https {
            let roots = match ca {
                Some(path) => roots_from(path)?,
                None => system_roots()?,
            };
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| WebhookError::Roots(e.to_string()))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Some(TlsConnector::from(Arc::new(config)))
        } else {
            None
        };
        Ok(Webhook {
            url: uri,
            secret,
            report_url: report_url.unwrap_or_default().trim_end_matches('/').to_string(),
            tls,
        })
    }

    /// Sets the report's base URL unless `--report-url` gave one (the bound HTTP address).
    pub fn default_report_url(&mut self, base: &str) {
        if self.report_url.is_empty() {
            self.report_url = base.trim_end_matches('/').to_string();
        }
    }

    /// The JSON body of `event`.
    pub fn body(&self, event: &Event) -> Value {
        json!({
            "event": format!("finding.{}", event.event),
            "delivery_id": event.id,
            "occurred_at": event.created_at,
            "host": {"id": event.host_id, "name": event.host_name},
            "finding": {
                "id": event.finding_id,
                "reason": event.reason,
                "kind": event.kind,
                "subject": event.subject,
                "severity": event.severity,
                "summary": event.summary,
                "first_seen": event.first_seen,
                "resolved_at": event.resolved_at,
                "evidence": event.evidence,
                "fact_changes": event.fact_changes,
            },
            "report_url": format!("{}/hosts/{}", self.report_url, event.host_id),
        })
    }

    /// POSTs `event` once; an error says what failed (connect, TLS, status).
    async fn deliver(&self, event: &Event) -> Result<(), String> {
        let body = serde_json::to_vec(&self.body(event)).expect("serialises");
        let signature = signature(self.secret.expose().as_bytes(), &body);
        let authority = self.url.authority().expect("checked in new");
        let host = authority.host().trim_start_matches('[').trim_end_matches(']');
        let port = authority
            .port_u16()
            .unwrap_or(if self.tls.is_some() { 443 } else { 80 });
        let request = Request::post(self.url.path_and_query().map_or("/", |p| p.as_str()))
            .header(hyper::header::HOST, authority.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(
                hyper::header::USER_AGENT,
                concat!("cipherfleet-coordinator/", env!("CARGO_PKG_VERSION")),
            )
            .header(EVENT_HEADER, format!("finding.{}", event.event))
            .header(DELIVERY_HEADER, event.id.to_string())
            .header(SIGNATURE_HEADER, format!("sha256={signature}"))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("building the request: {e}"))?;
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        tcp.set_nodelay(true).ok();
        let status = match &self.tls {
            Some(tls) => {
                let name = ServerName::try_from(host.to_string()).map_err(|e| format!("server name {host:?}: {e}"))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {host}: {e}"))?;
                send(TokioIo::new(stream), request).await?
            }
            None => send(TokioIo::new(tcp), request).await?,
        };
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the receiver answered HTTP {}", status.as_u16()))
        }
    }
}

/// The certificates of a PEM file, for a webhook behind a private CA.
fn roots_from(path: &Path) -> Result<rustls::RootCertStore, WebhookError> {
    let bad = |why: String| WebhookError::Ca(path.display().to_string(), why);
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))? {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad(
            "holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)".into()
        ));
    }
    Ok(roots)
}

/// The system's CA store.
fn system_roots() -> Result<rustls::RootCertStore, WebhookError> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(WebhookError::Roots(format!("none found ({:?})", found.errors)));
    }
    Ok(roots)
}

/// One HTTP/1.1 request on `io`; the answer's status (its body is read and dropped).
async fn send<I>(io: I, request: Request<Full<Bytes>>) -> Result<hyper::StatusCode, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let driver = tokio::spawn(connection);
    let response = sender.send_request(request).await.map_err(|e| format!("sending: {e}"));
    let status = match response {
        Ok(r) => {
            let status = r.status();
            // Up to the limit; what the receiver says is not ours to keep.
            let _ = r.into_body().collect().await;
            Ok(status)
        }
        Err(e) => Err(e),
    };
    driver.abort();
    status
}

/// The hex HMAC-SHA256 of `body` under `secret`: what [`SIGNATURE_HEADER`] carries after `sha256=`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The wait before retrying after `attempts` failed attempts.
pub fn backoff(attempts: i32) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1)).unwrap_or(0).min(20);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

/// Delivers every due event once; returns how many were delivered.
pub async fn deliver_due(pool: &PgPool, webhook: &Webhook) -> store::Result<usize> {
    let mut delivered = 0;
    while let Some(event) = store::outbox::claim(pool, LEASE.as_secs_f64(), MAX_AGE.as_secs_f64()).await? {
        let outcome = match tokio::time::timeout(ATTEMPT_TIMEOUT, webhook.deliver(&event)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs())),
        };
        match outcome {
            Ok(()) => {
                store::outbox::delivered(pool, event.id).await?;
                delivered += 1;
            }
            Err(error) => {
                let wait = backoff(event.attempts);
                tracing::warn!(delivery = event.id, attempt = event.attempts, retry_in = ?wait, %error, "webhook delivery failed");
                store::outbox::failed(pool, event.id, &error, wait.as_secs_f64()).await?;
            }
        }
    }
    Ok(delivered)
}

/// The background task: delivers due events (when a webhook is configured)
/// and prunes old ones, until `shutdown`.
pub async fn run(pool: PgPool, webhook: Option<Webhook>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if ticks.is_multiple_of(3600) {
            match store::outbox::prune(&pool, KEEP.as_secs_f64()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "old webhook events pruned"),
                Err(e) => tracing::warn!(error = %e, "pruning webhook events"),
            }
        }
        ticks += 1;
        if let Some(webhook) = &webhook
            && let Err(e) = deliver_due(&pool, webhook).await
        {
            tracing::warn!(error = %e, "delivering webhook events");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn retries_back_off_exponentially_up_to_a_bound() {
        let waits: Vec<u64> = (1..=12).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
        assert_eq!(backoff(0), FIRST_BACKOFF);
        assert_eq!(backoff(i32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn only_http_and_https_urls_with_a_host_are_taken() {
        let secret = || Secret::new("s3cret");
        assert!(Webhook::new("http://127.0.0.1:9000/hook", secret(), Some("http://report"), None).is_ok());
        for bad in [
            "ftp://example/hook",
            "example.com/hook",
            "http://user:pw@example/hook",
            "not a url",
        ] {
            let e = Webhook::new(bad, secret(), Some("http://report"), None)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--webhook"), "{bad}: {e}");
        }
        let shown = format!(
            "{:?}",
            Webhook::new("http://h/x", secret(), Some("http://r"), None).unwrap()
        );
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
