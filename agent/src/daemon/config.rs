//! The daemon's configuration: `run` flags, the token, the host's default
//! name and the default places of the state directory and the spool.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cipherfleet_core::token::{Secret, TokenError, TokenSource};
use cipherfleet_core::wire;
use cipherfleet_proto::client::{self, ClientError};
use cipherfleet_proto::v1;
use clap::Args;

use super::ceilings::{CeilingArgs, Ceilings};
use crate::provider::openssl::watch::{self, WatchTarget};
use crate::session::CoordinatorUrl;

/// Environment variable holding the enrollment token when `--token-file` is not given.
pub const TOKEN_ENV: &str = "CIPHERFLEET_TOKEN";

/// How to reach the coordinator: the flags `run` and `cipherfleet-sim` share.
#[derive(Args, Debug)]
pub struct ConnectArgs {
    /// Coordinator URL: https://coordinator.example:7443 (TLS); http://… only to this machine's
    /// loopback, or with --insecure-plaintext. Several coordinators sharing one database: repeat
    /// the flag or separate URLs with commas; the agent starts with the first and moves to the
    /// next whenever a session fails or ends (but stays with one that says the host's session is
    /// still held elsewhere, until that ends).
    #[arg(long = "coordinator", value_name = "URL", required = true, value_delimiter = ',')]
    pub coordinators: Vec<String>,
    /// File whose content is the enrollment token. Without it the token is read from CIPHERFLEET_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// CA certificate (PEM) that signed an https:// coordinator's certificate; only it is trusted.
    /// Without it the system's CA store is used.
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// Allow an http:// coordinator on another machine: the token and every result then cross the
    /// network in clear. Only for a network you trust; prefer https:// (`serve --self-signed`).
    #[arg(long)]
    pub insecure_plaintext: bool,
}

impl ConnectArgs {
    /// Checks each URL against the TLS flags and loads the CA (and the client
    /// certificate, if given): the coordinators to try, in order.
    pub fn coordinators(
        &self,
        client_cert: Option<&Path>,
        client_key: Option<&Path>,
    ) -> Result<Vec<CoordinatorUrl>, ConfigError> {
        let mut coordinators = Vec::with_capacity(self.coordinators.len());
        for url in self.coordinators.iter().map(|u| u.trim()) {
            if url.is_empty() {
                return Err(config_error("--coordinator", "an empty URL in the list"));
            }
            client::check_coordinator_url(url, self.ca_cert.as_deref(), self.insecure_plaintext)?;
            let tls = client::client_tls(url, self.ca_cert.as_deref())?;
            let identity = client::client_identity(url, client_cert, client_key)?;
            let tls = tls.map(|tls| match identity {
                Some(identity) => tls.identity(identity),
                None => tls,
            });
            coordinators.push(CoordinatorUrl {
                url: url.to_string(),
                tls,
            });
        }
        Ok(coordinators)
    }

    /// The enrollment token, from --token-file or the environment.
    pub fn token(&self) -> Result<Secret, ConfigError> {
        read_token(self.token_file.as_deref(), std::env::var(TOKEN_ENV).ok())
    }
}

/// Flags of `cipherfleet-agent run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Label for host selectors, e.g. --label rack=b7 (repeatable, at most 32; key: [A-Za-z0-9_.-]).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<v1::Label>,
    /// Host identity, kept across reconnects. Default: the hostname and the first 8 characters of
    /// /etc/machine-id (just the hostname when that is unreadable).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Where the agent keeps its host credential (`credential`, mode 0600, issued by the
    /// coordinator when the host enrolls) and, by default, its spool. Default: /var/lib/cipherfleet
    /// as root, else $XDG_STATE_HOME/cipherfleet (~/.local/state/cipherfleet). Keep it across
    /// restarts and upgrades; never copy it to another machine (a cloned VM must drop it).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where outcomes wait until the coordinator has stored them. Default: <state dir>/spool.
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<PathBuf>,
    /// Client certificate (PEM) for a coordinator that requires one (`serve --client-ca`): signed
    /// by that CA, with this host's --name as a DNS subjectAltName. Needs --client-key.
    #[arg(long, value_name = "PEM")]
    pub client_cert: Option<PathBuf>,
    /// Private key of --client-cert (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC). Needs --client-cert.
    #[arg(long, value_name = "PEM")]
    pub client_key: Option<PathBuf>,
    /// A service whose environment may mask OpenSSL's acceleration: a process id, or a systemd unit
    /// (its main process, else its Environment=). Repeatable, at most 16. Only its
    /// OPENSSL_ia32cap/OPENSSL_armcap is read, at every hello, and reported with the host's OpenSSL
    /// (the coordinator's `openssl-masked`); another user's process needs the agent to run as root.
    #[arg(long = "watch-env", value_name = "PID|UNIT", value_parser = WatchTarget::parse)]
    pub watch_env: Vec<WatchTarget>,
    /// Seconds a running job may finish after SIGTERM/SIGINT/SIGHUP before it is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub grace: u64,
    #[command(flatten)]
    pub ceilings: CeilingArgs,
}

