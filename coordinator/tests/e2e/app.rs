//! `spawn_app()`: a coordinator process on a fresh database, plus helpers to
//! start agents, talk to the admin API and inspect the database.
//! `spawn_tls_app()`: the same serving gRPC over TLS, with TLS clients.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cipherfleet_proto::v1::{self, admin_service_client::AdminServiceClient};
use sqlx::{ConnectOptions, PgPool};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

pub use crate::db_helpers::TempDir;
pub use crate::http::HttpResponse;
use crate::http::http_get;

pub const AGENT_TOKEN: &str = "agent-token-0123456789abcdef";
pub const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

/// The agent binary built by `deploy/build.sh` next to this test binary's deps dir.
pub fn agent_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("cipherfleet-agent");
    assert!(
        bin.is_file(),
        "{} is missing: run deploy/build.sh before these tests",
        bin.display()
    );
    bin
}

/// The simulator (`cipherfleet-sim`), built by `deploy/build.sh` next to the agent.
pub fn sim_binary() -> PathBuf {
    let bin = agent_binary().with_file_name("cipherfleet-sim");
    assert!(
        bin.is_file(),
        "{} is missing: run deploy/build.sh before these tests",
        bin.display()
    );
    bin
}

/// Whether this machine's kernel runs AES in software on a CPU with AES-NI:
/// the CPU flags say `aes` and no driver in `/proc/crypto` is AES-NI's
/// (`aesni_intel` not loaded or not built). Read here apart from the agent's
/// parser, so a native host's `kernel-crypto-generic` is checked against
/// the machine, not against the facts it came from.
pub fn kernel_aes_generic_here() -> bool {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu_aes = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "aes"));
    let aesni = read("/proc/crypto")
        .lines()
        .any(|l| l.starts_with("driver") && l.contains("aesni"));
    cpu_aes && !aesni
}

/// `algorithms` × `sizes`, encrypt, one thread, static key, the accelerated
/// path, `seconds` a point: change the rest with `v1::Matrix { …, ..matrix(…) }`.
pub fn matrix(algorithms: &[&str], sizes: &[u64], seconds: f64) -> v1::Matrix {
    v1::Matrix {
        algorithms: algorithms.iter().map(|s| s.to_string()).collect(),
        sizes: sizes.to_vec(),
        directions: vec![v1::Direction::Encrypt as i32],
        threads: vec![1],
        concurrency: None,
        key_modes: vec![v1::KeyMode::Static as i32],
        paths: vec![v1::Path::Accelerated as i32],
        nonces: vec![],
        seconds,
        providers: vec![],
    }
}

/// Both paths, for [`v1::Matrix::paths`].
pub fn both_paths() -> Vec<i32> {
    vec![v1::Path::Accelerated as i32, v1::Path::Software as i32]
}

pub struct App {
    pub pool: PgPool,
    pub db_url: String,
    pub dir: TempDir,
    pub grpc: SocketAddr,
    /// The report's HTTP address (a new port after each restart).
    pub http: SocketAddr,
    /// Set: the coordinator serves TLS with these files and clients use `https://`.
    tls: Option<TlsFiles>,
    /// Extra `serve` flags, kept across restarts. By default verification on change is
    /// off, so a test's campaigns are the only work its agents get.
    pub serve_args: Vec<String>,
    /// Set: the coordinator serves TLS with `--self-signed DIR` and these `--tls-name`s.
    self_signed: Option<(PathBuf, Vec<String>)>,
    /// Set: [`App::admin`] presents this client certificate and key (`serve --client-ca`).
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// The coordinator build [`App::start_coordinator`] runs: this one's, or a previous release's.
    pub coordinator_binary: PathBuf,
    /// Set: the coordinator runs its private cluster under this `--data-dir`
    /// ([`App::use_data_dir`]) instead of using `db_url`'s database.
    data_dir: Option<PathBuf>,
    /// Set: the coordinator logs at this level ([`App::capture_log`]), into `log`.
    log_level: Option<&'static str>,
    /// The started coordinator's stderr, line by line, when [`App::capture_log`] asked for it.
    pub log: Option<std::sync::mpsc::Receiver<String>>,
    coordinator: Option<Child>,
    agents: Vec<Child>,
}

