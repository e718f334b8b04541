//! Watching without a person, end to end: a schedule firing once per period
//! across a coordinator restart, a verification campaign at the hello of a
//! host whose kernel changed, and the webhook's signed open and resolve
//! events reaching a local receiver that fails at first.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

use crate::app::{App, agent_binary, matrix, spawn_app_with, wait_for};

/// Runs `cipherfleet-coordinator ARGS --coordinator … --admin-token-file …`; returns (exit code, stdout, stderr).
fn operator(app: &App, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(args)
        .args(["--coordinator", &app.url()])
        .arg("--admin-token-file")
        .arg(app.dir.path().join("admin.token"))
        .stdin(Stdio::null())
        .output()
        .expect("running the coordinator's CLI");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A schedule's campaigns: (id, created, finished).
async fn campaigns_of(app: &App, schedule: i64) -> Vec<(i64, DateTime<Utc>, Option<DateTime<Utc>>)> {
    sqlx::query_as("SELECT id, created_at, finished_at FROM campaigns WHERE schedule_id = $1 ORDER BY id")
        .bind(schedule)
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_once_per_period_across_a_coordinator_restart() {
    let mut app = spawn_app_with(&["--verify-on-change=false"]).await;
    app.spawn_agent("sched-01", &[]);
    app.wait_online(1).await;

    // Bad input is named before anything is stored.
    let (code, _, err) = operator(&app, &["schedule", "add", "--every", "24x"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--every") && err.contains("not a duration"), "{err}");
    let (code, _, err) = operator(&app, &["schedule", "add", "--every", "1h", "--at", "25:00"]);
    assert!(code != 0 && err.contains("HH:MM"), "{err}");
    let (code, _, err) = operator(&app, &["schedule", "add", "--every", "10s", "--jitter", "1m"]);
    assert!(
        code != 0 && err.contains("jitter") && err.contains("shorter than the period"),
        "{err}"
    );

    const PERIOD: i64 = 3;
    let added = Instant::now();
    let (code, out, err) = operator(
        &app,
        &[
            "schedule",
            "add",
            "--suite",
            "quick",
            "--select",
            "host=sched-01",
            "--every",
            "3s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let id: i64 = out
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("schedule id, not {out:?}"));

    // The first firing is at once; then the coordinator is killed mid-campaign and restarted.
    wait_for("the first scheduled campaign", Duration::from_secs(10), || {
        let app = &app;
        async move { (!campaigns_of(app, id).await.is_empty()).then_some(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let grpc = app.grpc;
    app.kill_coordinator();
    let restarted_at = Utc::now();
    app.start_coordinator(grpc);
    // Until the restarted coordinator has started one.
    let all = wait_for(
        "a scheduled campaign after the restart",
        Duration::from_secs(120),
        || {
            let app = &app;
            async move {
                let all = campaigns_of(app, id).await;
                all.iter().any(|(_, created, _)| *created > restarted_at).then_some(all)
            }
        },
    )
    .await;
    let elapsed = added.elapsed().as_secs() as i64;

    // Never two at once: each campaign started after the previous one ended.
    for pair in all.windows(2) {
        let (earlier, later) = (&pair[0], &pair[1]);
        let ended = earlier.2.expect("a later campaign started, so this one ended");
        assert!(
            later.1 >= ended,
            "campaign {} started before {} ended",
            later.0,
            earlier.0
        );
    }
    // Every due time did one thing (fired, or skipped while a campaign ran), once:
    // about one per period over the whole run, the restart's gap included.
    let (code, out, err) = operator(&app, &["schedule", "list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    let s = &listed[0];
    let (runs, skips) = (s["runs"].as_i64().unwrap(), s["skips"].as_i64().unwrap());
    assert_eq!(runs, all.len() as i64);
    let due_times = runs + skips;
    let periods = elapsed / PERIOD;
    assert!(
        (periods - 2..=periods + 1).contains(&due_times),
        "{due_times} due times handled in {elapsed} s at one per {PERIOD} s (runs {runs}, skips {skips})"
    );
    assert!(runs >= 2, "runs {runs}");
    let (code, table, _) = operator(&app, &["schedule", "list"]);
    assert_eq!(code, 0);
    assert!(table.contains("3s") && table.contains("skip"), "{table}");

    let (code, out, err) = operator(&app, &["schedule", "remove", &id.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("removed"), "{out}");
    let (code, _, err) = operator(&app, &["schedule", "remove", &id.to_string()]);
    assert!(code != 0 && err.contains("does not exist"), "{err}");
}

const OLD_KERNEL: &str = "3.10.0-1160.el7.x86_64";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_kernel_changes_gets_a_verification_campaign_within_one_heartbeat() {
    let qemu = Command::new("qemu-x86_64-static").arg("--version").output();
    assert!(
        qemu.is_ok_and(|o| o.status.success()),
        "qemu-x86_64-static is missing: run deploy/install-deps.sh"
    );
    // The heartbeat is 0.5 s (App); at most one verification per host every 2 s.
    let mut app = spawn_app_with(&["--verify-interval", "2s"]).await;
    let native = app.spawn_agent("verify-01", &[]);
    app.wait_online(1).await;

    // A new host: verified at once.
    let first = wait_for("the new host's verification", Duration::from_secs(10), || {
        let app = &app;
        async move { verification_of(app, "verify-01").await }
    })
    .await;
    let status = app.wait_completed(&first.to_string(), Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 6);
    // A point of its own, which the next verification repeats.
    app.run_campaign("own point", matrix(&["aes-128-ctr"], &[1024], 0.3))
        .await;

    // The same host, restarted on an old kernel (qemu-user reports another uname).
    app.kill_agent(native);
    let child = Command::new("qemu-x86_64-static")
        .args(["-r", OLD_KERNEL])
        .arg(agent_binary())
        .args(app_agent_args(&app, "verify-01"))
        .env("CIPHERFLEET_LOG", "error")
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the agent under qemu");
    app.track_agent(child);
    let second = wait_for(
        "the verification after the kernel change",
        Duration::from_secs(60),
        || {
            let app = &app;
            async move { verification_of(app, "verify-01").await.filter(|c| *c != first) }
        },
    )
    .await;

    // Queued in the hello, before the session's first heartbeat was due.
    let (name, gap): (String, f64) = sqlx::query_as(
        "SELECT c.name, extract(epoch FROM c.created_at - s.connected_at)::float8 \
         FROM campaigns c, agent_sessions s JOIN hosts h ON h.id = s.host_id \
         WHERE c.id = $1 AND h.name = 'verify-01' ORDER BY s.connected_at DESC LIMIT 1",
    )
    .bind(second)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!((0.0..0.5).contains(&gap), "queued {gap} s after the hello");
    assert!(name.contains("kernel_release"), "{name}");
    let kernel: String = sqlx::query_scalar(
        "SELECT s.kernel_release FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         WHERE h.name = 'verify-01'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(kernel, OLD_KERNEL);

    // Its jobs run: the small suite and the earlier point.
    let status = app.wait_completed(&second.to_string(), Duration::from_secs(240)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (7, 0), "{:?}", status.failures);
}

/// `run --coordinator … --name NAME …` as [`App::agent_command`] passes them.
fn app_agent_args(app: &App, name: &str) -> Vec<std::ffi::OsString> {
    app.agent_command(name).get_args().map(ToOwned::to_owned).collect()
}

/// The host's latest verification campaign, if any.
async fn verification_of(app: &App, host: &str) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT v.campaign_id FROM host_verifications v JOIN hosts h ON h.id = v.host_id WHERE h.name = $1",
    )
    .bind(host)
    .fetch_optional(&app.pool)
    .await
    .unwrap()
    .flatten()
}

/// One request the receiver got.
#[derive(Debug)]
struct Received {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A webhook receiver on port 0: answers the first `failures` requests with
/// HTTP 500, then 200; reports every request. With `tls`, it speaks HTTPS.
async fn receiver(failures: usize, tls: Option<TlsAcceptor>) -> (String, mpsc::UnboundedReceiver<(u16, Received)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}/hooks/cipherfleet", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut served = 0;
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let request = match &tls {
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(mut stream) => answer(&mut stream, &mut served, failures).await,
                    Err(_) => None,
                },
                None => {
                    let mut stream = tcp;
                    answer(&mut stream, &mut served, failures).await
                }
            };
            if let Some(request) = request {
                let _ = tx.send(request);
            }
        }
    });
    (url, rx)
}

/// Reads one request from `stream` and answers it (500 for the first `failures`).
async fn answer<S>(stream: &mut S, served: &mut usize, failures: usize) -> Option<(u16, Received)>
where
    S: AsyncReadExt + AsyncWriteExt + Unpin,
{
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let request = loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&data[..end]).into_owned();
        let headers: Vec<(String, String)> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            break Received {
                headers,
                body: data[end + 4..end + 4 + length].to_vec(),
            };
        }
    };
    *served += 1;
    let status: u16 = if *served <= failures { 500 } else { 200 };
    let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
    Some((status, request))
}

const SECRET: &str = "webhook-secret-for-the-e2e-test";

fn signed(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A coordinator POSTing to `url`, its secret ([`SECRET`]) in a file under `dir`.
async fn spawn_with_webhook(dir: &std::path::Path, url: &str, extra: &[&str]) -> App {
    let secret_file = dir.join("webhook.secret");
    std::fs::write(&secret_file, SECRET).unwrap();
    std::fs::set_permissions(&secret_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut args = vec![
        "--verify-on-change=false",
        "--webhook",
        url,
        "--webhook-secret-file",
        secret_file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    spawn_app_with(&args).await
}

/// The next request, within `limit`.
async fn next(rx: &mut mpsc::UnboundedReceiver<(u16, Received)>, limit: Duration) -> (u16, Received) {
    tokio::time::timeout(limit, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no webhook request within {limit:?}"))
        .expect("the receiver runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_delivers_signed_open_and_resolve_events_and_retries_while_the_receiver_fails() {
    let (url, mut requests) = receiver(2, None).await;
    let secret_dir = crate::app::TempDir::new("e2e-webhook");
    let mut app = spawn_with_webhook(secret_dir.path(), &url, &["--report-url", "https://report.example/"]).await;

    // The software build: its hello opens a software-build finding.
    let soft = app.spawn_soft_agent("hook-01", &[]);
    app.wait_online(1).await;
    let mut tried = Vec::new();
    let first = loop {
        let (status, r) = next(&mut requests, Duration::from_secs(30)).await;
        tried.push(r.header("x-cipherfleet-delivery").unwrap().to_string());
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        if status == 200 && body["finding"]["reason"] == "software-build" {
            break r;
        }
    };
    // Answered 500 at first, it came again with the same delivery id: as many
    // times as the outbox counts attempts, and more than once.
    let delivery = first.header("x-cipherfleet-delivery").unwrap().to_string();
    let tries = tried.iter().filter(|d| **d == delivery).count();
    assert_eq!(
        first.header("x-cipherfleet-signature"),
        Some(signed(&first.body).as_str())
    );
    assert_eq!(first.header("x-cipherfleet-event"), Some("finding.opened"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(body["event"], "finding.opened");
    assert_eq!(body["host"]["name"], "hook-01");
    assert_eq!(body["finding"]["reason"], "software-build");
    assert!(
        body["finding"]["summary"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    assert!(body["finding"]["evidence"].is_object(), "{body}");
    let host_id = body["host"]["id"].as_i64().unwrap();
    assert_eq!(body["report_url"], format!("https://report.example/hosts/{host_id}"));
    let finding = body["finding"]["id"].as_i64().unwrap();
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM webhook_outbox WHERE id = $1")
        .bind(delivery.parse::<i64>().unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(tries >= 2, "{tried:?}");
    assert_eq!(attempts as usize, tries, "{tried:?}");

    // The same host as the accelerated build: the finding resolves.
    app.kill_agent(soft);
    app.spawn_agent("hook-01", &[]);
    let resolved = loop {
        let (status, r) = next(&mut requests, Duration::from_secs(30)).await;
        assert_eq!(status, 200);
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        if body["finding"]["id"] == finding {
            break (r, body);
        }
    };
    let (r, body) = resolved;
    assert_eq!(r.header("x-cipherfleet-signature"), Some(signed(&r.body).as_str()));
    assert_ne!(
        r.header("x-cipherfleet-signature"),
        Some(signed(b"another body").as_str())
    );
    assert_eq!(body["event"], "finding.resolved");
    assert!(body["finding"]["resolved_at"].is_string(), "{body}");
}

/// A TLS acceptor for the test PKI's server certificate (CN localhost, IP 127.0.0.1).
fn acceptor(pki: &crate::app::TlsFiles) -> TlsAcceptor {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&pki.cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&pki.key).unwrap();
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    TlsAcceptor::from(std::sync::Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_webhook_behind_a_private_ca_gets_its_events() {
    let dir = crate::app::TempDir::new("e2e-webhook-tls");
    let pki = crate::tls::make_pki(dir.path(), "hook");
    let (url, mut requests) = receiver(0, Some(acceptor(&pki))).await;
    let mut app = spawn_with_webhook(dir.path(), &url, &["--webhook-ca-cert", pki.ca.to_str().unwrap()]).await;
    app.spawn_soft_agent("hook-tls", &[]);
    let (status, r) = next(&mut requests, Duration::from_secs(30)).await;
    assert_eq!(status, 200);
    assert_eq!(r.header("x-cipherfleet-signature"), Some(signed(&r.body).as_str()));
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        (body["event"].as_str(), body["host"]["name"].as_str()),
        (Some("finding.opened"), Some("hook-tls"))
    );
    // Without --report-url, the report's bound address.
    let host_id = body["host"]["id"].as_i64().unwrap();
    assert_eq!(body["report_url"], format!("http://{}/hosts/{host_id}", app.http));
}
