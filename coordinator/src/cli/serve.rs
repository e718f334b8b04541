//! `serve`'s flags, and what the binary does around [`crate::server::serve`]:
//! TLS set-up, the tokens, and stopping on a signal.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use cipherfleet_core::token::Secret;

use super::watch_args;
use crate::domain::auth::Token;
use crate::grpc::agent::pace::Pace;
use crate::grpc::limits;
use crate::guard::conn::Timeouts;
use crate::retention::{self, Retention};
use crate::server::{self, ServeConfig};
use crate::watch::timing;
use crate::{ingest, tls, web};

/// Flags of `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address for agents' and operators' gRPC. Anything but a loopback address needs TLS
    /// (--tls-cert and --tls-key, or --self-signed) or --insecure-plaintext.
    #[arg(long, default_value = "0.0.0.0:7443")]
    grpc_listen: SocketAddr,
    /// Address for HTTP: the report, its CSV/JSON API, /metrics and /healthz.
    /// Plain HTTP: keep it on a private network or behind a TLS proxy.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http_listen: SocketAddr,
    /// File holding a token the report asks for: browsers prompt for it (any user name, the
    /// token as password), scripts and Prometheus send `Authorization: Bearer TOKEN`.
    /// /healthz stays open. Without it the report is open to whoever reaches --http-listen.
    #[arg(long, value_name = "PATH")]
    http_auth_token_file: Option<PathBuf>,
    /// A host name the report answers to, as browsers send it in the Host header (e.g. the name
    /// of a proxy in front of it; repeatable). IP addresses and localhost are always accepted;
    /// any other name is refused (421), against DNS rebinding.
    #[arg(long = "http-allowed-host", value_name = "NAME[:PORT]")]
    http_allowed_hosts: Vec<String>,
    /// PostgreSQL URL. Without it a private cluster runs under --data-dir from
    /// the system's PostgreSQL binaries. Several coordinators may share one database
    /// (each host's session is leased to one of them; see docs/operations.md, "Several coordinators").
    /// TLS as libpq spells it: `?sslmode=verify-full&sslrootcert=/path/ca.pem` checks the
    /// server's certificate against that CA (and the system's) and its name against the host;
    /// `verify-ca` skips the name, `require` only encrypts (no check: a managed database's
    /// weakest setting, not a safe one).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_parser = database_url)]
    database_url: Option<Secret>,
    /// Where the private PostgreSQL cluster lives.
    #[arg(long, default_value = "/var/lib/cipherfleet")]
    data_dir: PathBuf,
    /// File holding the agents' enrollment token (else CIPHERFLEET_AGENT_TOKEN).
    #[arg(long)]
    agent_token_file: Option<PathBuf>,
    /// File holding the admin token (else CIPHERFLEET_ADMIN_TOKEN).
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Heartbeat interval asked of agents; three missed ones mean the agent is lost. Also how often
    /// this coordinator renews its hosts' leases, which live three intervals: with several
    /// coordinators on one database, a dead one's agents are admitted elsewhere that soon.
    #[arg(long, default_value_t = 5.0, value_parser = parse_interval)]
    heartbeat_seconds: f64,
    /// Heartbeats a second this coordinator aims to stay under: past --heartbeat-seconds × this
    /// many sessions, agents are told a longer interval (sessions ÷ this, in seconds, at most 60),
    /// new ones in their Welcome and open ones when it moves by a fifth (looked at every 5 s); a lost
    /// agent is noticed after three of the longest it was told. 0: every agent gets --heartbeat-seconds.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    max_heartbeat_rate: u32,
    /// Certificate chain (PEM, the coordinator's own certificate first): gRPC over TLS. Needs --tls-key.
    #[arg(long, value_name = "PEM")]
    tls_cert: Option<PathBuf>,
    /// Private key of --tls-cert (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, value_name = "PEM")]
    tls_key: Option<PathBuf>,
    /// Serve TLS with a private CA and a server certificate kept in DIR (made on the first start,
    /// reused later); agents and operators trust DIR/ca.pem with --ca-cert.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tls_cert", "tls_key"])]
    self_signed: Option<PathBuf>,
    /// A name (DNS name or IP address) agents dial this coordinator by, put in the --self-signed
    /// certificate besides localhost, 127.0.0.1 and a specific --grpc-listen address (repeatable).
    #[arg(long = "tls-name", value_name = "NAME", requires = "self_signed")]
    tls_names: Vec<String>,
    /// Mutual TLS: require of every gRPC client (agents and operator commands) a certificate
    /// signed by this CA (PEM), and admit an agent only under a host name (--name) that its
    /// certificate carries as a DNS subjectAltName. Needs --tls-cert/--tls-key or --self-signed.
    /// The per-host credential and the tokens are still required on top. See deploy/mtls.md.
    #[arg(long, value_name = "PEM", conflicts_with = "insecure_plaintext")]
    client_ca: Option<PathBuf>,
    /// Allow plain gRPC on an address other machines can reach: enrollment tokens, the admin token
    /// and results then cross the network in clear (warned at start and for every agent session).
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "self_signed"])]
    insecure_plaintext: bool,
    /// Most agent reports (results, job starts) waiting to be stored, those in the batch being
    /// written included. When it is full, sessions stop reading from their agents until there
    /// is room: agents keep their results spooled and get no new job meanwhile.
    #[arg(long, default_value_t = ingest::DEFAULT_QUEUE, value_parser = ingest_queue)]
    ingest_queue: usize,
    /// Most reports stored in one ingest transaction. A batch closes when it is this large or
    /// 2 ms after its first report; while every batch is being stored, reports queue up and
    /// make the next one larger, up to this.
    #[arg(long, default_value_t = ingest::Config::default().batch, value_parser = ingest_batch)]
    ingest_batch: usize,
    /// Ingest batches stored at once, each on a database connection of its own; while agents
    /// wait for a turn to be admitted, one small batch at a time (a restart or failover herd
    /// goes first).
    #[arg(long, default_value_t = ingest::Config::default().parallel, value_parser = ingest_parallel)]
    ingest_parallel: usize,
    /// Most open gRPC connections, agents' and operators' together; one past it is closed at
    /// once. Each is an open file: at start the soft open-files limit is raised to the hard one,
    /// and a value that does not fit under it (with 1024 files for the rest) is refused.
    /// Default: 65536, or as many as the limit allows (with a warning).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Most agent sessions, open or waiting for their Hello; past it a new one is refused with
    /// RESOURCE_EXHAUSTED and its agent retries later. Default: --max-connections.
    #[arg(long, value_name = "N")]
    max_sessions: Option<usize>,
    /// Most open connections to the report (--http-listen); at the cap a new one takes the place
    /// of the one idle longest. They count within the 1024 open files kept aside from gRPC.
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_HTTP_CONNECTIONS, value_parser = http_max_connections)]
    http_max_connections: usize,
    /// Seconds a new connection (gRPC, TLS or not, and HTTP) may take to start its first request
    /// (HTTP: to send its headers) before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = limits::DEFAULT_TIMEOUTS.first_request.as_secs_f64(), value_parser = timeout_seconds)]
    first_request_timeout: f64,
    /// Seconds a connection may stay open without a request in progress after its last one
    /// (keep-alive) before it is closed. An agent's session is one long request: it stays.
    #[arg(long, value_name = "SECONDS", default_value_t = limits::DEFAULT_TIMEOUTS.idle.as_secs_f64(), value_parser = timeout_seconds)]
    idle_timeout: f64,
    /// How long raw results (every sample, percentile and the measurement document) are kept:
    /// older ones fold into one summary per point and UTC day (count, median, p10/p90, min/max,
    /// path mix) that the host page's history reads, hourly on one coordinator of a cluster:
    /// a UTC week at a time once all of it is older, its partition of `results` then dropped
    /// (so raw results stay up to a week longer). The latest result of every point is kept raw
    /// whatever its age. The jobs of a campaign that
    /// ended before it go once its results are folded; the campaign keeps its counts. E.g. 30d, 12w is not
    /// accepted (s, m, h, d only); `forever` keeps every result raw. See docs/operations.md, "Retention".
    #[arg(long, value_name = "DURATION|forever", default_value = "90d", value_parser = keep_raw)]
    keep_raw: Keep,
    /// How long daily summaries are kept before they fold into one per month; at least --keep-raw.
    /// `forever` keeps them daily. Default: 730d, or --keep-raw when that is longer.
    #[arg(long, value_name = "DURATION|forever", value_parser = keep_daily)]
    keep_daily: Option<Keep>,
    #[command(flatten)]
    pub(super) watch: watch_args::WatchArgs,
}

