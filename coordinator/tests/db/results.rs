use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::store::campaigns::{self, CampaignStatus};
use cipherfleet_coordinator::store::jobs;
use cipherfleet_coordinator::store::results::{self, RecordOutcome};
use cipherfleet_coordinator::store::{Error, hosts};
use cipherfleet_core::measurement::Measurement;
use cipherfleet_core::path::{Path, PathUsed};

use crate::helpers::{campaign, facts, fresh_db, holder_of, host, job, record, result_of};

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

/// Without a unique index on `job_id` (`results` is partitioned by time, and
/// a partitioned table's unique keys hold its partition key), a result sent
/// again, twice in one batch, or by two batches at once, is stored once.
#[tokio::test]
async fn a_jobs_row_not_the_unique_index_keeps_its_result_once() {
    let pool = fresh_db().await;
    let unique_on_job: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid \
             AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'results'::regclass AND i.indisunique \
             AND a.attname = 'job_id')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        !unique_on_job,
        "results is partitioned (migrations/0040): no unique index on job_id"
    );
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16), job(bench, 64)]).await;

    // Two copies racing, each in a batch of its own.
    let first = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let copy = [result_of(&first, 200.0)];
    let (a, b) = tokio::join!(
        results::record_batch(&pool, &[], &copy),
        results::record_batch(&pool, &[], &copy)
    );
    let mut got: Vec<RecordOutcome> = [a.unwrap(), b.unwrap()]
        .into_iter()
        .flatten()
        .map(Result::unwrap)
        .collect();
    got.sort_by_key(|o| o != &RecordOutcome::Inserted);
    assert_eq!(got, [RecordOutcome::Inserted, RecordOutcome::Duplicate]);
    assert_eq!(results::count_for_job(&pool, first.id).await.unwrap(), 1);
    // And again later.
    let again = results::record_batch(&pool, &[], &copy).await.unwrap();
    assert!(matches!(again[..], [Ok(RecordOutcome::Duplicate)]), "{again:?}");

    // Two copies in one batch.
    let second = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let one = result_of(&second, 300.0);
    let outcomes = results::record_batch(&pool, &[], &[one.clone(), one]).await.unwrap();
    assert!(
        matches!(
            outcomes[..],
            [Ok(RecordOutcome::Inserted), Ok(RecordOutcome::Duplicate)]
        ),
        "{outcomes:?}"
    );
    assert_eq!(results::count_for_job(&pool, second.id).await.unwrap(), 1);
    assert_eq!(count_results(&pool).await, 2);
}

