//! Upgrades without downtime (issue 34). The previous release's coordinator
//! and agent (built from the pinned commit by `deploy/build-previous.sh`) run
//! beside this build's on one PostgreSQL: the previous coordinator keeps
//! serving on the schema this one migrated, a campaign started through it
//! reaches agents of both protocol versions on both coordinators and ends with
//! one result per job, readable on this coordinator's report; then the
//! previous coordinator stops and its agents move to this one as the hosts
//! they were. Agents one protocol version behind are served; two behind, or a
//! newer agent at the previous coordinator (when the protocol moved), are told
//! which version is needed and stop, never retrying in silence. The previous
//! release restarted beside the newer schema serves on, leaving the newer
//! stored procedures and retention to this one.
//!
//! Also, with this build alone: a coordinator restarting beside a newer one
//! (the database has a migration it does not know) keeps serving and leaves
//! the newer stored procedures alone, and says so.
//!
//! Without the previous release's binaries the first test skips loudly, and
//! fails when `CIPHERFLEET_REQUIRE_PREVIOUS` is set (as `deploy/test.sh` does,
//! after building them).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cipherfleet_coordinator::store::schema;
use cipherfleet_proto::v1;
use cipherfleet_proto::{OLDEST_AGENT_VERSION, PROTOCOL_VERSION};
use tonic::Code;

use crate::app::{AGENT_TOKEN, App, matrix, url_of, wait_for};
use crate::rejections::{hello, open};
use crate::tls::{stderr_lines, wait_for_line};

/// The protocol of the previous release's agent.
const PREVIOUS_PROTOCOL: u32 = 3;
/// The newest migration the previous release knows (deploy/build-previous.sh's pin).
const PREVIOUS_SCHEMA: i64 = 40;

/// The previous release's coordinator and agent.
struct Previous {
    coordinator: PathBuf,
    agent: PathBuf,
}

/// `target/previous/`, beside the target directory of this test binary; `None` when not built.
fn previous() -> Option<Previous> {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.ancestors().nth(3).expect("the target directory").join("previous");
    let found = Previous {
        coordinator: dir.join("cipherfleet-coordinator"),
        agent: dir.join("cipherfleet-agent"),
    };
    if found.coordinator.is_file() && found.agent.is_file() {
        return Some(found);
    }
    let why = format!("{} is missing: run deploy/build-previous.sh", dir.display());
    assert!(
        std::env::var_os("CIPHERFLEET_REQUIRE_PREVIOUS").is_none(),
        "CIPHERFLEET_REQUIRE_PREVIOUS is set but {why}"
    );
    eprintln!("SKIPPED: the rolling upgrade needs the previous release: {why}");
    None
}

