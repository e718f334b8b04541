//! The operator commands as a shell user meets them: a reader that goes away
//! (`hosts | head -1`) ends them quietly, and a coordinator that is not there
//! is said once.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::app::{ADMIN_TOKEN, spawn_app};

/// Runs the coordinator binary with `args` against `url`, its standard output
/// a pipe whose reader is already closed; returns (exit code, stderr).
fn into_closed_pipe(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(args)
        .args(["--coordinator", url])
        .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .expect("the coordinator binary runs");
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (child.wait().unwrap().code(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_ends_an_operator_command_quietly() {
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-pipe", &[]);
    app.wait_online(1).await;
    for args in [
        &["hosts"][..],
        &["hosts", "--format", "json"],
        &["check", "--min-severity", "info"],
        &["schedule", "list"],
    ] {
        let (code, stderr) = into_closed_pipe(&app.url(), args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_ne!(code, Some(101), "{args:?}: {stderr}");
        // `check` keeps its own status (findings at or above the threshold); the others succeed.
        if args[0] != "check" {
            assert_eq!(code, Some(0), "{args:?}: {stderr}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_is_not_there_is_said_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(["hosts", "--coordinator", &url])
        .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("the coordinator binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("tcp connect error").count(), 1, "{stderr}");
    assert!(stderr.contains("Connection refused"), "{stderr}");
}
