//! Benchmark of the report (`deploy/bench-report.sh`, or
//! `cargo bench -p cipherfleet-coordinator --bench report`): p50 and p95 of
//! every page and its `/api/v1` table, answered by the real router, with
//! 100,000 and with 1,000,000 stored results on 10,000 hosts, and the time of
//! the whole-fleet findings pass at each size. Target: every p95 under
//! 300 ms at 1,000,000.
//!
//! A private PostgreSQL cluster in a temporary directory (stopped and removed
//! at the end, panics included) gets a simulated fleet and its results in
//! bulk ([`fleet`]), then `result_points` rebuilt and the findings derived
//! as the coordinator does after a campaign. The report is served on a real
//! socket (port 0) and timed from a plain HTTP client. Afterwards every page
//! is requested once more with its query plans logged ([`plans`]); a
//! sequential scan of a table that grows with the results fails the run.
//! Before that, the pages whose figures are stored per point are viewed
//! right after new results, as during ingest ([`changes`]).
//!
//! With `CIPHERFLEET_REPORT_HISTORY=1` (`deploy/bench-history.sh`) it runs
//! [`history`] instead: a year of hourly `quick` results ([`year`]) under
//! retention, with the same page timings.

#[path = "../support/mod.rs"]
mod support;

mod changes;
mod fleet;
mod history;
mod plans;
mod year;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cipherfleet_coordinator::analysis::scenarios::Scenario;
use cipherfleet_coordinator::findings;
use cipherfleet_coordinator::ingest::Ingest;
use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::report::refresh::{Wanted, keep_fresh};
use cipherfleet_coordinator::scheduler::Scheduler;
use cipherfleet_coordinator::store;
use cipherfleet_coordinator::store::leases::Holder;
use cipherfleet_coordinator::web::{self, WebState};
use sqlx::Executor;
use tokio_util::sync::CancellationToken;

use crate::fleet::HOSTS;
use crate::support::http::http_get;

/// Results stored for each measurement, cumulative (`CIPHERFLEET_REPORT_DATASETS`, a
/// comma-separated list, overrides them, e.g. `1000000` alone).
const DATASETS: [i64; 2] = [100_000, 1_000_000];
/// Timed requests per page and dataset (after [`WARMUP`] untimed ones),
/// fewer when a page is so slow that they would take over [`PAGE_BUDGET`].
const REQUESTS: usize = 20;
const WARMUP: usize = 2;
const PAGE_BUDGET: Duration = Duration::from_secs(10);
/// p95 a page may take at 1,000,000 results.
const TARGET: Duration = Duration::from_millis(300);
/// Longest the findings pass may run before the bench gives up on it.
const FINDINGS_LIMIT: Duration = Duration::from_secs(300);

/// A page or API table timed.
pub struct Page {
    pub name: &'static str,
    pub path: String,
}

/// The datasets to measure: [`DATASETS`], or `CIPHERFLEET_REPORT_DATASETS`.
fn datasets() -> Vec<i64> {
    let Ok(list) = std::env::var("CIPHERFLEET_REPORT_DATASETS") else {
        return DATASETS.to_vec();
    };
    let mut sizes: Vec<i64> = list
        .split(',')
        .map(|s| {
            s.trim()
                .replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("CIPHERFLEET_REPORT_DATASETS: '{s}' is not a whole number of results"))
        })
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    assert!(
        sizes.first().is_some_and(|&n| n > 0),
        "CIPHERFLEET_REPORT_DATASETS: needs at least one positive size"
    );
    sizes
}

/// Whether an environment switch is on (unset means `default`; `0`/`false`/`no` mean off).
fn switch(name: &str, default: bool) -> bool {
    std::env::var(name).map_or(default, |v| !matches!(v.as_str(), "0" | "false" | "no" | ""))
}

