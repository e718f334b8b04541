//! A scripted coordinator (a real gRPC server on 127.0.0.1:0) and the real
//! agent binary as a child process, with one method per thing a test does.
//! The coordinator also serves an agent run in the test's own process
//! (`host.rs`): anything [`Logged`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cipherfleet_proto::v1::agent_service_server::{AgentService, AgentServiceServer};
use cipherfleet_proto::v1::{self, AgentMessage, CoordinatorMessage, agent_message, coordinator_message};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::Server;
use tonic::{Request, Response, Status, Streaming};

/// Longest wait for any single protocol step.
pub const STEP: Duration = Duration::from_secs(15);
/// Longest wait for a session: it may need a (re)started agent process, and
/// starting a debug build takes far longer than a step when other builds load
/// the machine (a restart connects at once, without backoff, so only the
/// process start is waited for). Reached only on failure.
pub const SESSION: Duration = Duration::from_secs(60);
/// Longest wait for a short job's result (a debug build measuring on a busy 2-core machine).
pub const JOB: Duration = Duration::from_secs(90);
/// The token every test agent presents.
pub const TOKEN: &str = "test-token-7c1e-0042";

/// How the coordinator answers a `Hello`.
#[derive(Clone)]
pub enum Admission {
    /// Hand the session to the test, which sends `Welcome` itself.
    Accept,
    /// End the call with this status.
    Reject(Status),
}

struct ScriptedCoordinator {
    admission: Admission,
    sessions: mpsc::UnboundedSender<AgentSession>,
    attempts: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl AgentService for ScriptedCoordinator {
    type SessionStream = ReceiverStream<Result<CoordinatorMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let mut from_agent = request.into_inner();
        let hello = match from_agent.message().await?.and_then(|m| m.body) {
            Some(agent_message::Body::Hello(hello)) => hello,
            other => {
                return Err(Status::invalid_argument(format!(
                    "first message must be Hello, got {other:?}"
                )));
            }
        };
        if let Admission::Reject(status) = &self.admission {
            return Err(status.clone());
        }
        let (to_agent, replies) = mpsc::channel(16);
        let _ = self.sessions.send(AgentSession {
            hello,
            to_agent,
            from_agent,
        });
        Ok(Response::new(ReceiverStream::new(replies)))
    }
}