async fn count_results(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM results")
        .fetch_one(pool)
        .await
        .unwrap()
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
    let listed = cipherfleet_coordinator::report::host_results::list(&pool, bench, 10, 0)
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

/// Stores `m` as the result of attempt `attempt` of `job_id`, as the session does.
async fn record_attempt(
    pool: &sqlx::PgPool,
    job_id: uuid::Uuid,
    host_id: i64,
    attempt: Option<uuid::Uuid>,
    m: &Measurement,
) -> RecordOutcome {
    let json = serde_json::to_value(m).unwrap();
    results::record(
        pool,
        job_id,
        host_id,
        attempt,
        m.path_used.unwrap(),
        m.figures.as_ref().unwrap(),
        &json,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn only_the_current_attempt_of_an_unfinished_job_stores_a_result() {
    use cipherfleet_coordinator::domain::attempt::Ignored;
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let campaign_id = campaign(&pool, &[job(bench, 16), job(bench, 64)]).await;
    let m = measurement(200.0);
    let sweeper = holder_of(&pool, bench).await;

    // Attempt 1 overruns and the job is dispatched again: attempt 1's late result is ignored.
    let first = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    sqlx::query("UPDATE jobs SET deadline = now() - interval '1 second' WHERE id = $1")
        .bind(first.id)
        .execute(&pool)
        .await
        .unwrap();
    jobs::expire_overdue(&pool, sweeper).await.unwrap();
    let retry = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert_eq!(retry.id, first.id);
    assert_ne!(retry.attempt_id, first.attempt_id);
    assert_eq!(
        record_attempt(&pool, first.id, bench, first.attempt_id, &m).await,
        RecordOutcome::Ignored(Ignored::EarlierAttempt)
    );
    assert_eq!(
        record_attempt(&pool, first.id, bench, None, &m).await,
        RecordOutcome::Ignored(Ignored::EarlierAttempt),
        "an outcome naming no attempt"
    );
    assert_eq!(results::count_for_job(&pool, first.id).await.unwrap(), 0);
    let job = jobs::get(&pool, first.id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Running, "attempt 2 still runs");

    // Attempt 2 fails; its result arriving afterwards does not flip it to done.
    assert_eq!(
        jobs::fail_attempt(&pool, first.id, bench, retry.attempt_id, "self-test failed")
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(
        record_attempt(&pool, first.id, bench, retry.attempt_id, &m).await,
        RecordOutcome::Ignored(Ignored::Finished(JobStatus::Failed))
    );
    assert_eq!(
        jobs::get(&pool, first.id).await.unwrap().unwrap().status,
        JobStatus::Failed
    );

    // A cancelled job stays cancelled, without a result: dispatched, refused
    // by a busy agent (back in the queue), then its campaign cancelled.
    let second = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert!(
        jobs::release(&pool, second.id, bench, second.attempt_id.unwrap())
            .await
            .unwrap()
    );
    campaigns::cancel(&pool, campaign_id).await.unwrap();
    assert_eq!(
        record_attempt(&pool, second.id, bench, second.attempt_id, &m).await,
        RecordOutcome::Ignored(Ignored::Finished(JobStatus::Cancelled))
    );
    assert_eq!(
        jobs::get(&pool, second.id).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
    assert_eq!(results::count(&pool).await.unwrap(), 0);
}

/// The measurement document is stored once (migrations 0038 and 0042): its
/// `host` keeps only what differs from the snapshot the result is tied to
/// (the load when the point ran) and names the rest; the figures the typed
/// columns hold are left out and flagged; and it reads back whole.
#[tokio::test]
async fn a_results_host_facts_and_figures_are_stored_once_and_read_back_whole() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16), job(bench, 16)]).await;
    let at_hello = facts("6.6.0-1-amd64");
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &at_hello)
        .await
        .unwrap();
    let m = measurement(200.0);
    let mut sent = serde_json::to_value(&m).unwrap();
    sent["host"] = at_hello.clone();
    sent["host"]["noise"]["load_average"] = serde_json::json!([3.5, 2.0, 1.0]);
    let job = record_next(&pool, bench, &m, &sent).await;

    let (id, kept, same, stored_bytes, doc, in_columns): (
        i64,
        serde_json::Value,
        Option<Vec<String>>,
        i32,
        serde_json::Value,
        i32,
    ) = sqlx::query_as(
        "SELECT id, measurement -> 'host', host_from_snapshot, pg_column_size(measurement), measurement, \
             figures_in_columns FROM results WHERE job_id = $1",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .unwrap();
    let same = same.expect("the keys taken from the snapshot");
    for key in ["cpu", "features", "os", "build", "virtualization", "hostname"] {
        assert!(same.iter().any(|k| k == key), "{key} in {same:?}");
        assert!(kept.get(key).is_none(), "{key} is not stored twice: {kept}");
    }
    assert_eq!(
        kept["noise"]["load_average"],
        serde_json::json!([3.5, 2.0, 1.0]),
        "what differs stays"
    );
    assert_eq!(in_columns, 0xffff, "every figure the columns hold");
    for key in [
        "throughput_mb_s",
        "latency_ns",
        "sample_throughputs_mb_s",
        "memory",
        "path_used",
    ] {
        assert!(
            sent.get(key).is_some() && doc.get(key).is_none(),
            "{key} is not stored twice: {doc}"
        );
    }
    for key in ["operations", "backends", "schema", "algorithm"] {
        assert_eq!(doc.get(key), sent.get(key), "{key} stays in the document");
    }
    let whole = results::stored(&pool, id).await.unwrap().unwrap();
    assert_eq!(whole.measurement, sent, "read back as the agent sent it");
    let sent_bytes = serde_json::to_string(&sent).unwrap().len();
    assert!(
        (stored_bytes as usize) < sent_bytes,
        "{stored_bytes} stored of {sent_bytes} sent"
    );

    // Without host facts the host is stored as it came, the figures once.
    let m = measurement(210.0);
    let plain = serde_json::to_value(&m).unwrap();
    let job = record_next(&pool, bench, &m, &plain).await;
    let (id, same, host, in_columns): (i64, Option<Vec<String>>, Option<serde_json::Value>, i32) = sqlx::query_as(
        "SELECT id, host_from_snapshot, measurement -> 'host', figures_in_columns FROM results WHERE job_id = $1",
    )
    .bind(job)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((same, host, in_columns), (None, Some(serde_json::Value::Null), 0xffff));
    let whole = results::stored(&pool, id).await.unwrap().unwrap();
    assert_eq!(whole.measurement, plain);
}

/// Claims `host`'s next job and records `sent` as its result, measurement `m`'s figures in the columns.
async fn record_next(pool: &sqlx::PgPool, host: i64, m: &Measurement, sent: &serde_json::Value) -> uuid::Uuid {
    let claimed = jobs::claim_next_for_host(pool, host)
        .await
        .unwrap()
        .expect("a queued job");
    let attempt = jobs::get(pool, claimed.id).await.unwrap().unwrap().attempt_id;
    let figures = m.figures.as_ref().unwrap();
    results::record(pool, claimed.id, host, attempt, PathUsed::Accelerated, figures, sent)
        .await
        .unwrap();
    claimed.id
}

/// A document stored before migration 0042, or by a coordinator of the
/// release before it, holds its figures and none are put back over them.
#[tokio::test]
async fn a_whole_document_reads_back_as_stored() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16)]).await;
    let m = measurement(200.0);
    let sent = serde_json::to_value(&m).unwrap();
    let job = record_next(&pool, bench, &m, &sent).await;
    // As the release before stores it: the whole document, no flags; and a
    // column that no longer matches (an operator's correction) is not put
    // back over the document's figure.
    let id: i64 = sqlx::query_scalar(
        "UPDATE results SET measurement = $2, figures_in_columns = 0, throughput_mb_s = 1 WHERE job_id = $1 \
         RETURNING id",
    )
    .bind(job)
    .bind(&sent)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(results::stored(&pool, id).await.unwrap().unwrap().measurement, sent);
}

