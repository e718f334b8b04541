//! gRPC over TLS: a coordinator with `--tls-cert`/`--tls-key`, agents that
//! trust its CA (`--ca-cert`, or the system store) and agents that do not.
//! The certificates are made at test time with the `openssl` command.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cipherfleet_proto::v1;

use crate::app::{ADMIN_TOKEN, App, TempDir, TlsFiles, spawn_tls_app};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl (Debian: apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A throwaway CA `<name>-ca.pem` and a server certificate it signed for
/// 127.0.0.1 and localhost, in `dir`.
pub(crate) fn make_pki(dir: &Path, name: &str) -> TlsFiles {
    let (ca_key, ca, key, csr, cert, ext) = (
        format!("{name}-ca.key"),
        format!("{name}-ca.pem"),
        format!("{name}-server.key"),
        format!("{name}-server.csr"),
        format!("{name}-server.pem"),
        format!("{name}-server.ext"),
    );
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let subject = format!("/CN=cipherfleet e2e {name} CA");
    openssl(
        dir,
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj", &subject],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req", "-new"][..],
            &ec,
            &["-keyout", &key, "-out", &csr, "-subj", "/CN=localhost"],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join(&ext),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-set_serial",
            "1",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &cert,
        ],
    );
    TlsFiles {
        ca: dir.join(ca),
        cert: dir.join(cert),
        key: dir.join(key),
    }
}

/// A client certificate `<pki>-client-<name>.pem` (and `.key`) for `name` as its DNS
/// subjectAltName, signed by the CA of [`make_pki`]`(dir, pki)`, for `serve --client-ca`.
pub(crate) fn make_client_cert(dir: &Path, pki: &str, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (ca_key, ca) = (format!("{pki}-ca.key"), format!("{pki}-ca.pem"));
    let (key, csr, cert, ext) = (
        format!("{pki}-client-{name}.key"),
        format!("{pki}-client-{name}.csr"),
        format!("{pki}-client-{name}.pem"),
        format!("{pki}-client-{name}.ext"),
    );
    let subject = format!("/CN={name}");
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &subject,
        ],
    );
    std::fs::write(
        dir.join(&ext),
        format!("subjectAltName=DNS:{name}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-set_serial",
            "2",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &cert,
        ],
    );
    (dir.join(cert), dir.join(key))
}

/// The agent's stderr lines, read on a thread so the test can wait with a limit.
pub fn stderr_lines(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits up to `limit` for a line containing `needle`; returns everything read.
pub fn wait_for_line(lines: &mpsc::Receiver<String>, needle: &str, limit: Duration) -> Result<String, String> {
    let start = Instant::now();
    let mut seen = String::new();
    while let Some(left) = limit.checked_sub(start.elapsed()) {
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(needle) {
                    return Ok(seen);
                }
            }
            Err(_) => break,
        }
    }
    Err(seen)
}

