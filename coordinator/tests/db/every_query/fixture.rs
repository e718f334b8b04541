//! The populated database every test reads.

use chrono::{DateTime, Utc};
use cipherfleet_coordinator::analysis::series::Observation;
use cipherfleet_coordinator::domain::labels::Labels;
use cipherfleet_coordinator::domain::latest::LatestResult;
use cipherfleet_coordinator::domain::memory::StoredMemory;
use cipherfleet_coordinator::store::campaigns::NewCampaign;
use cipherfleet_coordinator::store::campaigns::NewJob;
use cipherfleet_coordinator::store::findings::{NewFinding, Severity};
use cipherfleet_coordinator::store::jobs::Job;
use cipherfleet_coordinator::store::results::RecordOutcome;
use cipherfleet_coordinator::store::{campaigns, findings, hosts, jobs, results, sessions};
use cipherfleet_core::Point;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::measurement::{Figures, Measurement};
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{Direction, Execution, KeyMode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

pub(super) use crate::helpers::{facts, fresh_db, measurement};

pub(super) const OLD_KERNEL: &str = "6.1.0-18-amd64";
pub(super) const KERNEL: &str = "6.1.0-20-amd64";
pub(super) const BENCH_PEER: &str = "192.0.2.10:50412";

pub(super) fn gcm() -> Algorithm {
    "aes-256-gcm".parse().expect("a known algorithm")
}

pub(super) fn chacha() -> Algorithm {
    "chacha20-poly1305".parse().expect("a known algorithm")
}

/// aes-256-gcm, encrypt, one thread, one static key: the report's plain benchmark.
pub(super) fn gcm_point(size_bytes: u64, threads: u32, path: Path) -> Point {
    Point {
        algorithm: gcm(),
        direction: Direction::Encrypt,
        size_bytes,
        threads,
        concurrency: None,
        key_mode: KeyMode::Static,
        path,
        nonce: cipherfleet_core::spec::Nonce::Counter,
        provider: cipherfleet_core::provider::Provider::RustCrypto,
    }
}

/// The object-storage scenario: every dimension away from the plain benchmark,
/// so a column read into the wrong field shows.
pub(super) fn chacha_point() -> Point {
    Point {
        algorithm: chacha(),
        direction: Direction::Decrypt,
        size_bytes: 1024,
        threads: 4,
        concurrency: Some(8),
        key_mode: KeyMode::PerOp,
        path: Path::Software,
        nonce: cipherfleet_core::spec::Nonce::Counter,
        provider: cipherfleet_core::provider::Provider::RustCrypto,
    }
}

pub(super) fn new_job(host_id: i64, point: Point) -> NewJob {
    NewJob {
        host_id,
        spec: point.spec(0.5),
        execution: Execution::Native,
    }
}

pub(super) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub(super) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// An x86_64 host with AES and carry-less multiply: fully accelerated.
pub(super) fn bench_facts(kernel: &str) -> Value {
    let mut f = facts(kernel);
    f["features"]["advertised"] = json!(["aes", "avx", "pclmulqdq"]);
    f["features"]["usable"] = json!(["pclmulqdq", "aes", "avx"]);
    f
}

/// An arm64 guest whose hypervisor hides AES and PMULL.
pub(super) fn vm_facts() -> Value {
    let mut f = facts("6.1.0-18-arm64");
    f["hostname"] = json!("vm-01");
    f["arch"] = json!("aarch64");
    f["cpu"]["vendor"] = json!("ARM");
    f["cpu"]["model_name"] = json!("Neoverse-N1");
    f["features"]["advertised"] = json!(["aes", "pmull"]);
    f["features"]["usable"] = json!([]);
    f
}

pub(super) fn new_campaign<'a>(name: &'a str, matrix: &'a Value, selector: &'a Value) -> NewCampaign<'a> {
    NewCampaign {
        name,
        suite: "quick",
        matrix,
        selector,
        started_by: "tests",
        queued_ttl: cipherfleet_coordinator::store::campaigns::DEFAULT_QUEUED_TTL,
    }
}

/// A result as stored: its job, its row and what the agent sent.
#[derive(Debug, Clone)]
pub(super) struct Stored {
    pub(super) job: Uuid,
    pub(super) host_id: i64,
    pub(super) result: i64,
    pub(super) created_at: DateTime<Utc>,
    pub(super) point: Point,
    pub(super) measurement: Measurement,
}

impl Stored {
    pub(super) fn figures(&self) -> &Figures {
        self.measurement.figures.as_ref().expect("a successful measurement")
    }

    pub(super) fn path_used(&self) -> PathUsed {
        self.measurement.path_used.expect("a successful measurement")
    }