/// `results` keeps its hosts' and snapshots' ids without foreign keys, so
/// that storing a result looks up and locks neither row (migration 0046),
/// and what the keys did on delete still happens: a deleted host's results
/// go with it, and results tied to a deleted snapshot are tied to none.
#[tokio::test]
async fn a_deleted_host_takes_its_results_along_and_a_deleted_snapshot_unties_its_own() {
    let pool = fresh_db().await;
    let (a, b, c) = (host(&pool, "a").await, host(&pool, "b").await, host(&pool, "c").await);
    campaign(&pool, &[job(a, 16), job(b, 16), job(c, 16)]).await;
    for h in [a, b, c] {
        let claimed = jobs::claim_next_for_host(&pool, h).await.unwrap().unwrap();
        let stored = record(&pool, claimed.id, h, &measurement(200.0)).await.unwrap();
        assert_eq!(stored, RecordOutcome::Inserted);
    }
    // Each host's results: how many, and how many tied to a snapshot.
    let of = async |h: i64| -> (i64, i64) {
        sqlx::query_as("SELECT count(*), count(snapshot_id) FROM results WHERE host_id = $1")
            .bind(h)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!((of(a).await, of(b).await, of(c).await), ((1, 1), (1, 1), (1, 1)));
    let keys: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_constraint WHERE contype = 'f' \
         AND conrelid IN (SELECT relid FROM pg_partition_tree('results')) \
         AND confrelid IN ('hosts'::regclass, 'host_fact_snapshots'::regclass)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(keys, 0, "no partition of results checks its host or snapshot on insert");

    sqlx::query("DELETE FROM hosts WHERE id = $1")
        .bind(a)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM host_fact_snapshots WHERE host_id = $1")
        .bind(b)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        (of(a).await, of(b).await, of(c).await),
        ((0, 0), (1, 0), (1, 1)),
        "a's result deleted with a, b's kept untied from its deleted snapshot, c's untouched"
    );
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM results r WHERE NOT EXISTS (SELECT 1 FROM hosts h WHERE h.id = r.host_id) \
         OR (r.snapshot_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM host_fact_snapshots s WHERE s.id = r.snapshot_id))",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(orphans, 0);
}