/// A retention window as given: `None` is `forever`.
#[derive(Debug, Clone, Copy)]
struct Keep(Option<chrono::Duration>);

fn keep(flag: &'static str, s: &str) -> Result<Keep, String> {
    if s.trim() == "forever" {
        return Ok(Keep(None));
    }
    let seconds = timing::parse_duration(flag, s).map_err(|e| e.to_string())?;
    if seconds < 86_400 {
        return Err(format!(
            "{s:?}: at least a day (1d), or `forever`; summaries are per UTC day"
        ));
    }
    Ok(Keep(Some(chrono::Duration::seconds(seconds))))
}

fn keep_raw(s: &str) -> Result<Keep, String> {
    keep("--keep-raw", s)
}

fn keep_daily(s: &str) -> Result<Keep, String> {
    keep("--keep-daily", s)
}

/// `--keep-raw` and `--keep-daily` together: daily summaries are made of
/// raw results past their window, so they cannot be folded sooner.
fn retention(args: &ServeArgs) -> anyhow::Result<Retention> {
    let keep_daily = match args.keep_daily {
        Some(Keep(given)) => given,
        None => {
            let default = chrono::Duration::days(retention::DEFAULT_KEEP_DAILY_DAYS);
            Some(args.keep_raw.0.map_or(default, |raw| raw.max(default)))
        }
    };
    let r = Retention {
        keep_raw: args.keep_raw.0,
        keep_daily,
    };
    match (r.keep_raw, r.keep_daily) {
        (Some(raw), Some(daily)) if daily < raw => anyhow::bail!(
            "--keep-daily ({} days) is shorter than --keep-raw ({} days): daily summaries are made of raw \
             results past --keep-raw, so --keep-daily must be at least as long",
            daily.num_days(),
            raw.num_days()
        ),
        _ => Ok(r),
    }
}