async fn online_hosts(app: &App) -> Vec<String> {
    let hosts = app
        .admin()
        .await
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .expect("listing hosts over TLS")
        .into_inner()
        .hosts;
    hosts.into_iter().filter(|h| h.online).map(|h| h.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_trusting_the_ca_completes_a_campaign_over_tls() {
    let pki = TempDir::new("e2e-tls");
    let mut app = spawn_tls_app(make_pki(pki.path(), "fleet")).await;
    assert!(app.url().starts_with("https://"), "{}", app.url());
    let ca = app.ca().unwrap().to_str().unwrap().to_string();
    app.spawn_agent("e2e-tls", &["--ca-cert", &ca]);
    app.wait_online(1).await;

    let campaign = app.start_matrix(&["aes-128-gcm"], &[1024], 0.05).await;
    let status = app.wait_finished(&campaign, Duration::from_secs(120)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32, "{status:?}");
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (1, 0), "{:?}", status.failures);
    assert_eq!(app.result_counts(&campaign).await.len(), 1);

    // The operator commands speak TLS too.
    let hosts = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args([
            "hosts",
            "--format",
            "json",
            "--coordinator",
            &app.url(),
            "--ca-cert",
            &ca,
        ])
        .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("running the operator command");
    let stdout = String::from_utf8_lossy(&hosts.stdout);
    assert!(hosts.status.success(), "{}", String::from_utf8_lossy(&hosts.stderr));
    assert!(stdout.contains("\"e2e-tls\""), "{stdout}");

    // The port speaks TLS only: a plain-text client gets no answer.
    let plain = tonic::transport::Endpoint::from_shared(format!("http://{}", app.grpc))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5));
    if let Ok(channel) = plain.connect().await {
        let mut client = v1::admin_service_client::AdminServiceClient::new(channel);
        let answer = client.list_hosts(v1::ListHostsRequest::default()).await;
        assert!(answer.is_err(), "plain gRPC answered on the TLS port: {answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_that_do_not_trust_the_ca_stay_offline_and_say_why() {
    let pki = TempDir::new("e2e-tls-untrusted");
    let fleet = make_pki(pki.path(), "fleet");
    let other = make_pki(pki.path(), "other");
    let mut app = spawn_tls_app(fleet.clone()).await;

    // Another CA given with --ca-cert; and no --ca-cert with a system store
    // that lacks the fleet's CA (SSL_CERT_FILE alone replaces the store).
    let mut with_other_ca = app.agent_command("e2e-other-ca");
    with_other_ca.arg("--ca-cert").arg(&other.ca);
    let mut with_system_store = app.agent_command("e2e-system-store");
    with_system_store
        .env("SSL_CERT_FILE", &other.ca)
        .env_remove("SSL_CERT_DIR");
    let mut logs = vec![];
    for mut command in [with_other_ca, with_system_store] {
        let mut child = command
            .env("CIPHERFLEET_LOG", "warn")
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting an agent");
        logs.push(stderr_lines(&mut child));
        app.track_agent(child);
    }
    for lines in &logs {
        // rustls: "invalid peer certificate: UnknownIssuer", logged with each retry.
        let seen = wait_for_line(lines, "UnknownIssuer", Duration::from_secs(30))
            .unwrap_or_else(|seen| panic!("no certificate error from the agent; it logged:\n{seen}"));
        assert!(seen.contains("invalid peer certificate"), "{seen}");
    }
    assert_eq!(online_hosts(&app).await, Vec::<String>::new());

    // The same system-store agent, once the store holds the fleet's CA, gets in.
    let mut trusting = app.agent_command("e2e-system-store-ok");
    let child = trusting
        .env("SSL_CERT_FILE", &fleet.ca)
        .env_remove("SSL_CERT_DIR")
        .spawn()
        .expect("starting an agent");
    app.track_agent(child);
    app.wait_online(1).await;
    assert_eq!(online_hosts(&app).await, vec!["e2e-system-store-ok".to_string()]);
}

#[test]
fn serve_refuses_half_a_tls_setup_and_a_key_that_does_not_match() {
    let pki = TempDir::new("e2e-tls-flags");
    let fleet = make_pki(pki.path(), "fleet");
    let other = make_pki(pki.path(), "other");
    let serve = |tls: &[&std::path::PathBuf]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"));
        command.args(["serve", "--grpc-listen", "127.0.0.1:0"]);
        for (flag, path) in ["--tls-cert", "--tls-key"].iter().zip(tls) {
            command.arg(flag).arg(path);
        }
        // The TLS flags are checked before anything else: nothing below is reached.
        let out = command
            .arg("--data-dir")
            .arg(pki.path().join("data"))
            .env("DATABASE_URL", "postgres://127.0.0.1:9/unreachable")
            .env("CIPHERFLEET_AGENT_TOKEN", "agent-token-0123456789abcdef")
            .env("CIPHERFLEET_ADMIN_TOKEN", "admin-token-0123456789abcdef")
            .stdin(Stdio::null())
            .output()
            .expect("running the coordinator");
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let half = serve(&[&fleet.cert]);
    assert!(half.contains("--tls-cert needs --tls-key"), "{half}");
    let mismatched = serve(&[&fleet.cert, &other.key]);
    assert!(
        mismatched.contains("do not make a usable TLS identity") && mismatched.contains("other-server.key"),
        "{mismatched}"
    );
    let key_as_cert = serve(&[&fleet.key, &fleet.key]);
    assert!(key_as_cert.contains("holds no certificate"), "{key_as_cert}");
}
