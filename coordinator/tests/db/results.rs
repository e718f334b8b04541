use cipherfleet_coordinator::db::campaigns::{self, CampaignStatus};
use cipherfleet_coordinator::db::jobs::{self, JobStatus};
use cipherfleet_coordinator::db::results::{self, Metrics, RecordOutcome};
use cipherfleet_coordinator::db::{Error, hosts};
use serde_json::{Value, json};

use crate::helpers::{campaign, facts, fresh_db, host, job};

/// A measurement as the agent reports it.
fn measurement(throughput_mb_s: f64) -> Value {
    json!({
        "schema": "cipherfleet.measurement/1", "status": "ok",
        "algorithm": "aes-256-gcm", "direction": "encrypt", "size_bytes": 16,
        "threads": 1, "concurrency": null, "key_mode": "static",
        "path_requested": "accelerated", "path_used": "accelerated",
        "throughput_mb_s": throughput_mb_s, "ops_per_s": 12.5e6,
        "latency_ns": {"p50": 60, "p90": 70, "p99": 90, "p999": 400, "max": 12000},
        "latency_method": "batch-mean", "batch_ops": 1024, "cv": 0.02, "samples": 30,
        "elapsed_seconds": 1.0, "cpu_user_seconds": 0.98, "cpu_sys_seconds": 0.01,
        "cpu_utilization": 0.99, "key_setup_ns": 85.0,
        "sample_throughputs_mb_s": [199.0, 200.0, 201.0],
        "agent_version": "0.1.0"
    })
}

#[tokio::test]
async fn recording_the_same_result_twice_keeps_one_row() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16)]).await;
    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let m = measurement(200.0);
    let metrics = Metrics::from_measurement(&m).unwrap();

    let first = results::record(&pool, claimed.id, bench, &metrics, &m).await.unwrap();
    let second = results::record(&pool, claimed.id, bench, &metrics, &m).await.unwrap();

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
    let m = measurement(200.0);
    results::record(&pool, claimed.id, bench, &Metrics::from_measurement(&m).unwrap(), &m)
        .await
        .unwrap();

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
    let m = measurement(-1.0);

    let got = results::record(&pool, claimed.id, bench, &Metrics::from_measurement(&m).unwrap(), &m).await;

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
    let metrics = Metrics::from_measurement(&m).unwrap();

    let wrong_host = results::record(&pool, claimed.id, intruder, &metrics, &m).await;
    assert!(
        matches!(wrong_host, Err(Error::JobOfAnotherHost { .. })),
        "{wrong_host:?}"
    );
    let unknown = results::record(&pool, uuid::Uuid::new_v4(), bench, &metrics, &m).await;
    assert!(matches!(unknown, Err(Error::UnknownJob(_))), "{unknown:?}");
    assert_eq!(results::count_for_job(&pool, claimed.id).await.unwrap(), 0);
}