/// Coordinators holding live leases, by process id, and how many hosts each.
async fn leases(app: &App) -> Vec<(i64, i64)> {
    // coordinator_name is "hostname/pid", in both releases.
    sqlx::query_as(
        "SELECT substring(coordinator_name FROM '[0-9]+$')::bigint, count(*) FROM host_leases \
         WHERE expires_at > now() GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Every host: id, name and credential hash.
async fn hosts(app: &App) -> Vec<(i64, String, Option<Vec<u8>>)> {
    sqlx::query_as("SELECT id, name, credential_hash FROM hosts ORDER BY id")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

/// A free loopback address for a coordinator started later (agents are told it first).
fn reserve_address() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_release_serves_beside_this_one_through_a_campaign_and_hands_its_agents_over() {
    let Some(previous) = previous() else { return };
    let pool = crate::db_helpers::empty_db().await;
    let db_url = url_of(&pool).await;
    let new_addr = reserve_address();
    let new_url = format!("http://{new_addr}");

    // Before the upgrade: the previous coordinator, which migrates the new database to its
    // schema, and its agents, which know both coordinators' addresses (a load balancer's part).
    let mut old = App::with_build(
        &previous.coordinator,
        pool.clone(),
        db_url.clone(),
        &["--verify-on-change=false"],
    )
    .await;
    let old_schema: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        old_schema < schema::newest_migration(),
        "the previous release ({old_schema}) must be a schema behind this one ({})",
        schema::newest_migration()
    );
    let old_agents = ["up-old-0", "up-old-1"];
    for name in old_agents {
        old.spawn_agent_build(&previous.agent, name, &["--coordinator", &new_url]);
    }
    old.wait_online(old_agents.len()).await;

    // The upgrade starts: this coordinator joins on the same database and migrates it.
    let mut new = App::unstarted_on(pool.clone(), db_url.clone(), &["--verify-on-change=false"]);
    new.capture_log("warn");
    new.start_coordinator(new_addr);
    let new_schema: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(new_schema, schema::newest_migration());
    assert!(new_schema > PREVIOUS_SCHEMA, "this build adds migrations: {new_schema}");

    // Agents of both versions at either coordinator: the previous one keeps
    // serving, a hello of a new host included, on the newer schema.
    old.spawn_agent_build(&previous.agent, "up-old-late", &["--coordinator", &new_url]);
    new.spawn_agent_build(&previous.agent, "up-old-at-new", &[]);
    for name in ["up-new-0", "up-new-1"] {
        new.spawn_agent(name, &[]);
    }
    let all = 6;
    new.wait_online(all).await;
    old.wait_online(all).await;
    let old_pid = i64::from(old.coordinator_pid().unwrap());
    let new_pid = i64::from(new.coordinator_pid().unwrap());
    let mut each = vec![(old_pid, 3), (new_pid, 3)];
    each.sort_unstable();
    assert_eq!(
        leases(&new).await,
        each,
        "each coordinator serves the agents that dialled it"
    );

    // A newer agent at the previous coordinator, when the protocol moved: refused
    // naming both versions, and it stops.
    if PREVIOUS_PROTOCOL < PROTOCOL_VERSION {
        let mut refused = old
            .agent_command("up-new-at-old")
            .env("CIPHERFLEET_LOG", "error")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let said = stderr_lines(&mut refused);
        let status = wait_exit(&mut refused, Duration::from_secs(30));
        let said = wait_for_line(&said, "exiting", Duration::from_secs(5)).unwrap_or_else(|seen| seen);
        assert_eq!(status, Some(3), "a refused agent exits 3; it said:\n{said}");
        assert!(
            said.contains(&format!("agent speaks protocol version {PROTOCOL_VERSION}"))
                && said.contains(&format!("this coordinator speaks version {PREVIOUS_PROTOCOL}")),
            "{said}"
        );
    }
    // Two versions behind, at this coordinator: refused, told the versions it serves.
    let older = PROTOCOL_VERSION - 2;
    let err = open(&new, hello("up-older", AGENT_TOKEN, older))
        .await
        .err()
        .expect("refused");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains(&format!(
            "serves agents of versions {OLDEST_AGENT_VERSION} to {PROTOCOL_VERSION}; upgrade the agent"
        )),
        "{err:?}"
    );

    // A campaign started through the previous coordinator, on every host.
    let started = Instant::now();
    let campaign = old
        .start_campaign(
            "rolling upgrade",
            matrix(&["aes-128-gcm", "chacha20-poly1305"], &[1024], 0.2),
        )
        .await;
    let status = new.wait_finished(&campaign, Duration::from_secs(180)).await;
    let overall = status.overall.expect("totals");
    assert_eq!(
        (status.state, overall.done, overall.failed),
        (v1::CampaignState::Completed as i32, 2 * all as u32, 0),
        "{:?}",
        status.failures
    );
    eprintln!("the campaign over both coordinators took {:?}", started.elapsed());
    let counts = new.result_counts(&campaign).await;
    assert_eq!(counts.len(), 2 * all);
    for (job, n) in &counts {
        assert_eq!(*n, 1, "job {job} has {n} results");
    }
    // Every result, whichever coordinator stored it, reads on this one's report.
    let ids: Vec<(i64, String)> = sqlx::query_as(
        "SELECT r.id, h.name FROM results r JOIN jobs j ON j.id = r.job_id JOIN hosts h ON h.id = r.host_id \
         WHERE j.campaign_id = $1 ORDER BY r.id",
    )
    .bind(campaign.parse::<i64>().unwrap())
    .fetch_all(&new.pool)
    .await
    .unwrap();
    for (id, host) in &ids {
        let r = new.get(&format!("/api/v1/results/{id}")).await;
        assert_eq!(r.status, 200, "result {id}: {}", r.body);
        let json: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(json["host_name"], host.as_str());
        assert!(
            json["measurement"]["throughput_mb_s"].as_f64().is_some_and(|t| t > 0.0),
            "result {id}: {json}"
        );
    }
    let page = new.get(&format!("/campaigns/{campaign}")).await;
    assert_eq!(page.status, 200);

    // The upgrade completes: the previous coordinator stops, and its agents move here as the
    // hosts they were.
    let before = hosts(&new).await;
    let stopped = chrono::Utc::now();
    old.stop_coordinator(Duration::from_secs(30))
        .expect("the previous coordinator stops");
    wait_for("every agent on this coordinator", Duration::from_secs(30), || async {
        (leases(&new).await == [(new_pid, all as i64)]).then_some(())
    })
    .await;
    assert_eq!(hosts(&new).await, before, "no host enrolled again");
    let moved: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT s.host_id) FROM agent_sessions s JOIN hosts h ON h.id = s.host_id \
         WHERE s.connected_at > $1 AND h.name LIKE 'up-old-%' AND h.name <> 'up-old-at-new'",
    )
    .bind(stopped)
    .fetch_one(&new.pool)
    .await
    .unwrap();
    assert_eq!(moved, 3, "the previous coordinator's agents opened sessions here");

    // The previous release starts again beside the newer schema (a crash during
    // the upgrade): it leaves the newer stored procedures, and retention, to
    // this one, and says so (docs/operations.md, "Upgrading").
    let mut restart = std::process::Command::new(&previous.coordinator)
        .args(["serve", "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
        .arg("--database-url")
        .arg(&db_url)
        .env("CIPHERFLEET_AGENT_TOKEN", AGENT_TOKEN)
        .env("CIPHERFLEET_ADMIN_TOKEN", crate::app::ADMIN_TOKEN)
        .env("CIPHERFLEET_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = stderr_lines(&mut restart);
    let said = wait_for_line(&said, "stored procedures stay", Duration::from_secs(30));
    let _ = restart.kill();
    let _ = restart.wait();
    let said = said.unwrap_or_else(|seen| panic!("the previous release restarting said:\n{seen}"));
    assert!(
        said.contains(&format!(
            "the database has migration {}, newer than this build's {PREVIOUS_SCHEMA}",
            schema::newest_migration()
        )),
        "{said}"
    );

    // The agents follow at their pace: one upgraded in place is the same host.
    new.kill_agent(0);
    let killed = chrono::Utc::now();
    new.spawn_agent("up-old-at-new", &[]);
    // Its new session, not the lease the killed one left behind, says it is back.
    wait_for("the upgraded agent back", Duration::from_secs(30), || async {
        let back: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM agent_sessions s JOIN hosts h ON h.id = s.host_id \
             WHERE h.name = 'up-old-at-new' AND s.connected_at > $1 AND s.disconnected_at IS NULL)",
        )
        .bind(killed)
        .fetch_one(&new.pool)
        .await
        .ok()?;
        back.then_some(())
    })
    .await;
    new.wait_online(all).await;
    assert_eq!(hosts(&new).await, before, "the upgraded agent is the host it was");
    let after = new
        .run_campaign("after the upgrade", matrix(&["aes-128-gcm"], &[1024], 0.2))
        .await;
    assert_eq!(new.result_counts(&after).await.len(), all);
    // Nothing left the new stored procedures for the old ones.
    assert!(
        new.log
            .as_ref()
            .unwrap()
            .try_iter()
            .all(|l| !l.contains("stored procedures stay")),
        "this coordinator applied its stored procedures"
    );
}

