//! rollups: the folds retention runs and the history the host page reads.

use chrono::{Duration, Utc};
use cipherfleet_coordinator::report::{campaign_compare, campaign_summaries};
use cipherfleet_coordinator::store::campaign_folds::CampaignFold;
use cipherfleet_coordinator::store::{campaign_folds, jobs, partitions, rollups};

use super::fixture::populate;

/// Result `id` stops being the latest of its point, as a newer one would make it.
async fn no_longer_latest(pool: &sqlx::PgPool, id: i64) {
    sqlx::query("DELETE FROM result_points WHERE result_id = $1")
        .bind(id)
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_old_result_folds_into_its_day_then_its_month_and_the_history_reads_each() {
    let f = populate().await;
    let pool = &f.pool;
    let old = &f.bench_accelerated;
    let mb_s = old.figures().throughput_mb_s;
    // A hundred days old, and no longer the latest of its point.
    sqlx::query("UPDATE results SET created_at = now() - interval '100 days' WHERE id = $1")
        .bind(old.result)
        .execute(pool)
        .await
        .unwrap();
    no_longer_latest(pool, old.result).await;
    let now = Utc::now();
    // Stored before the first week: it folds by day.
    let weeks_from = partitions::weeks_from(&partitions::raw(pool).await.unwrap()).unwrap();

    let day = rollups::oldest_day(pool, now - Duration::days(90), weeks_from)
        .await
        .unwrap()
        .expect("a day to fold");
    assert!(
        day <= now - Duration::days(99) && day > now - Duration::days(101),
        "{day}"
    );
    assert_eq!(
        rollups::oldest_day(pool, now - Duration::days(101), weeks_from)
            .await
            .unwrap(),
        None
    );
    assert_eq!(campaign_compare::folded(pool, &[f.nightly]).await.unwrap(), 0);
    let mut conn = pool.acquire().await.unwrap();
    let (counts, _) = campaign_summaries::totals(pool, f.nightly).await.unwrap();
    let folded = rollups::fold_day(&mut conn, day, weeks_from).await.unwrap();
    drop(conn);
    assert_eq!((folded.removed, folded.summaries, folded.jobs), (1, 1, 1));
    assert!(
        jobs::get(pool, old.job).await.unwrap().is_none(),
        "the result's job went with it (its campaign had ended)"
    );
    assert_eq!(campaign_summaries::totals(pool, f.nightly).await.unwrap().0, counts);
    assert_eq!(
        campaign_compare::folded(pool, &[f.nightly, f.live]).await.unwrap(),
        1,
        "the campaign's result folded away"
    );
    let history = rollups::history(pool, f.bench, &["aes-256-gcm"], 16384).await.unwrap();
    let row = history.iter().find(|r| r.period_start == day).expect("the folded day");
    assert_eq!(
        (
            row.resolution.as_str(),
            row.summary.results,
            row.summary.median_mb_s,
            row.summary.min_mb_s,
            row.summary.accelerated
        ),
        ("day", 1, mb_s, mb_s, 1)
    );

    let month = rollups::oldest_month(pool, now)
        .await
        .unwrap()
        .expect("a month to fold");
    assert!(month <= day);
    assert_eq!(rollups::oldest_month(pool, month).await.unwrap(), None);
    let folded = rollups::fold_month(pool, month, now).await.unwrap();
    assert_eq!((folded.removed, folded.summaries), (1, 1));
    let history = rollups::history(pool, f.bench, &["aes-256-gcm"], 16384).await.unwrap();
    let row = history.iter().find(|r| r.resolution == "month").expect("the month");
    // The forms retention runs, each in a transaction that may outlast the pool's
    // statement timeout: nothing left to fold.
    let none = rollups::Folded::default();
    assert_eq!(rollups::fold_day_alone(pool, day, weeks_from).await.unwrap(), none);
    assert_eq!(rollups::fold_month_alone(pool, month, now).await.unwrap(), none);
    assert_eq!(
        (row.period_start, row.summary.results, row.summary.max_mb_s),
        (month, 1, mb_s)
    );
}

#[tokio::test]
async fn a_week_past_the_raw_window_folds_whole_its_latest_results_kept_and_its_partition_dropped() {
    let f = populate().await;
    let pool = &f.pool;
    let weeks = partitions::raw(pool).await.unwrap();
    assert_eq!(
        weeks[0].from, None,
        "the results stored before the first week: {weeks:?}"
    );
    assert!(
        weeks.len() as i32 > partitions::WEEKS_AHEAD,
        "the weeks ahead were made with the schema: {weeks:?}"
    );
    assert_eq!(partitions::ensure_weeks(pool).await.unwrap(), 0, "none missing");
    // Two results of the fixture moved into the second week: one no longer the
    // latest of its point, one that is.
    let week = &weeks[2];
    let old = &f.bench_accelerated;
    let latest: i64 = sqlx::query_scalar("SELECT result_id FROM result_points WHERE result_id <> $1 LIMIT 1")
        .bind(old.result)
        .fetch_one(pool)
        .await
        .unwrap();
    no_longer_latest(pool, old.result).await;
    sqlx::query("UPDATE results SET created_at = $2 + interval '1 hour' WHERE id = ANY($1)")
        .bind([old.result, latest])
        .bind(week.from)
        .execute(pool)
        .await
        .unwrap();
    let (counts, _) = campaign_summaries::totals(pool, f.nightly).await.unwrap();

    // A week with nothing in it folds to nothing (rolled back: it stays).
    let mut tx = pool.begin().await.unwrap();
    let empty = rollups::fold_week(&mut tx, &weeks[3]).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(empty, rollups::Folded::default());

    let folded = rollups::fold_week_alone(pool, week).await.unwrap();

    assert_eq!((folded.removed, folded.summaries, folded.jobs), (1, 1, 1));
    assert!(
        !partitions::raw(pool).await.unwrap().contains(week),
        "the week's partition is gone"
    );
    let kept: Vec<(i64, bool)> = sqlx::query_as("SELECT id, kept FROM results WHERE id = ANY($1)")
        .bind([old.result, latest])
        .fetch_all(pool)
        .await
        .unwrap();
    assert_eq!(kept, [(latest, true)], "the latest result kept, the other folded away");
    assert!(
        jobs::get(pool, old.job).await.unwrap().is_none(),
        "its job went with it"
    );
    assert_eq!(campaign_summaries::totals(pool, f.nightly).await.unwrap().0, counts);
    let history = rollups::history(pool, f.bench, &["aes-256-gcm"], 16384).await.unwrap();
    let row = history
        .iter()
        .find(|r| Some(r.period_start) == week.from)
        .expect("the folded day");
    assert_eq!((row.resolution.as_str(), row.summary.results), ("day", 1));
}

#[tokio::test]
async fn an_ended_campaigns_jobs_without_a_raw_result_fold_and_its_counts_stay() {
    let f = populate().await;
    let pool = &f.pool;
    let now = Utc::now();
    let later = now + Duration::days(1);
    // Both ended campaigns ended just now: inside any raw window.
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Jobs, now - Duration::days(1))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Jobs, later)
            .await
            .unwrap(),
        Some(f.nightly),
        "the campaign that ended first, with a failed job (its four results are each the latest of their point)"
    );
    let (counts, hosts) = campaign_summaries::totals(pool, f.nightly).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        campaign_folds::fold_campaign_jobs(&mut conn, f.nightly, later)
            .await
            .unwrap(),
        1
    );
    drop(conn);
    assert!(
        jobs::get(pool, f.failed_job).await.unwrap().is_none(),
        "the failed job went"
    );
    assert_eq!(
        campaign_summaries::totals(pool, f.nightly).await.unwrap(),
        (counts, hosts)
    );
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Jobs, later)
            .await
            .unwrap(),
        Some(f.cancelled)
    );
    assert_eq!(
        campaign_folds::fold_campaign_jobs_alone(pool, f.cancelled, later)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Jobs, later)
            .await
            .unwrap(),
        None,
        "the running campaign is never folded"
    );

    // Past the daily window: the counts per host become one row a campaign.
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Counts, now - Duration::days(1))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Counts, later)
            .await
            .unwrap(),
        Some(f.nightly)
    );
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        campaign_folds::fold_campaign_counts(&mut conn, f.nightly)
            .await
            .unwrap(),
        2,
        "bench's and vm's"
    );
    drop(conn);
    assert_eq!(
        campaign_summaries::totals(pool, f.nightly).await.unwrap(),
        (counts, hosts),
        "the totals and the number of hosts stay"
    );
    assert!(
        campaign_summaries::host_progress(pool, f.nightly, None, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Counts, later)
            .await
            .unwrap(),
        Some(f.cancelled)
    );
    assert_eq!(
        campaign_folds::fold_campaign_counts_alone(pool, f.cancelled)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Counts, later)
            .await
            .unwrap(),
        None
    );
}
