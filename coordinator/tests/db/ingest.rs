//! Results stored in batches (`results::record_batch`, the ingest batcher's
//! transaction): the per-result rules hold inside a batch, a bad result fails
//! alone, and a campaign closes exactly when its last job ends.

use chrono::{DateTime, TimeDelta, Utc};
use cipherfleet_coordinator::domain::attempt::Ignored;
use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::ingest::{Config, Ingest};
use cipherfleet_coordinator::store::campaigns::{self, CampaignStatus};
use cipherfleet_coordinator::store::jobs::{self, Start};
use cipherfleet_coordinator::store::results::{self, NewResult, RecordOutcome};
use cipherfleet_coordinator::store::{Error, advisory, jobs::Job};
use sqlx::PgPool;

use crate::helpers::{assert_job_counts_kept, bench_hosts, campaign, fresh_db, host, job, result_of};

async fn claim(pool: &PgPool, host_id: i64) -> Job {
    jobs::claim_next_for_host(pool, host_id)
        .await
        .unwrap()
        .expect("a job to claim")
}

/// Two hosts, `bench-01` and `bench-02`, each running its one job of a campaign.
async fn two_hosts_each_running_a_job(pool: &PgPool) -> (i64, i64, Job, Job) {
    let (a, b) = (host(pool, "bench-01").await, host(pool, "bench-02").await);
    campaign(pool, &[job(a, 16), job(b, 16)]).await;
    (a, b, claim(pool, a).await, claim(pool, b).await)
}

/// When an agent's start was heard, `secs` seconds ago, to the microsecond
/// PostgreSQL keeps.
fn ago(secs: i64) -> DateTime<Utc> {
    let now = Utc::now() - TimeDelta::seconds(secs);
    DateTime::from_timestamp_micros(now.timestamp_micros()).expect("in range")
}

/// The start of `job`'s current attempt by its own host, heard at `at`.
fn start_of(job: &Job, at: DateTime<Utc>) -> Start {
    Start {
        job_id: job.id,
        host_id: job.host_id,
        attempt_id: job.attempt_id.expect("a claimed job has an attempt"),
        at,
    }
}

async fn status_of(pool: &PgPool, campaign_id: i64) -> CampaignStatus {
    campaigns::get(pool, campaign_id).await.unwrap().unwrap().status
}

