//! The attack table (issue 32): what an attacker and a faulty host try, run
//! against a real coordinator with real agents, one row per case — inputs
//! tried, clear refusals, crashes, 5xx (gRPC: `UNAVAILABLE`, `INTERNAL`,
//! `UNKNOWN`), stuck hosts, lost and duplicated results, guesses past the
//! limit (or host names told apart) and health checks unanswered. A case
//! fails on any of those, or when an input that must be refused is not.
//!
//! The test command runs every case ([`ALL`]) at a small count.
//! `deploy/attack.sh` runs every case ([`ALL`], the bad-input ones too) at a
//! count of its choosing through [`attack_table`], and prints the table.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{self, agent_message, coordinator_message};
use tonic::Code;

use crate::app::{AGENT_TOKEN, App, matrix, spawn_app_with, wait_for};
use crate::guessing::{get_from, hello_presenting};
use crate::identity::hello_proposing;
use crate::idle::idle_sockets;
use crate::rejections::{hello, one_point, open, result_of};

const REPORT_TOKEN: &str = "attack-report-token-0123456789";
/// Wrong attempts allowed before the limit (`guard::auth::FAILED_BURST`).
const BURST: usize = 10;

/// One row of the table.
#[derive(Debug, Default, Clone)]
pub struct Row {
    pub case: &'static str,
    pub tried: usize,
    pub refused: usize,
    pub crashes: usize,
    pub server_errors: usize,
    pub stuck: usize,
    pub lost: usize,
    pub duplicated: usize,
    /// Guesses answered past the limit, or host names told apart.
    pub guessed: usize,
    pub unanswered: usize,
    /// Every input must be refused.
    must_refuse: bool,
}

impl Row {
    fn new(case: &'static str, must_refuse: bool) -> Row {
        Row {
            case,
            must_refuse,
            ..Row::default()
        }
    }

    pub fn failed(&self) -> bool {
        self.crashes + self.server_errors + self.stuck + self.lost + self.duplicated + self.guessed + self.unanswered
            > 0
            || (self.must_refuse && self.refused < self.tried)
    }

    /// A gRPC answer to an input that must be refused.
    fn grpc(&mut self, answer: Result<(), Code>) {
        self.tried += 1;
        match answer {
            Err(Code::Unavailable | Code::Internal | Code::Unknown) => self.server_errors += 1,
            Err(_) => self.refused += 1,
            Ok(()) => {}
        }
    }

    /// An HTTP status.
    fn http(&mut self, status: u16) {
        self.tried += 1;
        match status {
            500.. => self.server_errors += 1,
            400..=499 => self.refused += 1,
            _ => {}
        }
    }
}

/// The cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    EnrollmentToken,
    AdminToken,
    ReportToken,
    HostNames,
    NulInHello,
    NulInQuery,
    NulInCampaignName,
    OversizeMidSession,
    ImplausibleFigures,
    IdleSockets,
    RestartMidCampaign,
}

/// The limits alone: guessing, idle sockets, a restart (`deploy/attack.sh --limits-only`).
pub const LIMITS: &[Case] = &[
    Case::EnrollmentToken,
    Case::AdminToken,
    Case::ReportToken,
    Case::HostNames,
    Case::IdleSockets,
    Case::RestartMidCampaign,
];

/// Every case.
pub const ALL: &[Case] = &[
    Case::EnrollmentToken,
    Case::AdminToken,
    Case::ReportToken,
    Case::HostNames,
    Case::NulInHello,
    Case::NulInQuery,
    Case::NulInCampaignName,
    Case::OversizeMidSession,
    Case::ImplausibleFigures,
    Case::IdleSockets,
    Case::RestartMidCampaign,
];

/// A coordinator with the report's token, small caps and short timeouts.
async fn coordinator() -> App {
    let mut app = spawn_app_with(&["--verify-on-change=false"]).await;
    let file = app.dir.path().join("report.token");
    std::fs::write(&file, REPORT_TOKEN).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    app.kill_coordinator();
    app.set_serve_args(&[
        "--http-auth-token-file",
        file.to_str().unwrap(),
        "--max-connections",
        "256",
        "--http-max-connections",
        "64",
        "--first-request-timeout",
        "2",
        "--idle-timeout",
        "4",
    ]);
    app.start_coordinator("127.0.0.1:0".parse().unwrap());
    app
}

