//! Every public query of `db`, run against a populated database, so a column
//! or type that no longer matches its row struct fails here, not on a page.
//!
//! [`populate`] stores a small fleet (two hosts, three campaigns, results on
//! both paths and a fallback, sessions, findings); each test then reads it
//! back through one group of modules and checks the rows against what was
//! stored. Every test gets its own copy, so the ones that change state (the
//! queue, cancelling, resolving) do not disturb the others.
//! [`every_public_query_is_called_here`] fails when `src/db` gains a
//! `pub async fn` this file does not call.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use cipherfleet_coordinator::MIGRATOR;
use cipherfleet_coordinator::analysis::acceleration::Acceleration;
use cipherfleet_coordinator::analysis::series::Observation;
use cipherfleet_coordinator::db::campaigns::{CampaignStatus, JobCounts, NewCampaign};
use cipherfleet_coordinator::db::capacity::{ClassHost, PointFilter};
use cipherfleet_coordinator::db::fallback::{FallbackHost, PathPair, PathPoint};
use cipherfleet_coordinator::db::findings::{NewFinding, OpenCount, Severity};
use cipherfleet_coordinator::db::hosts::{HostUpsert, Labels};
use cipherfleet_coordinator::db::jobs::{Expired, Job, JobStatus, NewJob, Requeued};
use cipherfleet_coordinator::db::matrix::{ClassedHost, Slice, View};
use cipherfleet_coordinator::db::points::LatestResult;
use cipherfleet_coordinator::db::results::RecordOutcome;
use cipherfleet_coordinator::db::snapshots::{FactColumns, NormalisedFacts};
use cipherfleet_coordinator::db::{
    self, campaign_summaries, campaigns, capacity, fallback, findings, host_results, hosts, jobs, matrix, points,
    results, series, sessions, snapshots,
};
use cipherfleet_core::Point;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::measurement::{Figures, Measurement};
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::{Direction, KeyMode};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::types::Json;
use uuid::Uuid;

use crate::helpers::{facts, fresh_db, measurement};

// ---------------------------------------------------------------- fixture

const OLD_KERNEL: &str = "6.1.0-18-amd64";
const KERNEL: &str = "6.1.0-20-amd64";
const BENCH_PEER: &str = "192.0.2.10:50412";

fn gcm() -> Algorithm {
    "aes-256-gcm".parse().expect("a known algorithm")
}

fn chacha() -> Algorithm {
    "chacha20-poly1305".parse().expect("a known algorithm")
}

/// aes-256-gcm, encrypt, one thread, one static key: the report's plain benchmark.
fn gcm_point(size_bytes: u64, threads: u32, path: Path) -> Point {
    Point {
        algorithm: gcm(),
        direction: Direction::Encrypt,
        size_bytes,
        threads,
        concurrency: None,
        key_mode: KeyMode::Static,
        path,
    }
}

/// The object-storage scenario: every dimension away from the plain benchmark,
/// so a column read into the wrong field shows.
fn chacha_point() -> Point {
    Point {
        algorithm: chacha(),
        direction: Direction::Decrypt,
        size_bytes: 1024,
        threads: 4,
        concurrency: Some(8),
        key_mode: KeyMode::PerOp,
        path: Path::Software,
    }
}

fn new_job(host_id: i64, point: Point) -> NewJob {
    NewJob {
        host_id,
        spec: point.spec(0.5),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// An x86_64 host with AES and carry-less multiply: fully accelerated.
fn bench_facts(kernel: &str) -> Value {
    let mut f = facts(kernel);
    f["features"]["advertised"] = json!(["aes", "avx", "pclmulqdq"]);
    f["features"]["usable"] = json!(["pclmulqdq", "aes", "avx"]);
    f
}

/// An arm64 guest whose hypervisor hides AES and PMULL.
fn vm_facts() -> Value {
    let mut f = facts("6.1.0-18-arm64");
    f["hostname"] = json!("vm-01");
    f["arch"] = json!("aarch64");
    f["cpu"]["vendor"] = json!("ARM");
    f["cpu"]["model_name"] = json!("Neoverse-N1");
    f["features"]["advertised"] = json!(["aes", "pmull"]);
    f["features"]["usable"] = json!([]);
    f
}

fn new_campaign<'a>(name: &'a str, matrix: &'a Value, selector: &'a Value) -> NewCampaign<'a> {
    NewCampaign {
        name,
        suite: "quick",
        matrix,
        selector,
        started_by: "tests",
    }
}

/// A result as stored: its job, its row and what the agent sent.
#[derive(Debug, Clone)]
struct Stored {
    job: Uuid,
    host_id: i64,
    result: i64,
    created_at: DateTime<Utc>,
    point: Point,
    measurement: Measurement,
}

impl Stored {
    fn figures(&self) -> &Figures {
        self.measurement.figures.as_ref().expect("a successful measurement")
    }

    fn path_used(&self) -> Path {
        self.measurement.path_used.expect("a successful measurement")
    }

