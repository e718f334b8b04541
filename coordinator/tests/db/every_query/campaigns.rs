//! campaigns, campaign_summaries.

use cipherfleet_coordinator::report::{campaign_compare, campaign_summaries};
use cipherfleet_coordinator::store::campaigns;
use cipherfleet_coordinator::store::campaigns::{CampaignStatus, JobCounts};
use serde_json::json;

use super::fixture::*;
use crate::helpers::assert_job_counts_kept;

#[tokio::test]
async fn campaigns_and_their_summaries_count_every_job() {
    let f = populate().await;
    let pool = &f.pool;

    // campaigns
    let nightly = campaigns::get(pool, f.nightly).await.unwrap().expect("nightly");
    assert_eq!((nightly.name.as_str(), nightly.suite.as_str()), ("nightly", "quick"));
    assert_eq!(
        nightly.matrix,
        json!({"algorithms": ["aes-256-gcm", "chacha20-poly1305"]})
    );
    assert_eq!(
        (nightly.selector.clone(), nightly.started_by.as_str()),
        (json!({}), "tests")
    );
    assert_eq!(nightly.status, CampaignStatus::Finished);
    assert!(nightly.finished_at.is_some_and(|t| t >= nightly.created_at));
    assert_eq!(campaigns::get(pool, i64::MAX).await.unwrap(), None);
    // Finished already, and still running jobs: neither closes.
    assert!(
        campaigns::close_if_complete(pool, &[f.nightly, f.live])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(campaigns::close_any_complete(pool).await.unwrap().is_empty());

    let listed = campaigns::list(pool, 10).await.unwrap();
    let by_age: Vec<(i64, CampaignStatus)> = listed.iter().map(|c| (c.id, c.status)).collect();
    let newest_first = [
        (f.live, CampaignStatus::Running),
        (f.cancelled, CampaignStatus::Cancelled),
        (f.nightly, CampaignStatus::Finished),
    ];
    assert_eq!(by_age, newest_first);
    assert_eq!(listed[2], nightly);
    assert_eq!(campaigns::list(pool, 1).await.unwrap().len(), 1);

    let progress = campaigns::status(pool, f.nightly).await.unwrap().expect("nightly");
    assert_eq!(progress.campaign, nightly);
    let nightly_jobs = JobCounts {
        done: 4,
        failed: 1,
        ..JobCounts::default()
    };
    assert_eq!(progress.jobs, nightly_jobs);
    let cancelled = campaigns::status(pool, f.cancelled).await.unwrap().expect("weekly");
    assert_eq!(cancelled.campaign.status, CampaignStatus::Cancelled);
    assert_eq!(cancelled.jobs.cancelled, 1);
    assert_eq!(cancelled.jobs.total(), 1);
    assert_eq!(campaigns::status(pool, i64::MAX).await.unwrap(), None);

    let per_host = campaign_summaries::host_progress(pool, f.nightly, None, 0)
        .await
        .unwrap();
    let expected = [
        (
            f.bench,
            "bench-01".to_string(),
            JobCounts {
                done: 3,
                ..JobCounts::default()
            },
        ),
        (
            f.vm,
            "vm-01".to_string(),
            JobCounts {
                done: 1,
                failed: 1,
                ..JobCounts::default()
            },
        ),
    ];
    assert_eq!(per_host, expected);
    // The same rows a page at a time, and the campaign's sums.
    let first = campaign_summaries::host_progress(pool, f.nightly, Some(1), 0)
        .await
        .unwrap();
    let second = campaign_summaries::host_progress(pool, f.nightly, Some(1), 1)
        .await
        .unwrap();
    assert_eq!([first, second].concat(), expected);
    assert!(
        campaign_summaries::host_progress(pool, f.nightly, Some(5), 2)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        campaign_summaries::totals(pool, f.nightly).await.unwrap(),
        (nightly_jobs, 2)
    );
    assert_eq!(
        campaign_summaries::totals(pool, i64::MAX).await.unwrap(),
        (JobCounts::default(), 0)
    );

    let mut ended = campaigns::ended_within(pool, 3600.0).await.unwrap();
    ended.sort_unstable();
    assert_eq!(ended, [f.nightly, f.cancelled]);

    // The campaign before each, by creation.
    assert_eq!(campaigns::previous(pool, f.live).await.unwrap(), Some(f.cancelled));
    assert_eq!(campaigns::previous(pool, f.nightly).await.unwrap(), None);
    assert_eq!(campaigns::previous(pool, i64::MAX).await.unwrap(), None);

    // campaign_compare: nightly's results against the live campaign's (none yet).
    let pairs = campaign_compare::pairs(pool, f.nightly, f.live).await.unwrap();
    let stored = [
        &f.bench_accelerated,
        &f.bench_software,
        &f.bench_chacha,
        &f.vm_fell_back,
    ];
    assert_eq!(pairs.len(), stored.len(), "{pairs:#?}");
    for s in stored {
        let p = pairs
            .iter()
            .find(|p| p.before_result_id == Some(s.result))
            .unwrap_or_else(|| panic!("{} in {pairs:#?}", s.result));
        assert_eq!((p.host_id, p.point), (s.host_id, s.point));
        assert_eq!(p.before_mb_s, Some(s.figures().throughput_mb_s));
        assert_eq!(p.before_path_used.as_deref(), Some(s.path_used().as_str()));
        assert_eq!((p.after_result_id, p.after_mb_s), (None, None));
    }
    assert_eq!(pairs[0].host_name, "bench-01", "by host name");
    let swapped = campaign_compare::pairs(pool, f.live, f.nightly).await.unwrap();
    assert!(
        swapped
            .iter()
            .all(|p| p.before_result_id.is_none() && p.after_result_id.is_some())
    );
    let same = campaign_compare::pairs(pool, f.nightly, f.nightly).await.unwrap();
    assert!(same.iter().all(|p| p.before_mb_s == p.after_mb_s), "{same:#?}");

    // campaign_summaries, before the live campaign is cancelled below
    let summaries = campaign_summaries::list(pool, 10, 0).await.unwrap();
    let ids: Vec<i64> = summaries.iter().map(|s| s.id).collect();
    assert_eq!(ids, [f.live, f.cancelled, f.nightly]);
    let (live, nightly) = (&summaries[0], &summaries[2]);
    assert_eq!((live.name.as_str(), live.status.as_str()), ("adhoc", "running"));
    assert_eq!((live.queued, live.running, live.hosts, live.settled()), (1, 1, 1, 0));
    assert_eq!(
        (nightly.status.as_str(), nightly.started_by.as_str()),
        ("finished", "tests")
    );
    assert_eq!((nightly.done, nightly.failed, nightly.hosts), (4, 1, 2));
    assert_eq!((nightly.total(), nightly.settled()), (5, 5));
    assert_eq!(nightly.finished_at, progress.campaign.finished_at);
    assert_eq!(summaries[1].cancelled, 1);
    let second_page = campaign_summaries::list(pool, 1, 1).await.unwrap();
    assert_eq!(second_page.iter().map(|s| s.id).collect::<Vec<_>>(), [f.cancelled]);
    assert_eq!(campaign_summaries::count(pool).await.unwrap(), (3, 1));
    // Finished or not (what /metrics reads once or every time), and the totals of several.
    let (database, finished, others) = campaign_summaries::finished_or_not(pool).await.unwrap();
    assert!(!database.is_empty());
    let mut others_sorted = others.clone();
    others_sorted.sort_unstable();
    let mut want_others = vec![f.live, f.cancelled];
    want_others.sort_unstable();
    assert_eq!((finished, others_sorted), (vec![f.nightly], want_others));
    let totals = campaign_summaries::job_totals(pool, &[f.nightly, f.live, i64::MAX])
        .await
        .unwrap();
    let mut want = vec![
        (f.nightly, nightly_jobs),
        (f.live, campaign_summaries::totals(pool, f.live).await.unwrap().0),
    ];
    want.sort_by_key(|(id, _)| *id);
    assert_eq!(totals, want, "campaigns without jobs left out");
    assert!(campaign_summaries::job_totals(pool, &[]).await.unwrap().is_empty());
    // Every campaign's, summed: twice, the second with the finished campaign's kept.
    let mut every = JobCounts::default();
    for s in campaign_summaries::list(pool, 10, 0).await.unwrap() {
        every.queued += s.queued;
        every.running += s.running;
        every.done += s.done;
        every.failed += s.failed;
        every.cancelled += s.cancelled;
    }
    assert_eq!(campaign_summaries::all_jobs(pool).await.unwrap(), every);
    assert_eq!(campaign_summaries::all_jobs(pool).await.unwrap(), every);

    // Cancelling: the queued job is cancelled, the running one left for its agent to stop.
    assert!(
        campaigns::running_of_cancelled(pool, &[f.bench, f.vm], None)
            .await
            .unwrap()
            .is_empty()
    );
    let running = campaigns::cancel_because(pool, f.live, Some("campaign cancelled: tests"))
        .await
        .unwrap();
    assert_eq!(running, Some(vec![(f.live_jobs[0], f.bench)]));
    assert!(
        campaigns::cancel(pool, f.live).await.unwrap().is_none(),
        "already cancelled"
    );
    let to_stop = campaigns::running_of_cancelled(pool, &[f.bench, f.vm], None)
        .await
        .unwrap();
    assert_eq!(to_stop.len(), 1, "{to_stop:?}");
    let stop = &to_stop[0];
    assert_eq!((stop.job_id, stop.host_id), (f.live_jobs[0], f.bench));
    assert!(stop.attempt_id.is_some());
    assert_eq!(stop.reason, "campaign cancelled: tests");
    assert_eq!(
        campaigns::running_of_cancelled(pool, &[f.bench], Some(f.live))
            .await
            .unwrap(),
        to_stop
    );
    for (hosts, campaign) in [(vec![f.vm], None), (vec![f.bench], Some(f.cancelled)), (vec![], None)] {
        assert!(
            campaigns::running_of_cancelled(pool, &hosts, campaign)
                .await
                .unwrap()
                .is_empty(),
            "{hosts:?} {campaign:?}"
        );
    }
    let live = campaigns::status(pool, f.live).await.unwrap().expect("adhoc");
    assert_eq!(live.campaign.status, CampaignStatus::Cancelled);
    let live_jobs = JobCounts {
        running: 1,
        cancelled: 1,
        ..JobCounts::default()
    };
    assert_eq!(live.jobs, live_jobs);
    assert_eq!(campaign_summaries::count(pool).await.unwrap(), (3, 0));
    assert_eq!(campaigns::ended_within(pool, 3600.0).await.unwrap().len(), 3);
}

/// The per-(campaign, host) counts the triggers keep equal a count of the
/// jobs themselves after inserts, claims, results, failures, cancels and deletes.
#[tokio::test]
async fn campaign_host_counts_follow_every_job_change() {
    let f = populate().await;
    let pool = &f.pool;
    let check = async |when: &str| assert_job_counts_kept(pool, when).await;
    assert_eq!(check("after populate").await, 4);
    // Cancel: one statement moving a queued job, leaving the running one.
    assert!(campaigns::cancel(pool, f.live).await.unwrap().is_some());
    check("after cancel").await;
    // A statement changing nothing that counts (no status change).
    sqlx::query("UPDATE jobs SET attempts = attempts WHERE campaign_id = $1")
        .bind(f.nightly)
        .execute(pool)
        .await
        .unwrap();
    check("after an update of no status").await;
    // Several hosts in one statement, in both directions.
    sqlx::query("UPDATE jobs SET status = 'queued', finished_at = NULL WHERE campaign_id = $1 AND status = 'done'")
        .bind(f.nightly)
        .execute(pool)
        .await
        .unwrap();
    check("after re-queueing").await;
    // Deleting a host's jobs drops its row.
    sqlx::query("DELETE FROM results WHERE job_id IN (SELECT id FROM jobs WHERE host_id = $1)")
        .bind(f.vm)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM jobs WHERE host_id = $1")
        .bind(f.vm)
        .execute(pool)
        .await
        .unwrap();
    assert_eq!(check("after deleting vm's jobs").await, 2);
}
