//! Benchmark of the report (`deploy/bench-report.sh`, or
//! `cargo bench -p cipherfleet-coordinator --bench report`): how long the
//! real router takes to answer `/compare` and `/fallback` with 100,000 and
//! with 1,000,000 stored results. Target: p95 under 300 ms at 1,000,000.
//!
//! A private PostgreSQL cluster in a temporary directory (stopped and removed
//! at the end, panics included) gets a simulated fleet — 200 hosts labelled
//! `simulated`, five machine classes, facts snapshots — and results loaded in
//! bulk with `INSERT … SELECT generate_series` (each with its campaign and job
//! row, as the schema requires), then `result_points` rebuilt. The report is
//! served on a real socket (port 0) and timed from a plain HTTP client.
//! Afterwards every page is requested once more with `auto_explain` logging
//! each query's plan (`EXPLAIN ANALYZE, BUFFERS`): the plans are printed, and
//! a sequential scan of `results` or `result_points` fails the run — the
//! pages must not grow with the number of results stored.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cipherfleet_coordinator::db;
use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::scheduler::Scheduler;
use cipherfleet_coordinator::web::{self, WebState};
use sqlx::postgres::{PgArguments, PgPoolOptions};
use sqlx::query::Query;
use sqlx::{Executor, PgPool, Postgres};
use tokio_util::sync::CancellationToken;

use crate::support::http::http_get;

/// Simulated hosts, spread over [`CLASSES`].
const HOSTS: i64 = 200;
/// Results stored for each measurement, cumulative.
const DATASETS: [i64; 2] = [100_000, 1_000_000];
/// Timed requests per page and dataset (after [`WARMUP`] untimed ones).
const REQUESTS: usize = 40;
const WARMUP: usize = 3;
/// p95 a page may take at 1,000,000 results.
const TARGET: Duration = Duration::from_millis(300);

/// The pages timed; the first two carry the target.
const PAGES: [(&str, &str); 5] = [
    ("/compare", "/compare"),
    ("/compare classes", "/compare?rows=classes"),
    ("/fallback", "/fallback"),
    (
        "/compare AEAD+P99",
        "/compare?algorithms=aes-256-gcm,aes-128-cbc,aes-128-cbc-hmac-sha256,chacha20-poly1305&metric=p99",
    ),
    ("/modes host", "/modes?host={host}"),
];

/// Machine classes: arch, vendor, model, usable features, build flavour.
/// Host `id` is in class `id % 5`; the results' SQL scales their speed per class.
const CLASSES: [(&str, &str, &str, &[&str], &str); 5] = [
    (
        "x86_64",
        "GenuineIntel",
        "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
        &["aes", "pclmulqdq", "avx", "avx2", "avx512f"],
        "accelerated",
    ),
    (
        "x86_64",
        "AuthenticAMD",
        "AMD EPYC 7543 32-Core Processor",
        &["aes", "pclmulqdq", "avx", "avx2", "vaes", "vpclmulqdq"],
        "accelerated",
    ),
    (
        "aarch64",
        "ARM",
        "Neoverse-N1",
        &["aes", "pmull", "sha2"],
        "accelerated",
    ),
    // A hypervisor masking AES-NI: the accelerated path runs in software.
    (
        "x86_64",
        "GenuineIntel",
        "Intel Xeon Processor (Cascadelake)",
        &["avx", "avx2"],
        "accelerated",
    ),
    (
        "x86_64",
        "GenuineIntel",
        "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
        &["aes", "pclmulqdq", "avx", "avx2", "avx512f"],
        "software",
    ),
];

fn main() {
    // Errors only: the bulk load's statements are slow on purpose, and sqlx warns about each.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::ERROR)
        .with_writer(std::io::stderr)
        .init();
    if !support::with_private_cluster("bench-report", async |cluster, _| bench(cluster).await) {
        std::process::exit(1);
    }
}

