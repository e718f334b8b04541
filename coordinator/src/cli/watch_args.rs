//! `serve`'s flags for watching without a person: verification on change
//! and the findings webhook ([`crate::watch`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use cipherfleet_core::token::Secret;

use crate::auth::Token;
use crate::server::Watch;
use crate::watch::timing::parse_duration;
use crate::watch::verify::VerifyOnChange;
use crate::watch::webhook::Webhook;

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Queue a verification campaign (AES-GCM, ChaCha20-Poly1305, AES-CBC at 16 KiB on both
    /// paths, plus the points the host ran before) for a new host, or when a host's CPU model,
    /// CPU flags, kernel, hypervisor, agent version or build changes. `--verify-on-change=false` turns it off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    verify_on_change: bool,
    /// At most one verification campaign per host in this long (30m, 1h, 1d; 0s: no limit).
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = interval)]
    verify_interval: i64,
    /// POST each finding that opens or resolves to this http:// or https:// URL, as JSON signed
    /// with --webhook-secret-file (header X-Cipherfleet-Signature: sha256=HMAC-SHA256 of the body).
    /// Retried with backoff for a day; pending events survive restarts.
    #[arg(long, value_name = "URL")]
    webhook: Option<String>,
    /// File holding the webhook's shared secret (else CIPHERFLEET_WEBHOOK_SECRET).
    #[arg(long, value_name = "FILE")]
    webhook_secret_file: Option<PathBuf>,
    /// CA certificate (PEM) that signed an https:// --webhook's certificate (a private CA).
    /// Without it the system's CA store is used.
    #[arg(long, value_name = "PEM")]
    webhook_ca_cert: Option<PathBuf>,
    /// The report's address as webhook receivers reach it, for each event's report_url
    /// (default: http:// and the address --http-listen bound).
    #[arg(long, value_name = "URL")]
    report_url: Option<String>,
}

fn interval(s: &str) -> Result<i64, String> {
    parse_duration("--verify-interval", s).map_err(|e| e.message)
}

impl WatchArgs {
    /// Reads the webhook's secret and checks its URL.
    pub fn load(&self) -> anyhow::Result<Watch> {
        let verify = VerifyOnChange {
            enabled: self.verify_on_change,
            min_interval: Duration::from_secs(self.verify_interval.max(0) as u64),
        };
        let webhook = match &self.webhook {
            None => None,
            Some(url) => {
                let secret = Token::load(
                    "webhook secret",
                    self.webhook_secret_file.as_deref(),
                    "--webhook-secret-file",
                    "CIPHERFLEET_WEBHOOK_SECRET",
                )?;
                let ca = self.webhook_ca_cert.as_deref();
                let report = self.report_url.as_deref();
                Some(Webhook::new(url, Secret::new(secret.expose()), report, ca)?)
            }
        };
        Ok(Watch { verify, webhook })
    }
}
