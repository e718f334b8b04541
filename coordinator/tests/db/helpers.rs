//! One private PostgreSQL cluster for the whole test binary, a fresh migrated
//! database per test (what `#[sqlx::test]` does, on our own cluster), and
//! fixtures.
//!
//! The shared cluster is started by the first test that asks for it and
//! stopped when the test binary exits (an `atexit` hook: statics are never
//! dropped), so no `postgres` process outlives `cargo test`.

use std::sync::{Mutex, OnceLock, PoisonError};

use cipherfleet_coordinator::domain::labels::Labels;
use cipherfleet_coordinator::pg::PrivateCluster;
use cipherfleet_coordinator::store::campaigns::{self, NewCampaign, NewJob};
use cipherfleet_coordinator::store::hosts;
use cipherfleet_coordinator::store::jobs::{self, Job};
use cipherfleet_coordinator::store::leases::{self, Holder};
use cipherfleet_coordinator::store::results::{self, Checked, NewResult, RecordOutcome};
use cipherfleet_coordinator::store::schema::{self, MIGRATOR};
use cipherfleet_core::Point;
use cipherfleet_core::measurement::{
    Figures, Harness, Latency, LatencyMethod, Measurement, Memory, SampleKind, WorkerReport,
};
use cipherfleet_core::path::{Backends, Flavour, Path, PathUsed};
use cipherfleet_core::spec::{Direction, Execution, JobSpec, KeyMode};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};
use uuid::Uuid;

#[path = "../support/temp_dir.rs"]
mod temp_dir;
pub use temp_dir::TempDir;

/// The shared cluster, taken and dropped (which stops it) at exit.
static CLUSTER: Mutex<Option<(PrivateCluster, TempDir)>> = Mutex::new(None);

/// How tests reach the shared cluster.
struct Shared {
    options: PgConnectOptions,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        // Started on a thread of its own: the server outlives this test's runtime.
        std::thread::spawn(|| {
            let dir = TempDir::new("db-tests");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let cluster = rt
                .block_on(PrivateCluster::start(&dir.path().join("pg")))
                .unwrap_or_else(|e| panic!("starting the test cluster: {e}"));
            let options = cluster.connect_options("postgres");
            *CLUSTER.lock().unwrap_or_else(PoisonError::into_inner) = Some((cluster, dir));
            // SAFETY: registers a plain function without arguments; it only
            // runs after main returns.
            let registered = unsafe { libc::atexit(stop_shared_cluster) };
            assert_eq!(registered, 0, "atexit failed: the cluster would leak");
            Shared { options }
        })
        .join()
        .expect("the shared test cluster did not start")
    })
}

extern "C" fn stop_shared_cluster() {
    let taken = CLUSTER.lock().unwrap_or_else(PoisonError::into_inner).take();
    // Dropping the cluster stops it (blocking), then the directory goes.
    drop(taken);
}

/// A fresh database with the schema applied, in the shared cluster.
pub async fn fresh_db() -> PgPool {
    let pool = empty_db().await;
    schema::apply(&pool).await.expect("migrating the test database");
    pool
}

/// A fresh database with the migrations up to `version` only: data stored
/// there, then the rest applied, shows what a later migration does to it.
pub async fn db_at_migration(version: i64) -> PgPool {
    let pool = empty_db().await;
    let older: Vec<_> = MIGRATOR.iter().filter(|m| m.version <= version).cloned().collect();
    assert!(older.iter().any(|m| m.version == version), "no migration {version}");
    sqlx::migrate::Migrator::with_migrations(older)
        .run(&pool)
        .await
        .expect("migrating the test database part way");
    pool
}

/// `pool`'s database and an exact copy of it (`CREATE DATABASE … TEMPLATE`,
/// timestamps and ids included), each with a pool of its own: two runs of
/// the same step, compared row by row. `pool` is closed, as copying needs.
pub async fn twin_dbs(pool: PgPool) -> (PgPool, PgPool) {
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await
        .expect("the database's name");
    pool.close().await;
    let shared = shared();
    let twin = format!("{name}_twin_{}", Uuid::new_v4().simple());
    let mut admin = shared.options.connect().await.expect("connecting to the test cluster");
    // Generated identifiers; CREATE DATABASE takes no bind parameters.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {twin} TEMPLATE {name}")))
        .execute(&mut admin)
        .await
        .expect("copying a test database");
    let connect = |db: String| {
        PgPoolOptions::new()
            .max_connections(8)
            .connect_with(shared.options.clone().database(&db))
    };
    let original = connect(name).await.expect("reconnecting to the test database");
    let copy = connect(twin).await.expect("connecting to its copy");
    (original, copy)
}

