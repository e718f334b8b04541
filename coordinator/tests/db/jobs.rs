use cipherfleet_coordinator::store::campaigns::{self, CampaignStatus};

use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::store::jobs::{self, Job, MAX_ATTEMPTS};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use crate::helpers::{bench_hosts, campaign, fresh_db, holder_of, host, job, start};

mod lock_order;
mod reconnect;

/// Claims for `host_id` started all at once; returns the jobs handed out.
async fn race_claims(pool: &PgPool, host_id: i64, claims: usize) -> Vec<Job> {
    let tasks: Vec<_> = (0..claims)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { jobs::claim_next_for_host(&pool, host_id).await })
        })
        .collect();
    let mut won = Vec::new();
    for task in tasks {
        if let Some(job) = task.await.unwrap().expect("a claim failed") {
            won.push(job);
        }
    }
    won
}

#[tokio::test]
async fn a_host_never_gets_two_running_jobs() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let other = host(&pool, "bench-02").await;
    let matrix: Vec<_> = (0..7).map(|i| job(bench, 16 << i)).chain([job(other, 16)]).collect();
    campaign(&pool, &matrix).await;
    // Every claim below gets a connection of its own, so they really overlap.
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(pool.acquire().await.unwrap());
    }
    drop(open);

    for round in 0..5 {
        let won = race_claims(&pool, bench, 8).await;
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        assert_eq!(won[0].status, JobStatus::Running);
        assert!(won[0].deadline.is_some());
        // Still busy: nothing more for this host, while the other host is not held up.
        assert!(jobs::claim_next_for_host(&pool, bench).await.unwrap().is_none());
        if round == 0 {
            assert!(jobs::claim_next_for_host(&pool, other).await.unwrap().is_some());
        }
        // Once the job ends, the next one can be handed out.
        assert!(jobs::fail(&pool, won[0].id, bench, "unsupported").await.unwrap());
    }

    // The database itself refuses a second running job on a host.
    jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let sneak = sqlx::query(
        "UPDATE jobs SET status = 'running', assigned_at = now(), deadline = now(), \
             attempt_id = gen_random_uuid() \
         WHERE host_id = $1 AND status = 'queued'",
    )
    .bind(bench)
    .execute(&pool)
    .await;
    let err = sneak.expect_err("a second running job was accepted");
    assert_eq!(
        err.as_database_error().map(|e| e.kind()),
        Some(sqlx::error::ErrorKind::UniqueViolation)
    );
}

#[tokio::test]
async fn jobs_run_oldest_campaign_first_in_matrix_order() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let first = campaign(&pool, &[job(bench, 1024), job(bench, 16)]).await;
    let second = campaign(&pool, &[job(bench, 64)]).await;

    let mut order = Vec::new();
    while let Some(j) = jobs::claim_next_for_host(&pool, bench).await.unwrap() {
        order.push((j.campaign_id, j.point.size_bytes));
        jobs::fail(&pool, j.id, bench, "skipped").await.unwrap();
    }
    assert_eq!(order, [(first, 1024), (first, 16), (second, 64)]);
}

#[tokio::test]
async fn lost_agent_job_is_requeued_once_then_failed() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16)]).await;

    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert!(start(&pool, claimed.id, bench, claimed.attempt_id.unwrap()).await);
    let lost = jobs::requeue_lost(&pool, bench).await.unwrap();
    assert_eq!(lost.requeued, [claimed.id]);
    let requeued = jobs::get(&pool, claimed.id).await.unwrap().unwrap();
    assert_eq!(requeued.status, JobStatus::Queued);
    assert_eq!(requeued.attempts, 1);
    assert_eq!(requeued.started_at, None);

    let again = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert_eq!(again.id, claimed.id);
    let lost = jobs::requeue_lost(&pool, bench).await.unwrap();
    assert_eq!(lost.failed, [claimed.id]);
    let failed = jobs::get(&pool, claimed.id).await.unwrap().unwrap();
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(failed.attempts, MAX_ATTEMPTS);
    assert!(failed.error.unwrap().contains("agent lost"));

    // Nothing left to run: the campaign is over and the host gets nothing.
    assert!(jobs::claim_next_for_host(&pool, bench).await.unwrap().is_none());
    let progress = campaigns::status(&pool, campaign_id).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Finished);
    assert_eq!(progress.jobs.failed, 1);
    // A host with nothing running loses nothing.
    assert_eq!(jobs::requeue_lost(&pool, bench).await.unwrap(), Default::default());
}

