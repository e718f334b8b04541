//! Paging and the per-host tables kept on ingest, past one page: 130 hosts
//! with results stored in SQL (as a bulk load would), so the campaign page
//! and the fallback page have more rows than they show at once. Every page
//! put together must be the whole table, in the whole table's order, and
//! the fallback page's paged reading must agree with its whole-view reading
//! (the one a reason filter takes). The hosts and findings APIs page past
//! 1,000 rows, linking each page to the next.

use crate::app::{App, spawn_app};
use crate::html::between;

/// More than the campaign page's 100 hosts and two of the fallback page's 50 rows.
const HOSTS: i64 = 130;
/// Every this many hosts' accelerated request ran in software: at software speed.
const FELL_BACK_EVERY: i64 = 7;

/// `HOSTS` hosts with facts (AES-NI advertised), one finished campaign of
/// two jobs each (AES-128-GCM, 16 KiB, both paths) and their results; host
/// `i`'s accelerated path measures `1000 + 10 i` MB/s against 100 on the
/// software path, except every [`FELL_BACK_EVERY`]th, which ran software.
async fn load(app: &App) -> i64 {
    let pool = &app.pool;
    sqlx::query(
        "INSERT INTO hosts (name, labels) \
         SELECT format('pg-%s', lpad(i::text, 3, '0')), '{}' FROM generate_series(0, $1 - 1) i",
    )
    .bind(HOSTS)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO host_fact_snapshots (host_id, facts_hash, facts, arch, cpu_vendor, cpu_model_name, \
             logical_cores, memory_total_bytes, os_name, kernel_release, hypervisor_present, \
             features_advertised, features_usable, build_flavour, agent_version) \
         SELECT id, sha256(convert_to(name, 'UTF8')), jsonb_build_object('hostname', name), 'x86_64', \
             'GenuineIntel', 'Xeon', 8, 1073741824, 'Linux', '6.1.0', false, \
             ARRAY['aes', 'pclmulqdq', 'avx', 'avx2'], ARRAY['aes', 'pclmulqdq', 'avx', 'avx2'], 'accelerated', '0.1.0' \
         FROM hosts WHERE name LIKE 'pg-%'",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE hosts h SET current_snapshot_id = s.id FROM host_fact_snapshots s WHERE s.host_id = h.id")
        .execute(pool)
        .await
        .unwrap();
    let campaign: i64 = sqlx::query_scalar(
        "INSERT INTO campaigns (name, suite, matrix, started_by, status, created_at, finished_at) \
         VALUES ('paging', 'matrix', '{}', 'tests', 'finished', now() - interval '3 hours', \
             now() - interval '2 hours') RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
             key_mode, path, time_limit_seconds, status, assigned_at, started_at, finished_at) \
         SELECT $1, h.id, (row_number() OVER (ORDER BY h.name, p.path))::int - 1, '{}', 'aes-128-gcm', 'encrypt', \
             16384, 1, 'static', p.path, 60, 'done', now(), now(), now() \
         FROM hosts h CROSS JOIN (VALUES ('accelerated'), ('software')) p(path) WHERE h.name LIKE 'pg-%'",
    )
    .bind(campaign)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO results (job_id, host_id, snapshot_id, algorithm, direction, size_bytes, threads, \
             concurrency, key_mode, path, path_used, throughput_mb_s, ops_per_s, latency_p50_ns, latency_p90_ns, \
             latency_p99_ns, latency_p999_ns, latency_max_ns, latency_method, batch_ops, cv, samples, \
             cpu_user_seconds, cpu_sys_seconds, cpu_utilization, key_setup_ns, elapsed_seconds, measurement) \
         SELECT j.id, j.host_id, h.current_snapshot_id, j.algorithm, j.direction, j.size_bytes, j.threads, NULL, \
             j.key_mode, j.path, m.path_used, m.mb_s, m.mb_s * 1e6 / 16384, 1000, 1100, 1400, 2000, 3000, 'per-op', \
             1, 0.01, 20, 1, 0.01, 0.99, 300, 1, '{}' \
         FROM jobs j JOIN hosts h ON h.id = j.host_id \
         CROSS JOIN LATERAL (SELECT substr(h.name, 4)::int AS i) n \
         CROSS JOIN LATERAL (SELECT \
             CASE WHEN j.path = 'accelerated' AND n.i % $2 <> 0 THEN 'accelerated' ELSE 'software' END AS path_used, \
             CASE WHEN j.path = 'software' THEN 100.0 WHEN n.i % $2 = 0 THEN 101.0 + n.i \
                  ELSE 1000.0 + 10 * n.i END AS mb_s) m \
         WHERE j.campaign_id = $1",
    )
    .bind(campaign)
    .bind(FELL_BACK_EVERY)
    .execute(pool)
    .await
    .unwrap();
    // What a bulk load does after inserting results directly.
    sqlx::query("SELECT refresh_result_points()")
        .execute(pool)
        .await
        .unwrap();
    // The campaign ended hours ago, so no findings pass follows it; one that
    // ran at start over part of the load must not explain rows either.
    sqlx::query("DELETE FROM findings").execute(pool).await.unwrap();
    campaign
}

