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

use crate::cluster::{self, leader::Leader};
use crate::domain::auth::Token;
use crate::findings;
use crate::grpc::agent::pace::{Pace, Pacer};
use crate::grpc::{self, admin::AdminSvc, agent::AgentSvc, limits};
use crate::guard::auth::FailedAuth;
use crate::guard::conn::{Connections, Timeouts};
use crate::ingest::Ingest;
use crate::report::refresh::{self, Wanted};
use crate::retention::{self, Retention};
use crate::scheduler::{self, Scheduler};
use crate::seen::LastSeen;
use crate::store::coordinators::Listener;
use crate::store::leases::Holder;
use crate::watch::schedule;
use crate::watch::verify::VerifyOnChange;
use crate::watch::webhook::{self, Webhook};
use crate::{ingest, pg, seen, store, web};

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
    /// The heartbeat interval, and the rate past which sessions are told a longer one.
    pub heartbeat: Pace,
    /// gRPC over TLS with this identity ([`crate::tls::server_tls`]); `None`: plain gRPC.
    pub tls: Option<ServerTlsConfig>,
    /// `--client-ca`: `tls` requires client certificates, and agents are bound to their names.
    pub client_certs: bool,
    pub watch: Watch,
    /// Plain gRPC was insisted on (`--insecure-plaintext`): every agent session is warned about.
    pub insecure_plaintext: bool,
    /// `--self-signed`: the CA agents trust, printed at start.
    pub self_signed_ca: Option<PathBuf>,
    /// Who may read the report ([`web::Access`]).
    pub report: web::Access,
    /// How results are batched and how many may wait (`--ingest-queue`).
    pub ingest: ingest::Config,
    /// `--keep-raw` and `--keep-daily` ([`crate::retention`]).
    pub retention: Retention,
    /// `--max-connections` and `--max-sessions` as given, fitted to the
    /// open-files limit at start ([`limits::Caps::fit`]).
    pub max_connections: Option<usize>,
    pub max_sessions: Option<usize>,
    /// `--http-max-connections`: the report's open connections.
    pub http_connections: usize,
    /// `--first-request-timeout` and `--idle-timeout`, on both listeners.
    pub timeouts: Timeouts,
}

/// Watching without a person ([`crate::watch`]): verification on fact changes and the webhook.
/// (Schedules need no setting: they are rows in the database.)
#[derive(Debug, Default)]
pub struct Watch {
    pub verify: VerifyOnChange,
    /// `--webhook`: where findings opening and resolving are POSTed.
    pub webhook: Option<Webhook>,
}

/// How the listeners are guarded: TLS or not on gRPC, the report's checks on
/// HTTP, the caps and timeouts of connections on both.
pub struct Guards {
    pub tls: Option<ServerTlsConfig>,
    /// `tls` requires client certificates (`--client-ca`): an agent's `Hello` name must be
    /// one of its certificate ([`crate::tls::client_cert`]).
    pub client_certs: bool,
    /// Warn on every agent session: it runs over plain gRPC by the operator's choice.
    pub warn_plaintext: bool,
    pub report: web::Access,
    /// Open connections and agent sessions served at once.
    pub caps: limits::Caps,
    /// The report's open connections.
    pub http_connections: usize,
    /// When connections without a request are closed, on both listeners.
    pub timeouts: Timeouts,
}

impl Default for Guards {
    fn default() -> Guards {
        Guards {
            tls: None,
            client_certs: false,
            warn_plaintext: false,
            report: web::Access::default(),
            caps: limits::Caps::default(),
            http_connections: limits::DEFAULT_HTTP_CONNECTIONS,
            timeouts: limits::DEFAULT_TIMEOUTS,
        }
    }
}

/// The running parts `run` needs.
pub struct App {
    pub pool: PgPool,
    pub agent_token: Token,
    pub admin_token: Token,
    /// [`ServeConfig::heartbeat`].
    pub heartbeat: Pace,
    pub watch: Watch,
    /// How results are batched and how many may wait ([`crate::ingest`]).
    pub ingest: ingest::Config,
    /// How long results are kept raw, then as daily summaries ([`crate::retention`]).
    pub retention: Retention,
}

