use cipherfleet_coordinator::db::campaigns::{self, CampaignStatus};
use cipherfleet_coordinator::db::jobs::{self, JobStatus};
use cipherfleet_coordinator::db::results::{self, RecordOutcome};
use cipherfleet_coordinator::db::{Error, hosts};
use cipherfleet_core::measurement::Measurement;
use cipherfleet_core::path::{Path, PathUsed};

use crate::helpers::{campaign, facts, fresh_db, host, job, record};

/// A measurement of the helpers' job as the agent reports it.
fn measurement(throughput_mb_s: f64) -> Measurement {
    crate::helpers::measurement(&job(0, 16).spec, Path::Accelerated, throughput_mb_s)
}

#[tokio::test]
async fn recording_the_same_result_twice_keeps_one_row() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let m = measurement(200.0);

    let first = record(&pool, claimed.id, bench, &m).await.unwrap();
    let second = record(&pool, claimed.id, bench, &m).await.unwrap();

    assert_eq!((first, second), (RecordOutcome::Inserted, RecordOutcome::Duplicate));
    assert_eq!(results::count_for_job(&pool, claimed.id).await.unwrap(), 1);
    let done = jobs::get(&pool, claimed.id).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Done);
    let progress = campaigns::status(&pool, campaign_id).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Finished);
    // The host is free again.
    assert!(jobs::running_for_host(&pool, bench).await.unwrap().is_none());
}

#[tokio::test]
async fn a_result_is_tied_to_the_hosts_current_facts() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let up = hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.6.0-1-amd64"))
        .await
        .unwrap();
    record(&pool, claimed.id, bench, &measurement(200.0)).await.unwrap();

    let (snapshot_id, algorithm, size): (Option<i64>, String, i64) =
        sqlx::query_as("SELECT snapshot_id, algorithm, size_bytes FROM results WHERE job_id = $1")
            .bind(claimed.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(snapshot_id, Some(up.snapshot_id));
    assert_eq!((algorithm.as_str(), size), ("aes-256-gcm", 16));
}

#[tokio::test]
async fn a_negative_metric_is_rejected_by_the_database() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let got = record(&pool, claimed.id, bench, &measurement(-1.0)).await;

    match got {
        Err(Error::Database(e)) => assert_eq!(
            e.as_database_error().map(|d| d.kind()),
            Some(sqlx::error::ErrorKind::CheckViolation),
            "{e}"
        ),
        other => panic!("expected a check violation, got {other:?}"),
    }
    // Nothing was written: no result, the job still runs.
    assert_eq!(results::count_for_job(&pool, claimed.id).await.unwrap(), 0);
    let still = jobs::get(&pool, claimed.id).await.unwrap().unwrap();
    assert_eq!(still.status, JobStatus::Running);
}

#[tokio::test]
async fn a_result_for_another_hosts_job_is_refused() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let intruder = host(&pool, "bench-02").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let m = measurement(200.0);

    let wrong_host = record(&pool, claimed.id, intruder, &m).await;
    assert!(
        matches!(wrong_host, Err(Error::JobOfAnotherHost { .. })),
        "{wrong_host:?}"
    );
    let unknown = record(&pool, uuid::Uuid::new_v4(), bench, &m).await;
    assert!(matches!(unknown, Err(Error::UnknownJob(_))), "{unknown:?}");
    assert_eq!(results::count_for_job(&pool, claimed.id).await.unwrap(), 0);
}

#[tokio::test]
async fn a_partial_path_is_stored_and_read_back_as_such() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let m = crate::helpers::measurement(&job(0, 16).spec, PathUsed::Partial, 900.0);
    record(&pool, claimed.id, bench, &m).await.unwrap();

    let stored: (String, String) = sqlx::query_as(
        "SELECT r.path_used, p.path_used FROM results r JOIN result_points p ON p.result_id = r.id WHERE r.job_id = $1",
    )
    .bind(claimed.id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(stored, ("partial".into(), "partial".into()));
    let listed = cipherfleet_coordinator::db::host_results::list(&pool, bench, 10, 0)
        .await
        .unwrap();
    assert_eq!(listed[0].path_used, PathUsed::Partial);
    assert!(
        listed[0].fell_back(),
        "an accelerated request that ran partly in software"
    );
}

#[tokio::test]
async fn a_path_used_outside_the_schema_is_refused_by_the_database() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    record(&pool, claimed.id, bench, &measurement(200.0)).await.unwrap();
    let err = sqlx::query("UPDATE results SET path_used = 'mostly' WHERE job_id = $1")
        .bind(claimed.id)
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("results_path_used_check"), "{err}");
}
