//! The `providers` suite across the fleet, built from the suite's own matrix:
//! on every host every point measured or skipped with its reason (the
//! kernel's where the host's kernel offers no AF_ALG, OpenSSL's where the host
//! has no `openssl` it can run), ring on its AEADs alone, each result on its
//! job's provider; then the host's OpenSSL with and without AES-NI, the
//! Nehalem host's under the same emulator as its workers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cipherfleet_core::Point;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Execution, Matrix, Suite};
use cipherfleet_core::wire::provider_to_wire;
use cipherfleet_proto::v1;
use serde_json::Value;

use crate::app::App;

use super::EMULATED;
use super::harness::Fleet;

/// Seconds each point measures, against the suite's 1 s. The suite on every
/// host at once, on the test machine's few shared cores, would take many
/// minutes at full length; what this test asserts (each point measured or
/// skipped with its reason, each result on its job's provider, the path each
/// OpenSSL took) holds at any length. The engine still takes its minimum
/// samples (core/src/spec/budget.rs) and OpenSSL its three runs.
const SECONDS: f64 = 0.05;

/// The one payload size the emulated hosts measure the suite at. Their
/// timings are not performance (every page shows them unranked), and what
/// they show here (the path each provider takes on their CPU and kernel, the
/// providers they lack) is the same at every size; while their 10 MiB points
/// are the suite's slowest by far, and the whole suite on them took many
/// minutes (docs/performance.md, "The providers suite in the fleet test").
/// 16 KiB is the size `/providers` answers at. The native hosts measure
/// every size. (The kernel provider has no 10 MiB point anywhere: AF_ALG
/// takes at most `provider::kernel::MAX_BYTES` in one operation, so the
/// suite leaves them out.)
const EMULATED_SIZE: u64 = 16 * 1024;

/// The `providers` suite's matrix, each point measuring [`SECONDS`]. A
/// campaign's matrix is the same on every host, and so is the suite's,
/// whatever a host's cores and execution: checked, so that a suite that
/// starts to differ per host fails here instead of going untested.
fn suite_matrix() -> Matrix {
    let matrices = Suite::Providers.matrices(1);
    for cores in [1, 2, 64] {
        for execution in [Execution::Native, Execution::Emulated] {
            assert_eq!(
                Suite::Providers.matrices_on(cores, execution),
                matrices,
                "the providers suite differs on {cores} core(s), {execution:?}: one campaign matrix no longer stands for it"
            );
        }
    }
    let [matrix] = <[Matrix; 1]>::try_from(matrices).expect("the providers suite is one matrix");
    Matrix {
        seconds: SECONDS,
        ..matrix
    }
}

/// The providers campaigns, finished: the suite on the native hosts, and at
/// [`EMULATED_SIZE`] on the emulated ones.
pub(super) struct ProvidersCampaigns {
    pub(super) ids: Vec<i64>,
    /// Every host's skipped points, as `campaign status` lists them.
    skipped: Vec<v1::SkippedPoints>,
}

impl ProvidersCampaigns {
    /// `host`'s skipped points of `provider`, if it skipped any.
    pub(super) fn skipped(&self, host: &str, provider: Provider) -> Option<&v1::SkippedPoints> {
        let provider = provider_to_wire(provider) as i32;
        self.skipped
            .iter()
            .find(|s| s.host_name == host && s.provider == provider && s.path == v1::Path::Unspecified as i32)
    }
}

/// A job of the campaign, or a result with the job's host.
#[derive(Debug, sqlx::FromRow)]
struct Row {
    job_id: uuid::Uuid,
    host: String,
    #[sqlx(flatten)]
    point: Point,
}

/// What a point lacks when it is skipped, as `campaign status` keys its rows:
/// (provider, path), the path unspecified on a provider's row and the
/// built-in crates' rows naming the path their host lacks.
fn lacking(p: &Point) -> (i32, i32) {
    if p.provider.is_rustcrypto() {
        let path = match p.path {
            Path::Accelerated => v1::Path::Accelerated,
            Path::Software => v1::Path::Software,
        };
        (v1::Provider::Rustcrypto as i32, path as i32)
    } else {
        (provider_to_wire(p.provider) as i32, v1::Path::Unspecified as i32)
    }
}