/// `KEY=VALUE`, checked as the coordinator checks a label (`--label`).
pub fn parse_label(s: &str) -> Result<v1::Label, String> {
    wire::parse_label(s).map_err(|e| e.message)
}

/// Everything [`super::run`] needs.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Tried in turn, from the first: the next one after each failed or ended session.
    pub coordinators: Vec<CoordinatorUrl>,
    /// The enrollment token; `Debug` never shows it.
    pub token: Secret,
    /// Host identity (`Hello.name`).
    pub name: String,
    pub labels: Vec<v1::Label>,
    /// Holds the host credential (`credential`).
    pub state_dir: PathBuf,
    pub spool_dir: PathBuf,
    /// How long a running job may finish after shutdown is requested.
    pub grace: Duration,
    /// What a pushed job may use at most.
    pub ceilings: Ceilings,
    /// The services whose capability variable every hello reports (`--watch-env`).
    pub watch_env: Vec<WatchTarget>,
}

/// A bad flag: exit status 2, naming the flag.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub message: String,
}

impl From<ClientError> for ConfigError {
    fn from(e: ClientError) -> Self {
        config_error(e.flag, e.message)
    }
}

impl From<TokenError> for ConfigError {
    fn from(e: TokenError) -> Self {
        let flag = e.source_name();
        // The message already starts with the flag; keep only what follows it.
        let text = e.to_string();
        let message = text.strip_prefix(&format!("{flag}: ")).unwrap_or(&text).to_string();
        config_error(flag, message)
    }
}

pub(super) fn config_error(flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        flag,
        message: message.into(),
    }
}

impl RunArgs {
    /// Checks the flags and fills in defaults; reads the token.
    pub fn into_config(self) -> Result<DaemonConfig, ConfigError> {
        let coordinators = self
            .connect
            .coordinators(self.client_cert.as_deref(), self.client_key.as_deref())?;
        let name = match self.name {
            Some(n) => n,
            None => default_name(),
        };
        wire::check_text("--name", &name, wire::MAX_NAME_LEN, false).map_err(|e| config_error("--name", e.message))?;
        check_labels(&self.labels)?;
        watch::check_targets(&self.watch_env).map_err(|e| config_error("--watch-env", e))?;
        let token = self.connect.token()?;
        let state_dir = self.state_dir.unwrap_or_else(default_state_dir);
        Ok(DaemonConfig {
            coordinators,
            token,
            name,
            labels: self.labels,
            spool_dir: self.spool_dir.unwrap_or_else(|| state_dir.join("spool")),
            state_dir,
            grace: Duration::from_secs(self.grace),
            ceilings: self
                .ceilings
                .into_ceilings(crate::probe::probe().memory_total_bytes)
                .map_err(|(flag, message)| config_error(flag, message))?,
            watch_env: self.watch_env,
        })
    }
}

/// `--label`s as a whole: at most [`wire::MAX_LABELS`], no key twice.
pub fn check_labels(labels: &[v1::Label]) -> Result<(), ConfigError> {
    if labels.len() > wire::MAX_LABELS {
        return Err(config_error(
            "--label",
            format!("{} labels; at most {}", labels.len(), wire::MAX_LABELS),
        ));
    }
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].iter().any(|l| l.key == label.key) {
            return Err(config_error("--label", format!("{:?} given twice", label.key)));
        }
    }
    Ok(())
}

