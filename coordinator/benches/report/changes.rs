//! The pages whose figures are stored per point (`/compare`'s class cells,
//! `/fallback`'s list at software speed), viewed right after new results
//! changed that point, as during ingest: each round rewrites the latest
//! results of [`HOSTS_TOUCHED`] hosts at the pages' point in one statement
//! (an ingest batch's upsert of `result_points` fires the same triggers),
//! times the first view of each page, and then how long until a view shows
//! figures with the new results (the background refresh the first view asked for).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::Timing;
use crate::support::http::http_get;

/// Rounds of new results, each followed by a view of each page.
const ROUNDS: usize = 10;
/// Hosts whose AES-256-GCM results (both paths) at the point each round
/// rewrites: an ingest batch of 512 results.
const HOSTS_TOUCHED: i64 = 256;
/// How long a round waits at most for the refreshed figures.
const REFRESH_LIMIT: Duration = Duration::from_secs(60);

/// A page viewed after new results, and what marks its figures as stale.
const PAGES: [(&str, &str); 2] = [
    ("/compare new results", "/compare"),
    ("/fallback new results", "/fallback"),
];

/// The rows this adds to the bench's table: per page, the first view after
/// new results and the time until a view has them.
pub async fn time(pool: &PgPool, addr: SocketAddr) -> Vec<(String, Timing)> {
    let mut first: Vec<Vec<Duration>> = vec![Vec::new(); PAGES.len()];
    let mut fresh: Vec<Vec<Duration>> = vec![Vec::new(); PAGES.len()];
    let mut stale_views = vec![0; PAGES.len()];
    let mut errors: Vec<Option<String>> = vec![None; PAGES.len()];
    let mut bytes = vec![0; PAGES.len()];
    for round in 0..ROUNDS {
        touch(pool, round).await;
        let changed = Instant::now();
        for (i, (_, path)) in PAGES.iter().enumerate() {
            let started = Instant::now();
            let page = http_get(addr, path).await;
            first[i].push(started.elapsed());
            bytes[i] = page.body.len();
            if page.status != 200 && errors[i].is_none() {
                errors[i] = Some(format!("HTTP {}", page.status));
            }
            if is_stale(&page.body) {
                stale_views[i] += 1;
            }
        }
        for (i, (_, path)) in PAGES.iter().enumerate() {
            loop {
                let page = http_get(addr, path).await;
                if !is_stale(&page.body) {
                    fresh[i].push(changed.elapsed());
                    break;
                }
                if changed.elapsed() > REFRESH_LIMIT {
                    errors[i]
                        .get_or_insert_with(|| format!("still stale {} s after new results", REFRESH_LIMIT.as_secs()));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let mut rows = Vec::new();
    for (i, (name, _)) in PAGES.iter().enumerate() {
        println!(
            "  {name}: {} of {ROUNDS} first views showed stored figures marked stale",
            stale_views[i]
        );
        rows.push((name.to_string(), Timing::of(&mut first[i], bytes[i], errors[i].clone())));
        let refreshed = format!("{} refreshed", PAGES[i].1);
        rows.push((refreshed, Timing::of(&mut fresh[i], 0, errors[i].clone()).unjudged()));
    }
    rows
}

/// Whether a page says its stored figures miss newer results.
fn is_stale(body: &str) -> bool {
    body.contains("class=\"stale\"")
}

/// New latest results at the pages' point (16 KiB, 1 thread, encrypt,
/// static key) of AES-256-GCM on both paths, for [`HOSTS_TOUCHED`] hosts.
async fn touch(pool: &PgPool, round: usize) {
    sqlx::query(
        "UPDATE result_points SET throughput_mb_s = throughput_mb_s * (0.95 + random() * 0.1), \
             measured_at = now() \
         WHERE size_bytes = 16384 AND threads = 1 AND direction = 'encrypt' AND key_mode = 'static' \
           AND algorithm = 'aes-256-gcm' AND concurrency = 0 AND nonce = 'counter' \
           AND host_id IN (SELECT id FROM hosts ORDER BY id OFFSET $1 LIMIT $2)",
    )
    .bind(round as i64 * HOSTS_TOUCHED)
    .bind(HOSTS_TOUCHED)
    .execute(pool)
    .await
    .expect("rewriting latest results");
}
