//! jobs: every transition of the queue.

use cipherfleet_coordinator::domain::attempt::Ignored;
use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::store::campaigns::CampaignStatus;
use cipherfleet_coordinator::store::jobs::{Expired, Requeued};
use cipherfleet_coordinator::store::leases::{self, Holder};
use cipherfleet_coordinator::store::{campaigns, jobs};
use cipherfleet_core::Point;
use cipherfleet_core::path::Path;
use serde_json::json;
use uuid::Uuid;

use cipherfleet_core::spec::Execution;

use super::fixture::*;
use crate::helpers::start;

#[tokio::test]
async fn the_queue_moves_a_job_through_every_transition() {
    let f = populate().await;
    let pool = &f.pool;
    let [first, second] = f.live_jobs;
    let status = async |id: Uuid| jobs::get(pool, id).await.unwrap().expect("a stored job").status;

    let running = jobs::get(pool, first).await.unwrap().expect("the claimed job");
    assert_eq!(
        (running.campaign_id, running.host_id, running.position),
        (f.live, f.bench, 0)
    );
    assert_eq!(running.point, gcm_point(64, 1, Path::Accelerated));
    let spec = gcm_point(64, 1, Path::Accelerated).spec(0.5);
    assert_eq!(running.spec, serde_json::to_value(&spec).unwrap());
    assert_eq!(
        running.time_limit_seconds,
        spec.time_limit(Execution::Native).as_secs_f64()
    );
    assert_eq!((running.status, running.attempts), (JobStatus::Running, 0));
    assert!(running.assigned_at.is_some() && running.deadline > running.assigned_at);
    assert_eq!(
        (running.started_at, running.finished_at, running.error.clone()),
        (None, None, None)
    );
    assert_eq!(jobs::get(pool, Uuid::nil()).await.unwrap(), None);

    assert_eq!(
        jobs::running_for_host(pool, f.bench).await.unwrap(),
        Some(running.clone())
    );
    assert_eq!(jobs::running_for_host(pool, f.vm).await.unwrap(), None);
    let busy = jobs::claim_next_for_hosts(pool, &[f.bench, f.bench]).await.unwrap();
    assert!(busy.is_empty(), "a host runs one job at a time: {busy:?}");
    assert_eq!(campaigns::running_jobs(pool, f.live).await.unwrap(), [(first, f.bench)]);
    let none_running = campaigns::running_jobs(pool, f.nightly).await.unwrap();
    assert!(none_running.is_empty(), "{none_running:?}");

    let attempt = running.attempt_id.expect("a claimed job has an attempt");
    assert!(!start(pool, first, f.bench, Uuid::new_v4()).await, "another attempt");
    assert!(start(pool, first, f.bench, attempt).await);
    assert!(!start(pool, first, f.bench, attempt).await, "started twice");
    assert!(!start(pool, first, f.vm, attempt).await, "another host's job");
    assert!(jobs::get(pool, first).await.unwrap().unwrap().started_at.is_some());
    assert_eq!(
        jobs::mark_started_many(
            pool,
            &[
                jobs::Start {
                    job_id: first,
                    host_id: f.bench,
                    attempt_id: attempt,
                    at: chrono::Utc::now(),
                },
                jobs::Start {
                    job_id: first,
                    host_id: f.vm,
                    attempt_id: attempt,
                    at: chrono::Utc::now(),
                },
            ],
        )
        .await
        .unwrap(),
        0,
        "started already, and another host's"
    );

    let live: Vec<(Uuid, i32, JobStatus)> = jobs::for_campaign(pool, f.live)
        .await
        .unwrap()
        .into_iter()
        .map(|j| (j.id, j.position, j.status))
        .collect();
    assert_eq!(live, [(first, 0, JobStatus::Running), (second, 1, JobStatus::Queued)]);
    let nightly: Vec<Point> = jobs::for_campaign(pool, f.nightly)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.point)
        .collect();
    assert_eq!(nightly[2], chacha_point());
    assert_eq!(nightly.len(), 5);

    let mut by_status: Vec<(String, i64)> = sqlx::query_as("SELECT status, count(*) FROM jobs GROUP BY status")
        .fetch_all(pool)
        .await
        .unwrap();
    by_status.sort();
    let counts: Vec<(&str, i64)> = by_status.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    assert_eq!(
        counts,
        [
            ("cancelled", 1),
            ("done", 4),
            ("failed", 1),
            ("queued", 1),
            ("running", 1)
        ]
    );

    let failures = jobs::failures(pool, f.nightly, 10).await.unwrap();
    assert_eq!(failures.len(), 1);
    let (failed, host_name) = &failures[0];
    assert_eq!((failed.id, host_name.as_str()), (f.failed_job, "vm-01"));
    assert_eq!(
        (failed.status, failed.error.as_deref()),
        (JobStatus::Failed, Some("self-test failed"))
    );
    assert_eq!(failed.point, gcm_point(16384, 8, Path::Accelerated));

    // The agent is busy: back to the queue; claimed again (matrix order); the
    // RunJob reached no agent: unclaimed.
    assert!(
        !jobs::release(pool, first, f.bench, Uuid::new_v4()).await.unwrap(),
        "another attempt"
    );
    assert!(jobs::release(pool, first, f.bench, attempt).await.unwrap());
    assert_eq!(jobs::running_for_host(pool, f.bench).await.unwrap(), None);
    let claimed = claim(pool, f.bench).await;
    assert_eq!((claimed.id, claimed.started_at), (first, None));
    assert_ne!(claimed.attempt_id, Some(attempt), "every dispatch is a new attempt");
    assert!(jobs::unclaim(pool, &claimed).await.unwrap());
    assert!(!jobs::unclaim(pool, &claimed).await.unwrap(), "no longer that claim");
    assert_eq!(status(first).await, JobStatus::Queued);

    // After a reconnect the agent still holds the second job, in the attempt
    // an earlier session gave it: adopted, the first one goes back to the queue.
    let held = Uuid::new_v4();
    sqlx::query("UPDATE jobs SET attempt_id = $2 WHERE id = $1")
        .bind(second)
        .bind(held)
        .execute(pool)
        .await
        .unwrap();
    assert_eq!(claim(pool, f.bench).await.id, first);
    assert!(jobs::adopt(pool, second, f.bench, held).await.unwrap());
    assert!(
        !jobs::adopt(pool, second, f.bench, Uuid::new_v4()).await.unwrap(),
        "an attempt it was not given"
    );
    assert!(
        !jobs::adopt(pool, f.failed_job, f.vm, Uuid::new_v4()).await.unwrap(),
        "a finished job"
    );
    assert_eq!(
        jobs::running_for_host(pool, f.bench).await.unwrap().map(|j| j.id),
        Some(second)
    );
    assert_eq!(status(first).await, JobStatus::Queued);

    // The agent is lost: requeued with an attempt counted.
    let lost = jobs::requeue_lost(pool, f.bench).await.unwrap();
    let requeued = Requeued {
        requeued: vec![second],
        failed: vec![],
    };
    assert_eq!(lost, requeued);
    assert_eq!(jobs::get(pool, second).await.unwrap().unwrap().attempts, 1);

    // Overdue: requeued with an attempt counted, by the coordinator serving the host.
    let sweeper = Holder {
        id: Uuid::new_v4(),
        name: "sweeper/1".into(),
    };
    let ttl = std::time::Duration::from_secs(60);
    assert!(leases::acquire(pool, f.bench, &sweeper, 1, ttl).await.unwrap());
    let overdue = claim(pool, f.bench).await;
    assert_eq!(overdue.id, first);
    let not_due = jobs::expire_overdue(pool, sweeper.id).await.unwrap();
    assert!(not_due.is_empty(), "not due yet: {not_due:?}");
    // Queued within the campaign's time to live: nothing expires.
    assert_eq!(jobs::expire_queued(pool).await.unwrap(), []);
    sqlx::query("UPDATE jobs SET deadline = now() - interval '1 second' WHERE id = $1")
        .bind(first)
        .execute(pool)
        .await
        .unwrap();
    let expired = Expired {
        job_id: first,
        host_id: f.bench,
        attempt_id: overdue.attempt_id,
        requeued: true,
    };
    assert_eq!(
        jobs::expire_overdue(pool, Uuid::nil()).await.unwrap(),
        [],
        "another coordinator's host"
    );
    assert_eq!(jobs::expire_overdue(pool, sweeper.id).await.unwrap(), [expired]);
    assert!(leases::release(pool, f.bench, &sweeper, 1).await.unwrap());
    let first_job = jobs::get(pool, first).await.unwrap().unwrap();
    assert_eq!(
        (
            first_job.status,
            first_job.attempts,
            first_job.deadline,
            first_job.attempt_id
        ),
        (JobStatus::Queued, 1, None, None),
        "the overdue attempt is withdrawn"
    );

    // The overdue attempt's report no longer counts; the retry's does. Then
    // the agent loses the last job a second time, which fails it and ends the campaign.
    assert_eq!(
        jobs::fail_attempt(pool, first, f.bench, overdue.attempt_id, "late")
            .await
            .unwrap(),
        Err(Ignored::EarlierAttempt)
    );
    let retry = claim(pool, f.bench).await;
    assert_eq!(retry.id, first);
    assert_eq!(
        jobs::fail_attempt(pool, first, f.bench, retry.attempt_id, "unsupported point")
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(
        jobs::fail_attempt(pool, first, f.bench, retry.attempt_id, "again")
            .await
            .unwrap(),
        Err(Ignored::Finished(JobStatus::Failed)),
        "already failed"
    );
    assert!(
        !jobs::fail(pool, first, f.bench, "again").await.unwrap(),
        "already failed"
    );
    assert!(matches!(
        jobs::fail_attempt(pool, first, f.vm, retry.attempt_id, "intruder").await,
        Err(cipherfleet_coordinator::store::Error::JobOfAnotherHost { .. })
    ));
    assert!(matches!(
        jobs::fail_attempt(pool, Uuid::new_v4(), f.bench, None, "unknown").await,
        Err(cipherfleet_coordinator::store::Error::UnknownJob(_))
    ));
    let failures = jobs::failures(pool, f.live, 10).await.unwrap();
    let failed: Vec<(Uuid, &str)> = failures.iter().map(|(j, h)| (j.id, h.as_str())).collect();
    assert_eq!(failed, [(first, "bench-01")]);
    assert_eq!(claim(pool, f.bench).await.id, second);
    let lost = jobs::requeue_lost(pool, f.bench).await.unwrap();
    let requeued = Requeued {
        requeued: vec![],
        failed: vec![second],
    };
    assert_eq!(lost, requeued);
    let live = campaigns::get(pool, f.live).await.unwrap().unwrap();
    assert_eq!(live.status, CampaignStatus::Finished);

    // Queueing more jobs on a campaign: positions in slice order, the spec as sent.
    let (matrix, selector) = (json!({}), json!({}));
    let later = campaigns::create_with_jobs(pool, &new_campaign("later", &matrix, &selector), &[])
        .await
        .unwrap();
    let extra = [
        new_job(f.vm, chacha_point()),
        new_job(f.bench, gcm_point(4096, 2, Path::Software)),
    ];
    let mut tx = pool.begin().await.unwrap();
    assert_eq!(campaigns::insert_jobs(&mut tx, later, &extra).await.unwrap(), 2);
    let queued = jobs::for_campaign(&mut *tx, later).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(queued.len(), 2);
    for (position, (job, new)) in queued.iter().zip(&extra).enumerate() {
        assert_eq!(
            (job.campaign_id, job.host_id, job.position),
            (later, new.host_id, i32::try_from(position).unwrap())
        );
        assert_eq!(job.point, new.spec.point);
        assert_eq!(job.spec, serde_json::to_value(&new.spec).unwrap());
        assert_eq!((job.status, job.attempts), (JobStatus::Queued, 0));
    }
}

