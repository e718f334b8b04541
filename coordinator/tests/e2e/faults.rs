//! Things going away mid-campaign: the agent, the coordinator, PostgreSQL.

use std::time::Duration;

use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_proto::v1;

use crate::app::{App, TempDir, spawn_app, wait_for};

/// Waits until agent `agent` has finished `job` while the coordinator is down:
/// its outcome is in the agent's spool (`outcome-<job id>.json`, the name the
/// agent's `daemon/spool.rs` gives it). Also returns if the result is already
/// stored: the job may have ended and been delivered in the moment between
/// [`App::wait_job_started`] seeing it and the coordinator's kill.
async fn wait_spooled_or_stored(app: &App, agent: &str, job: uuid::Uuid) {
    let outcome = app.spool_dir(agent).join(format!("outcome-{job}.json"));
    let what = format!(
        "job {job} to end with its outcome spooled at {} while the coordinator is down",
        outcome.display()
    );
    wait_for(&what, Duration::from_secs(60), || async {
        if outcome.is_file() {
            return Some(());
        }
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM results WHERE job_id = $1")
            .bind(job)
            .fetch_one(&app.pool)
            .await
            .ok()?;
        (stored > 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_mid_job_gets_the_job_back_and_it_completes_once() {
    let mut app = spawn_app().await;
    let agent = app.spawn_agent("e2e-killed", &[]);
    app.wait_online(1).await;
    let campaign = app.start_matrix(&["aes-256-gcm"], &[1024, 4096], 2.0).await;
    let job = app.wait_job_started(&campaign).await;
    app.kill_agent(agent);
    // The coordinator notices (stream reset, or three missed heartbeats) and re-queues it.
    wait_for("the lost job to be re-queued", Duration::from_secs(30), || async {
        let (status, attempts): (String, i32) = sqlx::query_as("SELECT status, attempts FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&app.pool)
            .await
            .ok()?;
        (status == "queued" && attempts == 1).then_some(())
    })
    .await;
    app.spawn_agent("e2e-killed", &[]);
    let status = app.wait_finished(&campaign, Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 2, "{:?}", status.failures);
    for (job, n) in app.result_counts(&campaign).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_restart_mid_campaign_loses_and_duplicates_nothing() {
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-restart", &[]);
    app.wait_online(1).await;
    let campaign = app
        .start_matrix(&["aes-128-gcm", "chacha20-poly1305", "aes-256-ctr"], &[256, 2048], 0.6)
        .await;
    let job = app.wait_job_started(&campaign).await;
    let addr = app.grpc;
    app.kill_coordinator();
    // The agent finishes its job meanwhile and keeps the result in its spool.
    wait_spooled_or_stored(&app, "e2e-restart", job).await;
    app.start_coordinator(addr);
    let status = app.wait_finished(&campaign, Duration::from_secs(180)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (6, 0), "{:?}", status.failures);
    for (job, n) in app.result_counts(&campaign).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_sessions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(
        sessions >= 2,
        "the agent reconnected after the restart ({sessions} sessions)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_outage_mid_campaign_is_survived_without_losing_results_or_the_session() {
    // A cluster of its own: restarting the shared one would disturb other tests.
    let dir = TempDir::new("e2e-pg-restart");
    let cluster = PrivateCluster::start(&dir.path().join("pg")).await.expect("cluster");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_with(cluster.connect_options("cipherfleet"))
        .await
        .expect("pool");
    let mut app = App::with_database(pool, cluster.url().to_string()).await;
    app.spawn_agent("e2e-pg", &[]);
    app.wait_online(1).await;
    // Short jobs one after another: results reach the coordinator about every
    // second, so some arrive while PostgreSQL is down.
    let campaign = app
        .start_matrix(
            &["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305", "aes-128-cbc"],
            &[16, 64, 256, 1024, 4096],
            0.05,
        )
        .await;
    app.wait_job_started(&campaign).await;
    cluster
        .stop_for(Duration::from_secs(3))
        .await
        .expect("stopping and starting PostgreSQL");
    let status = app.wait_finished(&campaign, Duration::from_secs(180)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (20, 0), "{:?}", status.failures);
    for (job, n) in app.result_counts(&campaign).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
    // Their batches were tried again until the database was back: the agent
    // was never sent away to reconnect.
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_sessions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 1, "the agent had to reconnect");
    drop(app);
    cluster.stop().await.expect("stopping PostgreSQL");
}

/// A TCP door to a PostgreSQL listening on a unix socket that can be made to
/// stop answering: once [`Freezable::freeze`]d, it relays nothing more either
/// way and accepts connections it never relays, every socket kept open, as a
/// database host that hangs (not one that refuses) does. Thawed, it closes
/// what it froze, as a healed network resets its connections, and relays again.
struct Freezable {
    addr: std::net::SocketAddr,
    frozen: tokio::sync::watch::Sender<bool>,
}

impl Freezable {
    async fn to_socket(socket: std::path::PathBuf) -> Freezable {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (frozen, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let (socket, mut watch) = (socket.clone(), watch.clone());
                tokio::spawn(async move {
                    if !*watch.borrow() {
                        let Ok(mut server) = tokio::net::UnixStream::connect(&socket).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
                            _ = watch.wait_for(|f| *f) => {}
                        }
                    }
                    // Frozen: the sockets stay open and silent until thawed, then close.
                    let _ = watch.wait_for(|f| !*f).await;
                });
            }
        });
        Freezable { addr, frozen }
    }

    fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}

/// A health check must answer in time for its prober whatever the database
/// does: it answered 503 only after the pool's 10 s acquire timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_within_a_second_while_the_database_does_not() {
    let pool = crate::db_helpers::fresh_db().await;
    let options = pool.connect_options();
    let socket = options
        .get_socket()
        .expect("the test cluster listens on a unix socket")
        .join(format!(".s.PGSQL.{}", options.get_port()));
    let door = Freezable::to_socket(socket).await;
    let url = format!(
        "postgres://{}@{}/{}?sslmode=disable",
        options.get_username(),
        door.addr,
        options.get_database().expect("a database")
    );
    let app = App::with_database(pool, url).await;
    assert_eq!(app.get("/healthz").await.status, 200);

    door.freeze(true);
    for _ in 0..3 {
        let asked = std::time::Instant::now();
        let answer = app.get("/healthz").await;
        let took = asked.elapsed();
        assert_eq!(
            answer.status, 503,
            "healthz of a database that does not answer ({took:?})"
        );
        assert!(took < Duration::from_secs(1), "healthz took {took:?}");
    }
    door.freeze(false);
    wait_for("healthz to recover", Duration::from_secs(30), || async {
        (app.get("/healthz").await.status == 200).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_queued_jobs_and_aborts_the_running_one() {
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-cancel", &[]);
    app.wait_online(1).await;
    let campaign = app
        .start_matrix(&["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"], &[1024], 20.0)
        .await;
    app.wait_job_started(&campaign).await;
    let r = app.cancel(&campaign, "test").await;
    assert_eq!(r.jobs_cancelled, 2, "the two queued jobs");
    // The running job is aborted by its agent well before its 20 s are up.
    let id: i64 = campaign.parse().unwrap();
    wait_for("the running job to be aborted", Duration::from_secs(10), || async {
        let running: i64 =
            sqlx::query_scalar("SELECT count(*) FROM jobs WHERE campaign_id = $1 AND status = 'running'")
                .bind(id)
                .fetch_one(&app.pool)
                .await
                .ok()?;
        (running == 0).then_some(())
    })
    .await;
    let status = app.status(&campaign).await;
    assert_eq!(status.state, v1::CampaignState::Cancelled as i32);
}

/// A gauge of the coordinator's `/metrics`.
async fn gauge(app: &App, name: &str) -> f64 {
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{}", metrics.body))
}

/// Outcomes the agents named `agents` hold in their spools (sent, not yet acknowledged).
fn spooled(app: &App, agents: &[&str]) -> usize {
    agents
        .iter()
        .filter_map(|a| std::fs::read_dir(app.spool_dir(a)).ok())
        .flat_map(|dir| dir.filter_map(Result::ok))
        .filter(|e| e.file_name().to_string_lossy().starts_with("outcome-"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_database_fills_the_bounded_ingest_queue_holds_agents_back_and_loses_nothing() {
    const QUEUE: usize = 2;
    let queue = QUEUE.to_string();
    let mut app = crate::app::spawn_app_with(&["--verify-on-change=false", "--ingest-queue", &queue]).await;
    let agents = ["e2e-slow-1", "e2e-slow-2", "e2e-slow-3", "e2e-slow-4"];
    for name in agents {
        app.spawn_agent(name, &[]);
    }
    app.wait_online(agents.len()).await;
    // Every batch that stores results now takes half a second.
    sqlx::raw_sql(
        "CREATE FUNCTION e2e_slow() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$; \
         CREATE TRIGGER e2e_slow AFTER INSERT ON results FOR EACH STATEMENT EXECUTE FUNCTION e2e_slow();",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let campaign = app
        .start_matrix(&["aes-128-gcm", "chacha20-poly1305"], &[256, 1024], 0.05)
        .await;

    // Four agents report faster than the database stores: the queue fills to its
    // bound and no further, and the agents wait with their outcomes spooled.
    wait_for("the ingest queue to fill", Duration::from_secs(60), || async {
        (gauge(&app, "cipherfleet_ingest_queued").await >= QUEUE as f64).then_some(())
    })
    .await;
    wait_for(
        "agents holding outcomes in their spools",
        Duration::from_secs(30),
        || async { (spooled(&app, &agents) >= QUEUE).then_some(()) },
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        assert!(gauge(&app, "cipherfleet_ingest_queued").await <= QUEUE as f64);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The database speeds up again: every job ends with exactly one result.
    sqlx::raw_sql("DROP TRIGGER e2e_slow ON results; DROP FUNCTION e2e_slow();")
        .execute(&app.pool)
        .await
        .unwrap();
    let status = app.wait_finished(&campaign, Duration::from_secs(120)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (16, 0), "{:?}", status.failures);
    for (job, n) in app.result_counts(&campaign).await {
        assert_eq!(n, 1, "job {job} has {n} results");
    }
    assert_eq!(
        gauge(&app, "cipherfleet_ingest_queued_max").await,
        QUEUE as f64,
        "the queue never held more than its bound"
    );
    assert_eq!(gauge(&app, "cipherfleet_ingest_queue_capacity").await, QUEUE as f64);
    wait_for("the spools to empty", Duration::from_secs(10), || async {
        (spooled(&app, &agents) == 0).then_some(())
    })
    .await;
    app.stop_coordinator(Duration::from_secs(10));
}
