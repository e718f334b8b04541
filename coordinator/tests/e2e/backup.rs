//! Backups that restore (issue 34): a live coordinator's private cluster,
//! dumped with `cipherfleet-coordinator backup` while its agents are connected,
//! restored with `restore` into a new `--data-dir`, and a coordinator started
//! there in the first one's place. Every host (with its credential), campaign,
//! job, result, finding and schedule is as it was, and the agents, which kept
//! running, are back under their own credentials: no host enrolled again.
//! The commands are those of docs/operations.md, "Backups".

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use cipherfleet_proto::v1;

use crate::app::{App, TempDir, matrix, wait_for};

/// What the database holds that a restore must bring back, one line per row,
/// leaving out what a running coordinator changes by itself (sessions, leases,
/// `last_seen`).
async fn contents(app: &App) -> Vec<String> {
    let tables = [
        "SELECT format('host %s %s credential %s issued %s retired %s', id, name, encode(credential_hash, 'hex'), \
             credential_issued_at, retired_at) FROM hosts ORDER BY id",
        "SELECT format('campaign %s %s %s %s finished %s', id, name, suite, status, finished_at) FROM campaigns ORDER BY id",
        "SELECT format('job %s of campaign %s on host %s: %s, attempts %s', id, campaign_id, host_id, status, attempts) \
             FROM jobs ORDER BY campaign_id, position",
        "SELECT format('result %s of job %s: %s MB/s', id, job_id, throughput_mb_s) FROM results ORDER BY id",
        "SELECT format('finding %s on host %s: %s %s %s %s', id, host_id, reason, subject, severity, status) \
             FROM findings ORDER BY id",
        "SELECT format('schedule %s %s every %s s at minute %s, due %s', id, suite, every_seconds, at_minute, due_at) \
             FROM schedules ORDER BY id",
    ];
    let mut lines = Vec::new();
    for sql in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&app.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        lines.extend(rows);
    }
    lines
}

/// `cipherfleet-coordinator ARGS…`, which must succeed within two minutes.
fn coordinator_command(args: &[&std::ffi::OsStr]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .args(args)
        .env("CIPHERFLEET_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running cipherfleet-coordinator");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{args:?} ran for two minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The host credentials the agents keep in their state directories.
fn credentials(app: &App, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| std::fs::read_to_string(app.state_dir(n).join("credential")).expect("the agent's credential"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_a_live_coordinator_restores_everything_and_its_agents_come_back_without_enrolling() {
    let dir = TempDir::new("e2e-backup");
    let live = dir.path().join("live");
    let restored = dir.path().join("restored");
    let dump = dir.path().join("cipherfleet.dump");
    let mut app = App::private(&live).await;
    let agents = ["backup-01", "backup-02", "backup-soft"];
    app.spawn_agent(agents[0], &[]);
    app.spawn_agent(agents[1], &[]);
    // The software build: its hello opens a software-build finding.
    app.spawn_soft_agent(agents[2], &[]);
    app.wait_online(agents.len()).await;
    let campaign = app
        .run_campaign(
            "before the backup",
            matrix(&["aes-128-gcm", "chacha20-poly1305"], &[1024], 0.2),
        )
        .await;
    // A schedule whose next due time is half a day away: it must come back, not fire.
    let minute = (chrono::Utc::now()
        .time()
        .signed_duration_since(chrono::NaiveTime::MIN)
        .num_minutes()
        + 720)
        % 1440;
    app.admin()
        .await
        .add_schedule(v1::AddScheduleRequest {
            suite: "quick".into(),
            every_seconds: 86_400,
            at_minute: Some(minute as i32),
            created_by: "e2e".into(),
            ..Default::default()
        })
        .await
        .expect("a schedule");
    wait_for("the software build's finding", Duration::from_secs(30), || async {
        let open: i64 = sqlx::query_scalar("SELECT count(*) FROM findings WHERE status = 'open'")
            .fetch_one(&app.pool)
            .await
            .ok()?;
        (open > 0).then_some(())
    })
    .await;
    let before = contents(&app).await;
    let credentials_before = credentials(&app, &agents);
    for kind in ["host ", "campaign ", "job ", "result ", "finding ", "schedule "] {
        assert!(
            before.iter().any(|l| l.starts_with(kind)),
            "no {kind}row to back up: {before:#?}"
        );
    }
    assert!(
        before
            .iter()
            .filter(|l| l.starts_with("host "))
            .all(|l| !l.contains("credential  ")),
        "every host has a credential: {before:#?}"
    );

    // The backup, while the coordinator serves its agents.
    let started = std::time::Instant::now();
    coordinator_command(&[
        "backup".as_ref(),
        "--data-dir".as_ref(),
        live.as_os_str(),
        "--file".as_ref(),
        dump.as_os_str(),
    ]);
    eprintln!("backup took {:?}", started.elapsed());
    assert!(
        app.coordinator_alive(),
        "the coordinator kept running through its backup"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&dump).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(
        contents(&app).await,
        before,
        "the live coordinator changed nothing while backed up"
    );

    // The machine is lost: the coordinator and its cluster stop; the agents keep trying.
    let grpc = app.grpc;
    app.stop_coordinator(Duration::from_secs(30))
        .expect("the coordinator stops");
    let out = coordinator_command(&[
        "restore".as_ref(),
        "--data-dir".as_ref(),
        restored.as_os_str(),
        "--file".as_ref(),
        dump.as_os_str(),
    ]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("{} hosts", agents.len())), "{said}");
    // A restore never lands on a cluster that exists.
    let again = Command::new(env!("CARGO_BIN_EXE_cipherfleet-coordinator"))
        .arg("restore")
        .arg("--data-dir")
        .arg(&restored)
        .arg("--file")
        .arg(&dump)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already holds a cluster"),
        "{again:?}"
    );

    let restart = chrono::Utc::now();
    app.use_data_dir(&restored);
    app.start_coordinator(grpc);
    assert_eq!(contents(&app).await, before, "the restored database is the live one");
    app.wait_online(agents.len()).await;
    let back: i64 = sqlx::query_scalar("SELECT count(DISTINCT host_id) FROM agent_sessions WHERE connected_at > $1")
        .bind(restart)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        back,
        agents.len() as i64,
        "every agent opened a session on the restored coordinator"
    );
    assert_eq!(
        credentials(&app, &agents),
        credentials_before,
        "no agent was given a new credential"
    );

    // It serves as before: a campaign's results land after the restored ones.
    let after = app
        .run_campaign("after the restore", matrix(&["aes-128-gcm"], &[1024], 0.2))
        .await;
    for (job, n) in app.result_counts(&after).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
    let now = contents(&app).await;
    let hosts = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.starts_with("host "))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        hosts(&now),
        hosts(&before),
        "the agents came back as the hosts they were, none enrolled again"
    );
    assert!(before.iter().all(|l| !l.starts_with("result ") || now.contains(l)));
    let page = app.get(&format!("/campaigns/{campaign}")).await;
    assert_eq!(page.status, 200, "the restored campaign's page");
    assert!(page.body.contains("before the backup"), "{}", page.body);
}