    /// The `result_points` row this result is the latest of.
    pub(super) fn latest(&self) -> LatestResult {
        let f = self.figures();
        LatestResult {
            host_id: self.host_id,
            point: self.point,
            path_used: self.path_used(),
            result_id: self.result,
            measured_at: self.created_at,
            throughput_mb_s: f.throughput_mb_s,
            ops_per_s: f.ops_per_s,
            latency_p99_ns: i64::try_from(f.latency_ns.p99).expect("a small latency"),
            cv: f.cv,
            samples: i32::try_from(f.samples).expect("a few samples"),
            low_samples: f.low_samples,
            memory: StoredMemory::from(f.memory.as_ref()),
        }
    }

    /// The observation the finding deriver reads for this result.
    pub(super) fn observation(&self, snapshot_id: i64) -> Observation {
        Observation {
            host_id: self.host_id,
            point: self.point,
            path_used: self.path_used(),
            throughput_mb_s: self.figures().throughput_mb_s,
            created_at: self.created_at,
            snapshot_id: Some(snapshot_id),
        }
    }
}

/// Stores the result of `job` (just claimed) as its agent reports it.
pub(super) async fn store(pool: &PgPool, job: &Job, path_used: Path, throughput_mb_s: f64) -> Stored {
    let path_used = PathUsed::from(path_used);
    let m = measurement(&job.point.spec(0.5), path_used, throughput_mb_s);
    let figures = m.figures.as_ref().expect("with figures");
    let sent = serde_json::to_value(&m).expect("a measurement serialises");
    let outcome = results::record(pool, job.id, job.host_id, job.attempt_id, path_used, figures, &sent)
        .await
        .expect("recording a result");
    assert_eq!(outcome, RecordOutcome::Inserted);
    let (result, created_at): (i64, DateTime<Utc>) =
        sqlx::query_as("SELECT id, created_at FROM results WHERE job_id = $1")
            .bind(job.id)
            .fetch_one(pool)
            .await
            .expect("the result row");
    Stored {
        job: job.id,
        host_id: job.host_id,
        result,
        created_at,
        point: job.point,
        measurement: m,
    }
}

pub(super) async fn claim(pool: &PgPool, host_id: i64) -> Job {
    jobs::claim_next_for_host(pool, host_id)
        .await
        .expect("claiming a job")
        .expect("a queued job")
}

/// What [`populate`] stored, by role.
pub(super) struct Fleet {
    pub(super) pool: PgPool,
    /// `bench-01`: x86_64, accelerated, `class=storage-gen3`; said hello twice
    /// (a kernel update), so it has two snapshots, the second current.
    pub(super) bench: i64,
    pub(super) bench_snapshots: [i64; 2],
    /// `vm-01`: an aarch64 guest labelled `emulated`, AES hidden.
    pub(super) vm: i64,
    pub(super) vm_snapshot: i64,
    /// Finished: the four results below and `failed_job`.
    pub(super) nightly: i64,
    /// bench, aes-256-gcm 16 KiB on the accelerated path.
    pub(super) bench_accelerated: Stored,
    /// bench, the same point on the software path.
    pub(super) bench_software: Stored,
    /// bench, [`chacha_point`].
    pub(super) bench_chacha: Stored,
    /// vm, aes-256-gcm 16 KiB asked accelerated, ran in software.
    pub(super) vm_fell_back: Stored,
    /// vm, aes-256-gcm 16 KiB on 8 threads: the agent failed it.
    pub(super) failed_job: Uuid,
    /// Cancelled before its one job (on vm) ran.
    pub(super) cancelled: i64,
    /// Running: the first job claimed by bench, the second queued.
    pub(super) live: i64,
    pub(super) live_jobs: [Uuid; 2],
    /// bench's session, still open.
    pub(super) bench_session: i64,
    /// vm's session, closed.
    pub(super) vm_session: i64,
    /// Open: bench slow-accelerated (critical), vm hypervisor-masks (warning).
    pub(super) open_findings: [i64; 2],
    /// vm os-disabled (info), resolved.
    pub(super) resolved_finding: i64,
}