#[tokio::test]
async fn cancelling_a_campaign_cancels_its_queued_jobs() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16), job(bench, 64), job(bench, 256)]).await;
    let running = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();

    let told = campaigns::cancel(&pool, campaign_id).await.unwrap();
    assert_eq!(
        told,
        Some(vec![(running.id, bench)]),
        "the running job, for its agent to be told"
    );
    assert!(campaigns::cancel(&pool, campaign_id).await.unwrap().is_none());
    let progress = campaigns::status(&pool, campaign_id).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Cancelled);
    assert_eq!((progress.jobs.running, progress.jobs.cancelled), (1, 2));
    assert_eq!(progress.jobs.total(), 3);
    // The running job is left to its agent.
    assert_eq!(
        jobs::running_for_host(&pool, bench).await.unwrap().map(|j| j.id),
        Some(running.id)
    );
}

#[tokio::test]
async fn an_undelivered_claim_is_undone_without_an_attempt_unless_claimed_again() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;

    let claimed = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert!(jobs::unclaim(&pool, &claimed).await.unwrap());
    let undone = jobs::get(&pool, claimed.id).await.unwrap().unwrap();
    assert_eq!(
        (undone.status, undone.attempts, undone.assigned_at),
        (JobStatus::Queued, 0, None)
    );

    // Lost and handed out again since: that later claim is left alone.
    let first = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    jobs::requeue_lost(&pool, bench).await.unwrap();
    let second = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert_eq!(second.id, first.id);
    assert!(!jobs::unclaim(&pool, &first).await.unwrap());
    assert_eq!(
        jobs::get(&pool, first.id).await.unwrap().unwrap().status,
        JobStatus::Running
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_whose_last_jobs_end_at_once_on_two_hosts_is_finished() {
    let pool = fresh_db().await;
    let hosts = [host(&pool, "bench-01").await, host(&pool, "bench-02").await];
    // Each ending gets a connection of its own, so the two transactions overlap.
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(pool.acquire().await.unwrap());
    }
    drop(open);
    // Each transaction that ends a job sees the other's job still running until
    // the other commits: unless one waits for the other, neither closes the
    // campaign. The overlap is a matter of timing, hence the rounds.
    for round in 0..40 {
        let campaign_id = campaign(&pool, &[job(hosts[0], 16), job(hosts[1], 16)]).await;
        let mut claimed = Vec::new();
        for host_id in hosts {
            claimed.push(jobs::claim_next_for_host(&pool, host_id).await.unwrap().unwrap());
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(claimed.len()));
        let endings: Vec<_> = claimed
            .into_iter()
            .map(|j| {
                let (pool, barrier) = (pool.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    jobs::fail(&pool, j.id, j.host_id, "unsupported").await
                })
            })
            .collect();
        for ending in endings {
            assert!(ending.await.unwrap().unwrap());
        }
        let progress = campaigns::status(&pool, campaign_id).await.unwrap().unwrap();
        assert_eq!(progress.jobs.failed, 2);
        assert_eq!(
            progress.campaign.status,
            CampaignStatus::Finished,
            "round {round}: every job ended, the campaign still runs"
        );
    }
}

#[tokio::test]
async fn a_campaign_without_jobs_is_finished_at_once() {
    let pool = fresh_db().await;
    let campaign_id = campaign(&pool, &[]).await;
    let progress = campaigns::status(&pool, campaign_id).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Finished);
    assert_eq!(progress.jobs.total(), 0);
    assert!(campaigns::status(&pool, campaign_id + 1).await.unwrap().is_none());
}

/// Moves a running job's deadline into the past, as if its time limit ran out.
async fn make_overdue(pool: &PgPool, job_id: Uuid) {
    let moved =
        sqlx::query("UPDATE jobs SET deadline = now() - interval '1 second' WHERE id = $1 AND status = 'running'")
            .bind(job_id)
            .execute(pool)
            .await
            .unwrap();
    assert_eq!(moved.rows_affected(), 1, "job {job_id} is not running");
}

