//! Retention through the real coordinator (`serve --keep-raw`): a result
//! older than the raw window is folded into its day's summary by the pass a
//! coordinator runs at start, while the latest result of its point stays
//! raw; the host page then draws the whole history and says its resolution,
//! and `/api/v1/hosts/{id}/history` lists both days. The jobs of the campaign
//! that ended before the raw window go too; it keeps its counts, for all its
//! hosts together once it is past the daily window.

use std::time::Duration;

use serde_json::Value;

use crate::app::{matrix, spawn_app_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_past_keep_raw_fold_into_daily_summaries_the_host_page_draws() {
    let mut app = spawn_app_with(&["--verify-on-change=false", "--keep-raw", "1d", "--keep-daily", "30d"]).await;
    app.spawn_agent("e2e-retention", &[]);
    app.wait_online(1).await;
    let key = || matrix(&["aes-256-gcm"], &[16 * 1024], 0.1);
    let before = app.run_campaign("before", key()).await;
    let after = app.run_campaign("after", key()).await;
    // The first result three days old: past --keep-raw, and not the latest of its point.
    sqlx::query(
        "UPDATE results SET created_at = now() - interval '3 days' \
         WHERE id = (SELECT min(id) FROM results)",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let host: i64 = sqlx::query_scalar("SELECT id FROM hosts WHERE name = 'e2e-retention'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let first: i64 = before.parse().unwrap();
    // The first campaign ended 40 days ago, past --keep-daily, with a failed job besides.
    sqlx::query(
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
             key_mode, path, provider, time_limit_seconds, status, finished_at, error) \
         VALUES ($1, $2, 99, '{}', 'aes-256-gcm', 'encrypt', 64, 1, 'static', 'software', 'rustcrypto', 60, \
             'failed', now(), 'the worker crashed')",
    )
    .bind(first)
    .bind(host)
    .execute(&app.pool)
    .await
    .unwrap();
    for sql in [
        "UPDATE campaigns SET finished_at = now() - interval '40 days' WHERE id = $1",
        "UPDATE jobs SET finished_at = now() - interval '40 days' WHERE campaign_id = $1",
    ] {
        sqlx::query(sql).bind(first).execute(&app.pool).await.unwrap();
    }

    // A restarted coordinator runs a retention pass at start.
    let addr = app.grpc;
    app.stop_coordinator(Duration::from_secs(10));
    app.start_coordinator(addr);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let raw: i64 = sqlx::query_scalar("SELECT count(*) FROM results")
            .fetch_one(&app.pool)
            .await
            .unwrap();
        if raw == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{raw} raw results a minute after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let latest: i64 =
        sqlx::query_scalar("SELECT count(*) FROM result_points WHERE result_id IN (SELECT id FROM results)")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(latest, 1, "the latest result of the point stays raw");
    // The pass goes on to the old campaign's jobs: its result is folded and
    // its failure is old, so none is left; its counts stay, for its one host
    // together as it is past --keep-daily.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while sqlx::query_scalar::<_, i64>(
        "SELECT (SELECT count(*) FROM jobs WHERE campaign_id = $1) \
             + (SELECT count(*) FROM campaign_host_jobs WHERE campaign_id = $1 AND host_id <> 0)",
    )
    .bind(first)
    .fetch_one(&app.pool)
    .await
    .unwrap()
        > 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old campaign's jobs, or its counts per host, a minute after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let campaign = app.get(&format!("/campaigns/{before}")).await;
    assert_eq!(campaign.status, 200);
    assert!(
        campaign
            .body
            .contains("1 job failed; the errors went with the campaign's jobs when its results aged past"),
        "the campaign page says its failures were folded: {}",
        campaign.body
    );
    assert!(
        campaign.body.contains("1 done") && campaign.body.contains("1 failed"),
        "the campaign keeps its counts"
    );
    assert!(
        campaign
            .body
            .contains("its 2 jobs are counted for all its hosts together (above), no longer per host"),
        "the counts per host folded: {}",
        campaign.body
    );
    let hosts = app.get(&format!("/api/v1/campaigns/{before}/hosts")).await;
    assert_eq!(hosts.status, 200);
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&hosts.body).unwrap(),
        Vec::<Value>::new()
    );

    let api = app.get(&format!("/api/v1/hosts/{host}/history")).await;
    assert_eq!(api.status, 200, "{}", api.body);
    let rows: Vec<Value> = serde_json::from_str(&api.body).unwrap();
    let periods: Vec<(&str, &str, i64)> = rows
        .iter()
        .map(|r| {
            (
                r["algorithm"].as_str().unwrap(),
                r["resolution"].as_str().unwrap(),
                r["results"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        periods,
        [("aes-256-gcm", "day", 1), ("aes-256-gcm", "day", 1)],
        "{rows:#?}"
    );
    let page = app.get(&format!("/hosts/{host}")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("Whole history: 16 KiB encrypt, 1 thread, accelerated path")
            && page
                .body
                .contains("The whole history: one dot per UTC day, the median of its results."),
        "the host page draws the whole history and says its resolution"
    );
    let compare = app.get(&format!("/campaigns/{before}/compare/{after}")).await;
    assert!(
        compare
            .body
            .contains("1 result of these campaigns is older than the raw window"),
        "the comparison says what was folded away"
    );
    let csv = app.get(&format!("/api/v1/hosts/{host}/history?format=csv")).await;
    assert!(
        csv.body
            .starts_with("algorithm,resolution,period_start,results,median_mb_s"),
        "{}",
        csv.body
    );
}
