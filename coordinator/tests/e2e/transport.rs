//! TLS by default: plain gRPC off loopback is refused unless insisted on (and
//! then warned about), clients refuse to send a token over `http://` to
//! another machine, and `--self-signed` gets an agent working over TLS.
//! Also the private cluster's directory lock: one coordinator per `--data-dir`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::app::{ADMIN_TOKEN, AGENT_TOKEN, TempDir, agent_binary, spawn_app, url_of, wait_online_at};
use crate::tls::{stderr_lines, wait_for_line};

/// `cipherfleet-coordinator serve` with token files in `dir` and `args`, its
/// output piped; `CIPHERFLEET_LOG=warn`.
fn serve_command(dir: &Path, args: &[&str]) -> Command {
    for (file, token) in [("agent.token", AGENT_TOKEN), ("admin.token", ADMIN_TOKEN)] {
        let path = dir.join(file);
        std::fs::write(&path, token).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"));
    command
        .arg("serve")
        .args(["--http-listen", "127.0.0.1:0", "--heartbeat-seconds", "0.5"])
        .arg("--agent-token-file")
        .arg(dir.join("agent.token"))
        .arg("--admin-token-file")
        .arg(dir.join("admin.token"))
        .args(args)
        .env("CIPHERFLEET_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs `command` to its end, which must come within a minute.
fn output_within_a_minute(mut command: Command) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the command");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the command did not end within a minute")
        .expect("waiting for the command")
}

/// The `grpc=ADDR http=ADDR …` line a started coordinator prints.
fn address_line(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("coordinator address line");
    line
}

/// The value of `name=value` among a line's space-separated words.
pub(crate) fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// SIGTERM, then waits: the coordinator stops its private cluster on the way out.
fn terminate(child: &mut Child) {
    // SAFETY: kill(2) on a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_grpc_off_loopback_is_refused_unless_insisted_on_and_then_warned_about() {
    let pool = crate::db_helpers::fresh_db().await;
    let db_url = url_of(&pool).await;
    let dir = TempDir::new("e2e-plaintext");
    let on_every_address = ["--grpc-listen", "0.0.0.0:0", "--database-url", &db_url];

    let refused = output_within_a_minute(serve_command(dir.path(), &on_every_address));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "serve started plain gRPC on 0.0.0.0: {stderr}"
    );
    for want in ["0.0.0.0", "--insecure-plaintext", "--tls-cert", "--self-signed"] {
        assert!(stderr.contains(want), "{want:?} missing from: {stderr}");
    }
    assert!(refused.stdout.is_empty(), "it printed an address: {:?}", refused.stdout);

    let mut insisted = serve_command(dir.path(), &[&on_every_address[..], &["--insecure-plaintext"]].concat())
        .spawn()
        .expect("starting the coordinator");
    let log = stderr_lines(&mut insisted);
    let line = address_line(&mut insisted);
    let grpc: std::net::SocketAddr = field(&line, "grpc").expect("grpc=").parse().unwrap();
    wait_for_line(&log, "--insecure-plaintext", Duration::from_secs(10))
        .unwrap_or_else(|seen| panic!("no warning at start; the coordinator logged:\n{seen}"));

    // Every agent session is warned about again.
    let url = format!("http://127.0.0.1:{}", grpc.port());
    let mut agents = vec![];
    for name in ["e2e-plain-1", "e2e-plain-2"] {
        let agent = Command::new(agent_binary())
            .args(["run", "--coordinator", &url, "--name", name])
            .arg("--token-file")
            .arg(dir.path().join("agent.token"))
            .arg("--state-dir")
            .arg(dir.path().join(format!("state-{name}")))
            .arg("--spool-dir")
            .arg(dir.path().join(format!("spool-{name}")))
            .env("CIPHERFLEET_LOG", "error")
            .stdin(Stdio::null())
            .spawn()
            .expect("starting an agent");
        agents.push(agent);
        let seen = wait_for_line(&log, "agent session over plain gRPC", Duration::from_secs(30))
            .unwrap_or_else(|seen| panic!("no warning for {name}'s session; the coordinator logged:\n{seen}"));
        assert!(seen.contains("WARN"), "{seen}");
    }
    // And they work: both hosts come online over plain gRPC.
    wait_online_at(&url, None, 2).await;
    for mut agent in agents {
        let _ = agent.kill();
        let _ = agent.wait();
    }
    terminate(&mut insisted);
}