/// Every page and API table, `{host}` and `{campaign}` filled in; with
/// `CIPHERFLEET_REPORT_PAGES` set, only the pages whose name or path contains
/// one of its comma-separated parts (e.g. `compare,/modes`).
fn pages(host: i64, campaign: i64) -> Vec<Page> {
    let filter: Option<Vec<String>> = std::env::var("CIPHERFLEET_REPORT_PAGES").ok().map(|v| {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    all_pages(host, campaign)
        .into_iter()
        .filter(|p| {
            filter.as_ref().is_none_or(|parts| {
                parts
                    .iter()
                    .any(|f| p.name.contains(f.as_str()) || p.path.contains(f.as_str()))
            })
        })
        .collect()
}

fn all_pages(host: i64, campaign: i64) -> Vec<Page> {
    let scenario = Scenario::ALL[0].name();
    let aead = "algorithms=aes-256-gcm,aes-128-cbc,aes-128-cbc-hmac-sha256,chacha20-poly1305&metric=p99";
    [
        ("/", "/".to_string()),
        ("api host-groups", "/api/v1/host-groups".into()),
        ("/hosts", "/hosts".into()),
        ("/hosts page 100", "/hosts?page=100".into()),
        ("/hosts filtered", "/hosts?arch=aarch64&accel=accelerated".into()),
        ("api hosts", "/api/v1/hosts".into()),
        ("api hosts csv", "/api/v1/hosts?format=csv".into()),
        ("api hosts page 10", "/api/v1/hosts?page=10".into()),
        ("api hosts csv page 10", "/api/v1/hosts?page=10&format=csv".into()),
        ("/hosts/{id}", format!("/hosts/{host}")),
        ("api host results", format!("/api/v1/hosts/{host}/results")),
        ("api host changes", format!("/api/v1/hosts/{host}/changes")),
        ("api host findings", format!("/api/v1/hosts/{host}/findings")),
        ("/compare", "/compare".into()),
        ("/compare page 100", "/compare?page=100".into()),
        ("/compare classes", "/compare?rows=classes".into()),
        ("/compare AEAD+P99", format!("/compare?{aead}")),
        ("api compare", "/api/v1/compare".into()),
        ("api compare csv", "/api/v1/compare?format=csv".into()),
        ("/modes", "/modes".into()),
        ("/modes host", format!("/modes?host={host}")),
        ("api modes host", format!("/api/v1/modes?host={host}")),
        ("/fallback", "/fallback".into()),
        ("api fallback", "/api/v1/fallback".into()),
        ("api findings", "/api/v1/findings".into()),
        ("/capacity", "/capacity".into()),
        ("api capacity", "/api/v1/capacity".into()),
        ("/campaigns", "/campaigns".into()),
        ("api campaigns", "/api/v1/campaigns".into()),
        ("/campaigns/{id}", format!("/campaigns/{campaign}")),
        ("api campaign hosts", format!("/api/v1/campaigns/{campaign}/hosts")),
        ("api campaign fails", format!("/api/v1/campaigns/{campaign}/failures")),
        ("/scenarios", "/scenarios".into()),
        ("/scenarios/{name}", format!("/scenarios/{scenario}")),
        ("api scenario", format!("/api/v1/scenarios/{scenario}")),
        ("/metrics", "/metrics".into()),
    ]
    .into_iter()
    .map(|(name, path)| Page { name, path })
    .collect()
}

fn main() {
    // Errors only: the bulk load's statements are slow on purpose, and sqlx warns about each.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::ERROR)
        .with_writer(std::io::stderr)
        .init();
    let passed = if switch("CIPHERFLEET_REPORT_HISTORY", false) {
        support::with_private_cluster("bench-history", async |cluster, _| history::bench(cluster).await)
    } else {
        support::with_private_cluster("bench-report", async |cluster, _| bench(cluster).await)
    };
    if !passed {
        std::process::exit(1);
    }
}

/// Runs the whole benchmark; true when every target and plan check passed.
async fn bench(cluster: &PrivateCluster) -> bool {
    let pool = store::connect(cluster.url())
        .await
        .expect("connecting to the private cluster and migrating");
    let started = Instant::now();
    fleet::create(&pool, HOSTS).await;
    println!(
        "fleet: {HOSTS} simulated hosts in {} classes, created in {:.1} s",
        fleet::CLASS_COUNT,
        started.elapsed().as_secs_f64()
    );
    let first_host: i64 = sqlx::query_scalar("SELECT min(id) FROM hosts")
        .fetch_one(&pool)
        .await
        .unwrap();

    let server = Server::start(&pool).await;
    let addr = server.addr;

    let mut passed = true;
    let mut loaded = 0;
    // Per dataset: the timings of every page, by page.
    let mut timings: Vec<Vec<Timing>> = Vec::new();
    let mut pages_timed = Vec::new();
    let sizes = datasets();
    for &total in &sizes {
        let started = Instant::now();
        fleet::load_results(&pool, loaded, total).await;
        let load = started.elapsed();
        let started = Instant::now();
        refresh_points(&pool).await;
        let refresh = started.elapsed();
        loaded = total;
        let points: i64 = sqlx::query_scalar("SELECT count(*) FROM result_points")
            .fetch_one(&pool)
            .await
            .unwrap();
        println!(
            "\n{total} results: bulk load {:.1} s, result_points refresh + VACUUM ANALYZE {:.1} s ({points} points)",
            load.as_secs_f64(),
            refresh.as_secs_f64()
        );
        if switch("CIPHERFLEET_REPORT_FINDINGS", true) {
            passed &= time_findings(&pool).await;
        } else {
            println!("findings pass: skipped (CIPHERFLEET_REPORT_FINDINGS=0)");
        }
        // The latest campaign: 10 jobs on every host.
        let campaign: i64 = sqlx::query_scalar("SELECT max(id) FROM campaigns")
            .fetch_one(&pool)
            .await
            .unwrap();
        pages_timed = pages(first_host, campaign);
        let mut these = Vec::new();
        for page in &pages_timed {
            let timing = time_page(addr, &page.path).await;
            println!(
                "  {:<22} p50 {:>8.1} ms  p95 {:>8.1} ms  ({} requests)",
                page.name,
                ms(timing.p50),
                ms(timing.p95),
                timing.requests
            );
            these.push(timing);
        }
        timings.push(these);
    }

    // The pages with figures stored per point, right after new results (last dataset only).
    let after_changes = if switch("CIPHERFLEET_REPORT_CHANGES", true) {
        println!("\npages right after new results at {loaded} results:");
        changes::time(&pool, addr).await
    } else {
        println!("\npages after new results: skipped (CIPHERFLEET_REPORT_CHANGES=0)");
        Vec::new()
    };

    hold(cluster).await;
    // Query plans of every page at the last dataset.
    if switch("CIPHERFLEET_REPORT_PLANS", true) {
        println!("\nquery plans at {loaded} results (auto_explain, ANALYZE + BUFFERS):");
        passed &= plans::check(cluster, &pages_timed).await;
    } else {
        println!("\nquery plans: skipped (CIPHERFLEET_REPORT_PLANS=0)");
    }
    server.stop().await;

    // One table: every page at every dataset, the target judged at the last.
    println!("\nreport at {HOSTS} hosts (p50 / p95 in ms; KiB at the last dataset):");
    let mut head = format!("{:<22}", "page");
    for &total in &sizes {
        head.push_str(&format!(" {:>9} {:>9}", format!("p50 {}k", total / 1000), "p95"));
    }
    println!("{head} {:>8}  status", "KiB");
    for (i, page) in pages_timed.iter().enumerate() {
        let mut line = format!("{:<22}", page.name);
        for set in &timings {
            line.push_str(&format!(" {:>9.1} {:>9.1}", ms(set[i].p50), ms(set[i].p95)));
        }
        let last = &timings[timings.len() - 1][i];
        passed &= last.row(line);
    }
    // Measured at the last dataset only.
    for (name, timing) in &after_changes {
        let mut line = format!("{name:<22}");
        for _ in 1..sizes.len() {
            line.push_str(&format!(" {:>9} {:>9}", "–", "–"));
        }
        line.push_str(&format!(" {:>9.1} {:>9.1}", ms(timing.p50), ms(timing.p95)));
        passed &= timing.row(line);
    }
    println!("\n{}", if passed { "PASS" } else { "FAIL" });
    passed
}

/// `result_points` rebuilt after a bulk load, then what autovacuum does after
/// one: statistics, and the visibility map that lets counts scan an index only.
async fn refresh_points(pool: &sqlx::PgPool) {
    let mut tx = pool.begin().await.expect("transaction");
    tx.execute("SET LOCAL statement_timeout = 0").await.unwrap();
    store::points::refresh(&mut *tx)
        .await
        .expect("refreshing result_points");
    tx.commit().await.expect("committing result_points");
    let mut conn = pool.acquire().await.expect("a connection");
    conn.execute("SET statement_timeout = 0").await.unwrap();
    conn.execute("VACUUM ANALYZE").await.expect("VACUUM ANALYZE");
    conn.execute("RESET statement_timeout").await.unwrap();
}

/// The report served by the real router on a real socket (port 0), with the
/// background refresh of its stored figures.
struct Server {
    addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Server {
    async fn start(pool: &sqlx::PgPool) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("bound address");
        let shutdown = CancellationToken::new();
        let refresh = Wanted::default();
        let refresher = tokio::spawn(keep_fresh(pool.clone(), refresh.clone(), shutdown.clone()));
        let state = WebState {
            pool: pool.clone(),
            scheduler: Arc::new(Scheduler::new(pool.clone(), Holder::this_process())),
            ingest: Ingest::start(pool, Default::default()),
            refresh,
        };
        let server = tokio::spawn(web::serve(listener, state, shutdown.clone()));
        Server {
            addr,
            shutdown,
            tasks: vec![refresher, server],
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The whole-fleet findings pass, as the coordinator runs it at start and
/// after each campaign; prints its time and what it changed. False if it
/// failed or did not finish within [`FINDINGS_LIMIT`].
async fn time_findings(pool: &sqlx::PgPool) -> bool {
    let started = Instant::now();
    let outcome = tokio::time::timeout(FINDINGS_LIMIT, findings::derive_fleet(pool)).await;
    let took = started.elapsed().as_secs_f64();
    match outcome {
        Ok(Ok(o)) => {
            let open: i64 = sqlx::query_scalar("SELECT count(*) FROM findings WHERE status = 'open'")
                .fetch_one(pool)
                .await
                .unwrap();
            println!(
                "findings pass (whole fleet): {took:.1} s — {} opened, {} refreshed, {} resolved; {open} open",
                o.opened, o.refreshed, o.resolved
            );
            true
        }
        Ok(Err(e)) => {
            println!("findings pass (whole fleet): FAIL after {took:.1} s: {e}");
            false
        }
        Err(_) => {
            println!("findings pass (whole fleet): FAIL, not finished after {took:.0} s");
            false
        }
    }
}

/// With `CIPHERFLEET_REPORT_HOLD_SECONDS` set, waits that long with the
/// cluster up at the last dataset (its URL printed), to look at its queries
/// by hand (`psql`).
async fn hold(cluster: &PrivateCluster) {
    let Ok(seconds) = std::env::var("CIPHERFLEET_REPORT_HOLD_SECONDS") else {
        return;
    };
    let seconds: u64 = seconds
        .parse()
        .unwrap_or_else(|_| panic!("CIPHERFLEET_REPORT_HOLD_SECONDS: '{seconds}' is not a whole number"));
    println!("holding the cluster for {seconds} s: psql '{}'", cluster.url());
    tokio::time::sleep(Duration::from_secs(seconds)).await;
}

/// What timing one page gave.
pub struct Timing {
    p50: Duration,
    p95: Duration,
    requests: usize,
    bytes: usize,
    /// The first non-200 answer, if any.
    error: Option<String>,
    /// Held to [`TARGET`]: a page's answer. Not so how long a background
    /// refresh takes, which is shown beside them.
    judged: bool,
}

impl Timing {
    /// The percentiles of `times` (sorted here), a page's answer.
    pub fn of(times: &mut [Duration], bytes: usize, error: Option<String>) -> Timing {
        times.sort();
        let at = |q: f64| {
            let i = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len().max(1)) - 1;
            times.get(i).copied().unwrap_or_default()
        };
        Timing {
            p50: at(0.50),
            p95: at(0.95),
            requests: times.len(),
            bytes,
            error,
            judged: true,
        }
    }

    /// Not held to [`TARGET`].
    pub fn unjudged(self) -> Timing {
        Timing { judged: false, ..self }
    }

    /// Prints `line` with the size and the verdict; false if it failed.
    fn row(&self, line: String) -> bool {
        let (ok, verdict) = match &self.error {
            Some(e) => (false, format!("FAIL: {e}")),
            None if !self.judged => (true, "(background, not a page)".to_string()),
            None if self.p95 < TARGET => (true, "PASS".to_string()),
            None => (false, "FAIL (p95 ≥ 300 ms)".to_string()),
        };
        println!("{line} {:>8.0}  {verdict}", self.bytes as f64 / 1024.0);
        ok
    }
}

async fn time_page(addr: std::net::SocketAddr, path: &str) -> Timing {
    let mut times = Vec::with_capacity(REQUESTS);
    let mut bytes = 0;
    let mut error = None;
    let budget = Instant::now();
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
        if budget.elapsed() > PAGE_BUDGET && !times.is_empty() {
            break;
        }
    }
    Timing::of(&mut times, bytes, error)
}