#[tokio::test]
async fn each_result_of_a_batch_is_judged_alone_and_a_refused_one_fails_only_its_job() {
    let pool = fresh_db().await;
    let names = ["bench-01", "bench-02", "bench-03", "bench-04", "bench-05"];
    let mut hosts = Vec::new();
    for name in names {
        hosts.push(host(&pool, name).await);
    }
    let campaign_id = campaign(&pool, &hosts.iter().map(|h| job(*h, 16)).collect::<Vec<_>>()).await;
    let mut claimed = Vec::new();
    for h in &hosts {
        claimed.push(claim(&pool, *h).await);
    }
    let valid = result_of(&claimed[0], 200.0);
    // The database refuses a negative figure: the whole statement would fail.
    let negative = result_of(&claimed[1], -1.0);
    let stale = NewResult {
        attempt: Some(uuid::Uuid::new_v4()),
        ..result_of(&claimed[2], 200.0)
    };
    let other_point = {
        let mut r = result_of(&claimed[3], 200.0);
        if let Ok(c) = &mut r.measurement {
            c.ran.as_mut().unwrap().point.size_bytes = 64;
        }
        r
    };
    let malformed = NewResult {
        measurement: Err("measurement_json: missing field `figures`".into()),
        ..result_of(&claimed[4], 200.0)
    };
    let unknown = NewResult {
        job_id: uuid::Uuid::new_v4(),
        ..result_of(&claimed[0], 200.0)
    };
    let intruder = NewResult {
        host_id: hosts[1],
        ..result_of(&claimed[0], 200.0)
    };
    let batch = [
        valid.clone(),
        negative,
        stale,
        other_point,
        malformed,
        valid,
        unknown,
        intruder,
    ];

    let outcomes = results::record_batch(&pool, &[], &batch).await.unwrap();

    assert_eq!(outcomes.len(), batch.len());
    assert!(matches!(outcomes[0], Ok(RecordOutcome::Inserted)), "{:?}", outcomes[0]);
    assert!(
        matches!(&outcomes[1], Ok(RecordOutcome::Invalid(r)) if r.starts_with("invalid measurement: ") && r.contains("check constraint")),
        "{:?}",
        outcomes[1]
    );
    assert!(
        matches!(outcomes[2], Ok(RecordOutcome::Ignored(Ignored::EarlierAttempt))),
        "{:?}",
        outcomes[2]
    );
    assert!(
        matches!(&outcomes[3], Ok(RecordOutcome::Invalid(r)) if r.contains("does not match the job's")),
        "{:?}",
        outcomes[3]
    );
    assert_eq!(
        outcomes[4].as_ref().unwrap(),
        &RecordOutcome::Invalid("invalid measurement: measurement_json: missing field `figures`".into())
    );
    assert!(
        matches!(outcomes[5], Ok(RecordOutcome::Duplicate)),
        "the same result twice in a batch"
    );
    assert!(matches!(outcomes[6], Err(Error::UnknownJob(_))), "{:?}", outcomes[6]);
    assert!(
        matches!(outcomes[7], Err(Error::JobOfAnotherHost { .. })),
        "{:?}",
        outcomes[7]
    );

    let after: Vec<(JobStatus, i64)> = {
        let mut v = Vec::new();
        for j in &claimed {
            let status = jobs::get(&pool, j.id).await.unwrap().unwrap().status;
            v.push((status, results::count_for_job(&pool, j.id).await.unwrap()));
        }
        v
    };
    assert_eq!(
        after,
        [
            (JobStatus::Done, 1),
            (JobStatus::Failed, 0),
            (JobStatus::Running, 0),
            (JobStatus::Failed, 0),
            (JobStatus::Failed, 0),
        ]
    );
    let failed = jobs::get(&pool, claimed[1].id).await.unwrap().unwrap();
    assert!(failed.error.unwrap().starts_with("invalid measurement: "));
    assert_job_counts_kept(&pool, "after a batch stored one by one").await;
    assert_eq!(
        status_of(&pool, campaign_id).await,
        CampaignStatus::Running,
        "a job still runs"
    );
}

#[tokio::test]
async fn two_hosts_finishing_the_last_two_jobs_together_close_the_campaign() {
    let pool = fresh_db().await;
    let (a, b) = (host(&pool, "bench-01").await, host(&pool, "bench-02").await);
    // Many rounds: the two commits race differently each time.
    for round in 0..20 {
        let campaign_id = campaign(&pool, &[job(a, 16), job(b, 16)]).await;
        let (ja, jb) = (claim(&pool, a).await, claim(&pool, b).await);
        let (ra, rb) = (result_of(&ja, 100.0), result_of(&jb, 100.0));
        let (oa, ob) = tokio::join!(
            results::record_batch(&pool, &[], std::slice::from_ref(&ra)),
            results::record_batch(&pool, &[], std::slice::from_ref(&rb)),
        );
        assert!(matches!(oa.unwrap()[0], Ok(RecordOutcome::Inserted)));
        assert!(matches!(ob.unwrap()[0], Ok(RecordOutcome::Inserted)));
        assert_eq!(
            status_of(&pool, campaign_id).await,
            CampaignStatus::Finished,
            "round {round}"
        );
    }
}

#[tokio::test]
async fn a_campaign_with_a_queued_or_running_job_is_never_closed() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16), job(bench, 64)]).await;
    let first = claim(&pool, bench).await;
    let outcomes = results::record_batch(&pool, &[], &[result_of(&first, 100.0)])
        .await
        .unwrap();
    assert!(matches!(outcomes[0], Ok(RecordOutcome::Inserted)));
    assert_eq!(
        status_of(&pool, campaign_id).await,
        CampaignStatus::Running,
        "one queued"
    );
    assert_eq!(campaigns::close_any_complete(&pool).await.unwrap(), Vec::<i64>::new());

    let second = claim(&pool, bench).await;
    assert_eq!(
        campaigns::close_if_complete(&pool, &[campaign_id]).await.unwrap(),
        Vec::<i64>::new(),
        "one running"
    );
    // The check after the commit never ran (a crash): the sweep's closes it.
    sqlx::query("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = $1")
        .bind(second.id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(campaigns::close_any_complete(&pool).await.unwrap(), vec![campaign_id]);
    assert_eq!(status_of(&pool, campaign_id).await, CampaignStatus::Finished);
    assert_eq!(
        campaigns::close_if_complete(&pool, &[campaign_id]).await.unwrap(),
        Vec::<i64>::new(),
        "closed once"
    );
}

