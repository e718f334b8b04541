//! History mode (`deploy/bench-history.sh`, `CIPHERFLEET_REPORT_HISTORY=1`):
//! issue 34's "show it". A year of hourly `quick` results on simulated hosts
//! ([`year`]), then the database's size, a retention pass at the default
//! windows (timed, and the size again, after a plain `VACUUM` and after a
//! `VACUUM FULL`), every page's p50/p95 before and after it (the target, a
//! p95 under 300 ms, judged after), and a second pass that must fold
//! nothing. Figures per host and year are printed so that a fleet's can be
//! computed: 1,000 hosts need a bigger machine than the defaults fit
//! (docs/performance.md, "A year of history under retention").

use std::time::{Duration, Instant};

use chrono::{DateTime, DurationRound, Utc};
use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::retention::{self, Retention};
use cipherfleet_coordinator::store::{self, STATEMENT_TIMEOUT};
use sqlx::{Executor, PgPool};
use tokio_util::sync::CancellationToken;

use crate::year::{self, Scale};
use crate::{Page, Timing, ms, plans, switch, time_page};

/// Hosts and days unless `CIPHERFLEET_HISTORY_HOSTS` / `_DAYS` say otherwise:
/// what fits a 2-core machine with 10 GB of disk to spare (about 0.7 GB of
/// database and half a minute of generation a host).
const HOSTS: i64 = 8;
const DAYS: i64 = 365;
/// The command that measures issue 34's fleet, for a machine with the disk for it.
const FULL_RUN: &str = "CIPHERFLEET_HISTORY_HOSTS=1000 deploy/bench-history.sh";

/// A positive count from the environment, or `default`.
fn count(name: &str, default: i64) -> i64 {
    std::env::var(name).map_or(default, |v| {
        v.replace('_', "")
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("{name}={v:?}: not a positive whole number"))
    })
}

/// Sizes in bytes and row counts of what grows with the results.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    database: i64,
    results: i64,
    results_heap: i64,
    results_toast: i64,
    results_indexes: i64,
    jobs: i64,
    /// The job counts per campaign and host that outlive the jobs.
    job_counts: i64,
    rollups: i64,
    points: i64,
    result_rows: i64,
    job_rows: i64,
    rollup_rows: i64,
}

