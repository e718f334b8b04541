//! `serve`'s flags for watching without a person: verification on change
//! and the findings webhook ([`crate::watch`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use cipherfleet_core::token::Secret;

use crate::domain::auth::Token;
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use super::*;

    fn watch(extra: &[&str]) -> Result<WatchArgs, clap::Error> {
        let mut argv = vec!["cipherfleet-coordinator", "serve"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv)?.command {
            Command::Serve(args) => Ok(args.watch),
            _ => unreachable!("serve was asked for"),
        }
    }

    #[test]
    fn verification_is_on_by_default_and_turned_off_by_name() {
        let on = watch(&[]).unwrap().load().unwrap();
        assert_eq!(on.verify, VerifyOnChange::default());
        assert!(on.webhook.is_none());
        let off = watch(&["--verify-on-change=false", "--verify-interval", "30m"])
            .unwrap()
            .load()
            .unwrap();
        assert!(!off.verify.enabled);
        assert_eq!(off.verify.min_interval, Duration::from_secs(1800));
        let e = watch(&["--verify-interval", "2x"]).unwrap_err().to_string();
        assert!(e.contains("--verify-interval") && e.contains("not a duration"), "{e}");
    }

    #[test]
    fn a_webhook_needs_its_secret_and_a_usable_url() {
        let dir = std::env::temp_dir().join(format!("cf-webhook-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "webhook-secret-0123456789").unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let secret = secret.to_str().unwrap();
        let ok = watch(&["--webhook", "http://127.0.0.1:9/hook", "--webhook-secret-file", secret]).unwrap();
        assert!(ok.load().unwrap().webhook.is_some());
        let e = watch(&["--webhook", "ftp://example/hook", "--webhook-secret-file", secret])
            .unwrap()
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--webhook") && e.contains("http:// or https://"), "{e}");
        let missing = dir.join("missing-ca.pem");
        let e = watch(&[
            "--webhook",
            "https://example/hook",
            "--webhook-secret-file",
            secret,
            "--webhook-ca-cert",
            missing.to_str().unwrap(),
        ])
        .unwrap()
        .load()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--webhook-ca-cert"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
