//! What a migration does to data stored before it: rows written by the
//! schema of the migration before, then the rest applied.

use cipherfleet_coordinator::domain::facts::FactColumns;
use cipherfleet_coordinator::domain::memory::StoredMemory;
use cipherfleet_coordinator::report::host_results;
use cipherfleet_coordinator::report::matrix;
use cipherfleet_coordinator::store::schema;
use cipherfleet_coordinator::store::snapshots;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{db_at_migration, facts, job, measurement};

/// Stores a result of `host_id` at `size_bytes` as the schema of migration 4
/// held it (its typed columns, and `stored` as the measurement JSON).
async fn result_before_0005(pool: &PgPool, host_id: i64, snapshot: i64, size_bytes: i64, stored: &Value) {
    let campaign: i64 = sqlx::query_scalar(
        "INSERT INTO campaigns (name, suite, matrix, started_by) VALUES ('before', 'quick', '{}', 'tests') RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let job: uuid::Uuid = sqlx::query_scalar(
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
             key_mode, path, time_limit_seconds, status) \
         VALUES ($1, $2, 0, '{}', 'aes-256-gcm', 'encrypt', $3, 1, 'static', 'accelerated', 60, 'done') RETURNING id",
    )
    .bind(campaign)
    .bind(host_id)
    .bind(size_bytes)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO results (job_id, host_id, snapshot_id, algorithm, direction, size_bytes, threads, key_mode, \
             path, path_used, throughput_mb_s, ops_per_s, latency_p50_ns, latency_p90_ns, latency_p99_ns, \
             latency_p999_ns, latency_max_ns, latency_method, batch_ops, samples, cpu_user_seconds, \
             cpu_sys_seconds, cpu_utilization, key_setup_ns, elapsed_seconds, measurement) \
         VALUES ($1, $2, $3, 'aes-256-gcm', 'encrypt', $4, 1, 'static', 'accelerated', 'accelerated', 100, 6100, \
             60, 70, 90, 400, 12000, 'batch-mean', 1024, 3, 0.98, 0.01, 0.99, 85, 1, $5)",
    )
    .bind(job)
    .bind(host_id)
    .bind(snapshot)
    .bind(size_bytes)
    .bind(stored)
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn migration_5_fills_memory_low_samples_and_the_build_profile_from_what_was_stored() {
    let pool = db_at_migration(4).await;
    let mut probed = facts("6.1.0-18-amd64");
    probed["build"]["codegen"] = json!({"profile": "release", "opt_level": "3", "lto": "thin",
        "codegen_units": 1, "target_features": ["sse2", "fxsr", "sse4.1", "sse"]});
    let host_id: i64 = sqlx::query_scalar("INSERT INTO hosts (name) VALUES ('before-0005') RETURNING id")
        .fetch_one(&pool)
        .await
        .unwrap();
    let snapshot: i64 = sqlx::query_scalar(
        "INSERT INTO host_fact_snapshots (host_id, facts_hash, facts) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(host_id)
    .bind(vec![7u8; 32])
    .bind(&probed)
    .fetch_one(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE hosts SET current_snapshot_id = $1 WHERE id = $2")
        .bind(snapshot)
        .bind(host_id)
        .execute(&pool)
        .await
        .unwrap();
    // An agent of schema /2 (memory, low_samples) at 16 B; one from before at 1 KiB.
    let reported = measurement(&job(host_id, 16).spec, Path::Accelerated, 100.0);
    result_before_0005(&pool, host_id, snapshot, 16, &serde_json::to_value(&reported).unwrap()).await;
    let mut older = serde_json::to_value(measurement(&job(host_id, 1024).spec, Path::Accelerated, 100.0)).unwrap();
    for added in ["memory", "low_samples"] {
        older.as_object_mut().unwrap().remove(added);
    }
    result_before_0005(&pool, host_id, snapshot, 1024, &older).await;
    sqlx::query("SELECT refresh_result_points()")
        .execute(&pool)
        .await
        .unwrap();

    schema::apply(&pool).await.expect("the remaining migrations apply");

    // The profile reads as if the coordinator had stored the snapshot itself.
    let want = FactColumns::from_facts(&probed);
    let history = snapshots::history(&pool, host_id).await.unwrap();
    assert_eq!(
        (
            &history[0].columns.build_codegen,
            &history[0].columns.build_target_features
        ),
        (&want.build_codegen, &want.build_target_features)
    );
    assert_eq!(
        want.build_codegen.as_deref(),
        Some("release, opt-level 3, LTO thin, 1 codegen unit")
    );

    let figures = reported.figures.as_ref().unwrap();
    let expected = StoredMemory::from(figures.memory.as_ref());
    assert!(expected.cipher_state_bytes.is_some() && figures.low_samples);
    let mut rows: Vec<(u64, bool, StoredMemory)> = host_results::list(&pool, host_id, 10, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.point.size_bytes, r.low_samples, r.memory))
        .collect();
    rows.sort_by_key(|r| r.0);
    let want_rows = [(16, true, expected), (1024, false, StoredMemory::default())];
    assert_eq!(rows, want_rows);
    // The latest-result table the modes page reads carries them too.
    let latest: Vec<(u64, bool, StoredMemory)> = matrix::host_points(
        &pool,
        &[host_id],
        Direction::Encrypt,
        Path::Accelerated,
        Provider::RustCrypto,
    )
    .await
    .unwrap()
    .into_iter()
    .map(|r| (r.point.size_bytes, r.low_samples, r.memory))
    .collect();
    assert_eq!(latest, want_rows);
}