/// Claims `host_id`'s next job, starts it, lets its deadline pass and sweeps
/// as `sweeper` (the coordinator holding the host); returns the job, the
/// attempt that overran and what the sweep did.
async fn overrun(pool: &PgPool, host_id: i64, sweeper: Uuid) -> (Uuid, Option<Uuid>, Vec<jobs::Expired>) {
    let claimed = jobs::claim_next_for_host(pool, host_id)
        .await
        .unwrap()
        .expect("a queued job");
    assert!(start(pool, claimed.id, host_id, claimed.attempt_id.unwrap()).await);
    make_overdue(pool, claimed.id).await;
    (
        claimed.id,
        claimed.attempt_id,
        jobs::expire_overdue(pool, sweeper).await.unwrap(),
    )
}

#[tokio::test]
async fn an_overdue_job_is_requeued_then_failed_at_its_last_attempt_and_its_campaign_closes() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let other = host(&pool, "bench-02").await;
    let sweeper = holder_of(&pool, bench).await;
    let overrunning = campaign(&pool, &[job(bench, 16), job(bench, 64)]).await;
    // On time: its deadline is 30 s away and stays put through every sweep.
    let on_time = campaign(&pool, &[job(other, 16)]).await;
    let punctual = jobs::claim_next_for_host(&pool, other).await.unwrap().unwrap();
    let requeued = |job_id, attempt_id| jobs::Expired {
        job_id,
        host_id: bench,
        attempt_id,
        requeued: true,
    };
    let failed = |job_id, attempt_id| jobs::Expired {
        job_id,
        host_id: bench,
        attempt_id,
        requeued: false,
    };

    // First overrun: back in the queue, one attempt counted, the claim undone.
    let (first, attempt, swept) = overrun(&pool, bench, sweeper).await;
    assert_eq!(swept, [requeued(first, attempt)]);
    let j = jobs::get(&pool, first).await.unwrap().unwrap();
    assert_eq!((j.status, j.attempts), (JobStatus::Queued, 1));
    assert_eq!(
        (j.assigned_at, j.started_at, j.deadline, j.error),
        (None, None, None, None)
    );
    // Nothing is overdue any more: a second sweep changes nothing.
    assert!(jobs::expire_overdue(&pool, sweeper).await.unwrap().is_empty());

    // Its last attempt overruns too: failed with the reason. The campaign
    // still has a queued job, so it runs on.
    let (again, retry, swept) = overrun(&pool, bench, sweeper).await;
    assert_eq!(again, first, "the requeued job runs again first");
    assert_ne!(retry, attempt, "a retry is a new attempt");
    assert_eq!(swept, [failed(first, retry)]);
    let j = jobs::get(&pool, first).await.unwrap().unwrap();
    assert_eq!((j.status, j.attempts), (JobStatus::Failed, MAX_ATTEMPTS));
    assert!(j.finished_at.is_some());
    let reason = j.error.unwrap();
    assert!(reason.contains("exceeded its time limit"), "{reason}");
    let progress = campaigns::status(&pool, overrunning).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Running);
    assert_eq!((progress.jobs.queued, progress.jobs.failed), (1, 1));

    // The campaign's last job fails the same way: now the campaign is over.
    let (last, attempt, swept) = overrun(&pool, bench, sweeper).await;
    assert_ne!(last, first);
    assert_eq!(swept, [requeued(last, attempt)]);
    let (_, attempt, swept) = overrun(&pool, bench, sweeper).await;
    assert_eq!(swept, [failed(last, attempt)]);
    let progress = campaigns::status(&pool, overrunning).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Finished);
    assert!(progress.campaign.finished_at.is_some());
    assert_eq!((progress.jobs.failed, progress.jobs.total()), (2, 2));

    // The job within its deadline was never touched.
    assert_eq!(jobs::get(&pool, punctual.id).await.unwrap().unwrap(), punctual);
    let progress = campaigns::status(&pool, on_time).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Running);
    assert_eq!(progress.jobs.running, 1);
}

#[tokio::test]
async fn a_running_job_always_names_its_attempt() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let sneak =
        sqlx::query("UPDATE jobs SET status = 'running', assigned_at = now(), deadline = now() WHERE host_id = $1")
            .bind(bench)
            .execute(&pool)
            .await;
    let err = sneak.expect_err("a running job without an attempt was accepted");
    assert!(err.to_string().contains("jobs_running_has_attempt"), "{err}");
}

