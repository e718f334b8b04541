//! Guessing secrets has a limit that cannot be skipped nor turned on others
//! (`coordinator/src/guard/auth.rs`): a wrong enrollment token counts whatever
//! else the hello carries; a host name's state is not told before a secret is
//! proved; the report's token is limited too; and one kind of secret guessed
//! wrong at an address never refuses another kind there — agents with their
//! credentials keep coming back. `deploy/attack.sh` runs the same at scale.

use std::net::SocketAddr;
use std::time::Duration;

use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{self, AgentMessage, agent_message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

use crate::app::{AGENT_TOKEN, App, admin_with_token, spawn_app, wait_for};
use crate::identity::hello_proposing;
use crate::rejections::{hello, open};

/// The burst of wrong attempts allowed before the limit (`guard::auth::FAILED_BURST`).
const BURST: usize = 10;

/// A hello for `name` with `token` and `credential` (either may be empty).
pub(crate) fn hello_presenting(name: &str, token: &str, credential: &str) -> AgentMessage {
    let mut message = hello(name, token, PROTOCOL_VERSION);
    if let Some(agent_message::Body::Hello(h)) = &mut message.body {
        h.credential = credential.to_string();
    }
    message
}

/// The refusal of `message`, with `name` in its text replaced by `NAME`.
async fn refusal(app: &App, message: AgentMessage, name: &str) -> (Code, String) {
    let err = open(app, message).await.err().expect("refused");
    (err.code(), err.message().replace(name, "NAME"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_enrollment_token_is_limited_whatever_credential_comes_with_it() {
    let app = spawn_app().await;
    let mut refusals = Vec::new();
    for i in 0..=BURST {
        let name = format!("guess-{i}");
        refusals.push(
            refusal(
                &app,
                hello_presenting(&name, "not-the-token-0123456789", &"ab".repeat(32)),
                &name,
            )
            .await
            .0,
        );
    }
    assert!(
        refusals[..BURST].iter().all(|c| *c == Code::PermissionDenied),
        "{refusals:?}"
    );
    assert_eq!(
        refusals[BURST],
        Code::ResourceExhausted,
        "the token was guessed past the limit: {refusals:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enrolled_retired_and_unknown_names_get_one_answer_until_a_secret_is_proved() {
    let app = spawn_app().await;
    for name in ["enum-known", "enum-retired"] {
        let raw = open(&app, hello_proposing(name, &"5e".repeat(32)))
            .await
            .expect("enrolled");
        drop(raw);
    }
    wait_for("the retirement", Duration::from_secs(30), || async {
        let mut admin = app.admin().await;
        let retired = admin
            .retire_host(v1::RetireHostRequest {
                name: "enum-retired".into(),
            })
            .await
            .ok()?;
        Some(retired)
    })
    .await;

    let names = ["enum-known", "enum-retired", "enum-nobody"];
    // A credential without a valid token (none, or a wrong one); a wrong token alone.
    for (token, credential) in [("", "cd".repeat(32)), ("not-the-token-0123456789", "cd".repeat(32))] {
        let mut answers = Vec::new();
        for name in names {
            answers.push(refusal(&app, hello_presenting(name, token, &credential), name).await);
        }
        assert_eq!(answers[0].0, Code::PermissionDenied, "{answers:?}");
        assert!(
            answers.iter().all(|a| *a == answers[0]),
            "the answers tell the names apart: {answers:#?}"
        );
    }
    let mut answers = Vec::new();
    for name in names {
        answers.push(refusal(&app, hello_presenting(name, "not-the-token-0123456789", ""), name).await);
    }
    assert_eq!(answers[0].0, Code::Unauthenticated, "{answers:?}");
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:#?}");
    // With the token proved, the answer may say what the name is.
    let (code, message) = refusal(&app, hello_presenting("enum-retired", AGENT_TOKEN, ""), "enum-retired").await;
    assert_eq!(code, Code::PermissionDenied);
    assert!(message.contains("retired"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_admin_tokens_never_keep_agents_out_at_the_same_address() {
    let mut app = spawn_app().await;
    app.spawn_agent("fleet-1", &[]);
    app.wait_online(1).await;
    for attempt in 0..2 * BURST {
        let mut wrong = admin_with_token(&app.url(), "not-the-admin-token-0000").await;
        let err = wrong.list_hosts(v1::ListHostsRequest::default()).await.unwrap_err();
        let expected = if attempt < BURST {
            Code::Unauthenticated
        } else {
            Code::ResourceExhausted
        };
        assert_eq!(err.code(), expected, "attempt {attempt}: {err:?}");
    }
    // From the guesser's address, while it keeps guessing: an agent restarted with its
    // credential, and a new one with the enrollment token, are both admitted.
    let url = app.url();
    let guesser = tokio::spawn(async move {
        loop {
            let mut wrong = admin_with_token(&url, "not-the-admin-token-0000").await;
            let _ = wrong.list_hosts(v1::ListHostsRequest::default()).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let since = now(&app).await;
    app.kill_agent(0);
    app.spawn_agent("fleet-1", &[]);
    app.spawn_agent("fleet-2", &[]);
    wait_back(&app, &["fleet-1", "fleet-2"], since, Duration::from_secs(30)).await;
    guesser.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_of_other_secrets_never_refuse_a_valid_credential() {
    let mut app = spawn_app().await;
    app.spawn_agent("keeper", &[]);
    app.wait_online(1).await;
    // From the agent's own address: wrong enrollment tokens (alone and with credentials),
    // and wrong credentials for other hosts' names, all past their limits.
    for i in 0..2 * BURST {
        let _ = open(&app, hello("intruder", "not-the-token-0123456789", PROTOCOL_VERSION)).await;
        let other = format!("other-{}", i % 3);
        let _ = open(
            &app,
            hello_presenting(&other, "not-the-token-0123456789", &"ef".repeat(32)),
        )
        .await;
        let _ = open(&app, hello_presenting(&other, "", &"ef".repeat(32))).await;
    }
    let (code, _) = refusal(
        &app,
        hello("intruder", "not-the-token-0123456789", PROTOCOL_VERSION),
        "intruder",
    )
    .await;
    assert_eq!(code, Code::ResourceExhausted, "the guesser is limited");
    // The host with its credential comes back at once, while the guessing goes on.
    let guessing = {
        let app = GuessAt { url: app.url() };
        tokio::spawn(async move {
            loop {
                app.wrong_hellos().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let since = now(&app).await;
    app.kill_agent(0);
    app.spawn_agent("keeper", &[]);
    wait_back(&app, &["keeper"], since, Duration::from_secs(10)).await;
    guessing.abort();
}

/// The database's clock now.
async fn now(app: &App) -> chrono::DateTime<chrono::Utc> {
    sqlx::query_scalar("SELECT now()").fetch_one(&app.pool).await.unwrap()
}

/// Waits until each of `names` has a session welcomed since `since` (a new one, not the
/// lease of a session the coordinator has not yet seen end).
async fn wait_back(app: &App, names: &[&str], since: chrono::DateTime<chrono::Utc>, limit: Duration) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    wait_for("the agents back with new sessions", limit, || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM host_leases l JOIN hosts h ON h.id = l.host_id \
             WHERE l.welcomed AND l.expires_at > now() AND l.acquired_at > $1 AND h.name = ANY($2)",
        )
        .bind(since)
        .bind(&names)
        .fetch_one(&app.pool)
        .await
        .ok()?;
        (n == names.len() as i64).then_some(())
    })
    .await;
}

/// A coordinator to guess at from a task of its own.
struct GuessAt {
    url: String,
}

impl GuessAt {
    /// A wrong enrollment token, and a wrong credential for another host.
    async fn wrong_hellos(&self) {
        for message in [
            hello("intruder", "not-the-token-0123456789", PROTOCOL_VERSION),
            hello_presenting("other-0", "", &"ef".repeat(32)),
        ] {
            let mut client = cipherfleet_proto::v1::agent_service_client::AgentServiceClient::new(
                crate::app::connect(&self.url).await,
            );
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tx.send(message).await.unwrap();
            let _ = client.session(tokio_stream::wrappers::ReceiverStream::new(rx)).await;
        }
    }
}

/// `GET path` with `authorization` from local address `from`; the status and `Retry-After`.
pub(crate) async fn get_from(from: &str, to: SocketAddr, path: &str, authorization: &str) -> (u16, Option<String>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(to).await.expect("connecting to the report");
    let auth = if authorization.is_empty() {
        String::new()
    } else {
        format!("Authorization: {authorization}\r\n")
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {to}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let retry_after = text.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("retry-after:")
            .map(|v| v.trim().to_string())
    });
    (status, retry_after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_report_tokens_are_limited_per_address() {
    let mut app = spawn_app().await;
    let token = "report-token-0123456789abcdef";
    let file = app.dir.path().join("report.token");
    std::fs::write(&file, token).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    app.kill_coordinator();
    app.set_serve_args(&["--http-auth-token-file", file.to_str().unwrap()]);
    app.start_coordinator("127.0.0.1:0".parse().unwrap());
    let right = format!("Bearer {token}");

    // Asking without a token costs nothing: that is a browser's first visit.
    for _ in 0..2 * BURST {
        assert_eq!(get_from("127.0.0.1", app.http, "/", "").await.0, 401);
    }
    for attempt in 0..BURST {
        let (status, _) = get_from("127.0.0.1", app.http, "/", "Bearer not-the-token").await;
        assert_eq!(status, 401, "attempt {attempt}");
    }
    let (status, retry_after) = get_from("127.0.0.1", app.http, "/", "Bearer not-the-token").await;
    assert_eq!(status, 429, "guessed past the limit");
    assert!(retry_after.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));
    // Past the limit the token is not looked at, right or wrong; elsewhere it is.
    assert_eq!(get_from("127.0.0.1", app.http, "/", &right).await.0, 429);
    assert_eq!(get_from("127.0.0.1", app.http, "/healthz", "").await.0, 200);
    assert_eq!(get_from("127.0.0.2", app.http, "/", &right).await.0, 200);
    assert_eq!(
        get_from("127.0.0.2", app.http, "/", "Bearer not-the-token").await.0,
        401
    );
}