/// The coordinator side of the test.
pub struct Coordinator {
    pub address: SocketAddr,
    sessions: mpsc::UnboundedReceiver<AgentSession>,
    attempts: Arc<AtomicUsize>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Coordinator {
    /// Serves on a port-0 socket, bound before this returns (no readiness wait needed).
    pub async fn start(admission: Admission) -> Coordinator {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("local address");
        let (sessions_tx, sessions) = mpsc::unbounded_channel();
        let attempts = Arc::new(AtomicUsize::new(0));
        let service = AgentServiceServer::new(ScriptedCoordinator {
            admission,
            sessions: sessions_tx,
            attempts: attempts.clone(),
        });
        let server = tokio::spawn(Server::builder().serve_with_incoming_shutdown(
            service,
            TcpListenerStream::new(listener),
            async { std::future::pending::<()>().await },
        ));
        Coordinator {
            address,
            sessions,
            attempts,
            server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The next agent session (its `Hello` already read).
    pub async fn next_session(&mut self, agent: &impl Logged) -> AgentSession {
        match tokio::time::timeout(SESSION, self.sessions.recv()).await {
            Ok(Some(session)) => session,
            _ => panic!("no agent session within {SESSION:?}; agent log:\n{}", agent.log()),
        }
    }

    /// Session calls received so far, accepted or not.
    pub fn attempts(&self) -> usize {
        self.attempts.load(Ordering::SeqCst)
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One agent session as the coordinator sees it. Dropping it ends the stream.
pub struct AgentSession {
    pub hello: v1::Hello,
    to_agent: mpsc::Sender<Result<CoordinatorMessage, Status>>,
    from_agent: Streaming<AgentMessage>,
}

impl AgentSession {
    pub async fn send(&self, body: coordinator_message::Body) {
        self.to_agent
            .send(Ok(CoordinatorMessage { body: Some(body) }))
            .await
            .expect("the session is open");
    }

    pub async fn welcome(&self, heartbeat_interval_ms: u32) {
        self.welcome_with_credential(heartbeat_interval_ms, "").await;
    }

    /// `Welcome` issuing `credential` (empty: none), as on enrollment.
    pub async fn welcome_with_credential(&self, heartbeat_interval_ms: u32, credential: &str) {
        self.send(coordinator_message::Body::Welcome(v1::Welcome {
            agent_id: "agent-1".into(),
            heartbeat_interval_ms,
            credential: credential.into(),
        }))
        .await;
    }

    /// `RunJob` of attempt [`first_attempt`]`(job_id)`.
    pub async fn run_job(&self, job_id: &str, spec: v1::JobSpec) {
        self.run_attempt(job_id, &first_attempt(job_id), spec).await;
    }

    /// `RunJob` of attempt `attempt_id`.
    pub async fn run_attempt(&self, job_id: &str, attempt_id: &str, spec: v1::JobSpec) {
        self.send(coordinator_message::Body::RunJob(v1::RunJob {
            job_id: job_id.into(),
            spec: Some(spec),
            time_limit_ms: 0,
            attempt_id: attempt_id.into(),
        }))
        .await;
    }

    /// Acknowledges the outcome of attempt [`first_attempt`]`(job_id)`.
    pub async fn ack(&self, job_id: &str) {
        self.ack_attempt(job_id, &first_attempt(job_id)).await;
    }

    pub async fn ack_attempt(&self, job_id: &str, attempt_id: &str) {
        self.send(coordinator_message::Body::ResultAck(v1::ResultAck {
            job_id: job_id.into(),
            rejected: String::new(),
            attempt_id: attempt_id.into(),
        }))
        .await;
    }

    /// The next message of any kind, heartbeats included.
    pub async fn next_any(&mut self, within: Duration, agent: &impl Logged) -> agent_message::Body {
        match tokio::time::timeout(within, self.from_agent.message()).await {
            Ok(Ok(Some(AgentMessage { body: Some(body) }))) => body,
            Ok(other) => panic!("agent stream: {other:?}; agent log:\n{}", agent.log()),
            Err(_) => panic!(
                "no message from the agent within {within:?}; agent log:\n{}",
                agent.log()
            ),
        }
    }

    /// The next message that is not a heartbeat.
    pub async fn next(&mut self, within: Duration, agent: &impl Logged) -> agent_message::Body {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_any(left, agent).await {
                agent_message::Body::Heartbeat(_) => continue,
                body => return body,
            }
        }
    }

    /// Round trip through the agent's message loop: every message sent before
    /// this has been handled when it returns.
    pub async fn sync(&mut self, agent: &impl Logged) {
        const SEQ: u64 = 987_654_321;
        self.send(coordinator_message::Body::Ping(v1::Ping { seq: SEQ })).await;
        loop {
            if let agent_message::Body::Heartbeat(h) = self.next_any(STEP, agent).await
                && h.seq == SEQ
            {
                return;
            }
        }
    }
}

/// What an agent under test logged, shown when a step fails: the binary's
/// log, or what an in-process session told its host.
pub trait Logged {
    fn log(&self) -> String;
}

impl Logged for Agent {
    fn log(&self) -> String {
        Agent::log(self)
    }
}

/// The attempt id [`AgentSession::run_job`] sends for `job_id`.
pub fn first_attempt(job_id: &str) -> String {
    format!("{job_id}-attempt-1")
}

/// A job the debug build measures in well under a second: AES-128-GCM, 1 KiB, 0.05 s.
pub fn short_job() -> v1::JobSpec {
    v1::JobSpec {
        algorithm: "aes-128-gcm".into(),
        direction: v1::Direction::Encrypt as i32,
        size_bytes: 1024,
        threads: 1,
        concurrency: None,
        key_mode: v1::KeyMode::Static as i32,
        path: v1::Path::Accelerated as i32,
        nonce: v1::Nonce::Counter as i32,
        provider: v1::Provider::Rustcrypto as i32,
        seconds: 0.05,
    }
}

/// Whether `deploy/build.sh` put the software sibling next to the agent; says how to build it when not.
pub fn require_soft_sibling() -> bool {
    let soft = std::path::Path::new(env!("CARGO_BIN_EXE_cipherfleet-agent")).with_file_name("cipherfleet-agent-soft");
    if soft.is_file() {
        return true;
    }
    assert!(
        std::env::var_os("CIPHERFLEET_REQUIRE_SOFT").is_none(),
        "{} missing: run deploy/build.sh",
        soft.display()
    );
    eprintln!("skipping: {} not built (deploy/build.sh builds it)", soft.display());
    false
}

/// A job that would measure for 30 s.
pub fn long_job() -> v1::JobSpec {
    v1::JobSpec {
        seconds: 30.0,
        ..short_job()
    }
}

/// The agent binary running `run` against a coordinator, in its own directory.
pub struct Agent {
    child: tokio::process::Child,
    dir: PathBuf,
    /// Extra environment, kept across restarts.
    env: Vec<(String, String)>,
}

impl Agent {
    /// Starts `cipherfleet-agent run` with a token file, a state directory
    /// (`state/`, with the credential) and a spool in a fresh directory named
    /// after the test, name `test-host` and label `rack=b7`.
    pub fn start(test: &str, coordinator: &Coordinator, extra: &[&str]) -> Agent {
        Agent::start_with_env(test, coordinator, extra, &[])
    }

    /// [`Agent::start`] with extra environment variables.
    pub fn start_with_env(test: &str, coordinator: &Coordinator, extra: &[&str], env: &[(&str, &str)]) -> Agent {
        Agent::start_at(test, &coordinator.url(), extra, env)
    }

    /// [`Agent::start`] against a port nothing listens on.
    pub fn start_unreachable(test: &str) -> Agent {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let url = format!("http://{}", closed.local_addr().expect("its address"));
        drop(closed);
        Agent::start_at(test, &url, &[], &[])
    }

    fn start_at(test: &str, url: &str, extra: &[&str], env: &[(&str, &str)]) -> Agent {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("daemon-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test directory");
        let token_file = dir.join("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).expect("token file");
        let child = Self::spawn(&dir, url, extra, &env);
        Agent { child, dir, env }
    }

    /// Kills the agent with SIGKILL (no chance to clean up) and starts it again on the same spool.
    pub async fn kill_and_restart(&mut self, coordinator: &Coordinator) {
        self.child.kill().await.expect("kill the agent");
        self.child = Self::spawn(&self.dir, &coordinator.url(), &[], &self.env);
    }

    fn spawn(dir: &std::path::Path, url: &str, extra: &[&str], env: &[(String, String)]) -> tokio::process::Child {
        let token_file = dir.join("token");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("agent.log"))
            .expect("log file");
        tokio::process::Command::new(env!("CARGO_BIN_EXE_cipherfleet-agent"))
            .arg("run")
            .args(["--coordinator", url])
            .arg("--token-file")
            .arg(&token_file)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--spool-dir")
            .arg(dir.join("spool"))
            .args(["--name", "test-host", "--label", "rack=b7"])
            // Workers at the default niceness on a machine busy with builds get
            // too little CPU to measure: these tests are not about priority.
            .args(if extra.contains(&"--nice") {
                &[][..]
            } else {
                &["--nice", "0"][..]
            })
            .args(extra)
            .env_remove("CIPHERFLEET_TOKEN")
            .env("CIPHERFLEET_LOG", "debug")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("the agent binary starts")
    }

    /// Everything the agent logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// The agent's state directory (its credential file is `credential` in it).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// Job ids with an outcome in the spool.
    pub fn spooled(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.dir.join("spool"))
            .map(|entries| {
                entries
                    .filter_map(|e| {
                        let name = e.ok()?.file_name().to_string_lossy().into_owned();
                        Some(name.strip_prefix("outcome-")?.strip_suffix(".json")?.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `signal` (a valid signal number).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = self.child.id().expect("agent still running") as libc::pid_t;
        // SAFETY: kill(2) with a valid signal number on our own child.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits for the agent to exit and returns its status code.
    pub async fn exit_code(&mut self, within: Duration) -> i32 {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => status
                .code()
                .unwrap_or_else(|| panic!("agent killed by a signal: {status:?}; log:\n{}", self.log())),
            Ok(Err(e)) => panic!("waiting for the agent: {e}"),
            Err(_) => panic!("agent still running after {within:?}; log:\n{}", self.log()),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Kept after a failure for the log and the spool.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The error text of a `JobFailed`, or a panic naming what came instead.
pub fn job_failed(body: agent_message::Body, job_id: &str) -> v1::JobFailed {
    match body {
        agent_message::Body::JobFailed(f) if f.job_id == job_id => f,
        other => panic!("expected JobFailed for {job_id}, got {other:?}"),
    }
}