fn bearer() -> String {
    format!("Bearer {REPORT_TOKEN}")
}

/// The guessers dial from addresses of their own (loopback has them all), one per
/// case: what one spends of its allowances must not be what another case, or the
/// rest of the table, needs.
const ENROLLMENT_GUESSER: &str = "127.0.0.3";
const ADMIN_GUESSER: &str = "127.0.0.4";
const REPORT_GUESSER: &str = "127.0.0.5";
const NAME_PROBER: &str = "127.0.0.6";

/// A channel to the coordinator from local address `from`.
async fn channel_from(app: &App, from: &str) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(app.url())
        .unwrap()
        .local_address(Some(from.parse().unwrap()))
        .connect()
        .await
        .expect("connecting to the coordinator")
}

/// A session opened with `first` from local address `from`: its refusal's code, if refused.
async fn hello_from(app: &App, from: &str, first: v1::AgentMessage) -> Option<Code> {
    let mut client = v1::agent_service_client::AgentServiceClient::new(channel_from(app, from).await);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(first).await.unwrap();
    client
        .session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .err()
        .map(|e| e.code())
}

/// Runs `cases`, `n` inputs each (at least the limit's burst and one for guessing), on one coordinator.
pub async fn run(cases: &[Case], n: usize) -> Vec<Row> {
    let mut app = coordinator().await;
    let mut rows = Vec::new();
    for &case in cases {
        let mut row = match case {
            Case::EnrollmentToken => enrollment_token(&app, n).await,
            Case::AdminToken => admin_token(&app, n).await,
            Case::ReportToken => report_token(&app, n).await,
            Case::HostNames => host_names(&app, n).await,
            Case::NulInHello => nul_in_hello(&app, n).await,
            Case::NulInQuery => nul_in_query(&app, n).await,
            Case::NulInCampaignName => nul_in_campaign_name(&app, n).await,
            Case::OversizeMidSession => oversize_mid_session(&app, n).await,
            Case::ImplausibleFigures => implausible_figures(&app, n).await,
            Case::IdleSockets => idle(&app, n).await,
            Case::RestartMidCampaign => restart_mid_campaign(&mut app).await,
        };
        if !app.coordinator_alive() {
            row.crashes += 1;
            // The next cases need a coordinator.
            app.start_coordinator("127.0.0.1:0".parse().unwrap());
        }
        // Health after every case.
        if get_from("127.0.0.1", app.http, "/healthz", "").await.0 != 200 {
            row.unanswered += 1;
        }
        rows.push(row);
    }
    rows
}

/// The table as text.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| case | inputs tried | clear refusals | crashes | 5xx | stuck hosts | lost results | duplicated results | guessed past the limit | health checks unanswered | |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.case,
            r.tried,
            r.refused,
            r.crashes,
            r.server_errors,
            r.stuck,
            r.lost,
            r.duplicated,
            r.guessed,
            r.unanswered,
            if r.failed() { "FAIL" } else { "ok" }
        );
    }
    out
}

async fn enrollment_token(app: &App, n: usize) -> Row {
    let mut row = Row::new("wrong enrollment token, with or without a credential", true);
    for i in 0..n.max(BURST + 1) {
        let credential = if i % 2 == 0 { "ab".repeat(32) } else { String::new() };
        let name = format!("attack-enrol-{i}");
        let code = hello_from(
            app,
            ENROLLMENT_GUESSER,
            hello_presenting(&name, "not-the-token-0123456789", &credential),
        )
        .await;
        if i >= BURST && code != Some(Code::ResourceExhausted) {
            row.guessed += 1;
        }
        row.grpc(code.map_or(Ok(()), Err));
    }
    row
}

