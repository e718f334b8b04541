//! results, points, host_results.

use chrono::{DateTime, Utc};
use cipherfleet_coordinator::report::{host_results, matrix};
use cipherfleet_coordinator::store::points::ResultKey;
use cipherfleet_coordinator::store::results::{Checked, NewResult, RecordOutcome};
use cipherfleet_coordinator::store::{jobs, points, results};
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;

use super::fixture::*;

#[tokio::test]
async fn results_and_their_points_read_back_with_their_figures() {
    let f = populate().await;
    let pool = &f.pool;
    let all = [
        &f.bench_accelerated,
        &f.bench_software,
        &f.bench_chacha,
        &f.vm_fell_back,
    ];

    // results
    assert_eq!(results::count(pool).await.unwrap(), 4);
    for stored in all {
        assert_eq!(results::count_for_job(pool, stored.job).await.unwrap(), 1);
    }
    assert_eq!(results::count_for_job(pool, f.failed_job).await.unwrap(), 0);
    let s = &f.vm_fell_back;
    let row = results::stored(pool, s.result).await.unwrap().expect("the vm's result");
    assert_eq!(
        (row.id, row.job_id, row.campaign_id),
        (s.result, s.job, Some(f.nightly))
    );
    assert_eq!((row.host_id, row.host_name.as_str()), (f.vm, "vm-01"));
    assert_eq!((row.snapshot_id, row.created_at), (Some(f.vm_snapshot), s.created_at));
    assert_eq!(row.measurement, serde_json::to_value(&s.measurement).unwrap());
    assert_eq!(results::stored(pool, i64::MAX).await.unwrap(), None);
    let sent = serde_json::to_value(&s.measurement).unwrap();
    let attempt = jobs::get(pool, s.job).await.unwrap().unwrap().attempt_id;
    let again = results::record(pool, s.job, f.vm, attempt, s.path_used(), s.figures(), &sent)
        .await
        .unwrap();
    assert_eq!(again, RecordOutcome::Duplicate);
    let resent = NewResult {
        job_id: s.job,
        host_id: f.vm,
        attempt,
        measurement: Ok(Checked::new(
            Some(s.measurement.spec()),
            s.path_used(),
            s.figures().clone(),
            sent.to_string(),
        )),
    };
    let batch = results::record_batch(pool, &[], std::slice::from_ref(&resent))
        .await
        .unwrap();
    assert!(matches!(batch[..], [Ok(RecordOutcome::Duplicate)]), "{batch:?}");
    assert!(results::record_batch(pool, &[], &[]).await.unwrap().is_empty());
    let again = results::record_and_claim(pool, &[], &[resent]).await.unwrap();
    assert!(
        matches!(again.outcomes[..], [Ok(RecordOutcome::Duplicate)]),
        "{again:?}"
    );
    assert!(again.claimed.unwrap().iter().all(|j| j.host_id == f.vm));
    assert_eq!(results::count(pool).await.unwrap(), 4);

    // host_results
    let page = host_results::list(pool, f.bench, 10, 0).await.unwrap();
    let newest_first = [&f.bench_chacha, &f.bench_software, &f.bench_accelerated];
    assert_eq!(page.len(), 3);
    for (row, stored) in page.iter().zip(newest_first) {
        let latest = stored.latest();
        assert_eq!(
            (row.id, row.campaign_id, row.created_at),
            (stored.result, Some(f.nightly), stored.created_at)
        );
        assert_eq!((row.point, row.path_used), (latest.point, latest.path_used));
        assert_eq!(
            (row.throughput_mb_s, row.ops_per_s),
            (latest.throughput_mb_s, latest.ops_per_s)
        );
        assert_eq!(
            (row.latency_p99_ns, row.cv, row.samples),
            (latest.latency_p99_ns, latest.cv, latest.samples)
        );
        assert_eq!((row.low_samples, row.memory), (latest.low_samples, latest.memory));
        assert!(row.memory.cipher_state_bytes.is_some(), "the fixture reports memory");
        assert!(!row.fell_back());
    }
    let middle = host_results::list(pool, f.bench, 1, 1).await.unwrap();
    assert_eq!(
        middle.iter().map(|r| r.id).collect::<Vec<_>>(),
        [f.bench_software.result]
    );
    let vm_page = host_results::list(pool, f.vm, 10, 0).await.unwrap();
    assert_eq!(vm_page.len(), 1);
    assert!(vm_page[0].fell_back(), "{:?}", vm_page[0]);
    assert_eq!(
        (
            host_results::count(pool, f.bench).await.unwrap(),
            host_results::count(pool, f.vm).await.unwrap()
        ),
        (3, 1)
    );

    let series = host_results::key_series(pool, f.bench, &["aes-256-gcm", "chacha20-poly1305"], 16384, 10)
        .await
        .unwrap();
    let samples: Vec<(Algorithm, DateTime<Utc>, f64)> = series
        .iter()
        .map(|s| (s.algorithm, s.created_at, s.throughput_mb_s))
        .collect();
    // Single-thread static-key encryption on the accelerated path only.
    assert_eq!(samples, [(gcm(), f.bench_accelerated.created_at, 2000.0)]);

    // points
    let result_count = async |result: i64| -> i32 {
        sqlx::query_scalar("SELECT result_count FROM result_points WHERE result_id = $1")
            .bind(result)
            .fetch_one(pool)
            .await
            .unwrap()
    };
    let before = matrix::host_points(
        pool,
        &[f.bench, f.vm],
        Direction::Encrypt,
        Path::Accelerated,
        Provider::RustCrypto,
    )
    .await
    .unwrap();
    assert_eq!(result_count(f.bench_accelerated.result).await, 1);
    let mut tx = pool.begin().await.unwrap();
    let accelerated = ResultKey {
        id: f.bench_accelerated.result,
        created_at: f.bench_accelerated.created_at,
    };
    points::record_many(&mut tx, &[accelerated]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(result_count(f.bench_accelerated.result).await, 2, "counted again");
    // Two points of a batch in one statement.
    let batch = [
        accelerated,
        ResultKey {
            id: f.bench_software.result,
            created_at: f.bench_software.created_at,
        },
    ];
    let mut tx = pool.begin().await.unwrap();
    points::record_many(&mut tx, &batch).await.unwrap();
    points::record_many(&mut tx, &[]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(result_count(f.bench_accelerated.result).await, 3);
    assert_eq!(result_count(f.bench_software.result).await, 2);
    points::refresh(pool).await.unwrap();
    assert_eq!(
        result_count(f.bench_accelerated.result).await,
        1,
        "rebuilt from results"
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM result_points")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(rows, 4);
    let after = matrix::host_points(
        pool,
        &[f.bench, f.vm],
        Direction::Encrypt,
        Path::Accelerated,
        Provider::RustCrypto,
    )
    .await
    .unwrap();
    assert_eq!(after, before);
}