#[tokio::test]
async fn queued_jobs_past_their_campaigns_time_to_live_fail_with_the_reason_and_the_campaign_closes() {
    let pool = fresh_db().await;
    let gone = host(&pool, "gone-01").await;
    let busy = host(&pool, "busy-01").await;
    let old = campaign(&pool, &[job(gone, 16), job(busy, 16)]).await;
    let fresh = campaign(&pool, &[job(gone, 64)]).await;
    // The busy host is running its job; the gone one never took its own.
    let running = jobs::claim_next_for_host(&pool, busy).await.unwrap().unwrap();
    // The old campaign is two days old: past the default day.
    backdate(&pool, old).await;

    let expired = jobs::expire_queued(&pool).await.unwrap();
    let old_jobs = jobs::for_campaign(&pool, old).await.unwrap();
    let queued_old = old_jobs.iter().find(|j| j.host_id == gone).unwrap();
    assert_eq!(expired, [(queued_old.id, gone)], "only the stale queued job");
    assert_eq!(queued_old.status, JobStatus::Failed);
    let error = queued_old.error.as_deref().unwrap();
    assert!(
        error.contains("time to live of 86400 s") && error.contains("did not take it"),
        "{error}"
    );
    let still = jobs::get(&pool, running.id).await.unwrap().unwrap();
    assert_eq!(still.status, JobStatus::Running, "a running job is no queued job");
    assert_eq!(
        jobs::for_campaign(&pool, fresh).await.unwrap()[0].status,
        JobStatus::Queued,
        "within its time to live"
    );

    // Once the running job ends, the old campaign has nothing left: finished.
    assert!(jobs::fail(&pool, running.id, busy, "unsupported").await.unwrap());
    let progress = campaigns::status(&pool, old).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Finished);
    assert_eq!(progress.jobs.failed, 2);

    // A campaign whose only job expires closes in the same sweep.
    backdate(&pool, fresh).await;
    assert_eq!(jobs::expire_queued(&pool).await.unwrap().len(), 1);
    let progress = campaigns::status(&pool, fresh).await.unwrap().unwrap();
    assert_eq!(progress.campaign.status, CampaignStatus::Finished);
}

/// Makes campaign `id` and its jobs two days old, as if queued then.
async fn backdate(pool: &PgPool, id: i64) {
    sqlx::query(
        "WITH c AS (UPDATE campaigns SET created_at = now() - interval '2 days' WHERE id = $1) \
         UPDATE jobs SET created_at = now() - interval '2 days' WHERE campaign_id = $1",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
}

/// Waits until some other session of this database waits on a lock.
async fn wait_for_a_lock_wait(pool: &PgPool) {
    for _ in 0..600 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("nothing ever waited on a lock");
}

#[tokio::test]
async fn a_cancel_misses_no_job_claimed_while_it_runs() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16), job(bench, 64)]).await;
    let first = jobs::for_campaign(&pool, campaign_id).await.unwrap()[0].id;
    // A claim in flight: the job is running in its uncommitted transaction.
    let mut claim = pool.begin().await.unwrap();
    sqlx::query(
        "UPDATE jobs SET status = 'running', assigned_at = now(), deadline = now() + interval '1 minute', \
         attempt_id = gen_random_uuid() WHERE id = $1",
    )
    .bind(first)
    .execute(&mut *claim)
    .await
    .unwrap();
    let cancel = tokio::spawn({
        let pool = pool.clone();
        async move { campaigns::cancel(&pool, campaign_id).await }
    });
    // The cancel waits for the claimed job's row; then the claim commits.
    wait_for_a_lock_wait(&pool).await;
    claim.commit().await.unwrap();
    let told = cancel.await.unwrap().unwrap();
    assert_eq!(
        told,
        Some(vec![(first, bench)]),
        "the job claimed meanwhile is told to stop"
    );
    let progress = campaigns::status(&pool, campaign_id).await.unwrap().unwrap();
    assert_eq!((progress.jobs.running, progress.jobs.cancelled), (1, 1));
}

