//! The app's agents: the builds' binaries, agent processes with their own
//! state and spool directories, killed with the app.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::App;

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

impl App {
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
}