    /// The `result_points` row this result is the latest of.
    fn latest(&self) -> LatestResult {
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
        }
    }

    /// The observation the finding deriver reads for this result.
    fn observation(&self, snapshot_id: i64) -> Observation {
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
async fn store(pool: &PgPool, job: &Job, path_used: Path, throughput_mb_s: f64) -> Stored {
    let m = measurement(&job.point.spec(0.5), path_used, throughput_mb_s);
    let figures = m.figures.as_ref().expect("with figures");
    let sent = serde_json::to_value(&m).expect("a measurement serialises");
    let outcome = results::record(pool, job.id, job.host_id, path_used, figures, &sent)
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

async fn claim(pool: &PgPool, host_id: i64) -> Job {
    jobs::claim_next_for_host(pool, host_id)
        .await
        .expect("claiming a job")
        .expect("a queued job")
}

/// What [`populate`] stored, by role.
struct Fleet {
    pool: PgPool,
    /// `bench-01`: x86_64, accelerated, `class=storage-gen3`; said hello twice
    /// (a kernel update), so it has two snapshots, the second current.
    bench: i64,
    bench_snapshots: [i64; 2],
    /// `vm-01`: an aarch64 guest labelled `emulated`, AES hidden.
    vm: i64,
    vm_snapshot: i64,
    /// Finished: the four results below and `failed_job`.
    nightly: i64,
    /// bench, aes-256-gcm 16 KiB on the accelerated path.
    bench_accelerated: Stored,
    /// bench, the same point on the software path.
    bench_software: Stored,
    /// bench, [`chacha_point`].
    bench_chacha: Stored,
    /// vm, aes-256-gcm 16 KiB asked accelerated, ran in software.
    vm_fell_back: Stored,
    /// vm, aes-256-gcm 16 KiB on 8 threads: the agent failed it.
    failed_job: Uuid,
    /// Cancelled before its one job (on vm) ran.
    cancelled: i64,
    /// Running: the first job claimed by bench, the second queued.
    live: i64,
    live_jobs: [Uuid; 2],
    /// bench's session, still open.
    bench_session: i64,
    /// vm's session, closed.
    vm_session: i64,
    /// Open: bench slow-accelerated (critical), vm hypervisor-masks (warning).
    open_findings: [i64; 2],
    /// vm os-disabled (info), resolved.
    resolved_finding: i64,
}

/// A fresh database holding the fleet described by [`Fleet`].
async fn populate() -> Fleet {
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
    assert!(campaigns::cancel(&pool, cancelled).await.unwrap());

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
fn slow_finding(host_id: i64, evidence: Value) -> NewFinding {
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

fn at(rfc3339: &str) -> DateTime<Utc> {
    rfc3339.parse().expect("a timestamp")
}

// ---------------------------------------------------------------- db

/// The URL `serve` would be given for the database behind `pool`.
fn url_of(pool: &PgPool) -> String {
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

#[tokio::test]
async fn connect_reaches_a_migrated_database() {
    let pool = fresh_db().await;
    crate::helpers::host(&pool, "bench-01").await;

    // The schema is there already: migrating again is a no-op, not an error.
    let connected = db::connect(&url_of(&pool)).await.expect("connecting by URL");
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(&connected)
        .await
        .unwrap();
    assert_eq!(applied, i64::try_from(MIGRATOR.iter().count()).unwrap());
    let seen = hosts::find_by_name(&connected, "bench-01").await.unwrap();
    assert_eq!(seen.map(|h| h.name).as_deref(), Some("bench-01"));
    connected.close().await;
}

// ---------------------------------------------------------------- hosts, snapshots, sessions

#[tokio::test]
async fn hosts_their_snapshots_and_sessions_read_back_as_stored() {
    let f = populate().await;
    let pool = &f.pool;

    // hosts
    let bench = hosts::get(pool, f.bench).await.unwrap().expect("bench-01");
    assert_eq!(bench.name, "bench-01");
    assert_eq!(bench.labels.0, labels(&[("class", "storage-gen3")]));
    assert_eq!(bench.current_snapshot_id, Some(f.bench_snapshots[1]));
    assert_eq!(hosts::get(pool, i64::MAX).await.unwrap(), None);
    let vm = hosts::find_by_name(pool, "vm-01").await.unwrap().expect("vm-01");
    assert_eq!((vm.id, vm.labels.0.clone()), (f.vm, labels(&[("emulated", "yes")])));
    assert_eq!(hosts::find_by_name(pool, "nobody").await.unwrap(), None);
    assert_eq!(hosts::list(pool).await.unwrap(), [bench.clone(), vm.clone()]);

    sqlx::query("UPDATE hosts SET last_seen = last_seen - interval '1 hour' WHERE id = $1")
        .bind(f.bench)
        .execute(pool)
        .await
        .unwrap();
    let before = hosts::get(pool, f.bench).await.unwrap().unwrap().last_seen;
    hosts::touch(pool, f.bench).await.unwrap();
    let bench = hosts::get(pool, f.bench).await.unwrap().unwrap();
    assert!(bench.last_seen > before, "touch left last_seen at {before}");

    let with_facts = hosts::list_with_facts(pool).await.unwrap();
    assert_eq!(with_facts.len(), 2);
    let (b, v) = (&with_facts[0], &with_facts[1]);
    assert_eq!((&b.host, &v.host), (&bench, &vm));
    assert_eq!(b.arch.as_deref(), Some("x86_64"));
    assert_eq!(b.cpu_model_name.as_deref(), Some("Intel(R) Xeon(R) Gold 6230"));
    assert_eq!(b.kernel_release.as_deref(), Some(KERNEL));
    assert_eq!(b.logical_cores, Some(8));
    assert_eq!(b.features_usable, Some(strings(&["aes", "avx", "pclmulqdq"])));
    assert_eq!(b.build_flavour.as_deref(), Some("accelerated"));
    assert_eq!(b.acceleration(), Acceleration::Accelerated);
    assert_eq!(v.arch.as_deref(), Some("aarch64"));
    assert_eq!(v.features_usable, Some(vec![]));
    assert_eq!(v.acceleration(), Acceleration::Software);

    // The same facts again (load average aside): no new snapshot.
    let mut same = bench_facts(KERNEL);
    same["noise"]["load_average"] = json!([3.0, 2.0, 1.0]);
    let again = hosts::upsert_host_with_facts(pool, "bench-01", None, &same)
        .await
        .unwrap();
    let unchanged = HostUpsert {
        host_id: f.bench,
        snapshot_id: f.bench_snapshots[1],
        facts_changed: false,
        new_host: false,
    };
    assert_eq!(again, unchanged);

    // snapshots
    let history = snapshots::history(pool, f.bench).await.unwrap();
    let ids: Vec<i64> = history.iter().map(|s| s.id).collect();
    assert_eq!(ids, f.bench_snapshots, "oldest first");
    for (snapshot, kernel) in history.iter().zip([OLD_KERNEL, KERNEL]) {
        assert_eq!(snapshot.host_id, f.bench);
        assert_eq!(snapshot.facts, NormalisedFacts::new(&bench_facts(kernel)).facts);
        assert_eq!(snapshot.columns, FactColumns::from_facts(&bench_facts(kernel)));
    }
    assert!(history[0].taken_at <= history[1].taken_at);
    let hash = NormalisedFacts::new(&bench_facts(KERNEL)).hash;
    assert_eq!(
        snapshots::hash_of(pool, f.bench_snapshots[1]).await.unwrap(),
        Some(hash.to_vec())
    );
    assert_eq!(snapshots::hash_of(pool, i64::MAX).await.unwrap(), None);
    let vm_history = snapshots::history(pool, f.vm).await.unwrap();
    assert_eq!(vm_history.len(), 1);
    assert_eq!(vm_history[0].id, f.vm_snapshot);
    assert_eq!(vm_history[0].columns, FactColumns::from_facts(&vm_facts()));

    let newer = NormalisedFacts::new(&bench_facts("6.6.0-1-amd64"));
    let mut conn = pool.acquire().await.unwrap();
    let inserted = snapshots::insert(&mut conn, f.bench, &newer).await.unwrap();
    drop(conn);
    assert_eq!(
        snapshots::hash_of(pool, inserted).await.unwrap(),
        Some(newer.hash.to_vec())
    );
    let history = snapshots::history(pool, f.bench).await.unwrap();
    assert_eq!(
        history.last().map(|s| (s.id, s.facts.clone())),
        Some((inserted, newer.facts))
    );

    // sessions
    let bench_sessions = sessions::for_host(pool, f.bench, 10).await.unwrap();
    assert_eq!(bench_sessions.len(), 1);
    let s = &bench_sessions[0];
    assert_eq!(
        (s.id, s.host_id, s.snapshot_id),
        (f.bench_session, f.bench, Some(f.bench_snapshots[1]))
    );
    assert_eq!(s.peer_address.as_deref(), Some(BENCH_PEER));
    assert_eq!(s.agent_version.as_deref(), Some("0.1.0"));
    assert_eq!(s.disconnected_at, None);
    let vm_sessions = sessions::for_host(pool, f.vm, 10).await.unwrap();
    assert_eq!(vm_sessions.len(), 1);
    let closed_at = vm_sessions[0].disconnected_at.expect("vm's session is closed");
    assert_eq!(
        (vm_sessions[0].id, vm_sessions[0].peer_address.as_deref()),
        (f.vm_session, None)
    );
    sessions::close(pool, f.vm_session).await.unwrap();
    let vm_sessions = sessions::for_host(pool, f.vm, 10).await.unwrap();
    assert_eq!(
        vm_sessions[0].disconnected_at,
        Some(closed_at),
        "closing twice keeps the first time"
    );

    let reconnect = sessions::open(pool, f.bench, None, None, None).await.unwrap();
    let newest = sessions::for_host(pool, f.bench, 1).await.unwrap();
    assert_eq!(newest.iter().map(|s| s.id).collect::<Vec<_>>(), [reconnect]);
    assert_eq!(sessions::close_all_open(pool).await.unwrap(), 2);
    assert_eq!(sessions::close_all_open(pool).await.unwrap(), 0);
    let bench_sessions = sessions::for_host(pool, f.bench, 10).await.unwrap();
    assert!(
        bench_sessions.iter().all(|s| s.disconnected_at.is_some()),
        "{bench_sessions:?}"
    );
}

// ---------------------------------------------------------------- campaigns, campaign_summaries

#[tokio::test]
async fn campaigns_and_their_summaries_count_every_job() {
    let f = populate().await;
    let pool = &f.pool;

    // campaigns
    let nightly = campaigns::get(pool, f.nightly).await.unwrap().expect("nightly");
    assert_eq!((nightly.name.as_str(), nightly.suite.as_str()), ("nightly", "quick"));
    assert_eq!(
        nightly.matrix,
        json!({"algorithms": ["aes-256-gcm", "chacha20-poly1305"]})
    );
    assert_eq!(
        (nightly.selector.clone(), nightly.started_by.as_str()),
        (json!({}), "tests")
    );
    assert_eq!(nightly.status, CampaignStatus::Finished);
    assert!(nightly.finished_at.is_some_and(|t| t >= nightly.created_at));
    assert_eq!(campaigns::get(pool, i64::MAX).await.unwrap(), None);

    let listed = campaigns::list(pool, 10).await.unwrap();
    let by_age: Vec<(i64, CampaignStatus)> = listed.iter().map(|c| (c.id, c.status)).collect();
    let newest_first = [
        (f.live, CampaignStatus::Running),
        (f.cancelled, CampaignStatus::Cancelled),
        (f.nightly, CampaignStatus::Finished),
    ];
    assert_eq!(by_age, newest_first);
    assert_eq!(listed[2], nightly);
    assert_eq!(campaigns::list(pool, 1).await.unwrap().len(), 1);

    let progress = campaigns::status(pool, f.nightly).await.unwrap().expect("nightly");
    assert_eq!(progress.campaign, nightly);
    let nightly_jobs = JobCounts {
        done: 4,
        failed: 1,
        ..JobCounts::default()
    };
    assert_eq!(progress.jobs, nightly_jobs);
    let cancelled = campaigns::status(pool, f.cancelled).await.unwrap().expect("weekly");
    assert_eq!(cancelled.campaign.status, CampaignStatus::Cancelled);
    assert_eq!(cancelled.jobs.cancelled, 1);
    assert_eq!(cancelled.jobs.total(), 1);
    assert_eq!(campaigns::status(pool, i64::MAX).await.unwrap(), None);

    let per_host = campaigns::host_progress(pool, f.nightly).await.unwrap();
    let expected = [
        (
            f.bench,
            "bench-01".to_string(),
            JobCounts {
                done: 3,
                ..JobCounts::default()
            },
        ),
        (
            f.vm,
            "vm-01".to_string(),
            JobCounts {
                done: 1,
                failed: 1,
                ..JobCounts::default()
            },
        ),
    ];
    assert_eq!(per_host, expected);

    let mut ended = campaigns::ended_within(pool, 3600.0).await.unwrap();
    ended.sort_unstable();
    assert_eq!(ended, [f.nightly, f.cancelled]);

    // campaign_summaries, before the live campaign is cancelled below
    let summaries = campaign_summaries::list(pool, 10, 0).await.unwrap();
    let ids: Vec<i64> = summaries.iter().map(|s| s.id).collect();
    assert_eq!(ids, [f.live, f.cancelled, f.nightly]);
    let (live, nightly) = (&summaries[0], &summaries[2]);
    assert_eq!((live.name.as_str(), live.status.as_str()), ("adhoc", "running"));
    assert_eq!((live.queued, live.running, live.hosts, live.settled()), (1, 1, 1, 0));
    assert_eq!(
        (nightly.status.as_str(), nightly.started_by.as_str()),
        ("finished", "tests")
    );
    assert_eq!((nightly.done, nightly.failed, nightly.hosts), (4, 1, 2));
    assert_eq!((nightly.total(), nightly.settled()), (5, 5));
    assert_eq!(nightly.finished_at, progress.campaign.finished_at);
    assert_eq!(summaries[1].cancelled, 1);
    let second_page = campaign_summaries::list(pool, 1, 1).await.unwrap();
    assert_eq!(second_page.iter().map(|s| s.id).collect::<Vec<_>>(), [f.cancelled]);
    assert_eq!(campaign_summaries::count(pool).await.unwrap(), (3, 1));

    // Cancelling: the queued job is cancelled, the running one left to finish.
    assert!(campaigns::cancel(pool, f.live).await.unwrap());
    assert!(!campaigns::cancel(pool, f.live).await.unwrap(), "already cancelled");
    let live = campaigns::status(pool, f.live).await.unwrap().expect("adhoc");
    assert_eq!(live.campaign.status, CampaignStatus::Cancelled);
    let live_jobs = JobCounts {
        running: 1,
        cancelled: 1,
        ..JobCounts::default()
    };
    assert_eq!(live.jobs, live_jobs);
    assert_eq!(campaign_summaries::count(pool).await.unwrap(), (3, 0));
    assert_eq!(campaigns::ended_within(pool, 3600.0).await.unwrap().len(), 3);
}

// ---------------------------------------------------------------- jobs

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
    assert_eq!(running.time_limit_seconds, spec.time_limit().as_secs_f64());
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
    assert_eq!(
        jobs::running_for_campaign(pool, f.live).await.unwrap(),
        [(first, f.bench)]
    );
    let none_running = jobs::running_for_campaign(pool, f.nightly).await.unwrap();
    assert!(none_running.is_empty(), "{none_running:?}");

    assert!(jobs::mark_started(pool, first, f.bench).await.unwrap());
    assert!(
        !jobs::mark_started(pool, first, f.bench).await.unwrap(),
        "started twice"
    );
    assert!(
        !jobs::mark_started(pool, first, f.vm).await.unwrap(),
        "another host's job"
    );
    assert!(jobs::get(pool, first).await.unwrap().unwrap().started_at.is_some());

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

    let mut by_status = jobs::count_by_status(pool).await.unwrap();
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
    assert!(jobs::release(pool, first, f.bench).await.unwrap());
    assert_eq!(jobs::running_for_host(pool, f.bench).await.unwrap(), None);
    let claimed = claim(pool, f.bench).await;
    assert_eq!((claimed.id, claimed.started_at), (first, None));
    assert!(jobs::unclaim(pool, &claimed).await.unwrap());
    assert!(!jobs::unclaim(pool, &claimed).await.unwrap(), "no longer that claim");
    assert_eq!(status(first).await, JobStatus::Queued);

    // After a reconnect the agent still holds the second job: adopted, the
    // first one goes back to the queue.
    assert_eq!(claim(pool, f.bench).await.id, first);
    assert!(jobs::adopt(pool, second, f.bench).await.unwrap());
    assert!(!jobs::adopt(pool, f.failed_job, f.vm).await.unwrap(), "a finished job");
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

    // Overdue: requeued with an attempt counted.
    assert_eq!(claim(pool, f.bench).await.id, first);
    let not_due = jobs::expire_overdue(pool).await.unwrap();
    assert!(not_due.is_empty(), "not due yet: {not_due:?}");
    sqlx::query("UPDATE jobs SET deadline = now() - interval '1 second' WHERE id = $1")
        .bind(first)
        .execute(pool)
        .await
        .unwrap();
    let expired = Expired {
        job_id: first,
        host_id: f.bench,
        requeued: true,
    };
    assert_eq!(jobs::expire_overdue(pool).await.unwrap(), [expired]);
    let first_job = jobs::get(pool, first).await.unwrap().unwrap();
    assert_eq!(
        (first_job.status, first_job.attempts, first_job.deadline),
        (JobStatus::Queued, 1, None)
    );

    // The agent fails a queued job; then loses the last one a second time,
    // which fails it and ends the campaign.
    assert!(jobs::fail(pool, first, f.bench, "unsupported point").await.unwrap());
    assert!(
        !jobs::fail(pool, first, f.bench, "again").await.unwrap(),
        "already failed"
    );
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
    assert_eq!(jobs::insert_for_campaign(&mut tx, later, &extra).await.unwrap(), 2);
    let queued = jobs::for_campaign(&mut *tx, later).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(queued.len(), 2);
    for (position, (job, new)) in queued.iter().zip(&extra).enumerate() {
        assert_eq!(
            (job.campaign_id, job.host_id, job.position),
            (later, new.host_id, i32::try_from(position).unwrap())
        );
        assert_eq!(job.point, new.spec.point());
        assert_eq!(job.spec, serde_json::to_value(&new.spec).unwrap());
        assert_eq!((job.status, job.attempts), (JobStatus::Queued, 0));
    }
}

// ---------------------------------------------------------------- results, points, host_results

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
    let again = results::record(pool, s.job, f.vm, s.path_used(), s.figures(), &sent)
        .await
        .unwrap();
    assert_eq!(again, RecordOutcome::Duplicate);
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
    let before = matrix::host_points(pool, &[f.bench, f.vm], Direction::Encrypt, Path::Accelerated)
        .await
        .unwrap();
    assert_eq!(result_count(f.bench_accelerated.result).await, 1);
    let mut tx = pool.begin().await.unwrap();
    points::record(&mut tx, f.bench_accelerated.result).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(result_count(f.bench_accelerated.result).await, 2, "counted again");
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
    let after = matrix::host_points(pool, &[f.bench, f.vm], Direction::Encrypt, Path::Accelerated)
        .await
        .unwrap();
    assert_eq!(after, before);
}

// ---------------------------------------------------------------- matrix, capacity, fallback

#[tokio::test]
async fn the_report_reads_the_latest_point_of_every_host() {
    let f = populate().await;
    let pool = &f.pool;
    let bench_labels = labels(&[("class", "storage-gen3")]);
    let vm_labels = labels(&[("emulated", "yes")]);
    let bench_usable = strings(&["aes", "avx", "pclmulqdq"]);
    let xeon = Some("Intel(R) Xeon(R) Gold 6230".to_string());

    // matrix
    let classed = matrix::hosts(pool).await.unwrap();
    let bench = ClassedHost {
        id: f.bench,
        name: "bench-01".into(),
        labels: Json(bench_labels.clone()),
        arch: Some("x86_64".into()),
        cpu_vendor: Some("GenuineIntel".into()),
        cpu_model_name: xeon.clone(),
        features_usable: Some(bench_usable.clone()),
        build_flavour: Some("accelerated".into()),
    };
    let vm = ClassedHost {
        id: f.vm,
        name: "vm-01".into(),
        labels: Json(vm_labels.clone()),
        arch: Some("aarch64".into()),
        cpu_vendor: Some("ARM".into()),
        cpu_model_name: Some("Neoverse-N1".into()),
        features_usable: Some(vec![]),
        build_flavour: Some("accelerated".into()),
    };
    assert_eq!(classed, [bench.clone(), vm.clone()]);
    assert_ne!(bench.class(), vm.class());

    let view = View {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
    };
    let accelerated = [f.bench_accelerated.latest(), f.vm_fell_back.latest()];
    assert_eq!(matrix::view_points(pool, &view, &[]).await.unwrap(), accelerated);
    assert_eq!(matrix::view_points(pool, &view, &[gcm()]).await.unwrap(), accelerated);
    let no_chacha = matrix::view_points(pool, &view, &[chacha()]).await.unwrap();
    assert!(no_chacha.is_empty(), "{no_chacha:?}");
    let software = View {
        path: Path::Software,
        ..view
    };
    assert_eq!(
        matrix::view_points(pool, &software, &[]).await.unwrap(),
        [f.bench_software.latest()]
    );
    let bench_software = matrix::host_points(pool, &[f.bench], Direction::Encrypt, Path::Software)
        .await
        .unwrap();
    assert_eq!(bench_software, [f.bench_software.latest()]);
    // The object-storage scenario is not the plain benchmark these pages compare.
    let decrypt = matrix::host_points(pool, &[f.bench, f.vm], Direction::Decrypt, Path::Software)
        .await
        .unwrap();
    assert!(decrypt.is_empty(), "{decrypt:?}");
    let slices = matrix::slices(pool).await.unwrap();
    let expected = [
        Slice {
            size_bytes: 1024,
            threads: 4,
        },
        Slice {
            size_bytes: 16384,
            threads: 1,
        },
    ];
    assert_eq!(slices, expected);

    // capacity
    let class_hosts = capacity::hosts(pool).await.unwrap();
    let expected = [
        ClassHost {
            host_id: f.bench,
            name: "bench-01".into(),
            emulated: false,
            simulated: false,
            arch: Some("x86_64".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            cpu_model_name: xeon.clone(),
            features_usable: bench_usable.clone(),
            build_flavour: Some("accelerated".into()),
            logical_cores: Some(8),
        },
        ClassHost {
            host_id: f.vm,
            name: "vm-01".into(),
            emulated: true,
            simulated: false,
            arch: Some("aarch64".into()),
            cpu_vendor: Some("ARM".into()),
            cpu_model_name: Some("Neoverse-N1".into()),
            features_usable: vec![],
            build_flavour: Some("accelerated".into()),
            logical_cores: Some(8),
        },
    ];
    assert_eq!(class_hosts, expected);
    let filter = PointFilter {
        size_bytes: 16384,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
        algorithms: &[gcm(), chacha()],
    };
    assert_eq!(capacity::points(pool, filter).await.unwrap(), accelerated);
    let other_size = PointFilter {
        size_bytes: 1024,
        ..filter
    };
    let unmeasured = capacity::points(pool, other_size).await.unwrap();
    assert!(unmeasured.is_empty(), "{unmeasured:?}");

    // fallback
    let at = PathPoint {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        key_mode: KeyMode::Static,
    };
    let mut pairs = fallback::pairs(pool, &at).await.unwrap();
    pairs.sort_by_key(|p| p.host_id);
    let (acc, soft, vm_acc) = (&f.bench_accelerated, &f.bench_software, &f.vm_fell_back);
    let expected = [
        PathPair {
            host_id: f.bench,
            algorithm: gcm(),
            accelerated_result_id: Some(acc.result),
            accelerated_path_used: Some(Path::Accelerated),
            accelerated_mb_s: Some(2000.0),
            accelerated_cv: acc.figures().cv,
            software_result_id: Some(soft.result),
            software_mb_s: Some(500.0),
            software_cv: soft.figures().cv,
        },
        PathPair {
            host_id: f.vm,
            algorithm: gcm(),
            accelerated_result_id: Some(vm_acc.result),
            accelerated_path_used: Some(Path::Software),
            accelerated_mb_s: Some(450.0),
            accelerated_cv: vm_acc.figures().cv,
            software_result_id: None,
            software_mb_s: None,
            software_cv: None,
        },
    ];
    assert_eq!(pairs, expected);
    let two_threads = PathPoint { threads: 2, ..at };
    let unmeasured = fallback::pairs(pool, &two_threads).await.unwrap();
    assert!(unmeasured.is_empty(), "{unmeasured:?}");

    let mut fallback_hosts = fallback::hosts(pool).await.unwrap();
    fallback_hosts.sort_by_key(|h| h.id);
    let expected = [
        FallbackHost {
            id: f.bench,
            name: "bench-01".into(),
            labels: Json(bench_labels),
            arch: Some("x86_64".into()),
            cpu_model_name: xeon,
        },
        FallbackHost {
            id: f.vm,
            name: "vm-01".into(),
            labels: Json(vm_labels),
            arch: Some("aarch64".into()),
            cpu_model_name: Some("Neoverse-N1".into()),
        },
    ];
    assert_eq!(fallback_hosts, expected);
    assert_eq!(fallback::sizes(pool).await.unwrap(), [1024, 16384]);
    assert_eq!(fallback::archs(pool).await.unwrap(), ["aarch64", "x86_64"]);

    let ids = |list: Vec<findings::Finding>| {
        list.into_iter()
            .map(|finding| (finding.id, finding.status))
            .collect::<Vec<_>>()
    };
    let [slow, masks] = f.open_findings;
    let (open, resolved) = (String::from("open"), String::from("resolved"));
    assert_eq!(
        ids(fallback::findings(pool, None).await.unwrap()),
        [
            (slow, open.clone()),
            (masks, open.clone()),
            (f.resolved_finding, resolved.clone())
        ],
        "open first, most severe first"
    );
    assert_eq!(
        ids(fallback::findings(pool, Some("open")).await.unwrap()),
        [(slow, open.clone()), (masks, open)]
    );
    assert_eq!(
        ids(fallback::findings(pool, Some("resolved")).await.unwrap()),
        [(f.resolved_finding, resolved)]
    );
}

// ---------------------------------------------------------------- findings, series

#[tokio::test]
async fn findings_and_the_series_they_come_from_read_back_as_stored() {
    let f = populate().await;
    let pool = &f.pool;
    let [slow, masks] = f.open_findings;

    // findings
    let open = findings::list_open(pool).await.unwrap();
    assert_eq!(
        open.iter().map(|finding| finding.id).collect::<Vec<_>>(),
        [slow, masks],
        "most severe first"
    );
    let first = &open[0];
    let stated = slow_finding(f.bench, json!({"ratio": 0.95}));
    assert!(stated.same_as(first));
    assert_eq!(
        (first.host_name.as_str(), first.severity, first.status.as_str()),
        ("bench-01", Severity::Critical, "open")
    );
    assert_eq!(
        (first.evidence.clone(), first.fact_changes.clone()),
        (stated.evidence, stated.fact_changes)
    );
    assert_eq!((Some(first.first_seen), first.resolved_at), (stated.first_seen, None));
    assert_eq!(first.summary, stated.summary);
    assert!(first.last_seen >= first.first_seen);

    let vm_open = findings::list_open_for_hosts(pool, &[f.vm]).await.unwrap();
    assert_eq!(vm_open.iter().map(|finding| finding.id).collect::<Vec<_>>(), [masks]);
    assert_eq!(vm_open[0].kind, None);
    let no_hosts = findings::list_open_for_hosts(pool, &[]).await.unwrap();
    assert!(no_hosts.is_empty(), "{no_hosts:?}");
    let vm_history = findings::list_for_host(pool, f.vm).await.unwrap();
    let history: Vec<(i64, &str, Severity)> = vm_history
        .iter()
        .map(|finding| (finding.id, finding.status.as_str(), finding.severity))
        .collect();
    assert_eq!(
        history,
        [
            (masks, "open", Severity::Warning),
            (f.resolved_finding, "resolved", Severity::Info)
        ],
        "newest first"
    );
    assert!(vm_history[1].resolved_at.is_some());

    let by = findings::count_open_by(pool).await.unwrap();
    let expected = [
        OpenCount {
            reason: "hypervisor-masks".into(),
            severity: Severity::Warning,
            findings: 1,
            hosts: 1,
        },
        OpenCount {
            reason: "slow-accelerated".into(),
            severity: Severity::Critical,
            findings: 1,
            hosts: 1,
        },
    ];
    assert_eq!(by, expected);
    let hosts_by_reason = findings::hosts_by_reason(pool).await.unwrap();
    assert_eq!(
        hosts_by_reason,
        [("hypervisor-masks".to_string(), 1), ("slow-accelerated".to_string(), 1)]
    );

    // Derived again with new evidence: the same row, refreshed.
    let mut conn = pool.acquire().await.unwrap();
    let refreshed = findings::upsert_open(&mut conn, &slow_finding(f.bench, json!({"ratio": 0.9})))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(refreshed, slow);
    let bench_history = findings::list_for_host(pool, f.bench).await.unwrap();
    assert_eq!(bench_history.len(), 1);
    assert_eq!(bench_history[0].evidence, json!({"ratio": 0.9}));
    assert_eq!(bench_history[0].first_seen, first.first_seen);

    assert_eq!(findings::resolve(pool, &[slow, f.resolved_finding]).await.unwrap(), 1);
    assert_eq!(findings::resolve(pool, &[slow]).await.unwrap(), 0, "already resolved");
    assert_eq!(findings::resolve(pool, &[]).await.unwrap(), 0);
    let open = findings::list_open(pool).await.unwrap();
    assert_eq!(open.iter().map(|finding| finding.id).collect::<Vec<_>>(), [masks]);

    // series
    let current = series::current_facts(pool).await.unwrap();
    assert_eq!(current.len(), 2);
    let (bench, vm) = (&current[0], &current[1]);
    assert_eq!((bench.host_id(), vm.host_id()), (f.bench, f.vm));
    assert_eq!(
        (bench.snapshot.id, vm.snapshot.id),
        (f.bench_snapshots[1], f.vm_snapshot)
    );
    assert_eq!(bench.labels.0, labels(&[("class", "storage-gen3")]));
    assert_eq!(bench.snapshot.facts, json!({}), "the rules read typed columns only");
    assert_eq!(bench.snapshot.columns, FactColumns::from_facts(&bench_facts(KERNEL)));
    assert_eq!(vm.snapshot.columns, FactColumns::from_facts(&vm_facts()));

    let bench_snapshot = f.bench_snapshots[1];
    let observed = series::latest_points(pool, &[f.bench, f.vm], None, 5).await.unwrap();
    let expected = [
        f.bench_accelerated.observation(bench_snapshot),
        f.bench_software.observation(bench_snapshot),
        f.bench_chacha.observation(bench_snapshot),
        f.vm_fell_back.observation(f.vm_snapshot),
    ];
    assert_eq!(observed, expected);
    let only_chacha = BTreeSet::from([chacha().name().to_string()]);
    let observed = series::latest_points(pool, &[f.bench, f.vm], Some(&only_chacha), 1)
        .await
        .unwrap();
    assert_eq!(observed, [f.bench_chacha.observation(bench_snapshot)]);
    let no_algorithms = series::latest_points(pool, &[f.bench], Some(&BTreeSet::new()), 5)
        .await
        .unwrap();
    assert!(no_algorithms.is_empty(), "{no_algorithms:?}");
    let no_hosts = series::latest_points(pool, &[], None, 5).await.unwrap();
    assert!(no_hosts.is_empty(), "{no_hosts:?}");
}

// ---------------------------------------------------------------- the checklist

/// Every `pub async fn` under `src/db`, as `module::function` (`db` for `mod.rs`).
/// Each is called above, and its answer checked.
const COVERED: &[&str] = &[
    "db::connect",
    "campaign_summaries::count",
    "campaign_summaries::list",
    "campaigns::cancel",
    "campaigns::create_with_jobs",
    "campaigns::ended_within",
    "campaigns::get",
    "campaigns::host_progress",
    "campaigns::list",
    "campaigns::status",
    "capacity::hosts",
    "capacity::points",
    "fallback::archs",
    "fallback::findings",
    "fallback::hosts",
    "fallback::pairs",
    "fallback::sizes",
    "findings::count_open_by",
    "findings::hosts_by_reason",
    "findings::list_for_host",
    "findings::list_open",
    "findings::list_open_for_hosts",
    "findings::resolve",
    "findings::upsert_open",
    "host_results::count",
    "host_results::key_series",
    "host_results::list",
    "hosts::find_by_name",
    "hosts::get",
    "hosts::list",
    "hosts::list_with_facts",
    "hosts::touch",
    "hosts::upsert_host_with_facts",
    "jobs::adopt",
    "jobs::claim_next_for_host",
    "jobs::count_by_status",
    "jobs::expire_overdue",
    "jobs::fail",
    "jobs::failures",
    "jobs::for_campaign",
    "jobs::get",
    "jobs::insert_for_campaign",
    "jobs::mark_started",
    "jobs::release",
    "jobs::requeue_lost",
    "jobs::running_for_campaign",
    "jobs::running_for_host",
    "jobs::unclaim",
    "matrix::host_points",
    "matrix::hosts",
    "matrix::slices",
    "matrix::view_points",
    "points::record",
    "points::refresh",
    "results::count",
    "results::count_for_job",
    "results::record",
    "results::stored",
    "series::current_facts",
    "series::latest_points",
    "sessions::close",
    "sessions::close_all_open",
    "sessions::for_host",
    "sessions::open",
    "snapshots::hash_of",
    "snapshots::history",
    "snapshots::insert",
];

/// The `pub async fn`s of `src/db`, as `module::function`.
fn public_queries() -> BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/db");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("a UTF-8 file name");
        let module = if stem == "mod" { "db" } else { stem };
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for line in source.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("pub async fn ") {
                let name = rest.split(['(', '<']).next().unwrap_or(rest).trim();
                found.insert(format!("{module}::{name}"));
            }
        }
    }
    found
}

/// Whether `source` calls `path` (`module::function(`), not just a function
/// whose name ends the same (`host_results::count(` is no `results::count(`).
fn calls(source: &str, path: &str) -> bool {
    let call = format!("{path}(");
    source.match_indices(&call).any(|(at, _)| {
        source[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

#[test]
fn every_public_query_is_called_here() {
    let found = public_queries();
    let listed: BTreeSet<String> = COVERED.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&listed).collect();
    assert!(
        new.is_empty(),
        "src/db has public queries this test never runs: {new:?}. Add a call to each in \
         tests/db/every_query.rs against the populated database, assert on what it returns, \
         and list it in COVERED"
    );
    let gone: Vec<&String> = listed.difference(&found).collect();
    assert!(
        gone.is_empty(),
        "COVERED lists functions src/db no longer has: {gone:?}"
    );
    let this_file = include_str!("every_query.rs");
    let uncalled: Vec<&&str> = COVERED.iter().filter(|f| !calls(this_file, f)).collect();
    assert!(
        uncalled.is_empty(),
        "listed in COVERED but never called in tests/db/every_query.rs: {uncalled:?}; add a call"
    );
}