/// A campaign's large queue is counted for the planner by the transaction
/// that queues it: vacuumed between campaigns, the statistics hold the queue
/// as empty, and a claim would scan every active job instead of its host's
/// queue. The commit's notice wakes every coordinator's dispatch, so the
/// statistics must be true by then, not only after the starting one's. Its
/// hosts are counted too: a fleet that grew since the last count would have
/// each new host's queue planned as the few old hosts' whole history.
#[tokio::test]
async fn a_large_queue_is_analysed_once_when_the_statistics_miss_it() {
    let f = populate().await;
    let pool = &f.pool;
    let counted = async || -> f32 {
        sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 'jobs_queued_per_host'::regclass")
            .fetch_one(pool)
            .await
            .unwrap()
    };
    let keep = async || {
        campaigns::keep_queue_statistics(&mut pool.acquire().await.unwrap())
            .await
            .unwrap()
    };
    let hosts_counted = async || -> f32 {
        // pg_stats gives a count, or minus a fraction of the rows.
        sqlx::query_scalar(
            "SELECT CASE WHEN s.n_distinct >= 0 THEN s.n_distinct ELSE -s.n_distinct * c.reltuples END \
             FROM pg_stats s, pg_class c WHERE s.tablename = 'jobs' AND s.attname = 'host_id' AND c.relname = 'jobs'",
        )
        .fetch_one(pool)
        .await
        .unwrap()
    };
    // A history of one host's done jobs, as a fleet's first host leaves it.
    let (matrix, selector) = (json!({}), json!({}));
    let history: Vec<_> = (1..=300)
        .map(|i| new_job(f.bench, gcm_point(16 * i, 1, Path::Software)))
        .collect();
    let first = campaigns::create_with_jobs(pool, &new_campaign("history", &matrix, &selector), &history)
        .await
        .unwrap();
    sqlx::query("UPDATE jobs SET status = 'done', finished_at = now() WHERE campaign_id = $1")
        .bind(first)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("VACUUM ANALYZE jobs").execute(pool).await.unwrap();
    assert!(counted().await < 10.0, "the fixture's queue is small");
    assert!(hosts_counted().await < 10.0, "the fixture's jobs are of a few hosts");
    assert!(!keep().await, "a small queue is left alone");

    // The fleet grew: the large campaign is of 500 hosts more.
    let grown: Vec<i64> =
        sqlx::query_scalar("INSERT INTO hosts (name) SELECT 'grown-' || g FROM generate_series(1, 500) g RETURNING id")
            .fetch_all(pool)
            .await
            .unwrap();
    let many: Vec<_> = (1..=campaigns::QUEUE_STATISTICS_FROM as u64)
        .map(|i| new_job(grown[i as usize % grown.len()], gcm_point(16 * i, 1, Path::Software)))
        .collect();
    let mut tx = pool.begin().await.unwrap();
    campaigns::insert_with_jobs(&mut tx, &new_campaign("large", &matrix, &selector), &many)
        .await
        .unwrap();
    assert!(
        counted().await >= campaigns::QUEUE_STATISTICS_FROM as f32,
        "the statistics count the queue before its campaign commits: {}",
        counted().await
    );
    tx.commit().await.unwrap();
    assert!(
        hosts_counted().await >= 250.0,
        "the statistics count the campaign's hosts: {}",
        hosts_counted().await
    );
    assert!(!keep().await, "true already: not again");
}