/// A fresh, empty database in the shared cluster.
pub async fn empty_db() -> PgPool {
    let shared = shared();
    let name = format!("test_{}", Uuid::new_v4().simple());
    let mut admin = shared.options.connect().await.expect("connecting to the test cluster");
    // A generated identifier; CREATE DATABASE takes no bind parameters.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("creating a test database");
    PgPoolOptions::new()
        .max_connections(8)
        .connect_with(shared.options.clone().database(&name))
        .await
        .expect("connecting to the test database")
}

/// The URL `serve` would be given for the database behind `pool`, as libpq (`pg_dump`) reads it too.
pub fn url_of(pool: &PgPool) -> String {
    let options = pool.connect_options();
    let socket = options.get_socket().expect("the test cluster listens on a unix socket");
    let host: String = socket
        .to_string_lossy()
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!(
        "postgres:///{}?host={host}&port={}&user={}&sslmode=disable",
        options.get_database().expect("a named database"),
        options.get_port(),
        options.get_username()
    )
}

/// Host facts as `cipherfleet-agent probe --format json` prints them.
pub fn facts(kernel_release: &str) -> Value {
    json!({
        "schema_version": 1,
        "hostname": "bench-01",
        "arch": "x86_64",
        "kernel_release": kernel_release,
        "os": {"pretty_name": "Debian GNU/Linux 12 (bookworm)", "id": "debian"},
        "memory_total_bytes": 17179869184u64,
        "cpu": {"vendor": "GenuineIntel", "model_name": "Intel(R) Xeon(R) Gold 6230",
                "family": 6, "model": 85, "stepping": 7, "logical_cores": 8},
        "virtualization": {"hypervisor": true, "kind": "kvm"},
        "features": {"source": "cpuid", "checked": ["aes", "avx"],
                     "advertised": ["aes", "avx"], "usable": ["aes", "avx"]},
        "build": {"agent_version": "0.1.0", "flavour": "accelerated"},
        "noise": {"load_average": [0.1, 0.2, 0.3]}
    })
}

/// [`facts`] whose CPU advertises and can use `features`, and nothing else.
pub fn with_features(features: &[&str]) -> Value {
    let mut f = facts("6.1.0-18-amd64");
    f["features"]["usable"] = json!(features);
    f["features"]["advertised"] = json!(features);
    f
}

/// `facts` with the providers' facts an agent reports: the kernel's chosen
/// drivers for `aes` and `gcm(aes)` (`(name, driver, generic)`) and an OpenSSL
/// 3.0 build whose capability variable masks `masked` (none when empty).
pub fn with_providers(mut facts: Value, drivers: &[(&str, &str, bool)], masked: &[&str]) -> Value {
    let drivers: Vec<Value> = drivers
        .iter()
        .map(|(name, driver, generic)| {
            json!({"name": name, "driver": driver, "module": if *generic { "kernel" } else { "aesni_intel" },
                   "priority": if *generic { 100 } else { 300 }, "kind": "cipher", "generic": generic,
                   "path": if *generic { "software" } else { "accelerated" }, "candidates": 2})
        })
        .collect();
    facts["providers"] = json!({
        "capabilities": [],
        "cpu": {},
        "kernel": {"drivers": drivers, "missing": [],
                   "af_alg_skcipher": {"available": true, "reason": null},
                   "af_alg_aead": {"available": true, "reason": null}},
        "openssl": {"binary": "/usr/bin/openssl", "version": "OpenSSL 3.0.19 27 Jan 2026",
                    "platform": "debian-amd64", "no_asm": false,
                    "libcrypto": "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
                    "speed_bytes_seconds": true, "speed_aead": true,
                    "capability_env": if masked.is_empty() { Value::Null } else { json!("OPENSSL_ia32cap=~0x200000200000000") },
                    "masked": masked},
    });
    facts
}

/// A hello of `name` with `labels` and `facts`; the host's id.
pub async fn hello(pool: &PgPool, name: &str, labels: Option<&Labels>, facts: &Value) -> i64 {
    hosts::upsert_host_with_facts(pool, name, labels, facts)
        .await
        .expect("hello")
        .host_id
}

/// A host that said hello.
pub async fn host(pool: &PgPool, name: &str) -> i64 {
    hosts::upsert_host_with_facts(pool, name, None, &facts("6.1.0-18-amd64"))
        .await
        .expect("upserting a host")
        .host_id
}

/// `count` hosts that said hello, `bench-00` on, in the order of their ids.
pub async fn bench_hosts(pool: &PgPool, count: usize) -> Vec<i64> {
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        ids.push(host(pool, &format!("bench-{i:02}")).await);
    }
    ids
}