async fn admin_token(app: &App, n: usize) -> Row {
    let mut row = Row::new("wrong admin token", true);
    for i in 0..n.max(BURST + 1) {
        let value: tonic::metadata::MetadataValue<_> = "Bearer not-the-admin-token-0000".parse().unwrap();
        let mut wrong = v1::admin_service_client::AdminServiceClient::with_interceptor(
            channel_from(app, ADMIN_GUESSER).await,
            move |mut request: tonic::Request<()>| {
                request.metadata_mut().insert("authorization", value.clone());
                Ok(request)
            },
        );
        let code = wrong
            .list_hosts(v1::ListHostsRequest::default())
            .await
            .err()
            .map(|e| e.code());
        if i >= BURST && code != Some(Code::ResourceExhausted) {
            row.guessed += 1;
        }
        row.grpc(code.map_or(Ok(()), Err));
    }
    row
}

async fn report_token(app: &App, n: usize) -> Row {
    let mut row = Row::new("wrong report token", true);
    for i in 0..n.max(BURST + 1) {
        let (status, _) = get_from(REPORT_GUESSER, app.http, "/hosts", "Bearer not-the-report-token").await;
        if i >= BURST && status != 429 {
            row.guessed += 1;
        }
        row.http(status);
    }
    row
}

async fn host_names(app: &App, n: usize) -> Row {
    let mut row = Row::new("host names probed without a secret", true);
    let raw = open(app, hello_proposing("attack-known", &"5e".repeat(32))).await;
    drop(raw);
    let mut first: Option<(Code, String)> = None;
    for i in 0..n.max(2) {
        let name = if i % 2 == 0 {
            "attack-known".to_string()
        } else {
            format!("attack-nobody-{i}")
        };
        // Each name once past its own limit would answer RESOURCE_EXHAUSTED: stay under it.
        let mut client = v1::agent_service_client::AgentServiceClient::new(channel_from(app, NAME_PROBER).await);
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(hello_presenting(&name, "", &format!("{:02x}", i % 256).repeat(32)))
            .await
            .unwrap();
        let err = client
            .session(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .err();
        let seen = err.as_ref().map(|e| (e.code(), e.message().replace(&name, "NAME")));
        if let Some(seen) = &seen {
            match &first {
                None => first = Some(seen.clone()),
                Some(first) if first != seen && seen.0 != Code::ResourceExhausted => row.guessed += 1,
                Some(_) => {}
            }
        }
        row.grpc(err.map_or(Ok(()), |e| Err(e.code())));
    }
    row
}

async fn nul_in_hello(app: &App, n: usize) -> Row {
    let mut row = Row::new("NUL in a Hello's facts", true);
    for i in 0..n {
        let name = format!("attack-nul-{i}");
        let mut message = hello(&name, AGENT_TOKEN, PROTOCOL_VERSION);
        if let Some(agent_message::Body::Hello(h)) = &mut message.body
            && let Some(facts) = h.facts.as_mut()
        {
            facts.facts_json = facts.facts_json.replace("6.1.0", "6.1.0\\u0000-nul");
        }
        row.grpc(open(app, message).await.err().map_or(Ok(()), |e| Err(e.code())));
    }
    row
}

async fn nul_in_query(app: &App, n: usize) -> Row {
    let mut row = Row::new("NUL in report query parameters", true);
    let paths = ["/hosts", "/api/v1/hosts"];
    let params = ["label=rack%3D%00", "arch=%00", "cpu=x%00", "kernel=%00"];
    for i in 0..n {
        let path = format!("{}?{}", paths[i % 2], params[(i / 2) % params.len()]);
        row.http(get_from("127.0.0.1", app.http, &path, &bearer()).await.0);
    }
    row
}

async fn nul_in_campaign_name(app: &App, n: usize) -> Row {
    let mut row = Row::new("NUL in a campaign name", true);
    let mut admin = app.admin().await;
    for i in 0..n {
        let request = v1::StartCampaignRequest {
            points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
            name: format!("attack\0{i}"),
            include_offline: true,
            started_by: "attack".into(),
            ..Default::default()
        };
        row.grpc(
            admin
                .start_campaign(request)
                .await
                .err()
                .map_or(Ok(()), |e| Err(e.code())),
        );
    }
    row
}

async fn oversize_mid_session(app: &App, n: usize) -> Row {
    let mut row = Row::new("oversize message mid-session", true);
    for i in 0..n.min(20) {
        let name = format!("attack-big-{i}");
        let Ok(mut raw) = open(app, hello_proposing(&name, &format!("{:02x}", 0x80 + i).repeat(32))).await else {
            row.tried += 1;
            row.server_errors += 1;
            continue;
        };
        let _ = raw.rx.message().await;
        raw.send(agent_message::Body::JobProgress(v1::JobProgress {
            job_id: "x".repeat(2 << 20),
            ..Default::default()
        }))
        .await;
        // The stream must end with a status that says why, not OK.
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match raw.rx.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return Ok(()),
                    Err(status) => return Err(status.code()),
                }
            }
        })
        .await
        .unwrap_or(Err(Code::DeadlineExceeded));
        row.grpc(match ended {
            // Cancelled: the stream was reset without a status.
            Err(Code::Cancelled) => Ok(()),
            other => other,
        });
    }
    row
}