/// The enrollment token from `file`, else from `env` (the value of
/// [`TOKEN_ENV`]), by the rule both programs share (`cipherfleet_core::token`).
pub fn read_token(file: Option<&Path>, env: Option<String>) -> Result<Secret, ConfigError> {
    let source = TokenSource {
        what: "enrollment token",
        flag: "--token-file",
        file,
        env: TOKEN_ENV,
    };
    let token = source.load_with_env(env)?;
    if let Some(warning) = source.permission_warning() {
        tracing::warn!("{warning}");
    }
    Ok(token)
}

/// `<hostname>-<first 8 of /etc/machine-id>`: the hostname alone is often
/// `localhost` or reused across cloned VMs; the machine id tells them apart.
pub fn default_name() -> String {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "agent".to_string());
    let machine_id = std::fs::read_to_string("/etc/machine-id").unwrap_or_default();
    name_from(&hostname, machine_id.trim())
}

fn name_from(hostname: &str, machine_id: &str) -> String {
    let hostname = wire::truncate(hostname.to_string(), wire::MAX_NAME_LEN - 9);
    let prefix: String = machine_id.chars().take(8).collect();
    if prefix.len() == 8 && prefix.chars().all(|c| c.is_ascii_hexdigit()) {
        format!("{hostname}-{prefix}")
    } else {
        hostname
    }
}