/// A coordinator holding `host_id`'s lease, as while it serves the host's
/// session; returns its id. Overdue jobs are its to sweep.
pub async fn holder_of(pool: &PgPool, host_id: i64) -> Uuid {
    let holder = Holder {
        id: Uuid::new_v4(),
        name: "tests/1".into(),
    };
    let ttl = std::time::Duration::from_secs(600);
    assert!(
        leases::acquire(pool, host_id, &holder, 1, ttl).await.unwrap(),
        "the host's lease is free"
    );
    holder.id
}

/// One point of a matrix for `host_id`.
/// aes-256-gcm encrypt, 1 thread, static key, accelerated path, 0.5 s.
pub fn job(host_id: i64, size_bytes: u64) -> NewJob {
    job_on(host_id, size_bytes, Path::Accelerated)
}

/// As [`job`], asking for `path`.
pub fn job_on(host_id: i64, size_bytes: u64, path: Path) -> NewJob {
    NewJob {
        host_id,
        spec: JobSpec {
            point: Point {
                algorithm: "aes-256-gcm".parse().expect("a known algorithm"),
                direction: Direction::Encrypt,
                size_bytes,
                threads: 1,
                concurrency: None,
                key_mode: KeyMode::Static,
                path,
                nonce: cipherfleet_core::spec::Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 0.5,
        },
        execution: Execution::Native,
    }
}

/// A successful measurement of `spec` as the agent reports it: `path_used`
/// ran at `throughput_mb_s` (three samples at that value).
/// The accelerated-path result of `job` at `throughput_mb_s`, as its session
/// hands it to the batcher: checked without the job, naming the job's current attempt.
pub fn result_of(job: &Job, throughput_mb_s: f64) -> NewResult {
    let spec = serde_json::from_value(job.spec.clone()).expect("a stored spec");
    let m = measurement(&spec, Path::Accelerated, throughput_mb_s);
    NewResult {
        job_id: job.id,
        host_id: job.host_id,
        attempt: job.attempt_id,
        measurement: Ok(Checked::new(
            Some(m.spec()),
            m.path_used.expect("successful"),
            m.figures.clone().expect("with figures"),
            serde_json::to_string(&m).expect("serialises"),
        )),
    }
}

pub fn measurement(spec: &JobSpec, path_used: impl Into<PathUsed>, throughput_mb_s: f64) -> Measurement {
    let path_used = path_used.into();
    let backends = match path_used {
        PathUsed::Accelerated => Backends::best_on("x86_64"),
        PathUsed::Partial => Backends {
            aes: "aes-ni".into(),
            ..Backends::soft()
        },
        PathUsed::Software => Backends::soft(),
    };
    let report = WorkerReport {
        path_used,
        backends,
        build_flavour: Flavour::Accelerated,
        selftest_passed: 4,
        figures: Figures {
            throughput_mb_s,
            ops_per_s: throughput_mb_s * 61.0,
            latency_ns: Latency {
                p50: 60,
                p90: 70,
                p99: 90,
                p999: 400,
                max: 12000,
            },
            latency_method: LatencyMethod::BatchMean,
            batch_ops: 1024,
            cv: Some(0.02),
            samples: 3,
            sample_seconds: 0.33,
            warmup_seconds: 0.1,
            elapsed_seconds: 1.0,
            operations: 12_500_000,
            bytes_processed: 200_000_000,
            cpu_user_seconds: 0.98,
            cpu_sys_seconds: 0.01,
            cpu_utilization: 0.99,
            key_setup_ns: 85.0,
            sample_throughputs_mb_s: vec![throughput_mb_s; 3],
            latency_samples: 3000,
            throughput_batch_ops: 4096,
            sample_kind: SampleKind::Window,
            low_samples: true,
            all_running_bytes: 0,
            all_running_seconds: 0.0,
            objects: None,
            arrival_rate_per_s: None,
            memory: Some(Memory {
                cipher_state_bytes: 496,
                peak_rss_bytes: 3 << 20,
                heap_bytes_per_op: Some(0.0),
                allocs_per_op: Some(0.0),
            }),
        },
        harness: Harness::Engine,
    };
    Measurement::ok(spec, report, None)
}

/// Stores `m` as the result of `job_id` the way the session does: its typed
/// figures, and the object as sent.
pub async fn record(
    pool: &PgPool,
    job_id: Uuid,
    host_id: i64,
    m: &Measurement,
) -> cipherfleet_coordinator::store::Result<RecordOutcome> {
    let json = serde_json::to_value(m).expect("a measurement serialises");
    let (path_used, figures) = (m.path_used.expect("a successful measurement"), m.figures.as_ref());
    // The attempt the job was last dispatched in, as its agent would name it.
    let attempt = cipherfleet_coordinator::store::jobs::get(pool, job_id)
        .await?
        .and_then(|j| j.attempt_id);
    results::record(
        pool,
        job_id,
        host_id,
        attempt,
        path_used,
        figures.expect("with figures"),
        &json,
    )
    .await
}

/// Notes, as the ingest batch does, that `host_id`'s agent began attempt
/// `attempt_id` of `job_id` now; whether that was noted.
pub async fn start(pool: &PgPool, job_id: Uuid, host_id: i64, attempt_id: Uuid) -> bool {
    let start = jobs::Start {
        job_id,
        host_id,
        attempt_id,
        at: chrono::Utc::now(),
    };
    jobs::mark_started_many(pool, &[start]).await.expect("noting a start") == 1
}

/// A campaign with the given jobs; returns its id.
pub async fn campaign(pool: &PgPool, jobs: &[NewJob]) -> i64 {
    let matrix = json!({"algorithms": ["aes-256-gcm"]});
    let selector = json!({});
    let new = NewCampaign {
        name: "nightly",
        suite: "quick",
        matrix: &matrix,
        selector: &selector,
        started_by: "tests",
        queued_ttl: campaigns::DEFAULT_QUEUED_TTL,
    };
    campaigns::create_with_jobs(pool, &new, jobs)
        .await
        .expect("creating a campaign")
}

/// One stored result: host, provider, path asked, path used, MB/s, size,
/// threads, and how many hours ago it was measured.
pub type ProviderResult<'a> = (i64, &'a str, &'a str, &'a str, f64, i64, i32, i32);