#[tokio::test]
async fn job_starts_are_noted_in_one_statement_for_the_current_attempt_only() {
    let pool = fresh_db().await;
    let (a, _, ja, jb) = two_hosts_each_running_a_job(&pool).await;
    let heard = ago(3);
    let started = [
        start_of(&ja, heard),
        // Another host's, and an earlier attempt's: neither counts.
        Start {
            host_id: a,
            ..start_of(&jb, heard)
        },
        Start {
            attempt_id: uuid::Uuid::new_v4(),
            ..start_of(&jb, heard)
        },
    ];
    assert_eq!(jobs::mark_started_many(&pool, &started).await.unwrap(), 1);
    // At the time it was heard, not when it was stored.
    assert_eq!(jobs::get(&pool, ja.id).await.unwrap().unwrap().started_at, Some(heard));
    assert!(jobs::get(&pool, jb.id).await.unwrap().unwrap().started_at.is_none());
    assert_eq!(
        jobs::mark_started_many(&pool, &[start_of(&jb, ago(1)), start_of(&ja, ago(0))])
            .await
            .unwrap(),
        1,
        "ja was started already"
    );
    assert_eq!(jobs::get(&pool, ja.id).await.unwrap().unwrap().started_at, Some(heard));
    assert_eq!(jobs::mark_started_many(&pool, &[]).await.unwrap(), 0);
}

/// A start stored on its own and its result, stored in a later batch, may
/// commit in either order (batches are stored in parallel): a start that comes
/// after its attempt ended is noted all the same, but not on a job queued
/// again, whose attempt did not run.
#[tokio::test]
async fn a_start_stored_after_its_result_is_still_noted() {
    let pool = fresh_db().await;
    let (_, _, ja, jb) = two_hosts_each_running_a_job(&pool).await;
    results::record_batch(&pool, &[], &[result_of(&ja, 100.0)])
        .await
        .unwrap();
    assert!(
        jobs::release(&pool, jb.id, jb.host_id, jb.attempt_id.unwrap())
            .await
            .unwrap()
    );
    let heard = ago(2);
    assert_eq!(
        jobs::mark_started_many(&pool, &[start_of(&ja, heard), start_of(&jb, heard)])
            .await
            .unwrap(),
        1
    );
    let (ja, jb) = (
        jobs::get(&pool, ja.id).await.unwrap().unwrap(),
        jobs::get(&pool, jb.id).await.unwrap().unwrap(),
    );
    assert_eq!((ja.status, ja.started_at), (JobStatus::Done, Some(heard)));
    assert_eq!((jb.status, jb.started_at), (JobStatus::Queued, None));
}

#[tokio::test]
async fn a_start_and_its_result_in_one_batch_are_stored_together() {
    let pool = fresh_db().await;
    let (a, _, ja, jb) = two_hosts_each_running_a_job(&pool).await;
    let (heard_a, heard_b) = (ago(4), ago(3));
    let started = [start_of(&ja, heard_a), start_of(&jb, heard_b)];
    // `ja` starts and finishes in the batch; `jb` only starts.
    let outcomes = results::record_batch(&pool, &started, &[result_of(&ja, 100.0)])
        .await
        .unwrap();
    assert_eq!(outcomes[0].as_ref().unwrap(), &RecordOutcome::Inserted);
    let (ja, jb) = (
        jobs::get(&pool, ja.id).await.unwrap().unwrap(),
        jobs::get(&pool, jb.id).await.unwrap().unwrap(),
    );
    assert_eq!((ja.status, jb.status), (JobStatus::Done, JobStatus::Running));
    // Each at the time it was heard, the finished one's too.
    assert_eq!((ja.started_at, jb.started_at), (Some(heard_a), Some(heard_b)));
    // A batch of starts alone commits them too.
    campaign(&pool, &[job(a, 64)]).await;
    let next = claim(&pool, a).await;
    results::record_batch(&pool, &[start_of(&next, ago(0))], &[])
        .await
        .unwrap();
    assert!(jobs::get(&pool, next.id).await.unwrap().unwrap().started_at.is_some());
}