/// PEM files for a coordinator serving TLS.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA that signed `cert`: what clients trust.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Starts a coordinator on a fresh database.
pub async fn spawn_app() -> App {
    spawn_app_with(&["--verify-on-change=false"]).await
}

/// [`spawn_app`] with these `serve` flags instead of the default ones.
pub async fn spawn_app_with(serve_args: &[&str]) -> App {
    let pool = crate::db_helpers::fresh_db().await;
    let db_url = url_of(&pool).await;
    App::start(pool, db_url, None, serve_args)
}

/// Starts a coordinator serving gRPC over TLS (`--tls-cert`, `--tls-key`) on a
/// fresh database; `url()` is then `https://…` and `admin()` trusts `tls.ca`.
pub async fn spawn_tls_app(tls: TlsFiles) -> App {
    spawn_tls_app_with(tls, &["--verify-on-change=false"]).await
}

/// [`spawn_tls_app`] with these `serve` flags instead of the default ones.
pub async fn spawn_tls_app_with(tls: TlsFiles, serve_args: &[&str]) -> App {
    let pool = crate::db_helpers::fresh_db().await;
    let db_url = url_of(&pool).await;
    App::start(pool, db_url, Some(tls), serve_args)
}

/// A lazy pool for the database of the private cluster under `data_dir` (a
/// coordinator's `--data-dir`, whose server may not run yet), and its URL.
fn private_database(data_dir: &Path) -> (PgPool, String) {
    use cipherfleet_coordinator::pg;
    let options = sqlx::postgres::PgConnectOptions::new_without_pgpass()
        .socket(data_dir.join(pg::CLUSTER_DIR))
        .port(5432)
        .username(pg::SUPERUSER)
        .database(pg::DATABASE)
        .ssl_mode(sqlx::postgres::PgSslMode::Disable);
    let url = options.to_url_lossy().to_string();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_lazy_with(options);
    (pool, url)
}

/// A connection URL for the pool's database (socket directory and all).
pub async fn url_of(pool: &PgPool) -> String {
    let options = pool.connect_options();
    options.to_url_lossy().to_string()
}

impl App {
    /// Starts a coordinator on the database behind `pool` / `db_url`.
    pub async fn with_database(pool: PgPool, db_url: String) -> App {
        App::start(pool, db_url, None, &["--verify-on-change=false"])
    }

    /// [`App::with_database`] with these `serve` flags instead of the default ones.
    pub async fn with_database_and(pool: PgPool, db_url: String, serve_args: &[&str]) -> App {
        App::start(pool, db_url, None, serve_args)
    }

    /// [`App::with_database_and`] running the coordinator build at `binary`.
    pub async fn with_build(binary: &Path, pool: PgPool, db_url: String, serve_args: &[&str]) -> App {
        assert!(binary.is_file(), "{} is missing", binary.display());
        let mut app = App::unstarted(pool, db_url, None, serve_args);
        app.coordinator_binary = binary.to_path_buf();
        app.start_coordinator("127.0.0.1:0".parse().unwrap());
        app
    }

    /// An app on the database behind `pool` / `db_url` whose coordinator is not
    /// started yet: set it up, then [`App::start_coordinator`].
    pub fn unstarted_on(pool: PgPool, db_url: String, serve_args: &[&str]) -> App {
        App::unstarted(pool, db_url, None, serve_args)
    }