async fn implausible_figures(app: &App, n: usize) -> Row {
    let mut row = Row::new("implausible figures in a result", true);
    let Ok(mut raw) = open(app, hello_proposing("attack-figures", &"fa".repeat(32))).await else {
        row.tried += 1;
        row.server_errors += 1;
        return row;
    };
    let _ = raw.rx.message().await;
    let mut admin = app.admin().await;
    for _ in 0..n.min(10) {
        let request = v1::StartCampaignRequest {
            points: Some(v1::start_campaign_request::Points::Matrix(one_point())),
            hosts: Some(v1::HostSelector {
                host_names: vec!["attack-figures".into()],
                ..Default::default()
            }),
            started_by: "attack".into(),
            ..Default::default()
        };
        if admin.start_campaign(request).await.is_err() {
            row.tried += 1;
            row.server_errors += 1;
            continue;
        }
        let run = loop {
            match tokio::time::timeout(Duration::from_secs(20), raw.rx.message()).await {
                Ok(Ok(Some(v1::CoordinatorMessage {
                    body: Some(coordinator_message::Body::RunJob(run)),
                }))) => break Some(run),
                Ok(Ok(Some(_))) => continue,
                _ => break None,
            }
        };
        let Some(run) = run else {
            row.tried += 1;
            row.stuck += 1;
            break;
        };
        raw.send(agent_message::Body::JobResult(v1::JobResult {
            job_id: run.job_id.clone(),
            measurement: Some(result_of(&run, 1e300)),
            attempt_id: run.attempt_id.clone(),
        }))
        .await;
        let ack = loop {
            match tokio::time::timeout(Duration::from_secs(20), raw.rx.message()).await {
                Ok(Ok(Some(v1::CoordinatorMessage {
                    body: Some(coordinator_message::Body::ResultAck(ack)),
                }))) => break Ok(ack),
                Ok(Ok(Some(_))) => continue,
                Ok(Err(status)) => break Err(status.code()),
                _ => break Err(Code::DeadlineExceeded),
            }
        };
        row.grpc(match ack {
            Ok(ack) if ack.rejected.is_empty() => Ok(()),
            Ok(_) => Err(Code::InvalidArgument),
            Err(code) => Err(code),
        });
    }
    row
}