/// The `providers` suite ([`suite_matrix`]) on every one of `hosts`, at
/// [`EMULATED_SIZE`] on the emulated ones: two campaigns, run at once (their
/// hosts apart). Each is checked by [`measured_or_skipped`]; over both, ring
/// ran its AEADs alone, on the accelerated path, and no host lacks it.
pub(super) async fn suite_on_every_host(app: &App, fleet: &Fleet, hosts: &[&str]) -> ProvidersCampaigns {
    let suite = suite_matrix();
    assert!(suite.sizes.contains(&EMULATED_SIZE), "{:?}", suite.sizes);
    let at_one_size = Matrix {
        sizes: vec![EMULATED_SIZE],
        ..suite.clone()
    };
    let (emulated, native): (Vec<&str>, Vec<&str>) = hosts.iter().copied().partition(|h| EMULATED.contains(h));
    let runs = [
        ("providers", suite, native),
        ("providers at 16 KiB on the emulated hosts", at_one_size, emulated),
    ];
    let since = Instant::now();
    let mut started = Vec::new();
    for (name, matrix, hosts) in &runs {
        started.push(app.start_campaign_on(name, v1::Matrix::from(matrix), hosts).await);
    }
    let mut campaigns = ProvidersCampaigns {
        ids: Vec::new(),
        skipped: Vec::new(),
    };
    for ((name, matrix, hosts), started) in runs.iter().zip(started) {
        let id = started.campaign_id.parse().unwrap();
        let skipped = measured_or_skipped(app, fleet, matrix, hosts, &started).await;
        eprintln!(
            "fleet: {name}: {} jobs, {} points skipped",
            started.jobs_created, started.points_skipped
        );
        campaigns.ids.push(id);
        campaigns.skipped.extend(skipped);
    }
    // The figure docs/performance.md records (run with --nocapture to see it).
    eprintln!(
        "fleet: the providers suite on every host took {:.1} s",
        since.elapsed().as_secs_f64()
    );

    // ring, built into every agent: its three AEADs on the accelerated path, on every host.
    let ring: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT DISTINCT h.name, r.algorithm, r.path FROM results r JOIN jobs j ON j.id = r.job_id \
         JOIN hosts h ON h.id = r.host_id WHERE j.campaign_id = ANY($1) AND r.provider = 'ring' ORDER BY 1, 2, 3",
    )
    .bind(&campaigns.ids)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let mut expected: Vec<(String, String, String)> = hosts
        .iter()
        .flat_map(|h| {
            ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"]
                .map(|a| (h.to_string(), a.to_string(), "accelerated".to_string()))
        })
        .collect();
    expected.sort();
    assert_eq!(ring, expected, "ring ran its AEADs alone, accelerated, on every host");
    for &host in hosts {
        assert!(
            campaigns.skipped(host, Provider::Ring).is_none(),
            "{host} has ring: {:?}",
            campaigns.skipped
        );
    }
    campaigns
}