/// Starts the database (private cluster or URL), binds, prints the bound
/// addresses on stdout (`grpc=ADDR http=ADDR`), and runs until `shutdown`.
pub async fn serve(config: ServeConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    // Before anything is started: caps that cannot fit are refused at once.
    let caps = limits::Caps::fit_this_process(config.max_connections, config.max_sessions)?;
    // Held until the coordinator exits: one coordinator per private cluster.
    let _data_dir_lock = match &config.database_url {
        Some(_) => None,
        None => Some(pg::DataDirLock::acquire(&config.data_dir)?),
    };
    let cluster = match &config.database_url {
        Some(_) => None,
        None => {
            let dir = config.data_dir.join(pg::CLUSTER_DIR);
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
    let pool = store::connect(&url)
        .await
        .context("connecting to PostgreSQL and applying migrations")?;
    if cluster.is_some() {
        // A private cluster has no other coordinator: leases left in it are of
        // this coordinator's earlier run, and its agents need not wait them out.
        store::leases::clear(&pool)
            .await
            .context("clearing the leases of an earlier run")?;
    }
    let grpc =
        limits::bind(config.grpc_listen).with_context(|| format!("binding --grpc-listen {}", config.grpc_listen))?;
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
        client_certs = config.client_certs,
        private_cluster = cluster.is_some(),
        "coordinator listening"
    );
    let mut watch = config.watch;
    if let (Some(webhook), Some(addr)) = (watch.webhook.as_mut(), http_addr) {
        webhook.default_report_url(&format!("http://{addr}"));
    }
    let app = App {
        pool,
        agent_token: config.agent_token,
        admin_token: config.admin_token,
        heartbeat: config.heartbeat,
        watch,
        ingest: config.ingest,
        retention: config.retention,
    };
    let guards = Guards {
        warn_plaintext: config.tls.is_none() && config.insecure_plaintext,
        tls: config.tls,
        client_certs: config.client_certs,
        report: config.report,
        caps,
        http_connections: config.http_connections,
        timeouts: config.timeouts,
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
        client_certs,
        warn_plaintext,
        report,
        caps,
        http_connections,
        timeouts,
    } = guards;
    let pool = app.pool;
    let holder = Holder::this_process();
    tracing::info!(coordinator = %holder.id, name = %holder.name, "coordinator identity for host leases");
    // A predecessor that died here (this coordinator restarted) gives up its leases now.
    let listener = Listener {
        net_namespace: cluster::process::net_namespace(),
        grpc: grpc.local_addr().context("the gRPC listener's address")?.to_string(),
    };
    cluster::take_over(&pool, &holder, Some(&listener))
        .await
        .context("registering this coordinator")?;
    // Sessions of a coordinator that stopped without closing them, and whose
    // hosts no live coordinator holds, ended with it.
    store::sessions::close_orphaned(&pool)
        .await
        .context("closing stale sessions")?;
    let scheduler =
        Arc::new(Scheduler::new(pool.clone(), holder).with_lease_ttl(app.heartbeat.base * cluster::MISSED_RENEWALS));
    let ingest = Ingest::start(&pool, app.ingest);
    let last_seen = Arc::new(LastSeen::default());
    let leader = Arc::new(Leader::new(&pool));
    // Findings are derived in the background, once now and after results and campaigns.
    let deriver = findings::Deriver::new();
    let deriver_task = tokio::spawn(findings::run(
        deriver.clone(),
        pool.clone(),
        leader.clone(),
        shutdown.clone(),
    ));
    let failed_auth = Arc::new(FailedAuth::default());
    let pacer = Pacer::new(app.heartbeat);
    let pacing = tokio::spawn(pacer.clone().run(scheduler.clone(), shutdown.clone()));
    let agent = AgentSvc {
        pool: pool.clone(),
        scheduler: scheduler.clone(),
        ingest: ingest.clone(),
        last_seen: last_seen.clone(),
        token: app.agent_token,
        heartbeat: pacer.clone(),
        shutdown: shutdown.clone(),
        findings: deriver,
        verify: app.watch.verify,
        sessions: caps.session_permits(),
        handshakes: grpc::turns::for_serve(ingest.precedence()),
        failed_auth: failed_auth.clone(),
        client_certs,
    };
    let admin = AdminSvc {
        pool: pool.clone(),
        scheduler: scheduler.clone(),
        token: app.admin_token,
        failed_auth: failed_auth.clone(),
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).context("setting up TLS")?;
    }
    let retention = tokio::spawn(retention::run(
        pool.clone(),
        leader.clone(),
        app.retention,
        shutdown.clone(),
    ));
    let sweeper = tokio::spawn(sweep(pool.clone(), scheduler.clone(), leader, shutdown.clone()));
    let leases = tokio::spawn(cluster::renew_leases(
        pool.clone(),
        scheduler.clone(),
        app.heartbeat.base,
        shutdown.clone(),
    ));
    let wake = tokio::spawn(cluster::wake::run(pool.clone(), scheduler.clone(), shutdown.clone()));
    let schedules = tokio::spawn(schedule::run(pool.clone(), scheduler.clone(), shutdown.clone()));
    let webhook = tokio::spawn(webhook::run(pool.clone(), app.watch.webhook, shutdown.clone()));
    let seen = tokio::spawn(flush_seen(pool.clone(), last_seen, shutdown.clone()));
    // A coordinator that serves the report keeps its stored figures fresh.
    let wanted = Wanted::default();
    let refresher = http
        .is_some()
        .then(|| tokio::spawn(refresh::keep_fresh(pool.clone(), wanted.clone(), shutdown.clone())));
    let http_task = http.map(|l| {
        let state = web::WebState {
            pool: pool.clone(),
            scheduler: scheduler.clone(),
            ingest: ingest.clone(),
            refresh: wanted,
        };
        let conns = Connections::new("HTTP", http_connections, timeouts);
        let access = report.limited_by(failed_auth.clone());
        tokio::spawn(web::serve_guarded(l, state, access, conns, shutdown.clone()))
    });

    // Connections (plain or TLS) without a stream close after their timeouts, and
    // at the cap a new one takes the place of the one idle longest.
    let grpc_conns = Connections::new("gRPC", caps.connections, timeouts);
    let serving = builder
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .max_concurrent_streams(Some(limits::MAX_STREAMS_PER_CONNECTION))
        .initial_connection_window_size(limits::RECEIVE_WINDOW_BYTES)
        .initial_stream_window_size(limits::RECEIVE_WINDOW_BYTES)
        .add_service(limits::tracked(
            InterceptedService::new(
                AgentServiceServer::new(agent)
                    .max_decoding_message_size(grpc::MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(grpc::MAX_MESSAGE_BYTES),
                move |request: tonic::Request<()>| {
                    if warn_plaintext {
                        warn_plaintext_session(&request);
                    }
                    Ok(request)
                },
            ),
            grpc_conns.clone(),
        ))
        .add_service(limits::tracked(
            AdminServiceServer::new(admin).max_decoding_message_size(grpc::MAX_MESSAGE_BYTES),
            grpc_conns.clone(),
        ))
        // Nagle off: a ResultAck followed at once by the next RunJob would otherwise
        // wait for the agent's delayed ACK, on every job (docs/performance.md,
        // "Coordinator queries and sessions").
        .serve_with_incoming_shutdown(
            limits::admitted(TcpIncoming::from(grpc).with_nodelay(Some(true)), grpc_conns),
            shutdown.clone().cancelled_owned(),
        );
    // A graceful stop waits for every stream to finish, and the stream of an
    // agent that reads nothing never does: past the grace it is dropped.
    let grpc_result = tokio::select! {
        result = serving => result,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!("agent streams still open {SHUTDOWN_GRACE:?} after shutdown; dropping them");
            Ok(())
        }
    };
    shutdown.cancel();
    let _ = sweeper.await;
    let _ = retention.await;
    let _ = leases.await;
    let _ = wake.await;
    let _ = schedules.await;
    let _ = webhook.await;
    let _ = seen.await;
    if let Some(t) = refresher {
        let _ = t.await;
    }
    let _ = pacing.await;
    let _ = deriver_task.await;
    if let Some(t) = http_task {
        let _ = t.await;
    }
    grpc_result.context("serving gRPC")
}

