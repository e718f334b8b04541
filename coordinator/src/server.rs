//! `serve`: wire the storage, the scheduler and both gRPC services together
//! and run until shut down.
//!
//! [`run`] takes bound listeners so tests start a coordinator on port 0 and
//! learn its address before any client dials; [`serve`] is what the binary
//! does around it (private PostgreSQL cluster, binding, signals).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cipherfleet_proto::v1::admin_service_server::AdminServiceServer;
use cipherfleet_proto::v1::agent_service_server::AgentServiceServer;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::ServerTlsConfig;
use tonic::transport::server::TcpIncoming;

use cipherfleet_core::token::Secret;

use crate::auth::Token;
use crate::findings;
use crate::grpc::{self, admin::AdminSvc, agent::AgentSvc};
use crate::scheduler::{self, Scheduler};
use crate::{db, pg, web};

/// Everything `serve` needs.
#[derive(Debug)]
pub struct ServeConfig {
    pub grpc_listen: SocketAddr,
    pub http_listen: Option<SocketAddr>,
    /// `None`: run a private PostgreSQL cluster under `data_dir`. A secret:
    /// it usually carries a password, so `Debug` never shows it.
    pub database_url: Option<Secret>,
    pub data_dir: PathBuf,
    pub agent_token: Token,
    pub admin_token: Token,
    pub heartbeat: Duration,
    /// gRPC over TLS with this identity ([`crate::tls::server_tls`]); `None`: plain gRPC.
    pub tls: Option<ServerTlsConfig>,
    /// Plain gRPC was insisted on (`--insecure-plaintext`): every agent session is warned about.
    pub insecure_plaintext: bool,
    /// `--self-signed`: the CA agents trust, printed at start.
    pub self_signed_ca: Option<PathBuf>,
    /// Who may read the report ([`web::Access`]).
    pub report: web::Access,
}

/// How the listeners are guarded: TLS or not on gRPC, the report's checks on HTTP.
#[derive(Default)]
pub struct Guards {
    pub tls: Option<ServerTlsConfig>,
    /// Warn on every agent session: it runs over plain gRPC by the operator's choice.
    pub warn_plaintext: bool,
    pub report: web::Access,
}

/// The running parts `run` needs.
pub struct App {
    pub pool: PgPool,
    pub agent_token: Token,
    pub admin_token: Token,
    pub heartbeat: Duration,
}

/// Starts the database (private cluster or URL), binds, prints the bound
/// addresses on stdout (`grpc=ADDR http=ADDR`), and runs until `shutdown`.
pub async fn serve(config: ServeConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    // Held until the coordinator exits: one coordinator per private cluster.
    let _data_dir_lock = match &config.database_url {
        Some(_) => None,
        None => Some(pg::DataDirLock::acquire(&config.data_dir)?),
    };
    let cluster = match &config.database_url {
        Some(_) => None,
        None => {
            let dir = config.data_dir.join("postgres");
            Some(
                pg::PrivateCluster::start(&dir)
                    .await
                    .with_context(|| format!("starting PostgreSQL under {}", dir.display()))?,
            )
        }
    };
    let url = config
        .database_url
        .as_ref()
        .map(|u| u.expose().to_string())
        .or_else(|| cluster.as_ref().map(|c| c.url().to_string()))
        .expect("one of them");
    let pool = db::connect(&url)
        .await
        .context("connecting to PostgreSQL and applying migrations")?;
    let grpc = TcpListener::bind(config.grpc_listen)
        .await
        .with_context(|| format!("binding --grpc-listen {}", config.grpc_listen))?;
    let http = match config.http_listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding --http-listen {addr}"))?,
        ),
        None => None,
    };
    let grpc_addr = grpc.local_addr()?;
    let http_addr = http.as_ref().map(|l| l.local_addr()).transpose()?;
    let ca = config
        .self_signed_ca
        .as_ref()
        .map(|ca| format!(" ca={}", ca.display()))
        .unwrap_or_default();
    println!(
        "grpc={grpc_addr} http={}{ca}",
        http_addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into())
    );
    if let Some(ca) = &config.self_signed_ca {
        eprintln!(
            "serving gRPC over TLS with a private CA: agents and operators trust it with --ca-cert {} \
             (copy that file to them) and dial https://",
            ca.display()
        );
    }
    tracing::info!(
        %grpc_addr,
        http = ?http_addr,
        tls = config.tls.is_some(),
        private_cluster = cluster.is_some(),
        "coordinator listening"
    );
    let app = App {
        pool,
        agent_token: config.agent_token,
        admin_token: config.admin_token,
        heartbeat: config.heartbeat,
    };
    let guards = Guards {
        warn_plaintext: config.tls.is_none() && config.insecure_plaintext,
        tls: config.tls,
        report: config.report,
    };
    let result = run_guarded(app, grpc, guards, http, shutdown).await;
    if let Some(cluster) = cluster
        && let Err(e) = cluster.stop().await
    {
        tracing::warn!(error = %e, "stopping the private PostgreSQL cluster");
    }
    result
}

