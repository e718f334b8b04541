//! `spawn_app()`: a coordinator process on a fresh database, and its
//! process's life: started, restarted, killed, over TLS or its private
//! cluster. `spawn_tls_app()`: the same serving gRPC over TLS.
//! Agents of the app are in `agents`, admin clients and waiting in `admin`,
//! campaigns in `campaigns`.

mod admin;
mod agents;
mod campaigns;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{ConnectOptions, PgPool};

pub use self::admin::*;
pub use self::agents::{agent_binary, kernel_aes_generic_here, sim_binary};
pub use self::campaigns::{both_paths, matrix};
pub use crate::db_helpers::TempDir;
pub use crate::http::HttpResponse;
use crate::http::http_get;

pub const AGENT_TOKEN: &str = "agent-token-0123456789abcdef";
pub const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";

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