/// Runs the whole benchmark; true when every target and plan check passed.
async fn bench(cluster: &PrivateCluster) -> bool {
    let pool = db::connect(cluster.url())
        .await
        .expect("connecting to the private cluster and migrating");
    let started = Instant::now();
    create_fleet(&pool).await;
    println!(
        "fleet: {HOSTS} simulated hosts in {} classes, created in {:.1} s",
        CLASSES.len(),
        started.elapsed().as_secs_f64()
    );
    let first_host: i64 = sqlx::query_scalar("SELECT min(id) FROM hosts")
        .fetch_one(&pool)
        .await
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding 127.0.0.1:0");
    let addr = listener.local_addr().expect("bound address");
    let shutdown = CancellationToken::new();
    let state = WebState {
        pool: pool.clone(),
        scheduler: Arc::new(Scheduler::new(pool.clone())),
    };
    let server = tokio::spawn(web::serve(listener, state, shutdown.clone()));

    let mut passed = true;
    let mut loaded = 0;
    let mut results = Vec::new();
    for total in DATASETS {
        let started = Instant::now();
        load_results(&pool, loaded, total).await;
        let load = started.elapsed();
        let started = Instant::now();
        db::points::refresh(&pool).await.expect("refreshing result_points");
        pool.execute("ANALYZE").await.expect("ANALYZE");
        let refresh = started.elapsed();
        loaded = total;
        let points: i64 = sqlx::query_scalar("SELECT count(*) FROM result_points")
            .fetch_one(&pool)
            .await
            .unwrap();
        println!(
            "\n{total} results: bulk load {:.1} s, result_points refresh + ANALYZE {:.1} s ({points} points)",
            load.as_secs_f64(),
            refresh.as_secs_f64()
        );
        println!(
            "{:<20} {:>9} {:>9} {:>9} {:>9}  status",
            "page", "p50 ms", "p95 ms", "max ms", "KiB"
        );
        for (name, path) in PAGES {
            let path = path.replace("{host}", &first_host.to_string());
            let timing = time_page(addr, &path).await;
            let targeted = name == "/compare" || name == "/compare classes" || name == "/fallback";
            let verdict = match (&timing.error, targeted && total == 1_000_000) {
                (Some(e), _) => {
                    passed = false;
                    format!("FAIL: {e}")
                }
                (None, true) if timing.p95 < TARGET => "PASS (p95 < 300 ms)".to_string(),
                (None, true) => {
                    passed = false;
                    "FAIL (p95 ≥ 300 ms)".to_string()
                }
                (None, false) => String::new(),
            };
            println!(
                "{name:<20} {:>9.1} {:>9.1} {:>9.1} {:>9.0}  {verdict}",
                ms(timing.p50),
                ms(timing.p95),
                ms(timing.max),
                timing.bytes as f64 / 1024.0
            );
            results.push((total, name, timing));
        }
    }

    // Query plans of every page at 1,000,000 results.
    println!("\nquery plans at {} results (auto_explain, ANALYZE + BUFFERS):", loaded);
    passed &= check_plans(cluster, first_host).await;
    shutdown.cancel();
    let _ = server.await;
    println!("\n{}", if passed { "PASS" } else { "FAIL" });
    passed
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// 200 hosts labelled `simulated`, each with a facts snapshot of its class.
async fn create_fleet(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO hosts (name, labels) \
         SELECT format('sim-%s', lpad(i::text, 3, '0')), \
                jsonb_build_object('simulated', 'report-bench', 'rack', format('r%s', i % 10)) \
         FROM generate_series(1, $1) i",
    )
    .bind(HOSTS)
    .execute(pool)
    .await
    .expect("creating hosts");
    for (i, (arch, vendor, model, features, build)) in CLASSES.iter().enumerate() {
        sqlx::query(
            "INSERT INTO host_fact_snapshots (host_id, facts_hash, facts, arch, cpu_vendor, cpu_model_name, \
                 logical_cores, memory_total_bytes, os_name, kernel_release, hypervisor_present, \
                 features_advertised, features_usable, build_flavour, agent_version) \
             SELECT h.id, sha256(convert_to(h.name, 'UTF8')), jsonb_build_object('hostname', h.name), \
                 $2, $3, $4, 32, 137438953472, 'Linux', '6.1.0-18-amd64', $1 = 3, $5, $5, $6, '0.1.0' \
             FROM hosts h WHERE h.id % $7 = $1",
        )
        .bind(i as i64)
        .bind(arch)
        .bind(vendor)
        .bind(model)
        .bind(features.to_vec())
        .bind(build)
        .bind(CLASSES.len() as i64)
        .execute(pool)
        .await
        .expect("creating facts snapshots");
    }
    sqlx::query("UPDATE hosts h SET current_snapshot_id = s.id FROM host_fact_snapshots s WHERE s.host_id = h.id")
        .execute(pool)
        .await
        .expect("linking snapshots");
}