/// Waits for the campaign `started` of `matrix` on `hosts`, and checks it:
/// every point the matrix expands to is, on every host, a result of the
/// campaign or one of the points `campaign status` lists as skipped on that
/// host, with a reason (a provider its agent lacks, or the software path
/// without the `-soft` sibling); what `StartCampaign`, the status and
/// `/api/v1/campaigns/{id}/skipped` count as skipped agree; nothing failed;
/// each job has one result, of its own point and so of its provider. Returns
/// the skipped points.
async fn measured_or_skipped(
    app: &App,
    fleet: &Fleet,
    matrix: &Matrix,
    hosts: &[&str],
    started: &v1::StartCampaignResponse,
) -> Vec<v1::SkippedPoints> {
    let expected: Vec<Point> = matrix.expand().into_iter().map(|s| s.point).collect();
    assert_eq!(
        (started.jobs_created + started.points_skipped) as usize,
        expected.len() * hosts.len(),
        "each of the matrix's {} points on each of {hosts:?} is a job or skipped: {started:?}",
        expected.len()
    );
    let status = app.wait_finished(&started.campaign_id, Duration::from_secs(600)).await;
    let id: i64 = started.campaign_id.parse().unwrap();
    let spans: Vec<(String, i64, f64)> = sqlx::query_as(
        "SELECT h.name, count(*), extract(epoch FROM max(j.finished_at) - min(j.started_at))::float8 \
         FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.campaign_id = $1 GROUP BY h.name ORDER BY h.name",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    eprintln!("fleet: campaign {id} per host (jobs, first start to last finish in s): {spans:?}");
    let overall = status.overall.unwrap();
    assert_eq!(
        (status.state, overall.done, overall.failed),
        (v1::CampaignState::Completed as i32, started.jobs_created, 0),
        "{:?}\n{}\n{}",
        status.failures,
        app.diagnosis(&started.campaign_id).await,
        fleet.logs()
    );
    assert_eq!(status.points_skipped, started.points_skipped, "{:?}", status.skipped);

    let jobs: Vec<Row> = sqlx::query_as(
        "SELECT j.id AS job_id, h.name AS host, j.algorithm, j.direction, j.size_bytes, j.threads, \
             j.concurrency, j.key_mode, j.path, j.nonce, j.provider \
         FROM jobs j JOIN hosts h ON h.id = j.host_id WHERE j.campaign_id = $1",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let results: Vec<Row> = sqlx::query_as(
        "SELECT r.job_id, h.name AS host, r.algorithm, r.direction, r.size_bytes, r.threads, \
             r.concurrency, r.key_mode, r.path, r.nonce, r.provider \
         FROM results r JOIN jobs j ON j.id = r.job_id JOIN hosts h ON h.id = r.host_id WHERE j.campaign_id = $1",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(results.len(), jobs.len(), "one result per job");
    for r in &results {
        let job = jobs.iter().find(|j| j.job_id == r.job_id).unwrap();
        assert_eq!(
            (&r.host, r.point),
            (&job.host, job.point),
            "a result is of its job's host and point, provider included"
        );
    }

    // Per host: the points without a result are exactly the ones listed as skipped, each with a reason.
    for &host in hosts {
        let measured: Vec<Point> = results.iter().filter(|r| r.host == host).map(|r| r.point).collect();
        let strays: Vec<&Point> = measured.iter().filter(|p| !expected.contains(p)).collect();
        assert!(strays.is_empty(), "{host}: results outside the matrix: {strays:?}");
        let mut unmeasured: BTreeMap<(i32, i32), u32> = BTreeMap::new();
        for p in &expected {
            match measured.iter().filter(|m| *m == p).count() {
                0 => *unmeasured.entry(lacking(p)).or_default() += 1,
                1 => {}
                n => panic!("{host}: {n} results of {p:?}"),
            }
        }
        let listed: Vec<&v1::SkippedPoints> = status.skipped.iter().filter(|s| s.host_name == host).collect();
        let skipped: BTreeMap<(i32, i32), u32> = listed.iter().map(|s| ((s.provider, s.path), s.points)).collect();
        assert_eq!(
            unmeasured, skipped,
            "{host}: every point is measured or skipped ((provider, path) → points): {listed:?}"
        );
        for s in listed {
            assert!(!s.reason.trim().is_empty(), "{host}: a skip without a reason: {s:?}");
        }
    }
    let api = app.get(&format!("/api/v1/campaigns/{id}/skipped")).await;
    assert_eq!(api.status, 200, "{}", api.body);
    let rows: Vec<Value> = serde_json::from_str(&api.body).unwrap();
    let total: u64 = rows.iter().map(|r| r["points"].as_u64().unwrap_or_default()).sum();
    assert_eq!(total, u64::from(started.points_skipped), "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["reason"].as_str().is_some_and(|s| !s.trim().is_empty())),
        "every skipped row says why: {rows:?}"
    );
    status.skipped
}

/// AES-128-GCM at 16 KiB on both paths of the host's OpenSSL, from the
/// providers campaigns: on x86-aesni its accelerated request ran AES-NI and
/// its masked one software; on x86-no-aesni (a CPU without AES-NI, its
/// `openssl` under the same emulator as its workers) both ran software and
/// say so.
pub(super) async fn openssl_with_and_without_aes_ni(app: &App, campaigns: &ProvidersCampaigns) {
    let ran: Vec<(String, String, String, Value)> = sqlx::query_as(
        "SELECT h.name, r.path, r.path_used, r.measurement FROM results r JOIN jobs j ON j.id = r.job_id \
         JOIN hosts h ON h.id = r.host_id WHERE j.campaign_id = ANY($1) AND r.provider = 'openssl' \
         AND r.algorithm = 'aes-128-gcm' AND r.size_bytes = 16384 AND h.name IN ('x86-aesni', 'x86-no-aesni') \
         ORDER BY h.name, r.path",
    )
    .bind(&campaigns.ids)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let paths: Vec<(&str, &str, &str)> = ran
        .iter()
        .map(|(h, p, u, _)| (h.as_str(), p.as_str(), u.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            ("x86-aesni", "accelerated", "accelerated"),
            ("x86-aesni", "software", "software"),
            ("x86-no-aesni", "accelerated", "software"),
            ("x86-no-aesni", "software", "software"),
        ]
    );
    for (host, _, _, m) in &ran {
        assert_eq!(
            (&m["provider"], &m["path_basis"]),
            (&Value::from("openssl"), &Value::from("inferred")),
            "{host}: {m}"
        );
    }
}