/// A start whose result is not in the batch is committed before the batch's
/// transaction, which does not hold its job's row: the batch with its result
/// would otherwise wait for this one to commit.
#[tokio::test]
async fn a_start_without_its_result_is_committed_before_the_batch_and_not_held() {
    let pool = fresh_db().await;
    let (a, _, ja, jb) = two_hosts_each_running_a_job(&pool).await;
    // Host `a`'s claim lock, held elsewhere: the batch's transaction waits for it.
    let mut other = pool.begin().await.unwrap();
    advisory::lock_hosts_transaction(&mut other, &[a]).await.unwrap();
    let batch = tokio::spawn({
        let (pool, ja) = (pool.clone(), ja.clone());
        let started = [start_of(&jb, ago(0))];
        async move { results::record_and_claim(&pool, &started, &[result_of(&ja, 100.0)]).await }
    });
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while jobs::get(&pool, jb.id).await.unwrap().unwrap().started_at.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the start was not committed while the batch waited"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!batch.is_finished(), "the batch waits for host a's lock");
    let mut probe = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(jb.id)
        .execute(&mut *probe)
        .await
        .expect("the started job's row is not held by the waiting batch");
    probe.rollback().await.unwrap();
    other.commit().await.unwrap();
    let stored = batch.await.unwrap().unwrap();
    assert!(
        matches!(stored.outcomes[..], [Ok(RecordOutcome::Inserted)]),
        "{:?}",
        stored.outcomes
    );
    assert_eq!(jobs::get(&pool, ja.id).await.unwrap().unwrap().status, JobStatus::Done);
}

#[tokio::test]
async fn a_batch_claims_the_next_job_of_each_of_its_hosts_in_its_transaction() {
    let pool = fresh_db().await;
    let (a, b) = (host(&pool, "bench-01").await, host(&pool, "bench-02").await);
    campaign(&pool, &[job(a, 16), job(a, 64), job(b, 16)]).await;
    let (ja, jb) = (claim(&pool, a).await, claim(&pool, b).await);
    let stored = results::record_and_claim(&pool, &[], &[result_of(&ja, 100.0), result_of(&jb, 100.0)])
        .await
        .unwrap();
    assert!(
        matches!(
            stored.outcomes[..],
            [Ok(RecordOutcome::Inserted), Ok(RecordOutcome::Inserted)]
        ),
        "{:?}",
        stored.outcomes
    );
    // `a` has one more job, running now with an attempt of its own; `b` has none.
    let claimed = stored.claimed.expect("claimed with the batch");
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let next = jobs::get(&pool, claimed[0].id).await.unwrap().unwrap();
    assert_eq!((next.host_id, next.status), (a, JobStatus::Running));
    assert!(next.id != ja.id && next.attempt_id.is_some() && next.attempt_id == claimed[0].attempt_id);
    // A re-sent result is a duplicate, and claims nothing while the next job runs.
    let again = results::record_and_claim(&pool, &[], &[result_of(&ja, 100.0)])
        .await
        .unwrap();
    assert!(
        matches!(again.outcomes[..], [Ok(RecordOutcome::Duplicate)]),
        "{:?}",
        again.outcomes
    );
    assert!(again.claimed.expect("claimed").is_empty());
    // The last job's result claims nothing: the host has no job left.
    let last = results::record_and_claim(&pool, &[], &[result_of(&next, 100.0)])
        .await
        .unwrap();
    assert!(
        matches!(last.outcomes[..], [Ok(RecordOutcome::Inserted)]),
        "{:?}",
        last.outcomes
    );
    assert!(last.claimed.expect("claimed").is_empty());
    assert_eq!(results::count(&pool).await.unwrap(), 3);
    assert_job_counts_kept(&pool, "after the batches").await;
}