#[tokio::test]
async fn failing_a_queued_job_while_its_campaign_is_cancelled_does_not_deadlock() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16)]).await;
    let queued = jobs::for_campaign(&pool, campaign_id).await.unwrap()[0].id;
    // `campaigns::cancel`'s first statement, in a transaction held open: it owns the campaign's row.
    let mut cancel = pool.begin().await.unwrap();
    sqlx::query("UPDATE campaigns SET status = 'cancelled', finished_at = now() WHERE id = $1")
        .bind(campaign_id)
        .execute(&mut *cancel)
        .await
        .unwrap();
    let fail = tokio::spawn({
        let pool = pool.clone();
        async move { jobs::fail(&pool, queued, bench, "unsupported").await }
    });
    wait_for_a_lock_wait(&pool).await;
    // Its second statement: with the job's row taken by the failure first, this
    // would be a deadlock, and PostgreSQL would abort one of the two.
    sqlx::query(
        "UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE campaign_id = $1 AND status = 'queued'",
    )
    .bind(campaign_id)
    .execute(&mut *cancel)
    .await
    .expect("the cancel is not chosen as a deadlock victim");
    cancel.commit().await.unwrap();
    let failed = fail
        .await
        .unwrap()
        .expect("the failure is not chosen as a deadlock victim");
    assert!(!failed, "the job was cancelled first: nothing to fail");
    assert_eq!(
        jobs::get(&pool, queued).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
}

#[tokio::test]
async fn a_job_queued_again_after_its_campaign_was_cancelled_is_never_handed_out() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16)]).await;
    let running = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert!(campaigns::cancel(&pool, campaign_id).await.unwrap().is_some());
    // The agent is lost after the cancel: its job goes back to the queue …
    assert_eq!(jobs::requeue_lost(&pool, bench).await.unwrap().requeued, [running.id]);
    // … but a cancelled campaign hands out nothing.
    assert!(jobs::claim_next_for_host(&pool, bench).await.unwrap().is_none());
}