/// The URL as given; held as a [`Secret`] because it usually carries a password.
fn database_url(raw: &str) -> Result<Secret, String> {
    Ok(Secret::new(raw))
}

fn http_max_connections(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (16..=limits::MAX_HTTP_CONNECTIONS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?}: accepted 16 to {} connections",
            limits::MAX_HTTP_CONNECTIONS
        )),
    }
}

fn timeout_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if (0.1..=3600.0).contains(&t) => Ok(t),
        _ => Err(format!("{s:?}: accepted 0.1 to 3600 seconds")),
    }
}

fn ingest_queue(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!("{s:?}: accepted 1 to 1000000 reports")),
    }
}

fn ingest_batch(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=8192).contains(&n) => Ok(n),
        _ => Err(format!("{s:?}: accepted 1 to 8192 reports")),
    }
}

fn ingest_parallel(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=16).contains(&n) => Ok(n),
        _ => Err(format!("{s:?}: accepted 1 to 16 batches")),
    }
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.1..=300.0).contains(&f) => Ok(f),
        _ => Err(format!("{s:?}: accepted 0.1 to 300 seconds")),
    }
}

/// Sets up TLS and the tokens from `args`, and serves until SIGTERM, SIGINT or SIGHUP.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let self_signed = match &args.self_signed {
        Some(dir) => {
            if args.grpc_listen.ip().is_unspecified() && args.tls_names.is_empty() {
                tracing::warn!(
                    "--self-signed: the certificate names only localhost, 127.0.0.1 and ::1; agents on other \
                     machines need the name or address they dial in it: add --tls-name (repeatable)"
                );
            }
            let names = tls::self_signed::server_names(args.grpc_listen, &args.tls_names);
            Some(tls::self_signed::ensure(dir, &names)?)
        }
        None => None,
    };
    let tls = match &self_signed {
        Some(files) => tls::server_tls(Some(&files.cert), Some(&files.key))?,
        None => tls::server_tls(args.tls_cert.as_deref(), args.tls_key.as_deref())?,
    };
    let tls = tls::require_client_certs(tls, args.client_ca.as_deref())?;
    if tls.is_none() {
        tls::check_plaintext(args.grpc_listen, args.insecure_plaintext)?;
    }
    let (agent_token, admin_token) = serve_tokens(&args)?;
    let report_token = match &args.http_auth_token_file {
        Some(path) => Some(Token::load(
            "report token",
            Some(path),
            "--http-auth-token-file",
            "CIPHERFLEET_REPORT_TOKEN",
        )?),
        None => None,
    };
    let report = web::Access::new(&args.http_allowed_hosts, report_token).map_err(anyhow::Error::msg)?;
    let retention = retention(&args)?;
    let config = ServeConfig {
        grpc_listen: args.grpc_listen,
        http_listen: Some(args.http_listen),
        database_url: args.database_url,
        data_dir: args.data_dir,
        agent_token,
        admin_token,
        heartbeat: Pace {
            base: Duration::from_secs_f64(args.heartbeat_seconds),
            max_rate: args.max_heartbeat_rate,
        },
        tls,
        client_certs: args.client_ca.is_some(),
        insecure_plaintext: args.insecure_plaintext,
        self_signed_ca: self_signed.map(|files| files.ca),
        report,
        watch: args.watch.load()?,
        retention,
        ingest: ingest::Config {
            queue: args.ingest_queue,
            batch: args.ingest_batch,
            parallel: args.ingest_parallel,
            ..ingest::Config::default()
        },
        max_connections: args.max_connections,
        max_sessions: args.max_sessions,
        http_connections: args.http_max_connections,
        timeouts: Timeouts {
            first_request: Duration::from_secs_f64(args.first_request_timeout),
            idle: Duration::from_secs_f64(args.idle_timeout),
        },
    };
    let shutdown = super::shutdown_on_signal().context("installing the signal handlers")?;
    server::serve(config, shutdown).await
}