    /// Starts a coordinator on its private PostgreSQL cluster under `data_dir`
    /// (`--data-dir`, made on the first start); `pool` reaches its database.
    pub async fn private(data_dir: &Path) -> App {
        let (pool, db_url) = private_database(data_dir);
        let mut app = App::unstarted(pool, db_url, None, &["--verify-on-change=false"]);
        app.data_dir = Some(data_dir.to_path_buf());
        app.start_coordinator("127.0.0.1:0".parse().unwrap());
        app
    }

    /// From the next [`App::start_coordinator`] on: the private cluster under
    /// `data_dir`, which `pool` reaches from now on.
    pub fn use_data_dir(&mut self, data_dir: &Path) {
        (self.pool, self.db_url) = private_database(data_dir);
        self.data_dir = Some(data_dir.to_path_buf());
    }

    /// From the next [`App::start_coordinator`] on: the coordinator logs at
    /// `level` into [`App::log`] instead of logging errors to the test's stderr.
    pub fn capture_log(&mut self, level: &'static str) {
        self.log_level = Some(level);
    }

    fn start(pool: PgPool, db_url: String, tls: Option<TlsFiles>, serve_args: &[&str]) -> App {
        let mut app = App::unstarted(pool, db_url, tls, serve_args);
        app.start_coordinator("127.0.0.1:0".parse().unwrap());
        app
    }

    fn unstarted(pool: PgPool, db_url: String, tls: Option<TlsFiles>, serve_args: &[&str]) -> App {
        let dir = TempDir::new("e2e");
        for (file, token) in [("agent.token", AGENT_TOKEN), ("admin.token", ADMIN_TOKEN)] {
            let path = dir.path().join(file);
            std::fs::write(&path, token).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        }
        App {
            pool,
            db_url,
            dir,
            grpc: "127.0.0.1:0".parse().unwrap(),
            http: "127.0.0.1:0".parse().unwrap(),
            tls,
            self_signed: None,
            client_identity: None,
            serve_args: serve_args.iter().map(|a| a.to_string()).collect(),
            coordinator_binary: PathBuf::from(env!("CARGO_BIN_EXE_cipherfleet-coordinator")),
            data_dir: None,
            log_level: None,
            log: None,
            coordinator: None,
            agents: vec![],
        }
    }