/// Serves plain gRPC (and HTTP when given) on the bound listeners until `shutdown`.
pub async fn run(
    app: App,
    grpc: TcpListener,
    http: Option<TcpListener>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    run_guarded(app, grpc, Guards::default(), http, shutdown).await
}

/// [`run`], with gRPC over TLS when `guards.tls` is given (HTTP stays plain: it
/// is the report, meant for a TLS-terminating proxy or a private network) and
/// the report's checks of `guards.report`.
pub async fn run_guarded(
    app: App,
    grpc: TcpListener,
    guards: Guards,
    http: Option<TcpListener>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let Guards {
        tls,
        warn_plaintext,
        report,
    } = guards;
    // Sessions of a previous run ended with it.
    db::sessions::close_all_open(&app.pool)
        .await
        .context("closing stale sessions")?;
    let scheduler = Arc::new(Scheduler::new(app.pool.clone()));
    // Findings are derived in the background, once now and after results and campaigns.
    let deriver = findings::Deriver::new();
    let deriver_task = tokio::spawn(findings::run(deriver.clone(), app.pool.clone(), shutdown.clone()));
    let agent = AgentSvc {
        scheduler: scheduler.clone(),
        token: app.agent_token,
        heartbeat: app.heartbeat,
        shutdown: shutdown.clone(),
        findings: deriver,
    };
    let admin = AdminSvc {
        scheduler: scheduler.clone(),
        token: app.admin_token,
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).context("setting up TLS")?;
    }
    let sweeper = tokio::spawn(sweep(scheduler.clone(), shutdown.clone()));
    let http_task = http.map(|l| {
        let state = web::WebState {
            pool: app.pool.clone(),
            scheduler: scheduler.clone(),
        };
        tokio::spawn(web::serve_with(l, state, report, shutdown.clone()))
    });

    let grpc_result = builder
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .add_service(InterceptedService::new(
            AgentServiceServer::new(agent)
                .max_decoding_message_size(grpc::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(grpc::MAX_MESSAGE_BYTES),
            move |request: tonic::Request<()>| {
                if warn_plaintext {
                    warn_plaintext_session(&request);
                }
                Ok(request)
            },
        ))
        .add_service(AdminServiceServer::new(admin).max_decoding_message_size(grpc::MAX_MESSAGE_BYTES))
        // Nagle off: a ResultAck followed at once by the next RunJob would otherwise
        // wait for the agent's delayed ACK (~40 ms per job; deploy/bench-coordinator.sh).
        .serve_with_incoming_shutdown(
            TcpIncoming::from(grpc).with_nodelay(Some(true)),
            shutdown.clone().cancelled_owned(),
        )
        .await;
    shutdown.cancel();
    let _ = sweeper.await;
    let _ = deriver_task.await;
    if let Some(t) = http_task {
        let _ = t.await;
    }
    grpc_result.context("serving gRPC")
}

/// `--insecure-plaintext`: said again for every agent session, so it stays in the log.
fn warn_plaintext_session(request: &tonic::Request<()>) {
    tracing::warn!(
        peer = ?request.remote_addr(),
        "agent session over plain gRPC (--insecure-plaintext): its token and results cross the network in clear"
    );
}

/// Re-queues jobs past their deadline every few seconds.
async fn sweep(scheduler: Arc<Scheduler>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(scheduler::SWEEP_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = scheduler.expire_overdue().await {
            tracing::warn!(error = %e, "sweeping overdue jobs");
        }
    }
}