/// The points of every host: all 27 algorithms × 10 sizes × both directions ×
/// both paths at one thread, plus 2, 4 and 8 threads at 16 KiB — 1,404 per
/// host, 280,800 in the fleet. Result `n` (0-based) is round `n / 280,800` of
/// point `n % 280,800`, host-major within a point so that even 100,000
/// results reach every host; within a host the algorithm varies fastest, then
/// path, direction and size (16 KiB first), so 100,000 results hold both
/// paths and directions of the first sizes.
macro_rules! point_sql {
    () => {
        "\
    WITH n AS (SELECT g AS n, g % $3 AS k, g / $3 AS round FROM generate_series($1::bigint, $2::bigint - 1) g), \
    p AS (SELECT n, round, k % $4 AS host_index, k / $4 AS point FROM n), \
    d AS (SELECT n, round, host_index, point, \
            CASE WHEN point < 1080 THEN point % 27 ELSE (point - 1080) % 27 END AS alg, \
            CASE WHEN point < 1080 THEN (ARRAY[16384, 1024, 16, 64, 256, 8192, 11, 18, 1048576, 10485760])[(point / 108) % 10 + 1] \
                 ELSE 16384 END AS size_bytes, \
            CASE WHEN point < 1080 THEN 1 ELSE (ARRAY[2, 4, 8])[((point - 1080) / 108) % 3 + 1] END AS threads, \
            CASE WHEN point < 1080 THEN (point / 54) % 2 ELSE ((point - 1080) / 54) % 2 END AS dir, \
            CASE WHEN point < 1080 THEN (point / 27) % 2 ELSE ((point - 1080) / 27) % 2 END AS soft \
          FROM p) \
    SELECT d.n, d.round, h.id AS host_id, h.current_snapshot_id, \
        (ARRAY['aes-128-ecb','aes-192-ecb','aes-256-ecb','aes-128-cbc','aes-192-cbc','aes-256-cbc','aes-128-ctr', \
               'aes-192-ctr','aes-256-ctr','aes-128-gcm','aes-192-gcm','aes-256-gcm','aes-128-ccm','aes-192-ccm', \
               'aes-256-ccm','aes-128-ocb','aes-192-ocb','aes-256-ocb','aes-128-cbc-hmac-sha256', \
               'aes-256-cbc-hmac-sha256','chacha20','chacha20-poly1305','xchacha20-poly1305','des-ecb','des-cbc', \
               'des-ede3-ecb','des-ede3-cbc'])[d.alg + 1] AS algorithm, \
        d.alg, d.size_bytes, d.threads, \
        CASE d.dir WHEN 0 THEN 'encrypt' ELSE 'decrypt' END AS direction, \
        CASE d.soft WHEN 0 THEN 'accelerated' ELSE 'software' END AS path, \
        h.id % 5 AS class \
    FROM d JOIN hosts h ON h.name = format('sim-%s', lpad((d.host_index + 1)::text, 3, '0'))"
    };
}