#[test]
fn clients_refuse_to_send_a_token_over_plain_http_to_another_machine() {
    let dir = TempDir::new("e2e-plain-client");
    let token = dir.path().join("agent.token");
    std::fs::write(&token, AGENT_TOKEN).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // TEST-NET-1: nothing answers there, and nothing is tried.
    let remote = "http://192.0.2.10:7443";

    let mut agent = Command::new(agent_binary());
    agent
        .args(["run", "--coordinator", remote, "--name", "e2e-plain-client"])
        .arg("--token-file")
        .arg(&token)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .stdin(Stdio::null());
    let agent = output_within_a_minute(agent);
    let stderr = String::from_utf8_lossy(&agent.stderr);
    assert_eq!(agent.status.code(), Some(2), "{stderr}");
    for want in [
        "--coordinator",
        "192.0.2.10",
        "--insecure-plaintext",
        "https://",
        "--ca-cert",
    ] {
        assert!(stderr.contains(want), "{want:?} missing from: {stderr}");
    }

    for operator in [&["hosts"][..], &["check"], &["campaign", "status", "1"]] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"));
        command
            .args(operator)
            .args(["--coordinator", remote])
            .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
            .stdin(Stdio::null());
        let out = output_within_a_minute(command);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{operator:?}: {stderr}");
        assert!(
            stderr.contains("--insecure-plaintext") && stderr.contains("192.0.2.10"),
            "{operator:?}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_coordinator_serves_an_agent_that_trusts_the_printed_ca() {
    let mut app = spawn_app().await;
    app.kill_coordinator();
    app.use_self_signed(&["coordinator.e2e.example".to_string()]);
    // Every address, as a coordinator for a fleet listens: TLS makes that allowed.
    app.start_coordinator("0.0.0.0:0".parse().unwrap());
    assert!(app.url().starts_with("https://127.0.0.1:"), "{}", app.url());
    let ca = app.ca().unwrap();
    let ca_pem = std::fs::read_to_string(&ca).expect("the CA file --self-signed made");
    assert!(ca_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{ca_pem}");
    let key_mode = std::fs::metadata(ca.with_file_name("server.key")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&key_mode.permissions()) & 0o777,
        0o600
    );

    app.spawn_agent("e2e-self-signed", &["--ca-cert", ca.to_str().unwrap()]);
    app.wait_online(1).await;
    let campaign = app.start_matrix(&["aes-128-gcm"], &[1024], 0.05).await;
    let status = app.wait_finished(&campaign, Duration::from_secs(120)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (1, 0), "{:?}", status.failures);

    // A restart on the same port reuses the CA: the agent, which read that file
    // once at its start, reconnects.
    let port = app.grpc.port();
    app.kill_coordinator();
    app.start_coordinator(format!("0.0.0.0:{port}").parse().unwrap());
    assert_eq!(std::fs::read_to_string(&ca).unwrap(), ca_pem, "the CA was replaced");
    app.wait_online(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_address_line_names_the_ca_for_agents() {
    let pool = crate::db_helpers::fresh_db().await;
    let db_url = url_of(&pool).await;
    let dir = TempDir::new("e2e-self-signed-line");
    let tls = dir.path().join("tls");
    let mut child = serve_command(
        dir.path(),
        &[
            "--grpc-listen",
            "127.0.0.1:0",
            "--database-url",
            &db_url,
            "--self-signed",
            tls.to_str().unwrap(),
        ],
    )
    .spawn()
    .expect("starting the coordinator");
    let log = stderr_lines(&mut child);
    let line = address_line(&mut child);
    assert_eq!(field(&line, "ca"), Some(tls.join("ca.pem").to_str().unwrap()), "{line}");
    let seen = wait_for_line(&log, "--ca-cert", Duration::from_secs(10))
        .unwrap_or_else(|seen| panic!("no hint for agents; the coordinator said:\n{seen}"));
    assert!(seen.contains(tls.join("ca.pem").to_str().unwrap()), "{seen}");
    terminate(&mut child);
}

#[test]
fn a_second_coordinator_on_the_same_data_dir_exits_with_a_clear_error() {
    let dir = TempDir::new("e2e-data-dir-lock");
    let data_dir = dir.path().join("data");
    let private = ["--grpc-listen", "127.0.0.1:0", "--data-dir", data_dir.to_str().unwrap()];
    let mut first = serve_command(dir.path(), &private)
        .spawn()
        .expect("starting the first coordinator");
    let line = address_line(&mut first);
    assert!(
        field(&line, "grpc").is_some(),
        "the first coordinator did not start: {line:?}"
    );

    let second = output_within_a_minute(serve_command(dir.path(), &private));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    for want in [
        "another cipherfleet-coordinator",
        &format!("PID {}", first.id()),
        "coordinator.lock",
        "--data-dir",
    ] {
        assert!(stderr.contains(want), "{want:?} missing from: {stderr}");
    }
    assert!(second.stdout.is_empty(), "the second one printed an address");

    // The first still runs its cluster, and stops it on SIGTERM; then the lock is free.
    terminate(&mut first);
    assert!(
        !data_dir.join("postgres/postmaster.pid").exists(),
        "the cluster outlived its coordinator"
    );
    let mut third = serve_command(dir.path(), &private)
        .spawn()
        .expect("starting a third coordinator");
    let line = address_line(&mut third);
    assert!(field(&line, "grpc").is_some(), "the lock was not released: {line:?}");
    terminate(&mut third);
}

/// Whether a PostgreSQL server still runs on the private cluster of `data_dir`
/// (a live process working in its directory, whatever its `postmaster.pid` says).
fn server_runs(data_dir: &Path) -> bool {
    let pgdata = data_dir.join("postgres");
    let Ok(text) = std::fs::read_to_string(pgdata.join("postmaster.pid")) else {
        return false;
    };
    let pid = text.lines().next().unwrap_or("").trim();
    std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| Some(cwd) == pgdata.canonicalize().ok())
}

#[test]
fn sighup_and_sigint_stop_the_coordinator_and_its_private_cluster_as_sigterm_does() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let dir = TempDir::new("e2e-signals");
    let data_dir = dir.path().join("data");
    let private = ["--grpc-listen", "127.0.0.1:0", "--data-dir", data_dir.to_str().unwrap()];
    for (name, signal) in [("SIGHUP", libc::SIGHUP), ("SIGINT", libc::SIGINT)] {
        let mut child = serve_command(dir.path(), &private)
            .process_group(0)
            .spawn()
            .expect("starting the coordinator");
        let line = address_line(&mut child);
        assert!(field(&line, "grpc").is_some(), "{name}: it did not start: {line:?}");
        assert!(server_runs(&data_dir), "{name}: no server while the coordinator runs");
        // To its process group, as a closing terminal or Ctrl-C sends it.
        // SAFETY: kill(2) on the group of a child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(-(child.id() as i32), signal) }, 0);
        let status = child.wait().expect("waiting for the coordinator");
        assert_eq!((status.code(), status.signal()), (Some(0), None), "{name}: {status:?}");
        assert!(!server_runs(&data_dir), "{name}: the cluster outlived its coordinator");
    }

    // A signal while the cluster is starting (pg_ctl waiting for it) ends the same way.
    let mut child = serve_command(dir.path(), &private)
        .process_group(0)
        .spawn()
        .expect("starting the coordinator");
    let pid_file = data_dir.join("postgres/postmaster.pid");
    let started = std::time::Instant::now();
    while !pid_file.exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) }, 0);
    let status = child.wait().expect("waiting for the coordinator");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        !server_runs(&data_dir),
        "a signal during the start left the cluster running"
    );
}