impl Sizes {
    async fn of(pool: &PgPool) -> Sizes {
        let row: (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(
            // `results` is partitioned (migrations/0040): its sizes are its partitions'.
            "WITH parts AS (SELECT p.relid FROM pg_partition_tree('results') p WHERE p.isleaf) \
             SELECT pg_database_size(current_database()), \
                 (SELECT sum(pg_total_relation_size(relid))::bigint FROM parts), \
                 (SELECT sum(pg_relation_size(relid))::bigint FROM parts), \
                 (SELECT coalesce(sum(pg_total_relation_size(c.reltoastrelid)), 0)::bigint \
                  FROM parts JOIN pg_class c ON c.oid = parts.relid WHERE c.reltoastrelid <> 0), \
                 (SELECT sum(pg_indexes_size(relid))::bigint FROM parts), pg_total_relation_size('jobs'), \
                 pg_total_relation_size('result_rollups'), pg_total_relation_size('result_points'), \
                 (SELECT count(*) FROM results), (SELECT count(*) FROM jobs), (SELECT count(*) FROM result_rollups), \
                 pg_total_relation_size('campaign_host_jobs')",
        )
        .fetch_one(pool)
        .await
        .expect("measuring the database");
        Sizes {
            database: row.0,
            results: row.1,
            results_heap: row.2,
            results_toast: row.3,
            results_indexes: row.4,
            jobs: row.5,
            rollups: row.6,
            points: row.7,
            result_rows: row.8,
            job_rows: row.9,
            rollup_rows: row.10,
            job_counts: row.11,
        }
    }

    fn print(&self, when: &str) {
        println!(
            "database size {when}: {} (pg_database_size)\n  \
             results        {:>10}  ({} rows; heap {}, TOAST {}, indexes {})\n  \
             result_rollups {:>10}  ({} rows)\n  \
             result_points  {:>10}\n  \
             jobs           {:>10}  ({} rows)\n  \
             campaign_host_jobs {:>6}  (the counts per campaign and host, kept)",
            mib(self.database),
            mib(self.results),
            self.result_rows,
            mib(self.results_heap),
            mib(self.results_toast),
            mib(self.results_indexes),
            mib(self.rollups),
            self.rollup_rows,
            mib(self.points),
            mib(self.jobs),
            self.job_rows,
            mib(self.job_counts),
        );
    }
}

fn mib(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// Runs history mode; true when every page met the target after retention
/// and the second pass folded nothing.
pub async fn bench(cluster: &PrivateCluster) -> bool {
    let scale = Scale {
        hosts: count("CIPHERFLEET_HISTORY_HOSTS", HOSTS),
        days: count("CIPHERFLEET_HISTORY_DAYS", DAYS),
    };
    let points = year::quick_points().len() as i64;
    let expected = scale.hosts * scale.days * 24 * points;
    println!(
        "history: {} hosts × {} days × 24 hourly `quick` campaigns × {points} points = {expected} results \
         (CIPHERFLEET_HISTORY_HOSTS / CIPHERFLEET_HISTORY_DAYS; issue 34's 1,000 hosts × 365 days is {} results \
         and needs a bigger machine: {FULL_RUN})",
        scale.hosts,
        scale.days,
        1000 * 365 * 24 * points
    );
    let pool = store::connect(cluster.url())
        .await
        .expect("connecting to the private cluster and migrating");
    // The history ends at the last whole hour; retention runs at that moment.
    let now: DateTime<Utc> = Utc::now().duration_trunc(chrono::Duration::hours(1)).unwrap();
    let started = Instant::now();
    year::generate(&pool, scale, now).await;
    let generated = started.elapsed();
    let started = Instant::now();
    crate::refresh_points(&pool).await;
    println!(
        "generated in {:.0} s; result_points refresh + VACUUM ANALYZE {:.1} s",
        generated.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let raw = Sizes::of(&pool).await;
    assert_eq!(raw.result_rows, expected, "results generated");
    raw.print("before retention");
    let measurement: (f64, f64) = sqlx::query_as(
        "SELECT avg(octet_length(measurement::text))::float8, avg(pg_column_size(measurement))::float8 \
         FROM (SELECT measurement FROM results TABLESAMPLE SYSTEM (1)) r",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "  a measurement document: {:.0} bytes of JSON text, {:.0} bytes stored (jsonb, lz4)",
        measurement.0, measurement.1
    );

    let server = crate::Server::start(&pool).await;
    let host: i64 = sqlx::query_scalar("SELECT min(id) FROM hosts")
        .fetch_one(&pool)
        .await
        .unwrap();
    let campaign: i64 = sqlx::query_scalar("SELECT max(id) FROM campaigns")
        .fetch_one(&pool)
        .await
        .unwrap();
    let pages = pages(host, campaign);
    println!("\npages with the whole year raw (not judged):");
    let before = time_all(server.addr, &pages).await;

    if switch("CIPHERFLEET_REPORT_PLANS", true) {
        explain_fold(cluster, &pool, now).await;
    }
    println!("\nretention pass at {now} (Retention::default(): raw 90 days, daily 730 days):");
    let started = Instant::now();
    let pass = retention::pass(&pool, &Retention::default(), now, &CancellationToken::new())
        .await
        .expect("the retention pass");
    let took = started.elapsed();
    // Weeks fold whole, partitions dropped; days, of what was stored before them.
    let days = pass.days + 7 * pass.weeks;
    println!(
        "  {} weeks (partitions dropped) and {} days folded: {} results into {} daily summaries; the jobs of {} \
         campaigns, {} jobs; {} months ({} daily summaries) — {:.1} s ({:.0} ms a day, {:.1} µs a result)",
        pass.weeks,
        pass.days,
        pass.results,
        pass.summaries,
        pass.campaigns,
        pass.jobs,
        pass.months,
        pass.daily_summaries,
        took.as_secs_f64(),
        ms(took) / f64::from(days.max(1)),
        took.as_secs_f64() * 1e6 / pass.results.max(1) as f64
    );
    // A day's statement at 1,000 hosts: is it inside the pool's statement timeout?
    let per_day_at_1000 = took.as_secs_f64() / f64::from(days.max(1)) * 1000.0 / scale.hosts as f64;
    println!(
        "  extrapolated, one day's fold statement at 1,000 hosts: {per_day_at_1000:.1} s \
         (the pool's statement_timeout is {} s)",
        STATEMENT_TIMEOUT.as_secs()
    );
    let folded = Sizes::of(&pool).await;
    folded.print("after retention");
    vacuum(&pool, "VACUUM ANALYZE").await;
    let vacuumed = Sizes::of(&pool).await;
    vacuumed.print("after VACUUM ANALYZE (plain VACUUM makes the room reusable, it does not shrink the files)");

    println!("\npages after retention:");
    let after = time_all(server.addr, &pages).await;

    let started = Instant::now();
    let second = retention::pass(&pool, &Retention::default(), now, &CancellationToken::new())
        .await
        .expect("the second retention pass");
    let nothing = second == retention::Pass::default();
    println!(
        "\nsecond retention pass: {} weeks, {} days, {} results, {} campaigns' jobs, {} months folded in {:.1} ms — {}",
        second.weeks,
        second.days,
        second.results,
        second.campaigns,
        second.months,
        ms(started.elapsed()),
        if nothing {
            "nothing to fold, PASS"
        } else {
            "FAIL: it folded again"
        }
    );
    crate::hold(cluster).await;
    server.stop().await;

    // The compacted size: what the year occupies once new results have reused the room.
    let compact = if switch("CIPHERFLEET_HISTORY_VACUUM_FULL", true) {
        let started = Instant::now();
        vacuum(&pool, "VACUUM FULL results, jobs").await;
        let compact = Sizes::of(&pool).await;
        compact.print(&format!(
            "after VACUUM FULL results, jobs ({:.0} s; rewrites the tables, locking them meanwhile)",
            started.elapsed().as_secs_f64()
        ));
        Some(compact)
    } else {
        None
    };
    per_host_year(scale, points, &raw, compact.as_ref().unwrap_or(&vacuumed));

    let mut passed = nothing;
    println!(
        "\nreport at {} hosts, {} days hourly (p50 / p95 in ms; KiB after retention):",
        scale.hosts, scale.days
    );
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>8}  status",
        "page", "p50 raw", "p95", "p50 kept", "p95", "KiB"
    );
    for ((page, b), a) in pages.iter().zip(&before).zip(&after) {
        let line = format!(
            "{:<22} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            page.name,
            ms(b.p50),
            ms(b.p95),
            ms(a.p50),
            ms(a.p95)
        );
        passed &= a.row(line);
    }
    println!("\n{}", if passed { "PASS" } else { "FAIL" });
    passed
}

/// Every page of the report bench, with this mode's history pages first.
fn pages(host: i64, campaign: i64) -> Vec<Page> {
    let mut pages = vec![
        Page {
            name: "api host history",
            path: format!("/api/v1/hosts/{host}/history"),
        },
        Page {
            name: "api host history csv",
            path: format!("/api/v1/hosts/{host}/history?format=csv"),
        },
    ];
    pages.extend(crate::pages(host, campaign));
    pages
}

async fn time_all(addr: std::net::SocketAddr, pages: &[Page]) -> Vec<Timing> {
    let mut timings = Vec::new();
    for page in pages {
        let t = time_page(addr, &page.path).await;
        println!(
            "  {:<22} p50 {:>8.1} ms  p95 {:>8.1} ms  ({} requests)",
            page.name,
            ms(t.p50),
            ms(t.p95),
            t.requests
        );
        timings.push(t);
    }
    timings
}

/// Runs `sql` with no statement timeout.
async fn vacuum(pool: &PgPool, sql: &'static str) {
    let mut conn = pool.acquire().await.expect("a connection");
    conn.execute("SET statement_timeout = 0").await.unwrap();
    conn.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    conn.execute("RESET statement_timeout").await.unwrap();
}

/// The plan of the fold of the oldest day (EXPLAIN ANALYZE via auto_explain,
/// in a transaction rolled back, so the pass still finds that day).
async fn explain_fold(cluster: &PrivateCluster, pool: &PgPool, now: DateTime<Utc>) {
    let Some(before) = Retention::default().raw_before(now) else {
        return;
    };
    let weeks_from =
        store::partitions::weeks_from(&store::partitions::raw(pool).await.expect("the partitions")).unwrap_or(before);
    let Some(day) = store::rollups::oldest_day(pool, before, weeks_from)
        .await
        .expect("the oldest day")
    else {
        return;
    };
    let log_path = cluster.data_dir().join("server.log");
    let from = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let mut tx = pool.begin().await.expect("transaction");
    tx.execute(
        "LOAD 'auto_explain'; SET LOCAL auto_explain.log_min_duration = 0; \
         SET LOCAL auto_explain.log_analyze = on; SET LOCAL auto_explain.log_buffers = on",
    )
    .await
    .expect("auto_explain");
    let started = Instant::now();
    let folded = store::rollups::fold_day(&mut tx, day, weeks_from)
        .await
        .expect("folding a day");
    let took = started.elapsed();
    tx.rollback().await.expect("rolling back");
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!(
        "\nthe fold of one day ({}, {} results into {} summaries, {:.1} ms with plan logging, rolled back):",
        day.date_naive(),
        folded.removed,
        folded.summaries,
        ms(took)
    );
    for plan in plans::plans_in(&plans::read_from(&log_path, from)) {
        println!("-- {:.2} ms  {}", plan.duration_ms, plan.query);
        for line in plan.text.lines().filter(|l| !l.trim().is_empty()) {
            println!("   {line}");
        }
    }
}

/// Figures per host and year, from which a fleet's follow (multiply by its
/// hosts): measured here, extrapolated to 1,000 hosts, and labelled so.
fn per_host_year(scale: Scale, points: i64, raw: &Sizes, kept: &Sizes) {
    let per = |bytes: i64| bytes as f64 / scale.hosts as f64 * 365.0 / scale.days as f64;
    let results = points * 24 * 365;
    let raw_bytes = per(raw.results + raw.jobs + raw.job_counts + raw.rollups);
    let kept_bytes = per(kept.results + kept.jobs + kept.job_counts + kept.rollups);
    println!(
        "\nper host and year (measured at {} hosts × {} days, scaled to 365 days):\n  \
         results per host per year: {results} ({points} points × 8,760 hours)\n  \
         raw (keep everything): {:.1} MiB (results {:.1}, jobs {:.1}; {:.0} bytes a result with its job)\n  \
         after retention at one year: {:.1} MiB (results {:.1}, daily summaries {:.1}, jobs {:.1}, \
         job counts {:.1})",
        scale.hosts,
        scale.days,
        raw_bytes / (1 << 20) as f64,
        per(raw.results) / (1 << 20) as f64,
        per(raw.jobs) / (1 << 20) as f64,
        raw_bytes / results as f64,
        kept_bytes / (1 << 20) as f64,
        per(kept.results) / (1 << 20) as f64,
        per(kept.rollups) / (1 << 20) as f64,
        per(kept.jobs) / (1 << 20) as f64,
        per(kept.job_counts) / (1 << 20) as f64,
    );
    if scale.days != 365 {
        println!("  (\"after retention at one year\" holds at CIPHERFLEET_HISTORY_DAYS=365 only)");
    }
    println!(
        "extrapolated to 1,000 hosts (× 1,000, not measured): raw {:.1} GiB a year; after retention {:.1} GiB \
         at one year, of which the job counts {:.1} GiB (a row per campaign and host, kept until \
         --keep-daily, then one row a campaign)",
        raw_bytes * 1000.0 / (1u64 << 30) as f64,
        kept_bytes * 1000.0 / (1u64 << 30) as f64,
        per(kept.job_counts) * 1000.0 / (1u64 << 30) as f64,
    );
}