/// Stores `results` (AES-256-GCM, encryption, static key) as finished jobs of
/// one campaign, each with its provider (migrations/0036), then rebuilds the
/// latest points as a bulk load does.
pub async fn store_provider_results(pool: &PgPool, results: &[ProviderResult<'_>]) {
    let campaign: i64 = sqlx::query_scalar(
        "INSERT INTO campaigns (name, suite, matrix, started_by, status, finished_at) \
         VALUES ('providers', 'providers', '{}', 'tests', 'finished', now()) RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    for (position, &(host, provider, path, used, mb_s, size, threads, hours_ago)) in results.iter().enumerate() {
        let job: Uuid = sqlx::query_scalar(
            "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
                 key_mode, path, provider, time_limit_seconds, status, assigned_at, started_at, finished_at) \
             VALUES ($1, $2, $3, '{}', 'aes-256-gcm', 'encrypt', $4, $5, 'static', $6, $7, 60, 'done', \
                 now(), now(), now()) RETURNING id",
        )
        .bind(campaign)
        .bind(host)
        .bind(i32::try_from(position).unwrap())
        .bind(size)
        .bind(threads)
        .bind(path)
        .bind(provider)
        .fetch_one(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO results (job_id, host_id, provider, algorithm, direction, size_bytes, threads, \
                 concurrency, key_mode, path, path_used, throughput_mb_s, ops_per_s, latency_p50_ns, \
                 latency_p90_ns, latency_p99_ns, latency_p999_ns, latency_max_ns, latency_method, batch_ops, cv, \
                 samples, cpu_user_seconds, cpu_sys_seconds, cpu_utilization, key_setup_ns, elapsed_seconds, \
                 measurement, created_at) \
             VALUES ($1, $2, $3, 'aes-256-gcm', 'encrypt', $4, $5, NULL, 'static', $6, $7, $8, $8 * 61, \
                 1000, 1100, 1400, 2000, 3000, 'per-op', 1, 0.01, 20, 1, 0.01, 0.99, 300, 1, '{}', \
                 now() - make_interval(hours => $9))",
        )
        .bind(job)
        .bind(host)
        .bind(provider)
        .bind(size)
        .bind(threads)
        .bind(path)
        .bind(used)
        .bind(mb_s)
        .bind(hours_ago)
        .execute(pool)
        .await
        .unwrap();
    }
    sqlx::query("SELECT refresh_result_points()")
        .execute(pool)
        .await
        .unwrap();
}

/// Asserts that `campaign_host_jobs` equals a count of the jobs themselves
/// (`when` names the moment in the failure); returns its rows.
pub async fn assert_job_counts_kept(pool: &PgPool, when: &str) -> usize {
    type Row = (i64, i64, i64, i64, i64, i64, i64);
    let counted: Vec<Row> = sqlx::query_as(
        "SELECT campaign_id, host_id, \
             count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'running'), \
             count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed'), \
             count(*) FILTER (WHERE status = 'cancelled') \
         FROM jobs GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let kept: Vec<Row> = sqlx::query_as(
        "SELECT campaign_id, host_id, queued, running, done, failed, cancelled \
         FROM campaign_host_jobs ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(kept, counted, "{when}");
    kept.len()
}