/// How long a shutdown waits for gRPC streams to close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Writes the coalesced `last_seen` marks every few seconds, and once more at shutdown.
async fn flush_seen(pool: PgPool, last_seen: Arc<LastSeen>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(seen::FLUSH_INTERVAL);
    loop {
        let stopping = tokio::select! {
            _ = shutdown.cancelled() => true,
            _ = tick.tick() => false,
        };
        if let Err(e) = last_seen.flush(&pool).await {
            tracing::warn!(error = %e, "writing hosts' last_seen");
        }
        if stopping {
            return;
        }
    }
}

/// `--insecure-plaintext`: said again for every agent session, so it stays in the log.
fn warn_plaintext_session(request: &tonic::Request<()>) {
    tracing::warn!(
        peer = ?request.remote_addr(),
        "agent session over plain gRPC (--insecure-plaintext): its token and results cross the network in clear"
    );
}

/// Every few seconds: re-queues jobs past their deadline (of this
/// coordinator's hosts and of hosts nobody holds); on the cluster's leader
/// also fails queued jobs past their time to live and closes sessions left
/// open by a coordinator that died.
async fn sweep(pool: PgPool, scheduler: Arc<Scheduler>, leader: Arc<Leader>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(scheduler::SWEEP_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = scheduler.expire_overdue().await {
            tracing::warn!(error = %e, "sweeping overdue jobs");
        }
        if !leader.is_leader().await {
            continue;
        }
        // The completion check after a commit that never ran (see `close_if_complete`).
        match store::campaigns::close_any_complete(&pool).await {
            Ok(closed) if !closed.is_empty() => {
                tracing::info!(campaigns = ?closed, "complete campaigns closed by the sweep")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "closing complete campaigns"),
        }
        match store::sessions::close_orphaned(&pool).await {
            Ok(n) if n > 0 => tracing::info!(sessions = n, "sessions of a coordinator that went away closed"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "closing orphaned sessions"),
        }
        match store::jobs::expire_queued(&pool).await {
            Ok(expired) if !expired.is_empty() => {
                tracing::info!(
                    jobs = expired.len(),
                    "queued jobs past their campaign's time to live failed"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweeping queued jobs past their time to live"),
        }
    }
}
