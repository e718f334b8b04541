//! Command line: `serve`, and the operator commands (`campaign start|status|cancel`,
//! `hosts`, `hosts reset-credential|retire` in [`hosts`], `check` in [`check`],
//! `schedule` in [`schedule`]) that talk to a running coordinator's admin API.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use cipherfleet_proto::client::{check_coordinator_url, client_identity, client_tls};
use cipherfleet_proto::v1::{self, admin_service_client::AdminServiceClient, start_campaign_request::Points};
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use cipherfleet_core::spec::Matrix;
use cipherfleet_core::token::Secret;

use crate::auth::Token;
use crate::selector::Selector;
use crate::server::{self, ServeConfig};
use crate::{ingest, tls, web};

mod check;
mod hosts;
mod schedule;
mod watch_args;

pub use check::Exit;

#[derive(Parser, Debug)]
#[command(
    name = "cipherfleet-coordinator",
    version,
    about = "Schedule crypto benchmarks on a fleet of agents and keep every result"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the coordinator: gRPC for agents and operators, results in PostgreSQL.
    Serve(Box<ServeArgs>),
    /// Start, watch or cancel a campaign (a suite run on selected hosts).
    #[command(subcommand)]
    Campaign(CampaignCommand),
    /// List known hosts with their online state and acceleration status; or reset a host's
    /// credential, or retire a host.
    Hosts(hosts::HostsArgs),
    /// Print open findings; exit 1 when any is at or above --min-severity (for cron and CI).
    #[command(after_help = check::EXIT_STATUS)]
    Check(check::CheckArgs),
    /// Start a suite on selected hosts every period: schedule add|list|remove.
    #[command(subcommand, after_help = schedule::ABOUT)]
    Schedule(schedule::ScheduleCommand),
}

#[derive(Args, Debug)]
struct ServeArgs {
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
    /// (each host's session is leased to one of them; see the README, "Several coordinators").
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
    /// Ingest batches stored at once, each on a database connection of its own.
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
    #[command(flatten)]
    watch: watch_args::WatchArgs,
}

/// The URL as given; held as a [`Secret`] because it usually carries a password.
fn database_url(raw: &str) -> Result<Secret, String> {
    Ok(Secret::new(raw))
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

/// `--matrix`: the JSON of a matrix; the coordinator validates what it holds.
fn matrix_json(s: &str) -> Result<Box<Matrix>, String> {
    serde_json::from_str(s).map_err(|e| {
        format!(
            "not a matrix ({e}); it takes the lists algorithms, sizes, directions, threads, key_modes and \
             paths, and seconds (concurrency and nonces optional)"
        )
    })
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.1..=300.0).contains(&f) => Ok(f),
        _ => Err(format!("{s:?}: accepted 0.1 to 300 seconds")),
    }
}

#[derive(Args, Debug, Clone)]
struct AdminArgs {
    /// The coordinator's gRPC address: https://… when it serves TLS (http:// only to this
    /// machine's loopback, or with --insecure-plaintext).
    #[arg(long, env = "CIPHERFLEET_COORDINATOR", default_value = "http://127.0.0.1:7443")]
    coordinator: String,
    /// CA certificate (PEM) that signed an https:// coordinator's certificate. Without it the
    /// system's CA store is used.
    #[arg(long, env = "CIPHERFLEET_CA_CERT", value_name = "PEM")]
    ca_cert: Option<PathBuf>,
    /// Client certificate (PEM) for a coordinator that requires one (`serve --client-ca`): any
    /// certificate that CA signed. Needs --client-key.
    #[arg(long, env = "CIPHERFLEET_CLIENT_CERT", value_name = "PEM")]
    client_cert: Option<PathBuf>,
    /// Private key of --client-cert (PEM).
    #[arg(long, env = "CIPHERFLEET_CLIENT_KEY", value_name = "PEM")]
    client_key: Option<PathBuf>,
    /// Allow an http:// coordinator on another machine: the admin token then crosses the network
    /// in clear. Only for a network you trust; prefer https://.
    #[arg(long)]
    insecure_plaintext: bool,
    /// File holding the admin token (else CIPHERFLEET_ADMIN_TOKEN).
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Output: table (also spelled text) for people, json for scripts.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    #[value(alias = "text")]
    Table,
    Json,
}

