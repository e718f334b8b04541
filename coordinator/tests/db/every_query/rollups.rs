//! rollups: the folds retention runs and the history the host page reads.

use chrono::{Duration, Utc};
use cipherfleet_coordinator::report::{campaign_compare, campaign_summaries};
use cipherfleet_coordinator::store::rollups::CampaignFold;
use cipherfleet_coordinator::store::{jobs, rollups};

use super::fixture::populate;

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
    sqlx::query("DELETE FROM result_points WHERE result_id = $1")
        .bind(old.result)
        .execute(pool)
        .await
        .unwrap();
    let now = Utc::now();

    let day = rollups::oldest_day(pool, now - Duration::days(90))
        .await
        .unwrap()
        .expect("a day to fold");
    assert!(
        day <= now - Duration::days(99) && day > now - Duration::days(101),
        "{day}"
    );
    assert_eq!(
        rollups::oldest_day(pool, now - Duration::days(101)).await.unwrap(),
        None
    );
    assert_eq!(campaign_compare::folded(pool, &[f.nightly]).await.unwrap(), 0);
    let mut conn = pool.acquire().await.unwrap();
    let (counts, _) = campaign_summaries::totals(pool, f.nightly).await.unwrap();
    let folded = rollups::fold_day(&mut conn, day).await.unwrap();
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
    assert_eq!(rollups::fold_day_alone(pool, day).await.unwrap(), none);
    assert_eq!(rollups::fold_month_alone(pool, month, now).await.unwrap(), none);
    assert_eq!(
        (row.period_start, row.summary.results, row.summary.max_mb_s),
        (month, 1, mb_s)
    );
}

#[tokio::test]
async fn an_ended_campaigns_jobs_without_a_raw_result_fold_and_its_counts_stay() {
    let f = populate().await;
    let pool = &f.pool;
    let now = Utc::now();
    let later = now + Duration::days(1);
    // Both ended campaigns ended just now: inside any raw window.
    assert_eq!(
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Jobs, now - Duration::days(1))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Jobs, later)
            .await
            .unwrap(),
        Some(f.nightly),
        "the campaign that ended first, with a failed job (its four results are each the latest of their point)"
    );
    let (counts, hosts) = campaign_summaries::totals(pool, f.nightly).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        rollups::fold_campaign_jobs(&mut conn, f.nightly, later).await.unwrap(),
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
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Jobs, later)
            .await
            .unwrap(),
        Some(f.cancelled)
    );
    assert_eq!(
        rollups::fold_campaign_jobs_alone(pool, f.cancelled, later)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Jobs, later)
            .await
            .unwrap(),
        None,
        "the running campaign is never folded"
    );

    // Past the daily window: the counts per host become one row a campaign.
    assert_eq!(
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Counts, now - Duration::days(1))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Counts, later)
            .await
            .unwrap(),
        Some(f.nightly)
    );
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        rollups::fold_campaign_counts(&mut conn, f.nightly).await.unwrap(),
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
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Counts, later)
            .await
            .unwrap(),
        Some(f.cancelled)
    );
    assert_eq!(rollups::fold_campaign_counts_alone(pool, f.cancelled).await.unwrap(), 1);
    assert_eq!(
        rollups::oldest_campaign_to_fold(pool, CampaignFold::Counts, later)
            .await
            .unwrap(),
        None
    );
}