/// A fresh database holding the fleet described by [`Fleet`].
pub(super) async fn populate() -> Fleet {
    let pool = fresh_db().await;

    let bench_labels = labels(&[("class", "storage-gen3")]);
    let first = hosts::upsert_host_with_facts(&pool, "bench-01", Some(&bench_labels), &bench_facts(OLD_KERNEL))
        .await
        .unwrap();
    assert!(first.new_host && first.facts_changed, "{first:?}");
    let second = hosts::upsert_host_with_facts(&pool, "bench-01", None, &bench_facts(KERNEL))
        .await
        .unwrap();
    assert!(!second.new_host && second.facts_changed, "{second:?}");
    assert_eq!(second.host_id, first.host_id);
    let bench = first.host_id;
    let vm_hello = hosts::upsert_host_with_facts(&pool, "vm-01", Some(&labels(&[("emulated", "yes")])), &vm_facts())
        .await
        .unwrap();
    let vm = vm_hello.host_id;

    let (matrix, selector) = (json!({"algorithms": ["aes-256-gcm", "chacha20-poly1305"]}), json!({}));
    let nightly = campaigns::create_with_jobs(
        &pool,
        &new_campaign("nightly", &matrix, &selector),
        &[
            new_job(bench, gcm_point(16384, 1, Path::Accelerated)),
            new_job(bench, gcm_point(16384, 1, Path::Software)),
            new_job(bench, chacha_point()),
            new_job(vm, gcm_point(16384, 1, Path::Accelerated)),
            new_job(vm, gcm_point(16384, 8, Path::Accelerated)),
        ],
    )
    .await
    .unwrap();
    let bench_accelerated = store(&pool, &claim(&pool, bench).await, Path::Accelerated, 2000.0).await;
    let bench_software = store(&pool, &claim(&pool, bench).await, Path::Software, 500.0).await;
    let bench_chacha = store(&pool, &claim(&pool, bench).await, Path::Software, 150.0).await;
    let vm_fell_back = store(&pool, &claim(&pool, vm).await, Path::Software, 450.0).await;
    let failed_job = claim(&pool, vm).await.id;
    assert!(jobs::fail(&pool, failed_job, vm, "self-test failed").await.unwrap());

    let cancelled = campaigns::create_with_jobs(
        &pool,
        &new_campaign("weekly", &matrix, &selector),
        &[new_job(vm, gcm_point(65536, 1, Path::Software))],
    )
    .await
    .unwrap();
    assert!(campaigns::cancel(&pool, cancelled).await.unwrap().is_some());

    let live = campaigns::create_with_jobs(
        &pool,
        &new_campaign("adhoc", &matrix, &selector),
        &[
            new_job(bench, gcm_point(64, 1, Path::Accelerated)),
            new_job(bench, gcm_point(256, 1, Path::Accelerated)),
        ],
    )
    .await
    .unwrap();
    let claimed = claim(&pool, bench).await;
    let queued = jobs::for_campaign(&pool, live).await.unwrap()[1].id;

    let bench_session = sessions::open(&pool, bench, Some(second.snapshot_id), Some(BENCH_PEER), Some("0.1.0"))
        .await
        .unwrap();
    let vm_session = sessions::open(&pool, vm, Some(vm_hello.snapshot_id), None, None)
        .await
        .unwrap();
    sessions::close(&pool, vm_session).await.unwrap();

    let mut conn = pool.acquire().await.unwrap();
    let slow = findings::upsert_open(&mut conn, &slow_finding(bench, json!({"ratio": 0.95})))
        .await
        .unwrap();
    let masks = findings::upsert_open(
        &mut conn,
        &NewFinding {
            host_id: vm,
            reason: "hypervisor-masks".into(),
            kind: None,
            subject: "aes".into(),
            severity: Severity::Warning,
            first_seen: Some(at("2025-03-01T00:00:00Z")),
            evidence: json!({"advertised": ["aes"], "usable": []}),
            fact_changes: json!({}),
            summary: "the hypervisor hides aes".into(),
        },
    )
    .await
    .unwrap();
    let os_disabled = findings::upsert_open(
        &mut conn,
        &NewFinding {
            host_id: vm,
            reason: "os-disabled".into(),
            kind: None,
            subject: "avx-state".into(),
            severity: Severity::Info,
            first_seen: Some(at("2025-01-01T00:00:00Z")),
            evidence: json!({}),
            fact_changes: json!({"kernel": ["6.1.0-18-arm64", "6.1.0-18-arm64"]}),
            summary: "the kernel leaves wide vectors off".into(),
        },
    )
    .await
    .unwrap();
    drop(conn);
    assert_eq!(findings::resolve(&pool, &[os_disabled]).await.unwrap(), 1);

    Fleet {
        pool,
        bench,
        bench_snapshots: [first.snapshot_id, second.snapshot_id],
        vm,
        vm_snapshot: vm_hello.snapshot_id,
        nightly,
        bench_accelerated,
        bench_software,
        bench_chacha,
        vm_fell_back,
        failed_job,
        cancelled,
        live,
        live_jobs: [claimed.id, queued],
        bench_session,
        vm_session,
        open_findings: [slow, masks],
        resolved_finding: os_disabled,
    }
}

/// bench's slow accelerated AES-GCM, with `evidence`.
pub(super) fn slow_finding(host_id: i64, evidence: Value) -> NewFinding {
    NewFinding {
        host_id,
        reason: "slow-accelerated".into(),
        kind: Some("near-software".into()),
        subject: "aes-256-gcm".into(),
        severity: Severity::Critical,
        first_seen: Some(at("2025-06-01T12:00:00Z")),
        evidence,
        fact_changes: json!({"kernel": [OLD_KERNEL, KERNEL]}),
        summary: "aes-256-gcm runs at software speed on the accelerated path".into(),
    }
}

pub(super) fn at(rfc3339: &str) -> DateTime<Utc> {
    rfc3339.parse().expect("a timestamp")
}