/// The agents' enrollment token and the admin token. The same secret for
/// both would let every agent host run operator commands, so it is refused.
fn serve_tokens(args: &ServeArgs) -> anyhow::Result<(Token, Token)> {
    let agent_token = Token::load(
        "agent enrollment token",
        args.agent_token_file.as_deref(),
        "--agent-token-file",
        "CIPHERFLEET_AGENT_TOKEN",
    )?;
    let admin_token = Token::load(
        "admin token",
        args.admin_token_file.as_deref(),
        "--admin-token-file",
        "CIPHERFLEET_ADMIN_TOKEN",
    )?;
    if admin_token.matches(agent_token.expose().as_bytes()) {
        anyhow::bail!(
            "--agent-token-file and --admin-token-file hold the same token: every agent host could then run \
             operator commands; give the admin token its own random value (e.g. `openssl rand -hex 32`)"
        );
    }
    Ok((agent_token, admin_token))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn serve_args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec!["cipherfleet-coordinator", "serve"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).expect("serve parses").command {
            Command::Serve(args) => *args,
            _ => unreachable!("serve was asked for"),
        }
    }

    #[test]
    fn retention_windows_parse_and_name_what_is_wrong() {
        let r = retention(&serve_args(&[])).unwrap();
        assert_eq!(r, Retention::default());
        let r = retention(&serve_args(&["--keep-raw", "30d", "--keep-daily", "forever"])).unwrap();
        assert_eq!((r.keep_raw, r.keep_daily), (Some(chrono::Duration::days(30)), None));
        assert_eq!(
            retention(&serve_args(&["--keep-raw", "forever"])).unwrap().keep_raw,
            None
        );
        let long = retention(&serve_args(&["--keep-raw", "800d"])).unwrap();
        assert_eq!(
            long.keep_daily, long.keep_raw,
            "the daily default follows a longer --keep-raw"
        );
        let e = retention(&serve_args(&["--keep-raw", "400d", "--keep-daily", "100d"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--keep-daily (100 days) is shorter than --keep-raw (400 days)"),
            "{e}"
        );
        for (bad, said) in [("12h", "at least a day"), ("3x", "--keep-raw"), ("", "--keep-raw")] {
            let mut argv = vec!["cipherfleet-coordinator", "serve", "--keep-raw", bad];
            argv.truncate(4);
            let Err(e) = Cli::try_parse_from(argv) else {
                panic!("{bad:?} accepted");
            };
            let e = e.to_string();
            assert!(e.contains(said), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_same_token_for_agents_and_operators_is_refused() {
        let dir = std::env::temp_dir().join(format!("cf-serve-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (agent, admin, same) = (dir.join("agent"), dir.join("admin"), dir.join("same"));
        std::fs::write(&agent, "agent-token-0123456789abcdef\n").unwrap();
        std::fs::write(&admin, "admin-token-0123456789abcdef\n").unwrap();
        // The same secret, spelled with other white space around it.
        std::fs::write(&same, "  agent-token-0123456789abcdef").unwrap();
        let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
        let ok = serve_args(&["--agent-token-file", &path(&agent), "--admin-token-file", &path(&admin)]);
        assert!(serve_tokens(&ok).is_ok());
        let clash = serve_args(&["--agent-token-file", &path(&agent), "--admin-token-file", &path(&same)]);
        let e = serve_tokens(&clash).unwrap_err().to_string();
        assert!(e.contains("same token") && e.contains("--admin-token-file"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn tls_flags_that_contradict_each_other_are_refused() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["cipherfleet-coordinator", "serve"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(drop)
        };
        assert!(parse(&["--self-signed", "/tmp/tls", "--tls-name", "c.example"]).is_ok());
        for contradiction in [
            &["--self-signed", "/tmp/tls", "--tls-cert", "c.pem", "--tls-key", "k.pem"][..],
            &["--self-signed", "/tmp/tls", "--insecure-plaintext"],
            &["--tls-cert", "c.pem", "--tls-key", "k.pem", "--insecure-plaintext"],
            &["--tls-name", "c.example"],
            &["--client-ca", "clients.pem", "--insecure-plaintext"],
        ] {
            let err = parse(contradiction).unwrap_err().to_string();
            assert!(err.contains("--"), "{contradiction:?}: {err}");
        }
    }

    #[test]
    fn the_database_url_never_shows_in_debug_output() {
        let args = serve_args(&["--database-url", "postgres://cf:hunter2-secret@db.example/cf"]);
        let shown = format!("{args:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            args.database_url.as_ref().map(Secret::expose),
            Some("postgres://cf:hunter2-secret@db.example/cf")
        );
    }
}