/// The `data-host` of every `<tr data-host="…"` in `html`, in order.
fn hosts_in(html: &str) -> Vec<String> {
    html.split("<tr data-host=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].to_string())
        .collect()
}

/// The names of the hosts with an open finding.
async fn open_finding_hosts(app: &App) -> std::collections::BTreeSet<String> {
    sqlx::query_scalar(
        "SELECT DISTINCT h.name FROM findings f JOIN hosts h ON h.id = f.host_id WHERE f.status = 'open'",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// `read()`, taken between two equal readings of the hosts with open findings (a few tries),
/// with those hosts.
async fn stable_reading<T>(app: &App, read: impl AsyncFn() -> T) -> (T, std::collections::BTreeSet<String>) {
    for _ in 0..10 {
        let before = open_finding_hosts(app).await;
        let value = read().await;
        if open_finding_hosts(app).await == before {
            return (value, before);
        }
    }
    panic!("the open findings kept changing while the fallback page was read");
}

async fn body(app: &App, path: &str) -> String {
    let page = app.get(path).await;
    assert_eq!(page.status, 200, "{path}: {}", page.body);
    page.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_and_fallback_pages_put_together_are_the_whole_table() {
    let app = spawn_app().await;
    let campaign = load(&app).await;
    let names: Vec<String> = (0..HOSTS).map(|i| format!("pg-{i:03}")).collect();

    // The campaign page: 100 hosts, then the other 30, by name; the counts kept on ingest.
    let first = body(&app, &format!("/campaigns/{campaign}")).await;
    let second = body(&app, &format!("/campaigns/{campaign}?page=2")).await;
    assert!(first.contains("showing 1–100 of 130"), "{first}");
    assert!(second.contains("showing 101–130 of 130"), "{second}");
    let listed: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|p| {
            p.split("href=\"/hosts/")
                .skip(1)
                .filter_map(|s| {
                    let name = between(s, "\">", "</a>");
                    name.starts_with("pg-").then(|| name.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(listed, names);
    // Its API table pages the same hosts the same way, each page linking the next.
    let hosts_api = format!("/api/v1/campaigns/{campaign}/hosts");
    let first = app.get(&hosts_api).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(
        first.header("link"),
        Some(format!("<{hosts_api}?page=2>; rel=\"next\"").as_str())
    );
    let last = app.get(&format!("{hosts_api}?page=2")).await;
    assert_eq!(last.header("link"), None);
    let api: Vec<serde_json::Value> = [&first.body, &last.body]
        .iter()
        .flat_map(|b| serde_json::from_str::<Vec<serde_json::Value>>(b).unwrap())
        .collect();
    let api_names: Vec<&str> = api.iter().map(|h| h["host_name"].as_str().unwrap()).collect();
    assert_eq!(api_names, names);
    assert!(api.iter().all(|h| h["done"] == 2 && h["total"] == 2), "{api:?}");
    let csv = app.get(&format!("{hosts_api}?format=csv")).await;
    assert_eq!(
        csv.header("link"),
        Some(format!("<{hosts_api}?format=csv&page=2>; rel=\"next\"").as_str())
    );
    let campaigns: Vec<serde_json::Value> = serde_json::from_str(&body(&app, "/api/v1/campaigns").await).unwrap();
    let row = campaigns.iter().find(|c| c["id"] == campaign).expect("listed");
    assert_eq!(
        (row["hosts"].as_i64(), row["done"].as_i64()),
        (Some(HOSTS), Some(2 * HOSTS))
    );

    // The fallback page: its rows a page at a time (the paged reading) and
    // the reason filter "no open finding" (the whole-view reading; no finding
    // is open) list the same rows in the same order, worst ratio first.
    let paged: Vec<String> = [
        body(&app, "/fallback").await,
        body(&app, "/fallback?page=2").await,
        body(&app, "/fallback?page=3").await,
    ]
    .iter()
    .flat_map(|p| hosts_in(between(p, "<section id=\"paths\">", "</section>")))
    .collect();
    // A findings pass of the coordinator's own (the leader's sweeps) may open
    // findings for the hosts that fell back after the load cleared them; the
    // whole-view reading then leaves exactly those hosts out. Read it between
    // two equal readings of which hosts have open findings.
    let (whole, open) = stable_reading(&app, async || {
        [
            body(&app, "/fallback?reason=none").await,
            body(&app, "/fallback?reason=none&page=2").await,
            body(&app, "/fallback?reason=none&page=3").await,
        ]
        .iter()
        .flat_map(|p| hosts_in(between(p, "<section id=\"paths\">", "</section>")))
        .collect::<Vec<String>>()
    })
    .await;
    assert_eq!(paged.len(), HOSTS as usize, "{paged:?}");
    let unexplained: Vec<String> = paged.iter().filter(|h| !open.contains(*h)).cloned().collect();
    assert_eq!(unexplained, whole);
    // Fell back first (ratio about 1, by host), then the rest by ratio.
    let fell_back: Vec<String> = (0..HOSTS)
        .filter(|i| i % FELL_BACK_EVERY == 0)
        .map(|i| format!("pg-{i:03}"))
        .collect();
    assert_eq!(paged[..fell_back.len()], fell_back[..]);
    let mut rest: Vec<String> = names.iter().filter(|n| !fell_back.contains(n)).cloned().collect();
    rest.sort();
    assert_eq!(paged[fell_back.len()..], rest[..]);
    let api: Vec<serde_json::Value> = serde_json::from_str(&body(&app, "/api/v1/fallback").await).unwrap();
    let api_hosts: Vec<&str> = api.iter().map(|r| r["host_name"].as_str().unwrap()).collect();
    assert_eq!(api_hosts, paged);
    let api_slow = api.iter().filter(|r| r["at_software_speed"] == true).count();
    assert_eq!(api_slow, fell_back.len());

    // The hosts at software speed: the same in both readings, worst first.
    let slow = |page: &str| hosts_in(between(page, "<section id=\"software-speed\">", "</section>"));
    let paged_slow = slow(&body(&app, "/fallback").await);
    let (whole_slow, open) = stable_reading(&app, async || slow(&body(&app, "/fallback?reason=none").await)).await;
    assert_eq!(paged_slow, fell_back);
    let unexplained_slow: Vec<String> = fell_back.iter().filter(|h| !open.contains(*h)).cloned().collect();
    assert_eq!(whole_slow, unexplained_slow);
}

/// `/api/v1/hosts` past one page of 1,000 rows: each page links the next (and
/// keeps the filters and the format), the last links none, and the pages put
/// together are every matching host once, by name.
#[tokio::test]
async fn the_hosts_api_pages_put_together_are_every_host_once() {
    const MANY: i64 = 1234;
    let app = spawn_app().await;
    sqlx::query(
        "INSERT INTO hosts (name, labels) \
         SELECT format('api-%s', lpad(i::text, 4, '0')), \
             jsonb_build_object('rack', CASE WHEN i < 1100 THEN 'big' ELSE 'small' END) \
         FROM generate_series(0, $1 - 1) i",
    )
    .bind(MANY)
    .execute(&app.pool)
    .await
    .unwrap();
    let names = |body: &str| -> Vec<String> {
        let rows: Vec<serde_json::Value> = serde_json::from_str(body).unwrap();
        rows.iter().map(|r| r["name"].as_str().unwrap().to_string()).collect()
    };
    let first = app.get("/api/v1/hosts").await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.header("link"), Some("</api/v1/hosts?page=2>; rel=\"next\""));
    let second = app.get("/api/v1/hosts?page=2").await;
    assert_eq!(second.header("link"), None, "the last page links no further");
    let mut all = names(&first.body);
    assert_eq!(all.len(), 1000);
    all.extend(names(&second.body));
    let expected: Vec<String> = (0..MANY).map(|i| format!("api-{i:04}")).collect();
    assert_eq!(all, expected);

    // A filter and CSV travel with the link; the filtered pages are that rack's hosts.
    let csv = app.get("/api/v1/hosts?label=rack%3Dbig&format=csv").await;
    assert_eq!(csv.body.lines().count(), 1 + 1000, "a header and one line a host");
    let next = csv.header("link").expect("a link to the rest of rack=big").to_string();
    assert!(
        next.contains("label=rack%3Dbig") && next.contains("format=csv"),
        "{next}"
    );
    let rest = app.get(next.trim_start_matches('<').split('>').next().unwrap()).await;
    assert_eq!(rest.body.lines().count(), 1 + 100, "{}", rest.body);
    assert!(
        rest.body.lines().skip(1).all(|l| l.contains("rack=big")),
        "{}",
        rest.body
    );
    let small = app.get("/api/v1/hosts?label=rack%3Dsmall").await;
    assert_eq!(names(&small.body), expected[1100..]);
}

#[tokio::test]
async fn the_findings_api_pages_put_together_are_every_finding_once() {
    const MANY: i64 = 1234;
    let app = spawn_app().await;
    // One host, a finding per subject: more than one page of them, a few resolved.
    let host: i64 = sqlx::query_scalar("INSERT INTO hosts (name, labels) VALUES ('findings-host', '{}') RETURNING id")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO findings (host_id, reason, subject, severity, summary, status, resolved_at) \
         SELECT $1, 'cpu-lacks', format('f-%s', lpad(i::text, 4, '0')), 'warning', 'lacks it', \
             CASE WHEN i % 100 = 0 THEN 'resolved' ELSE 'open' END, CASE WHEN i % 100 = 0 THEN now() END \
         FROM generate_series(0, $2 - 1) i",
    )
    .bind(host)
    .bind(MANY)
    .execute(&app.pool)
    .await
    .unwrap();
    let subjects = |body: &str| -> Vec<String> {
        let rows: Vec<serde_json::Value> = serde_json::from_str(body).unwrap();
        rows.iter()
            .map(|r| r["subject"].as_str().unwrap().to_string())
            .collect()
    };
    let all_of = |resolved: bool| -> Vec<String> {
        (0..MANY)
            .filter(|i| (i % 100 == 0) == resolved)
            .map(|i| format!("f-{i:04}"))
            .collect()
    };
    // Open ones (the default): two pages, linked.
    let first = app.get("/api/v1/findings").await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.header("link"), Some("</api/v1/findings?page=2>; rel=\"next\""));
    let second = app.get("/api/v1/findings?page=2").await;
    assert_eq!(second.header("link"), None, "the last page links no further");
    let mut open = subjects(&first.body);
    assert_eq!(open.len(), 1000);
    open.extend(subjects(&second.body));
    assert_eq!(open, all_of(false));
    // All, as CSV: the status and the format travel with the link.
    let csv = app.get("/api/v1/findings?status=all&format=csv").await;
    assert_eq!(csv.body.lines().count(), 1 + 1000, "a header and one line a finding");
    let next = csv.header("link").expect("a link to the rest").to_string();
    assert!(next.contains("status=all") && next.contains("format=csv"), "{next}");
    let rest = app.get(next.trim_start_matches('<').split('>').next().unwrap()).await;
    assert_eq!(rest.body.lines().count(), 1 + 234, "{}", rest.body);
    let resolved = app.get("/api/v1/findings?status=resolved").await;
    assert_eq!(subjects(&resolved.body), all_of(true));
    assert_eq!(resolved.header("link"), None);
}