/// Root: `/var/lib/cipherfleet`; others: `$XDG_STATE_HOME/cipherfleet`,
/// falling back to `~/.local/state/cipherfleet`.
pub fn default_state_dir() -> PathBuf {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/lib/cipherfleet");
    }
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let state = absolute(std::env::var_os("XDG_STATE_HOME"))
        .or_else(|| absolute(std::env::var_os("HOME")).map(|h| h.join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    state.join("cipherfleet")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        Cli::try_parse_from(full).map(|c| c.run)
    }

    #[test]
    fn several_coordinators_come_repeated_or_comma_separated_and_each_is_checked() {
        let args = parse(&[
            "--coordinator",
            "http://127.0.0.1:1,http://127.0.0.1:2",
            "--coordinator",
            "http://127.0.0.1:3",
        ])
        .unwrap();
        assert_eq!(
            args.connect.coordinators,
            ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"]
        );
        // Each URL is held to the rules of one (plain http only to loopback),
        // before the token is even read.
        let refused = |list: &str| parse(&["--coordinator", list]).unwrap().into_config().unwrap_err();
        let err = refused("http://127.0.0.1:1,http://192.0.2.7:7443");
        assert_eq!(err.flag, "--coordinator");
        assert!(err.message.contains("192.0.2.7"), "{err}");
        let err = refused("http://127.0.0.1:1,");
        assert_eq!(
            (err.flag, err.message.as_str()),
            ("--coordinator", "an empty URL in the list")
        );
    }

    #[test]
    fn token_comes_from_the_file_first_and_never_prints() {
        let path = std::env::temp_dir().join(format!("cipherfleet-token-{}", std::process::id()));
        std::fs::write(&path, "  file-secret-0123456789\n").unwrap();
        let token = read_token(Some(&path), Some("env-secret-0123456789".into())).unwrap();
        assert_eq!(token.expose(), "file-secret-0123456789");
        assert!(!format!("{token:?}").contains("secret"));
        assert_eq!(
            read_token(None, Some("env-secret-0123456789".into())).unwrap().expose(),
            "env-secret-0123456789"
        );
        std::fs::write(&path, "\n").unwrap();
        assert_eq!(read_token(Some(&path), None).unwrap_err().flag, "--token-file");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read_token(Some(&path), None).unwrap_err().flag, "--token-file");
        let missing = read_token(None, None).unwrap_err().to_string();
        assert!(
            missing.contains("--token-file") && missing.contains(TOKEN_ENV),
            "{missing}"
        );
        assert_eq!(
            read_token(None, Some("two-0123456789\nlines-0123456789".into()))
                .unwrap_err()
                .flag,
            TOKEN_ENV
        );
        assert_eq!(read_token(None, Some("short".into())).unwrap_err().flag, TOKEN_ENV);
    }

    #[test]
    fn name_adds_the_machine_id_prefix_when_there_is_one() {
        assert_eq!(name_from("db-1", "0123456789abcdef0123456789abcdef"), "db-1-01234567");
        assert_eq!(name_from("db-1", ""), "db-1");
        assert_eq!(name_from("db-1", "uninitialized"), "db-1");
        assert!(name_from(&"h".repeat(500), "0123456789abcdef").len() <= wire::MAX_NAME_LEN);
        assert!(!default_name().is_empty());
    }

    #[test]
    fn the_spool_lives_in_the_state_dir_unless_given() {
        let path = std::env::temp_dir().join(format!("cipherfleet-token-state-{}", std::process::id()));
        std::fs::write(&path, "file-secret-0123456789\n").unwrap();
        let token = path.to_str().unwrap();
        let config = parse(&[
            "--coordinator",
            "http://127.0.0.1:1",
            "--token-file",
            token,
            "--state-dir",
            "/srv/cf",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert_eq!(config.state_dir, PathBuf::from("/srv/cf"));
        assert_eq!(config.spool_dir, PathBuf::from("/srv/cf/spool"));
        let config = parse(&[
            "--coordinator",
            "http://127.0.0.1:1",
            "--token-file",
            token,
            "--state-dir",
            "/srv/cf",
            "--spool-dir",
            "/var/spool/cf",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert_eq!(config.spool_dir, PathBuf::from("/var/spool/cf"));
        assert!(default_state_dir().ends_with("cipherfleet"));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn plain_http_to_another_machine_needs_insecure_plaintext() {
        let err = parse(&["--coordinator", "http://192.0.2.7:7443"])
            .unwrap()
            .into_config()
            .unwrap_err();
        assert_eq!(err.flag, "--coordinator");
        assert!(err.message.contains("--insecure-plaintext"), "{err}");
        // With the flag the URL passes (what may fail next is a missing token).
        let args = parse(&["--coordinator", "http://192.0.2.7:7443", "--insecure-plaintext"]).unwrap();
        if let Err(next) = args.into_config() {
            assert_ne!(next.flag, "--coordinator", "{next}");
        }
    }

    #[test]
    fn watched_services_are_pids_or_units_and_nonsense_is_a_usage_error() {
        let args = parse(&[
            "--coordinator",
            "http://127.0.0.1:1",
            "--watch-env",
            "1234",
            "--watch-env",
            "nginx.service",
        ])
        .unwrap();
        assert_eq!(
            args.watch_env,
            [WatchTarget::Pid(1234), WatchTarget::Unit("nginx.service".into())]
        );
        for bad in ["", "0", "nginx\nX=1", "-x"] {
            let err = parse(&["--coordinator", "http://127.0.0.1:1", &format!("--watch-env={bad}")]).unwrap_err();
            assert!(err.to_string().contains("--watch-env"), "{bad:?}: {err}");
        }
        let twice = parse(&[
            "--coordinator",
            "http://127.0.0.1:1",
            "--watch-env",
            "7",
            "--watch-env",
            "7",
        ])
        .unwrap();
        let err = twice.into_config().unwrap_err();
        assert_eq!((err.flag, err.message.as_str()), ("--watch-env", "pid 7 given twice"));
    }

    #[test]
    fn labels_are_checked_as_flags() {
        let args = parse(&[
            "--coordinator",
            "http://127.0.0.1:1",
            "--label",
            "rack=b7",
            "--label",
            "class=storage",
        ])
        .unwrap();
        assert_eq!(args.labels.len(), 2);
        let err = parse(&["--coordinator", "http://127.0.0.1:1", "--label", "rack"]).unwrap_err();
        assert!(err.to_string().contains("--label"), "{err}");
        let twice = parse(&[
            "--coordinator",
            "http://127.0.0.1:1",
            "--label",
            "a=1",
            "--label",
            "a=2",
        ])
        .unwrap();
        assert_eq!(twice.into_config().unwrap_err().flag, "--label");
        let many: Vec<String> = (0..=wire::MAX_LABELS).map(|i| format!("k{i}=v")).collect();
        let mut args = vec!["--coordinator", "http://127.0.0.1:1"];
        for l in &many {
            args.extend(["--label", l.as_str()]);
        }
        assert_eq!(parse(&args).unwrap().into_config().unwrap_err().flag, "--label");
    }
}