    /// Starts (or restarts) the coordinator process on `addr` and waits for its address line.
    pub fn start_coordinator(&mut self, addr: SocketAddr) {
        let mut command = Command::new(&self.coordinator_binary);
        command.args([
            "serve",
            "--grpc-listen",
            &addr.to_string(),
            "--http-listen",
            "127.0.0.1:0",
        ]);
        // Short unless the test asks for its own.
        if !self.serve_args.iter().any(|a| a == "--heartbeat-seconds") {
            command.args(["--heartbeat-seconds", "0.5"]);
        }
        if let Some(tls) = &self.tls {
            command.arg("--tls-cert").arg(&tls.cert).arg("--tls-key").arg(&tls.key);
        }
        command.args(&self.serve_args);
        if let Some((dir, names)) = &self.self_signed {
            command.arg("--self-signed").arg(dir);
            for name in names {
                command.args(["--tls-name", name]);
            }
        }
        match &self.data_dir {
            Some(dir) => command.arg("--data-dir").arg(dir),
            None => command.arg("--database-url").arg(&self.db_url),
        };
        if let Some(level) = self.log_level {
            command.env("CIPHERFLEET_LOG", level).stderr(Stdio::piped());
        } else {
            command.env("CIPHERFLEET_LOG", "error");
        }
        let mut child = command
            .arg("--agent-token-file")
            .arg(self.dir.path().join("agent.token"))
            .arg("--admin-token-file")
            .arg(self.dir.path().join("admin.token"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the coordinator");
        self.log = self.log_level.map(|_| crate::tls::stderr_lines(&mut child));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("coordinator address line");
        let grpc = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("grpc="))
            .unwrap_or_else(|| panic!("coordinator did not print its address: {line:?}"));
        self.grpc = grpc.parse().unwrap();
        let http = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http="))
            .unwrap_or_else(|| panic!("coordinator did not print its HTTP address: {line:?}"));
        self.http = http.parse().unwrap();
        self.coordinator = Some(child);
    }

    /// Whether the coordinator process still runs (false once it exited, however).
    pub fn coordinator_alive(&mut self) -> bool {
        self.coordinator
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// The coordinator's process id, while it runs.
    pub fn coordinator_pid(&self) -> Option<u32> {
        self.coordinator.as_ref().map(Child::id)
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill_coordinator(&mut self) {
        if let Some(mut c) = self.coordinator.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGTERM, then waits up to `limit` for the coordinator to exit; its
    /// status, or `None` if it was still running (it is then killed).
    pub fn stop_coordinator(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let mut c = self.coordinator.take()?;
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = c.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    /// `GET path` on the report's HTTP side.
    pub async fn get(&self, path: &str) -> HttpResponse {
        http_get(self.http, path).await
    }

    /// The coordinator's gRPC URL as this machine dials it (loopback for a wildcard listener).
    pub fn url(&self) -> String {
        let tls = self.tls.is_some() || self.self_signed.is_some();
        let scheme = if tls { "https" } else { "http" };
        let mut addr = self.grpc;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("{scheme}://{addr}")
    }

    /// The CA clients trust when the coordinator serves TLS.
    pub fn ca(&self) -> Option<PathBuf> {
        match (&self.tls, &self.self_signed) {
            (Some(t), _) => Some(t.ca.clone()),
            (None, Some((dir, _))) => Some(dir.join("ca.pem")),
            (None, None) => None,
        }
    }

    /// From the next [`App::start_coordinator`] on: these `serve` flags too.
    pub fn set_serve_args(&mut self, args: &[&str]) {
        self.serve_args.extend(args.iter().map(|a| a.to_string()));
    }

    /// `GET path` on the report with this `Host` header and these extra headers.
    pub async fn get_as(&self, path: &str, host: &str, headers: &[(&str, &str)]) -> HttpResponse {
        crate::http::http_get_as(self.http, path, host, headers).await
    }

    /// From the next [`App::start_coordinator`] on: TLS with `--self-signed` in a
    /// directory of the app's, naming `names` too (`--tls-name`).
    pub fn use_self_signed(&mut self, names: &[String]) {
        self.tls = None;
        self.self_signed = Some((self.dir.path().join("tls"), names.to_vec()));
    }

    /// Starts an agent process named `name` with its own state and spool directories.
    pub fn spawn_agent(&mut self, name: &str, extra: &[&str]) -> usize {
        let child = self.agent_command(name).args(extra).spawn().expect("starting an agent");
        self.track_agent(child)
    }

    /// `cipherfleet-agent run` for this coordinator, named `name`, with its own
    /// state directory (its host credential, kept across restarts of the agent)
    /// and spool directory; add flags, environment or pipes, spawn, then [`App::track_agent`].
    pub fn agent_command(&self, name: &str) -> Command {
        self.agent_command_with(&agent_binary(), name)
    }

    /// The spool directory of the agent named `name` (see the agent's `daemon/spool.rs`).
    pub fn spool_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("spool-{name}"))
    }

    /// The state directory of the agent named `name`: its host credential is
    /// `credential` in it. The same for every start of that agent, so a
    /// restarted agent is the same host.
    pub fn state_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("state-{name}"))
    }

    /// [`App::agent_command`] running the agent build at `binary` instead.
    pub fn agent_command_with(&self, binary: &Path, name: &str) -> Command {
        let spool = self.spool_dir(name);
        let mut command = Command::new(binary);
        command
            .args([
                "run",
                "--coordinator",
                &self.url(),
                "--name",
                name,
                "--label",
                "suite=e2e",
                // Workers at the default niceness on a machine busy with builds
                // get too little CPU to measure: these tests are not about priority.
                "--nice",
                "0",
            ])
            .arg("--token-file")
            .arg(self.dir.path().join("agent.token"))
            .arg("--state-dir")
            .arg(self.state_dir(name))
            .arg("--spool-dir")
            .arg(&spool)
            .env("CIPHERFLEET_LOG", "error")
            .stdin(Stdio::null());
        command
    }

    /// Starts the agent build at `binary` as agent `name`, like [`App::spawn_agent`].
    pub fn spawn_agent_build(&mut self, binary: &Path, name: &str, extra: &[&str]) -> usize {
        assert!(binary.is_file(), "{} is missing: run deploy/build.sh", binary.display());
        let child = self
            .agent_command_with(binary, name)
            .args(extra)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        self.track_agent(child)
    }

    /// Starts the software build (`cipherfleet-agent-soft`, every crypto crate
    /// forced to software) as agent `name`. Its daemon measures every job itself,
    /// so accelerated requests run in software too.
    pub fn spawn_soft_agent(&mut self, name: &str, extra: &[&str]) -> usize {
        let soft = agent_binary().with_file_name("cipherfleet-agent-soft");
        self.spawn_agent_build(&soft, name, extra)
    }

    /// Kills `child` with the app; returns its index for [`App::kill_agent`].
    pub fn track_agent(&mut self, child: Child) -> usize {
        self.agents.push(child);
        self.agents.len() - 1
    }

    pub fn kill_agent(&mut self, index: usize) {
        let a = &mut self.agents[index];
        a.kill().unwrap();
        a.wait().unwrap();
    }

    pub async fn admin(&self) -> AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>> {
        admin_presenting(&self.url(), self.ca().as_deref(), self.client_identity.as_ref()).await
    }

    /// Waits until `n` hosts are online.
    pub async fn wait_online(&self, n: usize) {
        self.wait_hosts("hosts online", |hosts| hosts.iter().filter(|h| h.online).count() >= n)
            .await
    }

    /// Waits until the host named `name` is known and `online` (or not).
    pub async fn wait_host(&self, name: &str, online: bool) {
        let what = format!("host {name} online: {online}");
        self.wait_hosts(&what, |hosts| {
            hosts.iter().any(|h| h.name == name && h.online == online)
        })
        .await
    }

    /// Waits up to 30 s until `check` holds for the hosts the coordinator lists.
    async fn wait_hosts(&self, what: &str, check: impl Fn(&[v1::Host]) -> bool) {
        let admin = self.admin().await;
        let check = &check;
        wait_for(what, Duration::from_secs(30), || {
            let mut admin = admin.clone();
            async move {
                let hosts = admin
                    .list_hosts(v1::ListHostsRequest::default())
                    .await
                    .ok()?
                    .into_inner();
                check(&hosts.hosts).then_some(())
            }
        })
        .await;
    }

    /// Starts a campaign over [`matrix`] on every host.
    pub async fn start_matrix(&self, algorithms: &[&str], sizes: &[u64], seconds: f64) -> String {
        self.start_campaign("e2e", matrix(algorithms, sizes, seconds)).await
    }

    /// Starts a campaign named `name` over `matrix` on every host; returns its id.
    pub async fn start_campaign(&self, name: &str, matrix: v1::Matrix) -> String {
        self.start_campaign_on(name, matrix, &[]).await.campaign_id
    }

    /// [`App::start_campaign`] on the hosts named (every host when none), with
    /// the whole answer: the jobs made and the points skipped.
    pub async fn start_campaign_on(&self, name: &str, matrix: v1::Matrix, hosts: &[&str]) -> v1::StartCampaignResponse {
        let request = v1::StartCampaignRequest {
            points: Some(v1::start_campaign_request::Points::Matrix(matrix)),
            hosts: (!hosts.is_empty()).then(|| v1::HostSelector {
                host_names: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }),
            started_by: "e2e".into(),
            name: name.into(),
            ..Default::default()
        };
        self.admin()
            .await
            .start_campaign(request)
            .await
            .expect("campaign starts")
            .into_inner()
    }

    /// [`App::start_campaign`], then waits up to 240 s for it to complete; returns its id.
    pub async fn run_campaign(&self, name: &str, matrix: v1::Matrix) -> String {
        let id = self.start_campaign(name, matrix).await;
        let status = self.wait_finished(&id, Duration::from_secs(240)).await;
        assert_eq!(
            status.state,
            v1::CampaignState::Completed as i32,
            "{:?}",
            status.failures
        );
        id
    }

    pub async fn status(&self, id: &str) -> v1::CampaignStatusResponse {
        self.admin()
            .await
            .campaign_status(v1::CampaignStatusRequest {
                campaign_id: id.to_string(),
            })
            .await
            .expect("status")
            .into_inner()
    }

    /// Cancels campaign `id` with `reason` through the admin API.
    pub async fn cancel(&self, id: &str, reason: &str) -> v1::CancelCampaignResponse {
        self.admin()
            .await
            .cancel_campaign(v1::CancelCampaignRequest {
                campaign_id: id.to_string(),
                reason: reason.into(),
            })
            .await
            .expect("cancelled")
            .into_inner()
    }

    /// Waits until some job of campaign `id` has been accepted by its agent; returns it.
    pub async fn wait_job_started(&self, id: &str) -> uuid::Uuid {
        let id: i64 = id.parse().unwrap();
        wait_for("a job to start", Duration::from_secs(60), || async {
            sqlx::query_scalar(
                "SELECT id FROM jobs WHERE campaign_id = $1 AND status = 'running' AND started_at IS NOT NULL",
            )
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .ok()
            .flatten()
        })
        .await
    }

    /// Waits for a campaign to leave the running state.
    pub async fn wait_finished(&self, id: &str, limit: Duration) -> v1::CampaignStatusResponse {
        let url = self.url();
        let ca = self.ca();
        let identity = self.client_identity.clone();
        let id = id.to_string();
        let finished = wait_for("campaign to finish", limit * 2, || {
            let (url, ca, identity, id) = (url.clone(), ca.clone(), identity.clone(), id.clone());
            async move {
                let mut admin = admin_presenting(&url, ca.as_deref(), identity.as_ref()).await;
                let s = admin
                    .campaign_status(v1::CampaignStatusRequest { campaign_id: id })
                    .await
                    .ok()?
                    .into_inner();
                (s.state != v1::CampaignState::Running as i32).then_some(s)
            }
        });
        match tokio::time::timeout(limit, finished).await {
            Ok(status) => status,
            Err(_) => panic!(
                "timed out after {limit:?} waiting for campaign {id} to finish\n{}",
                self.diagnosis(&id).await
            ),
        }
    }

    /// Where a campaign's jobs stand and which hosts are online, for a failure
    /// message: a stuck campaign should show which host sat idle with work queued.
    pub async fn diagnosis(&self, campaign: &str) -> String {
        let lines: Result<Vec<String>, _> = sqlx::query_scalar(
            "SELECT format('campaign %s: %s (database time %s)', id, status, now()) FROM campaigns WHERE id = $1 \
             UNION ALL (SELECT format('  job %s on %s: %s, attempts %s, assigned %s, started %s, finished %s, error %s', \
                     j.position, h.name, j.status, j.attempts, j.assigned_at, j.started_at, j.finished_at, j.error) \
                 FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.campaign_id = $1 ORDER BY h.name, j.position) \
             UNION ALL (SELECT format('  host %s: %s sessions, %s open, last connected %s', h.name, count(s.id), \
                     count(s.id) FILTER (WHERE s.disconnected_at IS NULL), max(s.connected_at)) \
                 FROM hosts h LEFT JOIN agent_sessions s ON s.host_id = h.id GROUP BY h.name ORDER BY h.name)",
        )
        .bind(campaign.parse::<i64>().unwrap_or(-1))
        .fetch_all(&self.pool)
        .await;
        let online = tokio::time::timeout(Duration::from_secs(5), async {
            let mut admin = self.admin().await;
            let hosts = admin.list_hosts(v1::ListHostsRequest::default()).await?.into_inner();
            let online: Vec<(String, bool)> = hosts.hosts.into_iter().map(|h| (h.name, h.online)).collect();
            Ok::<_, tonic::Status>(online)
        })
        .await;
        let lines = lines.unwrap_or_else(|e| vec![format!("cannot read the jobs: {e}")]);
        format!("{}\n  online (coordinator's view): {online:?}", lines.join("\n"))
    }

    /// Results stored per job of a campaign (job id, count).
    pub async fn result_counts(&self, campaign: &str) -> Vec<(uuid::Uuid, i64)> {
        sqlx::query_as(
            "SELECT j.id, (SELECT count(*) FROM results r WHERE r.job_id = j.id) FROM jobs j WHERE j.campaign_id = $1 ORDER BY j.position",
        )
        .bind(campaign.parse::<i64>().unwrap())
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        for a in &mut self.agents {
            let _ = a.kill();
            let _ = a.wait();
        }
        self.kill_coordinator();
    }
}

#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        r.metadata_mut().insert("authorization", self.0.clone());
        Ok(r)
    }
}