#[derive(Subcommand, Debug)]
enum CampaignCommand {
    /// Start a campaign; prints its id. A host whose agent lacks a path (the software path
    /// without its cipherfleet-agent-soft sibling) skips that path's points; they are
    /// counted as skipped, not queued.
    Start {
        /// Named suite: quick, standard, full, or a scenario suite (object-storage, legacy-migration,
        /// modes, fallback, field-level; each about 15-30 s a host, see `cipherfleet-agent bench --help`).
        /// Thread counts of "all cores" follow each host's logical cores.
        #[arg(long, default_value = "quick")]
        suite: String,
        /// An explicit matrix instead of a suite, as JSON: the lists of `cipherfleet-agent bench`'s
        /// flags, e.g. '{"algorithms":["aes-128-gcm"],"sizes":[16,1024],"directions":["encrypt"],
        /// "threads":[1],"key_modes":["static"],"paths":["accelerated"],"seconds":0.5}'.
        #[arg(long, value_name = "JSON", value_parser = matrix_json)]
        matrix: Option<Box<Matrix>>,
        /// Host selector terms, all must hold: arch=aarch64, cpu-model=EPYC, host=NAME, or LABEL=VALUE. Repeatable.
        #[arg(long = "select", value_name = "KEY=VALUE")]
        select: Vec<String>,
        /// A name for the campaign.
        #[arg(long)]
        name: Option<String>,
        /// Also queue jobs for selected hosts that are offline now; they run when
        /// the host comes back. By default only online hosts are selected.
        #[arg(long)]
        include_offline: bool,
        /// Seconds a job may stay queued (its host offline or busy) before it fails
        /// with the reason; at most 30 days. Default: a day.
        #[arg(long, value_name = "SECONDS")]
        queued_ttl: Option<f64>,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Progress per host: done / running / queued / failed, and the points skipped because
    /// their host lacks the path.
    Status {
        id: String,
        /// Refresh until the campaign completes or is cancelled.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Cancel queued jobs and abort running ones.
    Cancel {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Hosts(hosts::HostsArgs { action: None, admin }) => hosts(admin).await,
        Command::Hosts(hosts::HostsArgs {
            action: Some(command), ..
        }) => hosts::run(command).await,
        Command::Campaign(c) => campaign(c).await,
        Command::Check(args) => check::run(args).await,
        Command::Schedule(c) => schedule::run(c).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
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
    let config = ServeConfig {
        grpc_listen: args.grpc_listen,
        http_listen: Some(args.http_listen),
        database_url: args.database_url,
        data_dir: args.data_dir,
        agent_token,
        admin_token,
        heartbeat: Duration::from_secs_f64(args.heartbeat_seconds),
        tls,
        client_certs: args.client_ca.is_some(),
        insecure_plaintext: args.insecure_plaintext,
        self_signed_ca: self_signed.map(|files| files.ca),
        report,
        watch: args.watch.load()?,
        ingest: ingest::Config {
            queue: args.ingest_queue,
            batch: args.ingest_batch,
            parallel: args.ingest_parallel,
            ..ingest::Config::default()
        },
        max_connections: args.max_connections,
        max_sessions: args.max_sessions,
    };
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        on_signal.cancel();
    });
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

/// SIGTERM or SIGINT.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

type Admin = AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, BearerToken>>;

#[derive(Clone)]
struct BearerToken(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}

async fn admin_client(args: &AdminArgs) -> anyhow::Result<Admin> {
    let token = Token::load(
        "admin token",
        args.admin_token_file.as_deref(),
        "--admin-token-file",
        "CIPHERFLEET_ADMIN_TOKEN",
    )?;
    let header = format!("Bearer {}", token.expose());
    let value: MetadataValue<_> = header.parse().context("the admin token must be printable ASCII")?;
    // The agent's rules: https:// or http://, --ca-cert only with https://, files checked now.
    check_coordinator_url(&args.coordinator, args.ca_cert.as_deref(), args.insecure_plaintext)?;
    let mut endpoint = Endpoint::from_shared(args.coordinator.clone())
        .with_context(|| format!("--coordinator {:?} is not a URL", args.coordinator))?
        .connect_timeout(Duration::from_secs(5));
    let identity = client_identity(
        &args.coordinator,
        args.client_cert.as_deref(),
        args.client_key.as_deref(),
    )?;
    if let Some(mut tls) = client_tls(&args.coordinator, args.ca_cert.as_deref())? {
        if let Some(identity) = identity {
            tls = tls.identity(identity);
        }
        endpoint = endpoint.tls_config(tls).context("setting up TLS")?;
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("connecting to the coordinator at {}", args.coordinator))?;
    Ok(AdminServiceClient::with_interceptor(channel, BearerToken(value)))
}

fn status_error(what: &str, s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{what}: {} ({:?})", s.message(), s.code())
}

async fn hosts(args: AdminArgs) -> anyhow::Result<()> {
    let mut client = admin_client(&args).await?;
    // Every page, in order.
    let mut hosts = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = client
            .list_hosts(v1::ListHostsRequest {
                page_token,
                ..Default::default()
            })
            .await
            .map_err(|s| status_error("listing hosts", s))?
            .into_inner();
        hosts.extend(page.hosts);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    if args.format == Format::Json {
        let rows: Vec<_> = hosts
            .iter()
            .map(|h| {
                serde_json::json!({
                    "id": h.id, "name": h.name, "arch": h.arch, "cpu_model_name": h.cpu_model_name,
                    "kernel_release": h.kernel_release, "online": h.online, "retired": h.retired,
                    "last_seen_unix_ms": h.last_seen_unix_ms,
                    "acceleration": h.acceleration,
                    "labels": h.labels.iter().map(|l| (l.key.clone(), l.value.clone())).collect::<std::collections::BTreeMap<_, _>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<6} {:<24} {:<8} {:<8} {:<12} {:<24} cpu",
        "id", "name", "online", "arch", "crypto", "kernel"
    );
    for h in hosts {
        println!(
            "{:<6} {:<24} {:<8} {:<8} {:<12} {:<24} {}",
            h.id,
            h.name.escape_debug().to_string(),
            if h.retired {
                "retired"
            } else if h.online {
                "online"
            } else {
                "offline"
            },
            h.arch.escape_debug().to_string(),
            h.acceleration,
            h.kernel_release.escape_debug().to_string(),
            h.cpu_model_name.escape_debug()
        );
    }
    Ok(())
}

async fn campaign(command: CampaignCommand) -> anyhow::Result<()> {
    match command {
        CampaignCommand::Start {
            suite,
            matrix,
            select,
            name,
            include_offline,
            queued_ttl,
            admin,
        } => {
            let mut selector = Selector::default();
            for term in &select {
                selector.add_term(term).map_err(anyhow::Error::msg)?;
            }
            let request = v1::StartCampaignRequest {
                points: Some(match matrix {
                    Some(m) => Points::Matrix(v1::Matrix::from(&*m)),
                    None => Points::Suite(suite),
                }),
                hosts: Some(proto_selector(selector)),
                started_by: std::env::var("USER").unwrap_or_else(|_| "operator".into()),
                name: name.unwrap_or_default(),
                include_offline,
                queued_ttl_seconds: queued_ttl.unwrap_or(0.0),
            };
            let mut client = admin_client(&admin).await?;
            let r = client
                .start_campaign(request)
                .await
                .map_err(|s| status_error("starting the campaign", s))?
                .into_inner();
            match admin.format {
                Format::Json => println!(
                    "{}",
                    serde_json::json!({"campaign_id": r.campaign_id, "jobs_created": r.jobs_created, "points_skipped": r.points_skipped})
                ),
                Format::Table => println!("{}", r.campaign_id),
            }
            if admin.format == Format::Table && std::io::stderr().is_terminal() {
                let skipped = match r.points_skipped {
                    0 => String::new(),
                    n => format!(" ({n} points skipped: their hosts lack the path)"),
                };
                eprintln!(
                    "campaign {} started with {} jobs{skipped}; watch it with `campaign status {} --watch`",
                    r.campaign_id, r.jobs_created, r.campaign_id
                );
            }
            Ok(())
        }
        CampaignCommand::Status { id, watch, admin } => {
            let mut client = admin_client(&admin).await?;
            loop {
                let s = client
                    .campaign_status(v1::CampaignStatusRequest {
                        campaign_id: id.clone(),
                    })
                    .await
                    .map_err(|s| status_error("reading the campaign", s))?
                    .into_inner();
                print_status(&s, admin.format)?;
                let running = s.state == v1::CampaignState::Running as i32;
                if !watch || !running {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        CampaignCommand::Cancel { id, reason, admin } => {
            let mut client = admin_client(&admin).await?;
            let r = client
                .cancel_campaign(v1::CancelCampaignRequest {
                    campaign_id: id.clone(),
                    reason: reason.unwrap_or_default(),
                })
                .await
                .map_err(|s| status_error("cancelling the campaign", s))?
                .into_inner();
            match admin.format {
                Format::Json => println!(
                    "{}",
                    serde_json::json!({"campaign_id": id, "jobs_cancelled": r.jobs_cancelled})
                ),
                Format::Table => println!("campaign {id}: {} jobs cancelled", r.jobs_cancelled),
            }
            Ok(())
        }
    }
}

/// The admin API's form of `--select` terms.
fn proto_selector(selector: Selector) -> v1::HostSelector {
    crate::grpc::admin::selector_to(&selector)
}

fn counts_json(c: Option<&v1::JobCounts>) -> serde_json::Value {
    let c = c.copied().unwrap_or_default();
    serde_json::json!({"done": c.done, "running": c.running, "queued": c.queued, "failed": c.failed, "cancelled": c.cancelled})
}

fn print_status(s: &v1::CampaignStatusResponse, format: Format) -> anyhow::Result<()> {
    let state = match v1::CampaignState::try_from(s.state) {
        Ok(v1::CampaignState::Running) => "running",
        Ok(v1::CampaignState::Completed) => "completed",
        Ok(v1::CampaignState::Cancelled) => "cancelled",
        _ => "unknown",
    };
    if format == Format::Json {
        let v = serde_json::json!({
            "campaign_id": s.campaign_id, "name": s.name, "state": state, "overall": counts_json(s.overall.as_ref()),
            "hosts": s.hosts.iter().map(|h| serde_json::json!({"host_id": h.host_id, "host_name": h.host_name, "counts": counts_json(h.counts.as_ref())})).collect::<Vec<_>>(),
            "failures": s.failures.iter().map(|f| serde_json::json!({"job_id": f.job_id, "host_name": f.host_name, "error": f.error})).collect::<Vec<_>>(),
            "points_skipped": s.points_skipped,
            "skipped": s.skipped.iter().map(|k| serde_json::json!({"host_id": k.host_id, "host_name": k.host_name, "path": path_name(k.path), "points": k.points, "reason": k.reason})).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(());
    }
    let o = s.overall.unwrap_or_default();
    let total = o.done + o.running + o.queued + o.failed + o.cancelled;
    let skipped = match s.points_skipped {
        0 => String::new(),
        n => format!(", {n} points skipped"),
    };
    println!(
        "campaign {} ({}): {state}, {}/{} done, {} running, {} queued, {} failed{skipped}",
        s.campaign_id,
        s.name.escape_debug(),
        o.done,
        total,
        o.running,
        o.queued,
        o.failed
    );
    for h in &s.hosts {
        let c = h.counts.unwrap_or_default();
        let n = (c.done + c.running + c.queued + c.failed + c.cancelled).max(1);
        let width = 30usize;
        let filled = (c.done + c.failed) as usize * width / n as usize;
        println!(
            "  {:<24} [{}{}] done {} running {} queued {} failed {}",
            h.host_name.escape_debug().to_string(),
            "#".repeat(filled),
            ".".repeat(width - filled),
            c.done,
            c.running,
            c.queued,
            c.failed
        );
    }
    for f in &s.failures {
        println!(
            "  failed {} on {}: {}",
            f.job_id,
            f.host_name.escape_debug(),
            f.error.escape_debug()
        );
    }
    for k in &s.skipped {
        println!(
            "  skipped {} {}-path points on {}: {}",
            k.points,
            path_name(k.path),
            k.host_name.escape_debug(),
            k.reason
        );
    }
    if total == 0 && s.points_skipped == 0 {
        bail!("campaign has no jobs");
    }
    Ok(())
}

/// A wire path's name as the rest of the output spells paths.
fn path_name(path: i32) -> &'static str {
    match v1::Path::try_from(path) {
        Ok(v1::Path::Accelerated) => "accelerated",
        Ok(v1::Path::Software) => "software",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec!["cipherfleet-coordinator", "serve"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).expect("serve parses").command {
            Command::Serve(args) => *args,
            _ => unreachable!("serve was asked for"),
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