/// The batch counts its jobs' changes itself (`store::jobs::Counts`), the
/// update trigger leaving them to it: `campaign_host_jobs` still equals a
/// count of the jobs, for finishes, failures and claims alike.
#[tokio::test]
async fn a_batch_counts_what_its_jobs_became() {
    let pool = fresh_db().await;
    let (a, b, c) = (
        host(&pool, "bench-01").await,
        host(&pool, "bench-02").await,
        host(&pool, "bench-03").await,
    );
    campaign(&pool, &[job(a, 16), job(a, 64), job(b, 16), job(b, 64), job(c, 16)]).await;
    let (ja, jb, jc) = (claim(&pool, a).await, claim(&pool, b).await, claim(&pool, c).await);
    assert_job_counts_kept(&pool, "after the claims").await;
    let invalid = NewResult {
        measurement: Err("measurement_json: missing field `figures`".into()),
        ..result_of(&jb, 100.0)
    };
    // `a` finishes and takes its next job, `b` fails and takes its next, `c`
    // finishes and has none left; the start of `a`'s job is heard with it.
    let stored = results::record_and_claim(
        &pool,
        &[start_of(&ja, ago(1))],
        &[result_of(&ja, 100.0), invalid, result_of(&jc, 100.0)],
    )
    .await
    .unwrap();
    assert_eq!(stored.claimed.expect("claimed").len(), 2);
    let by_status: Vec<(i64, i64, i64, i64)> =
        sqlx::query_as("SELECT host_id, running, done, failed FROM campaign_host_jobs ORDER BY host_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(by_status, [(a, 1, 1, 0), (b, 1, 0, 1), (c, 0, 1, 0)]);
    assert_job_counts_kept(&pool, "after a batch of finishes, a failure and claims").await;
    // The trigger still counts every other change: a job failed on its own.
    let next_b = jobs::claim_next_for_host(&pool, b).await.unwrap();
    assert!(next_b.is_none(), "b runs its next job already");
    let running_b: uuid::Uuid = sqlx::query_scalar("SELECT id FROM jobs WHERE host_id = $1 AND status = 'running'")
        .bind(b)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(jobs::fail(&pool, running_b, b, "self-test failed").await.unwrap());
    sqlx::query("UPDATE jobs SET status = 'queued' WHERE host_id = $1 AND status = 'failed'")
        .bind(b)
        .execute(&pool)
        .await
        .unwrap();
    assert_job_counts_kept(&pool, "after changes outside a batch").await;
}

/// Counts the updates of each job row from now on (`job_updates`).
async fn count_job_updates(pool: &PgPool) {
    for statement in [
        "CREATE TABLE job_updates (job_id uuid NOT NULL)",
        "CREATE FUNCTION count_job_update() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN INSERT INTO job_updates VALUES (NEW.id); RETURN NULL; END $$",
        "CREATE TRIGGER count_job_update AFTER UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION count_job_update()",
    ] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
}

async fn updates_of(pool: &PgPool, job_id: uuid::Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM job_updates WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_job_started_and_finished_in_one_batch_is_updated_once() {
    let pool = fresh_db().await;
    let (_, _, ja, jb) = two_hosts_each_running_a_job(&pool).await;
    count_job_updates(&pool).await;
    let started = [start_of(&ja, ago(1)), start_of(&jb, ago(1))];
    let outcomes = results::record_batch(&pool, &started, &[result_of(&ja, 100.0)])
        .await
        .unwrap();
    assert_eq!(outcomes[0].as_ref().unwrap(), &RecordOutcome::Inserted);
    // Started and done in one update; the job that only started, one too.
    assert_eq!((updates_of(&pool, ja.id).await, updates_of(&pool, jb.id).await), (1, 1));
    let done = jobs::get(&pool, ja.id).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Done);
    assert!(done.started_at.is_some() && done.started_at <= done.finished_at);
}

#[tokio::test]
async fn a_measurement_jsonb_refuses_fails_only_its_job() {
    let pool = fresh_db().await;
    let (a, b) = (host(&pool, "bench-01").await, host(&pool, "bench-02").await);
    let campaign_id = campaign(&pool, &[job(a, 16), job(b, 16)]).await;
    let (ja, jb) = (claim(&pool, a).await, claim(&pool, b).await);
    // Well-formed JSON that Rust reads, and PostgreSQL's jsonb does not take.
    let mut refused = result_of(&jb, 100.0);
    if let Ok(c) = &mut refused.measurement {
        c.json = c.json.replacen('{', r#"{"note": "nul \u0000 inside","#, 1);
    }
    let batch = [result_of(&ja, 100.0), refused];
    let outcomes = results::record_batch(&pool, &[], &batch).await.unwrap();
    assert_eq!(outcomes[0].as_ref().unwrap(), &RecordOutcome::Inserted);
    assert!(
        matches!(&outcomes[1], Ok(RecordOutcome::Invalid(r)) if r.contains("Unicode")),
        "{:?}",
        outcomes[1]
    );
    let failed = jobs::get(&pool, jb.id).await.unwrap().unwrap();
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(status_of(&pool, campaign_id).await, CampaignStatus::Finished);
}

#[tokio::test]
async fn measurements_are_stored_compressed_with_lz4() {
    let pool = fresh_db().await;
    let a = host(&pool, "bench-01").await;
    campaign(&pool, &[job(a, 16)]).await;
    let ja = claim(&pool, a).await;
    results::record_batch(&pool, &[], &[result_of(&ja, 100.0)])
        .await
        .unwrap();
    let (size, compression): (i32, Option<String>) =
        sqlx::query_as("SELECT pg_column_size(measurement), pg_column_compression(measurement) FROM results")
            .fetch_one(&pool)
            .await
            .unwrap();
    // Small test measurements may stay uncompressed; a real one (4 KB) is not.
    assert!(
        compression.is_none() || compression.as_deref() == Some("lz4"),
        "{compression:?} ({size} bytes)"
    );
    let column: String = sqlx::query_scalar(
        "SELECT attcompression::text FROM pg_attribute WHERE attrelid = 'results'::regclass AND attname = 'measurement'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(column, "l", "the column's compression method");
}

/// Hands `jobs`' results to `ingest` all at once; each is stored as new.
async fn store_all(ingest: &Ingest, jobs: &[Job]) {
    let mut stored = tokio::task::JoinSet::new();
    for j in jobs {
        let (ingest, item) = (ingest.clone(), result_of(j, 100.0));
        stored.spawn(async move { ingest.record(item).await });
    }
    while let Some(reply) = stored.join_next().await {
        let outcome = reply.unwrap().expect("stored").outcome.expect("a valid result");
        assert_eq!(outcome, RecordOutcome::Inserted);
    }
}

#[tokio::test]
async fn while_handshakes_wait_for_a_turn_results_are_stored_in_small_batches_one_at_a_time() {
    let pool = fresh_db().await;
    let hosts = bench_hosts(&pool, 78).await;
    campaign(&pool, &hosts.iter().map(|h| job(*h, 16)).collect::<Vec<_>>()).await;
    let mut claimed = Vec::new();
    for h in &hosts {
        claimed.push(claim(&pool, *h).await);
    }
    // Each batch takes 0.3 s, so batches let run together overlap.
    sqlx::raw_sql(
        "CREATE FUNCTION test_slow() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$; \
         CREATE TRIGGER test_slow AFTER INSERT ON results FOR EACH STATEMENT EXECUTE FUNCTION test_slow();",
    )
    .execute(&pool)
    .await
    .unwrap();
    // A result a batch, up to four batches at once.
    let one_each = Ingest::start(
        &pool,
        Config {
            batch: 1,
            parallel: 4,
            ..Config::default()
        },
    );
    // A handshake waits for a turn: one batch at a time.
    let precedence = one_each.precedence();
    let waiting = precedence.enter();
    store_all(&one_each, &claimed[..4]).await;
    assert_eq!(one_each.stats().most_storing, 1);
    // None waits: several at once again.
    drop(waiting);
    store_all(&one_each, &claimed[4..8]).await;
    assert!(one_each.stats().most_storing > 1, "{:?}", one_each.stats());

    // Batches of up to 512 at once: while a handshake waits, 70 results
    // queued together are stored in more than one, none larger than 64.
    let default = Ingest::start(&pool, Config::default());
    let precedence = default.precedence();
    let waiting = precedence.enter();
    store_all(&default, &claimed[8..]).await;
    drop(waiting);
    let stats = default.stats();
    assert!(stats.batches >= 2, "{stats:?}");
    assert_eq!((stats.results, stats.most_storing), (70, 1));
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM results")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(done, 78);
}