/// `sql` over [`point_sql!`]'s results `from..to`: its `$1`–`$4` bound.
fn over_points(sql: &'static str, from: i64, to: i64, per_round: i64) -> Query<'static, Postgres, PgArguments> {
    sqlx::query(sql).bind(from).bind(to).bind(per_round).bind(HOSTS)
}

/// Loads results `from..to` with their campaigns and jobs, in one transaction.
async fn load_results(pool: &PgPool, from: i64, to: i64) {
    const POINTS_PER_HOST: i64 = 1404;
    let per_round = HOSTS * POINTS_PER_HOST;
    let mut tx = pool.begin().await.expect("transaction");
    tx.execute("SET LOCAL synchronous_commit = off").await.unwrap();
    // One finished campaign per round of the matrix.
    let rounds = (to - 1) / per_round + 1;
    sqlx::query(
        "INSERT INTO campaigns (name, suite, matrix, started_by, status, created_at, finished_at) \
         SELECT format('report-bench round %s', r), 'full', '{}', 'bench-report', 'finished', \
                timestamptz '2026-01-01 00:00Z' + r * interval '1 day', \
                timestamptz '2026-01-01 01:00Z' + r * interval '1 day' \
         FROM generate_series((SELECT count(*) FROM campaigns WHERE started_by = 'bench-report'), $1 - 1) r",
    )
    .bind(rounds)
    .execute(&mut *tx)
    .await
    .expect("creating campaigns");
    let jobs = concat!(
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
             key_mode, path, time_limit_seconds, status, created_at, assigned_at, started_at, finished_at) \
         SELECT c.id, x.host_id, (x.n % $3)::int, '{}', x.algorithm, x.direction, x.size_bytes, x.threads, \
             'static', x.path, 60, 'done', c.created_at, c.created_at, c.created_at, c.created_at \
         FROM (",
        point_sql!(),
        ") x JOIN campaigns c ON c.name = format('report-bench round %s', x.round)"
    );
    over_points(jobs, from, to, per_round)
        .execute(&mut *tx)
        .await
        .expect("creating jobs");
    // Throughput: a per-algorithm base, scaled by payload size (fixed costs
    // weigh on small payloads), class, threads and path, with ±10 % noise.
    // AES on the class without usable AES, and DES everywhere, runs in software.
    let results = concat!(
        "INSERT INTO results (job_id, host_id, snapshot_id, created_at, algorithm, direction, size_bytes, threads, \
             concurrency, key_mode, path, path_used, throughput_mb_s, ops_per_s, latency_p50_ns, latency_p90_ns, \
             latency_p99_ns, latency_p999_ns, latency_max_ns, latency_method, batch_ops, cv, samples, \
             cpu_user_seconds, cpu_sys_seconds, cpu_utilization, key_setup_ns, elapsed_seconds, measurement) \
         SELECT j.id, x.host_id, x.current_snapshot_id, c.created_at + x.n * interval '1 ms', x.algorithm, \
             x.direction, x.size_bytes, x.threads, NULL, 'static', x.path, m.path_used, m.mb_s, \
             m.mb_s * 1e6 / x.size_bytes, m.ns, m.ns * 1.1, m.ns * 1.4, m.ns * 2, m.ns * 3, 'per-op', 1, \
             0.005 + random() * 0.04, 20, 1, 0.01, 0.99, 300, 1, '{}' \
         FROM (",
        point_sql!(),
        ") x \
         JOIN campaigns c ON c.name = format('report-bench round %s', x.round) \
         JOIN jobs j ON j.campaign_id = c.id AND j.position = (x.n % $3)::int \
         CROSS JOIN LATERAL (SELECT \
             CASE WHEN x.path = 'software' OR x.alg >= 23 OR x.class IN (3, 4) AND x.alg < 20 \
                  THEN 'software' ELSE 'accelerated' END AS path_used) u \
         CROSS JOIN LATERAL (SELECT u.path_used, \
             (CASE WHEN x.alg >= 23 THEN 60 WHEN x.alg >= 20 THEN 1500 ELSE 4000 END) \
               * (CASE WHEN u.path_used = 'software' AND x.alg < 23 THEN 0.08 ELSE 1 END) \
               * x.size_bytes / (x.size_bytes + 64.0) * (ARRAY[1.0, 1.3, 0.8, 0.9, 1.0])[x.class + 1] \
               * x.threads * (0.9 + random() * 0.2) AS mb_s) m0 \
         CROSS JOIN LATERAL (SELECT m0.path_used, m0.mb_s, \
             greatest(1, (x.size_bytes / m0.mb_s * 1e3)::bigint) AS ns) m"
    );
    over_points(results, from, to, per_round)
        .execute(&mut *tx)
        .await
        .expect("loading results");
    tx.commit().await.expect("committing the bulk load");
}

/// What timing one page gave.
struct Timing {
    p50: Duration,
    p95: Duration,
    max: Duration,
    bytes: usize,
    /// The first non-200 answer, if any.
    error: Option<String>,
}

async fn time_page(addr: std::net::SocketAddr, path: &str) -> Timing {
    let mut times = Vec::with_capacity(REQUESTS);
    let mut bytes = 0;
    let mut error = None;
    for i in 0..WARMUP + REQUESTS {
        let started = Instant::now();
        // A fresh connection, as a browser's first visit; the whole body read.
        let page = http_get(addr, path).await;
        let took = started.elapsed();
        if page.status != 200 && error.is_none() {
            let start: String = page.body.chars().take(200).collect();
            error = Some(format!("HTTP {}: {start}", page.status));
        }
        bytes = page.body.len();
        if i >= WARMUP {
            times.push(took);
        }
    }
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    Timing {
        p50: at(0.50),
        p95: at(0.95),
        max: *times.last().unwrap(),
        bytes,
        error,
    }
}

/// Requests every page once through a pool whose connections log each
/// statement's plan (`auto_explain`, with ANALYZE and BUFFERS) to the server
/// log, then prints those plans. False if a page scans `results` or
/// `result_points` sequentially.
async fn check_plans(cluster: &PrivateCluster, first_host: i64) -> bool {
    let log_path = cluster.data_dir().join("server.log");
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute(
                    "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; \
                     SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; \
                     SET auto_explain.log_timing = on; SET auto_explain.log_nested_statements = on",
                )
                .await?;
                Ok(())
            })
        })
        .connect(cluster.url())
        .await
        .expect("connecting with auto_explain");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding 127.0.0.1:0");
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let state = WebState {
        pool: pool.clone(),
        scheduler: Arc::new(Scheduler::new(pool.clone())),
    };
    let server = tokio::spawn(web::serve(listener, state, shutdown.clone()));
    // A first request opens the pool's connections; only the second one's plans count.
    http_get(addr, "/healthz").await;
    let mut passed = true;
    for (name, path) in PAGES {
        let path = path.replace("{host}", &first_host.to_string());
        let before = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let started = Instant::now();
        let status = http_get(addr, &path).await.status;
        let took = started.elapsed();
        // The server writes its log asynchronously to the request.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let log = read_from(&log_path, before);
        let plans = plans_in(&log);
        println!(
            "\n== {name} ({path}): HTTP {status}, {:.1} ms with plan logging, {} statements",
            ms(took),
            plans.len()
        );
        for plan in &plans {
            let seq: Vec<&str> = ["results", "result_points"]
                .into_iter()
                .filter(|t| {
                    plan.text.contains(&format!("Seq Scan on {t} "))
                        || plan.text.contains(&format!("Seq Scan on {t}\n"))
                })
                .collect();
            let verdict = if seq.is_empty() {
                "ok".to_string()
            } else {
                passed = false;
                format!("FAIL: sequential scan of {}", seq.join(", "))
            };
            println!("-- {:.2} ms  {}  [{verdict}]", plan.duration_ms, plan.query);
            for line in plan.text.lines().filter(|l| !l.trim().is_empty()) {
                println!("   {line}");
            }
        }
    }
    shutdown.cancel();
    let _ = server.await;
    pool.close().await;
    passed
}

