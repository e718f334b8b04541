use std::path::PathBuf;
use std::process::{Command, Output};

/// The accelerated binary under test.
pub fn agent() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cipherfleet-agent"))
}

/// The software sibling `deploy/build.sh` places next to it.
pub fn soft_sibling() -> PathBuf {
    agent().with_file_name("cipherfleet-agent-soft")
}

/// Runs the agent with `args` and no stdin.
pub fn run(args: &[&str]) -> Output {
    run_with(agent(), args, &[])
}

pub fn run_with(binary: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary);
    cmd.args(args).stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the agent binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses JSON-lines output into values.
pub fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Skips a test that needs the software sibling when it has not been built, saying how to build it.
pub fn require_soft_sibling() -> bool {
    if soft_sibling().is_file() {
        return true;
    }
    assert!(
        std::env::var_os("CIPHERFLEET_REQUIRE_SOFT").is_none(),
        "{} missing: run deploy/build.sh",
        soft_sibling().display()
    );
    eprintln!(
        "skipping: {} not built (deploy/build.sh builds it)",
        soft_sibling().display()
    );
    false
}