#[tokio::test]
async fn one_claim_for_many_hosts_gives_each_idle_host_its_next_job_in_queue_order() {
    let pool = fresh_db().await;
    let (a, b, busy, idle) = (
        host(&pool, "bench-01").await,
        host(&pool, "bench-02").await,
        host(&pool, "bench-03").await,
        host(&pool, "bench-04").await,
    );
    let first = campaign(
        &pool,
        &[job(a, 16), job(a, 64), job(b, 16), job(busy, 16), job(busy, 64)],
    )
    .await;
    let second = campaign(&pool, &[job(b, 1024)]).await;
    let running = jobs::claim_next_for_host(&pool, busy).await.unwrap().unwrap();
    // Repeats and a host with nothing queued change nothing.
    let mut claimed = jobs::claim_next_for_hosts(&pool, &[b, a, busy, idle, a]).await.unwrap();
    claimed.sort_by_key(|j| j.host_id);
    let got: Vec<(i64, i64, i32)> = claimed.iter().map(|j| (j.host_id, j.campaign_id, j.position)).collect();
    assert_eq!(got, vec![(a, first, 0), (b, first, 2)]);
    for j in &claimed {
        assert_eq!(j.status, JobStatus::Running);
        assert!(j.deadline.is_some() && j.attempt_id.is_some());
    }
    // Busy hosts get nothing more; once a job ends, the next claim moves on.
    assert!(
        jobs::claim_next_for_hosts(&pool, &[a, b, busy])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(jobs::fail(&pool, running.id, busy, "unsupported").await.unwrap());
    assert!(jobs::fail(&pool, claimed[1].id, b, "unsupported").await.unwrap());
    let mut next = jobs::claim_next_for_hosts(&pool, &[a, b, busy]).await.unwrap();
    next.sort_by_key(|j| j.host_id);
    let got: Vec<(i64, i64)> = next.iter().map(|j| (j.host_id, j.campaign_id)).collect();
    assert_eq!(got, vec![(b, second), (busy, first)]);
    assert!(jobs::claim_next_for_hosts(&pool, &[]).await.unwrap().is_empty());
}

/// A host's next job is read from its own queue whatever the statistics say.
/// Counted empty (`jobs` vacuumed between campaigns, and the campaign's own
/// `ANALYZE` skipped while a vacuum runs), a claim that joined the running
/// campaigns read every active job of the campaign for each host instead: a
/// dispatch growing with the campaign's square (docs/performance.md,
/// "Coordinator queries and sessions"). The index entries each claim read
/// are PostgreSQL's own counts, flushed on demand by the one connection.
#[tokio::test]
async fn a_claim_reads_each_hosts_queue_even_when_the_statistics_count_it_empty() {
    let pool = fresh_db().await;
    let hosts = bench_hosts(&pool, 40).await;
    let matrix: Vec<_> = hosts
        .iter()
        .flat_map(|&h| (1..=25).map(move |i| job(h, 16 * i)))
        .collect();
    let id = campaign(&pool, &matrix).await;
    // Every connection's counts are flushed when it closes; from here on
    // there is one, whose counts are flushed before each reading.
    let options = pool.connect_options();
    pool.close().await;
    let one = PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*options).clone())
        .await
        .unwrap();
    // Autovacuum, which could count the queue again meanwhile, stays away.
    for sql in [
        "ALTER TABLE jobs SET (autovacuum_enabled = false)",
        "UPDATE jobs SET status = 'done', finished_at = now()",
        "VACUUM ANALYZE jobs",
        "UPDATE jobs SET status = 'queued', finished_at = NULL",
    ] {
        sqlx::query(sql).execute(&one).await.unwrap();
    }
    let counted: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = 'jobs_queued_per_host'")
        .fetch_one(&one)
        .await
        .unwrap();
    assert_eq!(counted, 0.0, "the statistics count no job queued");
    let read = async || -> (i64, i64) {
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&one)
            .await
            .unwrap();
        sqlx::query_as(
            "SELECT sum(idx_tup_read) FILTER (WHERE indexrelname = 'jobs_queued_per_host')::bigint, \
                    sum(idx_tup_read) FILTER (WHERE indexrelname = 'jobs_active_per_campaign')::bigint \
             FROM pg_stat_user_indexes WHERE relname = 'jobs'",
        )
        .fetch_one(&one)
        .await
        .unwrap()
    };
    let before = read().await;
    let mut claimed = jobs::claim_next_for_hosts(&one, &hosts).await.unwrap();
    let after = read().await;
    claimed.sort_by_key(|j| j.host_id);
    let got: Vec<(i64, i64, i32)> = claimed.iter().map(|j| (j.host_id, j.campaign_id, j.position)).collect();
    let first: Vec<(i64, i64, i32)> = (0..).step_by(25).zip(&hosts).map(|(p, &h)| (h, id, p)).collect();
    assert_eq!(got, first, "each host its first job");
    let (queues, campaigns) = (after.0 - before.0, after.1 - before.1);
    assert!(
        campaigns < matrix.len() as i64,
        "the campaign's active jobs are not read for each host: {campaigns} entries for {} hosts",
        hosts.len()
    );
    assert!(
        queues >= hosts.len() as i64,
        "the hosts' queues were read: {queues} entries"
    );
}

#[tokio::test]
async fn batched_claims_racing_over_overlapping_hosts_never_give_a_host_two_jobs() {
    let pool = fresh_db().await;
    let hosts = bench_hosts(&pool, 12).await;
    let matrix: Vec<_> = hosts
        .iter()
        .flat_map(|h| [job(*h, 16), job(*h, 64), job(*h, 256)])
        .collect();
    campaign(&pool, &matrix).await;
    let mut open = Vec::new();
    for _ in 0..6 {
        open.push(pool.acquire().await.unwrap());
    }
    drop(open);
    // Six claims at once, each over a different, overlapping half of the hosts, in both orders.
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let pool = pool.clone();
            let mut some: Vec<i64> = hosts
                .iter()
                .copied()
                .skip(i)
                .step_by(2)
                .chain(hosts.iter().copied().take(4))
                .collect();
            if i % 2 == 1 {
                some.reverse();
            }
            tokio::spawn(async move { jobs::claim_next_for_hosts(&pool, &some).await })
        })
        .collect();
    let mut won = Vec::new();
    for task in tasks {
        won.extend(task.await.unwrap().expect("a claim failed"));
    }
    let mut per_host: Vec<i64> = won.iter().map(|j| j.host_id).collect();
    per_host.sort_unstable();
    let mut distinct = per_host.clone();
    distinct.dedup();
    assert_eq!(per_host, distinct, "a host got two jobs");
    assert_eq!(distinct, hosts, "every host got one");
}