/// One statement's plan from the server log.
struct Plan {
    duration_ms: f64,
    /// The statement's first line, shortened.
    query: String,
    /// The plan tree.
    text: String,
}

/// The log appended since byte `from`.
fn read_from(path: &Path, from: u64) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&bytes[(from as usize).min(bytes.len())..]).into_owned()
}

/// auto_explain entries: `… LOG:  duration: 1.234 ms  plan:` then `Query Text: …`
/// and the plan, indented, until the next log line.
fn plans_in(log: &str) -> Vec<Plan> {
    let mut plans = Vec::new();
    let mut lines = log.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.split("duration: ").nth(1).filter(|_| line.contains("plan:")) else {
            continue;
        };
        let duration_ms = rest.split(' ').next().and_then(|d| d.parse().ok()).unwrap_or(f64::NAN);
        let mut query = String::new();
        let mut text = String::new();
        let mut in_query = false;
        while let Some(next) = lines.peek() {
            // Continuation lines of a log entry start with whitespace.
            if !next.starts_with(char::is_whitespace) {
                break;
            }
            let next = lines.next().unwrap();
            if let Some(q) = next.trim_start().strip_prefix("Query Text: ") {
                query = q.to_string();
                in_query = true;
            } else if in_query && !next.trim_start().contains("  (cost=") && !next.contains("(actual") {
                query.push(' ');
                query.push_str(next.trim());
            } else {
                in_query = false;
                text.push_str(next);
                text.push('\n');
            }
        }
        let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = query.chars().take(140).collect();
        plans.push(Plan {
            duration_ms,
            query: if query.chars().count() > 140 {
                format!("{short}…")
            } else {
                short
            },
            text,
        });
    }
    plans
}
