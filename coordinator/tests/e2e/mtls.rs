//! Mutual TLS (`serve --client-ca`): every gRPC client shows a certificate of
//! the fleet's CA, and an agent is admitted only under a name its certificate
//! carries. The certificates are made with the `openssl` command.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::{ADMIN_TOKEN, App, TempDir, spawn_tls_app_with};
use crate::tls::{make_client_cert, make_pki, stderr_lines, wait_for_line};

/// A coordinator requiring client certificates of the `fleet` CA in `pki`;
/// its own admin client presents an `operator` certificate.
async fn mtls_app(pki: &Path) -> App {
    let fleet = make_pki(pki, "fleet");
    let client_ca = fleet.ca.to_str().unwrap().to_string();
    let mut app = spawn_tls_app_with(fleet, &["--verify-on-change=false", "--client-ca", &client_ca]).await;
    app.client_identity = Some(make_client_cert(pki, "fleet", "operator"));
    app
}

fn agent_flags<'a>(ca: &'a str, identity: &'a (PathBuf, PathBuf)) -> [&'a str; 6] {
    [
        "--ca-cert",
        ca,
        "--client-cert",
        identity.0.to_str().unwrap(),
        "--client-key",
        identity.1.to_str().unwrap(),
    ]
}

async fn host_names(app: &App) -> Vec<String> {
    let hosts = app
        .admin()
        .await
        .list_hosts(v1::ListHostsRequest::default())
        .await
        .expect("listing hosts with a client certificate")
        .into_inner()
        .hosts;
    hosts.into_iter().map(|h| h.name).collect()
}

fn hosts_cli(app: &App, extra: &[&str]) -> std::process::Output {
    let ca = app.ca().unwrap();
    Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(["hosts", "--format", "json", "--coordinator", &app.url(), "--ca-cert"])
        .arg(&ca)
        .args(extra)
        .env("CIPHERFLEET_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("running the operator command")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_a_certificate_for_its_name_runs_a_job_and_operators_present_one_too() {
    let pki = TempDir::new("e2e-mtls");
    let mut app = mtls_app(pki.path()).await;
    let ca = app.ca().unwrap().to_str().unwrap().to_string();
    let web = make_client_cert(pki.path(), "fleet", "mtls-web-1");
    app.spawn_agent("mtls-web-1", &agent_flags(&ca, &web));
    app.wait_online(1).await;

    let campaign = app.start_matrix(&["aes-128-gcm"], &[1024], 0.05).await;
    let status = app.wait_finished(&campaign, Duration::from_secs(120)).await;
    assert_eq!(status.state, v1::CampaignState::Completed as i32, "{status:?}");
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (1, 0), "{:?}", status.failures);

    // The operator commands present a certificate of the CA as well; without one the
    // handshake fails before the admin token is even sent.
    let operator = app.client_identity.clone().unwrap();
    let listed = hosts_cli(
        &app,
        &[
            "--client-cert",
            operator.0.to_str().unwrap(),
            "--client-key",
            operator.1.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    assert!(stdout.contains("\"mtls-web-1\""), "{stdout}");
    let without = hosts_cli(&app, &[]);
    assert!(!without.status.success(), "listed hosts without a client certificate");
    assert!(!String::from_utf8_lossy(&without.stdout).contains("mtls-web-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_a_client_certificate_is_refused_in_the_handshake() {
    let pki = TempDir::new("e2e-mtls-none");
    let mut app = mtls_app(pki.path()).await;
    let mut child = app
        .agent_command("mtls-anonymous")
        .arg("--ca-cert")
        .arg(app.ca().unwrap())
        .env("CIPHERFLEET_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting an agent");
    let lines = stderr_lines(&mut child);
    app.track_agent(child);
    // Refused in the handshake, it never had a session: it says why and retries.
    let seen = wait_for_line(&lines, "retrying in", Duration::from_secs(30))
        .unwrap_or_else(|seen| panic!("the agent did not retry; it logged:\n{seen}"));
    assert!(!seen.contains("session lost"), "{seen}");
    // Whether the agent reads the server's alert before the connection closes is a race.
    assert!(
        seen.contains("connection closed") || seen.contains("broken pipe") || seen.contains("CertificateRequired"),
        "{seen}"
    );
    assert_eq!(host_names(&app).await, Vec::<String>::new());

    // What the agent saw as a closed connection is the TLS handshake: the coordinator's alert.
    let alert = handshake_without_certificate(&app).await;
    assert!(alert.contains("CertificateRequired"), "{alert}");
}

/// A bare TLS 1.3 handshake trusting the fleet's CA but presenting no certificate;
/// the error of the first read (the server's verdict arrives after the client's Finished).
async fn handshake_without_certificate(app: &App) -> String {
    use tokio::io::AsyncReadExt;
    use tokio_rustls::rustls::{self, pki_types::ServerName};
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(app.ca().unwrap()).unwrap();
    for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(app.grpc).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let server = ServerName::try_from("localhost").unwrap();
    let mut byte = [0u8; 1];
    match connector.connect(server, tcp).await {
        Err(e) => e.to_string(),
        Ok(mut tls) => match tokio::time::timeout(Duration::from_secs(10), tls.read(&mut byte)).await {
            Ok(Err(e)) => e.to_string(),
            other => panic!("the coordinator accepted a client without a certificate: {other:?}"),
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_certificate_names_another_host_is_refused_and_changes_nothing() {
    let pki = TempDir::new("e2e-mtls-other");
    let mut app = mtls_app(pki.path()).await;
    let ca = app.ca().unwrap().to_str().unwrap().to_string();
    let web = make_client_cert(pki.path(), "fleet", "mtls-web-1");
    app.spawn_agent("mtls-web-1", &agent_flags(&ca, &web));
    app.wait_online(1).await;
    let before = host_names(&app).await;

    // The certificate of mtls-web-1, presented by an agent calling itself mtls-db-7.
    let mut child = app
        .agent_command("mtls-db-7")
        .args(agent_flags(&ca, &web))
        .env("CIPHERFLEET_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting an agent");
    let lines = stderr_lines(&mut child);
    let seen = wait_for_line(&lines, "coordinator refused this host", Duration::from_secs(30))
        .unwrap_or_else(|seen| panic!("the agent was not refused; it logged:\n{seen}"));
    assert!(
        seen.contains(r#"the client certificate names \"mtls-web-1\", not host \"mtls-db-7\""#)
            || seen.contains(r#"the client certificate names "mtls-web-1", not host "mtls-db-7""#),
        "{seen}"
    );
    app.track_agent(child);
    assert_eq!(host_names(&app).await, before);
    assert_eq!(before, vec!["mtls-web-1".to_string()]);
    // It stored the credential it proposed before dialling, but no Welcome confirmed one.
    let credential_file = app.state_dir("mtls-db-7").join("credential");
    let stored: serde_json::Value = std::fs::read(&credential_file)
        .map(|b| serde_json::from_slice(&b).expect("a credential file is JSON"))
        .unwrap_or_default();
    assert!(
        stored.get("credential").is_none_or(|c| c.is_null()),
        "a refused agent got a credential: {stored}"
    );
}
