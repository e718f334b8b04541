//! The query plans of every page: each is requested once through a pool whose
//! connections log every statement's plan (`auto_explain`, with ANALYZE and
//! BUFFERS) to the server log, and the plans are printed. A sequential scan
//! of `results`, `result_points` or `jobs` fails the run: the pages must not
//! grow with the number of results stored.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cipherfleet_coordinator::ingest::Ingest;
use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::report::refresh::{Wanted, keep_fresh};
use cipherfleet_coordinator::scheduler::Scheduler;
use cipherfleet_coordinator::store::leases::Holder;
use cipherfleet_coordinator::web::{self, WebState};
use sqlx::Executor;
use sqlx::postgres::PgPoolOptions;
use tokio_util::sync::CancellationToken;

use crate::support::http::http_get;
use crate::{Page, ms};

/// Tables a page must never read whole.
const BIG_TABLES: [&str; 3] = ["results", "result_points", "jobs"];

/// Requests each of `pages` once with plan logging and prints the plans.
/// False if a page scans one of [`BIG_TABLES`] sequentially.
pub async fn check(cluster: &PrivateCluster, pages: &[Page]) -> bool {
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
    let refresh = Wanted::default();
    let refresher = tokio::spawn(keep_fresh(pool.clone(), refresh.clone(), shutdown.clone()));
    let state = WebState {
        pool: pool.clone(),
        scheduler: Arc::new(Scheduler::new(pool.clone(), Holder::this_process())),
        ingest: Ingest::start(&pool, Default::default()),
        refresh,
    };
    let server = tokio::spawn(web::serve(listener, state, shutdown.clone()));
    // A first request opens the pool's connections; only the second one's plans count.
    http_get(addr, "/healthz").await;
    let mut passed = true;
    for Page { name, path, .. } in pages {
        let before = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let started = Instant::now();
        let status = http_get(addr, path).await.status;
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
            let seq: Vec<&str> = BIG_TABLES
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
    let _ = refresher.await;
    pool.close().await;
    passed
}

/// One statement's plan from the server log.
pub struct Plan {
    pub duration_ms: f64,
    /// The statement's first line, shortened.
    pub query: String,
    /// The plan tree.
    pub text: String,
}

/// The log appended since byte `from`.
pub fn read_from(path: &Path, from: u64) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&bytes[(from as usize).min(bytes.len())..]).into_owned()
}

/// auto_explain entries: `… LOG:  duration: 1.234 ms  plan:` then `Query Text: …`
/// and the plan, indented, until the next log line.
pub fn plans_in(log: &str) -> Vec<Plan> {
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