async fn idle(app: &App, n: usize) -> Row {
    // Every idle socket must be closed by the coordinator: its refusal.
    let mut row = Row::new("idle sockets on the report and gRPC ports", true);
    let http = idle_sockets(app.http, n).await;
    let grpc = idle_sockets(app.grpc, n).await;
    row.tried = http.len() + grpc.len();
    for round in 0..3 {
        if get_from("127.0.0.1", app.http, "/healthz", "").await.0 != 200 {
            row.unanswered += 1;
        }
        if app
            .admin()
            .await
            .list_hosts(v1::ListHostsRequest::default())
            .await
            .is_err()
        {
            row.unanswered += 1;
        }
        let name = format!("attack-idle-{round}");
        if open(app, hello_proposing(&name, &format!("{:02x}", 0x40 + round).repeat(32)))
            .await
            .is_err()
        {
            row.unanswered += 1;
        }
    }
    // Closed by the coordinator once their first-request timeout passed.
    let (mut http, mut grpc) = (http, grpc);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut closed = 0;
    while Instant::now() < deadline {
        closed = crate::idle::closed(&mut http).await + crate::idle::closed(&mut grpc).await;
        if closed == http.len() + grpc.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    row.refused = closed;
    row
}

async fn restart_mid_campaign(app: &mut App) -> Row {
    let mut row = Row::new("coordinator SIGKILLed and restarted mid-campaign", false);
    for i in 0..2 {
        app.spawn_agent(&format!("attack-fleet-{i}"), &[]);
    }
    wait_for("the fleet online", Duration::from_secs(30), || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM host_leases l JOIN hosts h ON h.id = l.host_id \
             WHERE l.welcomed AND l.expires_at > now() AND h.name LIKE 'attack-fleet-%'",
        )
        .fetch_one(&app.pool)
        .await
        .ok()?;
        (n == 2).then_some(())
    })
    .await;
    let request = v1::StartCampaignRequest {
        points: Some(v1::start_campaign_request::Points::Matrix(matrix(
            &["aes-128-gcm", "chacha20-poly1305", "aes-256-ctr"],
            &[256, 2048],
            0.2,
        ))),
        hosts: Some(v1::HostSelector {
            host_names: vec!["attack-fleet-0".into(), "attack-fleet-1".into()],
            ..Default::default()
        }),
        started_by: "attack".into(),
        ..Default::default()
    };
    let campaign = app
        .admin()
        .await
        .start_campaign(request)
        .await
        .unwrap()
        .into_inner()
        .campaign_id;
    let id: i64 = campaign.parse().unwrap();
    row.tried = 1;
    wait_for("a job done", Duration::from_secs(60), || async {
        let done: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE campaign_id = $1 AND status = 'done'")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .ok()?;
        (done >= 1).then_some(())
    })
    .await;
    let addr = app.grpc;
    app.kill_coordinator();
    app.start_coordinator(addr);
    let back = Instant::now();
    let finished = tokio::time::timeout(
        Duration::from_secs(120),
        app.wait_finished(&campaign, Duration::from_secs(120)),
    )
    .await;
    if finished.is_err() {
        row.stuck += 1;
    }
    let online: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM host_leases l JOIN hosts h ON h.id = l.host_id \
         WHERE l.welcomed AND l.expires_at > now() AND h.name LIKE 'attack-fleet-%'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap_or(0);
    row.stuck += 2usize.saturating_sub(online as usize);
    let counts: Vec<(String, i64)> = sqlx::query_as(
        "SELECT j.status, (SELECT count(*) FROM results r WHERE r.job_id = j.id) FROM jobs j WHERE j.campaign_id = $1",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap_or_default();
    row.lost = counts.iter().filter(|(status, n)| status != "done" || *n == 0).count();
    row.duplicated = counts.iter().filter(|(_, n)| *n > 1).count();
    eprintln!(
        "restart: campaign of {} jobs finished {:?} after the restart",
        counts.len(),
        back.elapsed()
    );
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_of_the_attack_table_holds() {
    let rows = run(ALL, 2 * BURST).await;
    let printed = table(&rows);
    eprintln!("{printed}");
    assert!(rows.iter().all(|r| !r.failed()), "{printed}");
}

/// `deploy/attack.sh`: every case, `CIPHERFLEET_ATTACK_COUNT` inputs each (default 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by deploy/attack.sh"]
async fn attack_table() {
    let n = std::env::var("CIPHERFLEET_ATTACK_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let cases: Vec<Case> = match std::env::var("CIPHERFLEET_ATTACK_CASES").ok().as_deref() {
        Some("limits") => LIMITS.to_vec(),
        _ => ALL.to_vec(),
    };
    let rows = run(&cases, n).await;
    let printed = table(&rows);
    println!("ATTACK-TABLE-BEGIN\n{printed}ATTACK-TABLE-END");
    assert!(rows.iter().all(|r| !r.failed()), "{printed}");
}