/// Waits until the coordinator at `url` (over TLS trusting `ca` when given) has `n` hosts online.
pub async fn wait_online_at(url: &str, ca: Option<&Path>, n: usize) {
    let admin = admin_over(url, ca, ADMIN_TOKEN).await;
    wait_for("hosts online", Duration::from_secs(30), || {
        let mut admin = admin.clone();
        async move {
            let hosts = admin
                .list_hosts(v1::ListHostsRequest::default())
                .await
                .ok()?
                .into_inner()
                .hosts;
            (hosts.iter().filter(|h| h.online).count() >= n).then_some(())
        }
    })
    .await;
}

pub async fn admin_with_token(
    url: &str,
    token: &str,
) -> AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>> {
    admin_over(url, None, token).await
}

/// An admin client; over TLS trusting `ca` when given.
pub async fn admin_over(
    url: &str,
    ca: Option<&Path>,
    token: &str,
) -> AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>> {
    let channel = connect_with(url, ca).await;
    AdminServiceClient::with_interceptor(channel, Bearer(format!("Bearer {token}").parse().unwrap()))
}

/// [`admin_over`] with the admin token, presenting `identity` (certificate, key) when given.
pub async fn admin_presenting(
    url: &str,
    ca: Option<&Path>,
    identity: Option<&(PathBuf, PathBuf)>,
) -> AdminServiceClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>> {
    let Some((cert, key)) = identity else {
        return admin_over(url, ca, ADMIN_TOKEN).await;
    };
    let ca = std::fs::read(ca.expect("client certificates need TLS")).expect("reading the test CA");
    let identity = Identity::from_pem(std::fs::read(cert).unwrap(), std::fs::read(key).unwrap());
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .identity(identity);
    let channel = tonic::transport::Endpoint::from_shared(url.to_string())
        .unwrap()
        .tls_config(tls)
        .expect("TLS settings")
        .connect()
        .await
        .expect("connecting to the coordinator with a client certificate");
    AdminServiceClient::with_interceptor(channel, Bearer(format!("Bearer {ADMIN_TOKEN}").parse().unwrap()))
}

pub async fn connect(url: &str) -> Channel {
    connect_with(url, None).await
}

/// A channel to `url`; over TLS trusting `ca` alone when given.
pub async fn connect_with(url: &str, ca: Option<&Path>) -> Channel {
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_string()).unwrap();
    if let Some(ca) = ca {
        let pem = std::fs::read(ca).expect("reading the test CA");
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
            .expect("TLS settings");
    }
    endpoint.connect().await.expect("connecting to the coordinator")
}

/// Polls `check` every 100 ms until it yields a value, or panics after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