/// Waits up to `limit` for `child` to exit; its status code, `None` if it still runs.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A newer coordinator's release is simulated on this build's schema: one more
/// migration recorded, and a stored procedure as that release defines it. This
/// build, restarting beside it, keeps serving, leaves that definition alone
/// and says so; once it knows every migration again it applies its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_restarting_beside_a_newer_one_leaves_its_stored_procedures_alone() {
    let pool = crate::db_helpers::fresh_db().await;
    let db_url = url_of(&pool).await;
    let newer = schema::newest_migration() + 1;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'a newer release', true, '\\x00', 0)",
    )
    .bind(newer)
    .execute(&pool)
    .await
    .unwrap();
    let newer_definition = schema::FUNCTIONS
        .iter()
        .find(|f| f.name == "cipherfleet_notify_jobs_queued")
        .unwrap()
        .sql
        .replace("BEGIN", "BEGIN -- as a newer release defines it");
    sqlx::raw_sql(sqlx::AssertSqlSafe(newer_definition))
        .execute(&pool)
        .await
        .unwrap();

    let mut app = App::unstarted_on(pool.clone(), db_url, &["--verify-on-change=false"]);
    app.capture_log("warn");
    app.start_coordinator("127.0.0.1:0".parse().unwrap());
    let said = wait_for_line(
        app.log.as_ref().unwrap(),
        "stored procedures stay",
        Duration::from_secs(10),
    )
    .unwrap_or_else(|seen| panic!("no word of the newer schema; the coordinator said:\n{seen}"));
    assert!(
        said.contains(&format!(
            "the database has migration {newer}, newer than this build's {}",
            newer - 1
        )),
        "{said}"
    );
    let body: String =
        sqlx::query_scalar("SELECT prosrc FROM pg_proc WHERE proname = 'cipherfleet_notify_jobs_queued'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(body.contains("as a newer release defines it"), "{body}");

    // It serves: an agent enrolls and a campaign ends.
    app.spawn_agent("beside-newer", &[]);
    app.wait_online(1).await;
    let campaign = app
        .run_campaign("beside a newer", matrix(&["aes-128-gcm"], &[1024], 0.2))
        .await;
    assert_eq!(app.result_counts(&campaign).await.len(), 1);
}
