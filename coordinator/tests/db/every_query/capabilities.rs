//! capabilities: the paths each host's agent advertised, and the points a
//! campaign skips on a host that lacks their path.

use std::collections::HashMap;

use cipherfleet_coordinator::domain::selector::Selector;
use cipherfleet_coordinator::launch::{self, Launch, Points};
use cipherfleet_coordinator::store::campaigns::{self, CampaignStatus};
use cipherfleet_coordinator::store::capabilities::{self, Advertised, HostSkips, PathSkips, Skipped};
use cipherfleet_coordinator::store::{hosts, jobs};
use cipherfleet_coordinator::watch::verify;
use cipherfleet_core::path::Path;
use sqlx::PgPool;

use super::fixture::*;

const BOTH: [Path; 2] = [Path::Accelerated, Path::Software];

async fn hello(pool: &PgPool, name: &str) -> i64 {
    hosts::upsert_host_with_facts(pool, name, None, &facts(KERNEL))
        .await
        .unwrap()
        .host_id
}

/// A campaign of verification's small matrix (three points on each path) on
/// the hosts named, through the launcher every campaign goes through.
async fn start(pool: &PgPool, names: &[&str], paths: &[Path]) -> launch::Launched {
    let mut matrix = verify::matrix();
    matrix.paths = paths.to_vec();
    start_matrix(pool, names, matrix).await
}

/// A campaign of `matrix` on the hosts named (every host when none), through the launcher.
async fn start_matrix(pool: &PgPool, names: &[&str], matrix: cipherfleet_core::spec::Matrix) -> launch::Launched {
    let selector = Selector {
        host_names: names.iter().map(|n| n.to_string()).collect(),
        ..Selector::default()
    };
    let mut tx = pool.begin().await.unwrap();
    let launched = launch::insert(
        &mut tx,
        &Launch {
            points: &Points::Matrix(Box::new(matrix)),
            selector: &selector,
            name: "",
            started_by: "tests",
            online: None,
            queued_ttl: campaigns::DEFAULT_QUEUED_TTL,
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    launched
}

/// The paths of a campaign's jobs per host.
async fn job_paths(pool: &PgPool, campaign: i64) -> HashMap<i64, Vec<Path>> {
    let mut by_host: HashMap<i64, Vec<Path>> = HashMap::new();
    for j in jobs::for_campaign(pool, campaign).await.unwrap() {
        by_host.entry(j.host_id).or_default().push(j.point.path);
    }
    by_host
}

async fn status(pool: &PgPool, campaign: i64) -> CampaignStatus {
    campaigns::get(pool, campaign).await.unwrap().unwrap().status
}

#[tokio::test]
async fn a_host_lacking_the_software_path_gets_no_software_jobs_and_its_skips_are_counted() {
    let pool = fresh_db().await;
    let full = hello(&pool, "full").await;
    let accel = hello(&pool, "accel-only").await;
    let silent = hello(&pool, "silent").await;
    // First hellos: nothing changed (nothing was said before), nothing queued to skip.
    assert_eq!(
        capabilities::advertise(&pool, full, &BOTH, &[]).await.unwrap(),
        Advertised::default()
    );
    assert_eq!(
        capabilities::advertise(&pool, accel, &[Path::Accelerated], &[])
            .await
            .unwrap(),
        Advertised::default()
    );
    let known = capabilities::paths_of_hosts(&pool).await.unwrap();
    assert_eq!(
        known,
        HashMap::from([(full, BOTH.to_vec()), (accel, vec![Path::Accelerated])])
    );
    assert_eq!(capabilities::paths_of(&pool, silent).await.unwrap(), None);
    assert_eq!(capabilities::paths_of(&pool, i64::MAX).await.unwrap(), None);

    // Made with what the hosts said: accel-only gets its three accelerated points alone;
    // silent has not said, so it gets everything until its hello says otherwise.
    let launched = start(&pool, &["full", "accel-only", "silent"], &BOTH).await;
    assert_eq!((launched.jobs, launched.points_skipped, launched.hosts), (15, 3, 3));
    let id = launched.campaign_id;
    let paths = job_paths(&pool, id).await;
    assert_eq!(paths[&accel], vec![Path::Accelerated; 3]);
    assert_eq!(paths[&full].len(), 6);
    assert_eq!(paths[&silent].iter().filter(|p| **p == Path::Software).count(), 3);
    let only_accel = |points| HostSkips {
        host_id: accel,
        host_name: "accel-only".into(),
        path: Path::Software,
        points,
    };
    assert_eq!(
        capabilities::for_campaign(&pool, id, 10).await.unwrap(),
        [only_accel(3)]
    );

    // silent says it lacks the software path; the one software job it still
    // holds the outcome of stays, the other two are skipped.
    let held = jobs::for_campaign(&pool, id)
        .await
        .unwrap()
        .into_iter()
        .find(|j| j.host_id == silent && j.point.path == Path::Software)
        .unwrap();
    let said = capabilities::advertise(&pool, silent, &[Path::Accelerated], &[held.id])
        .await
        .unwrap();
    assert_eq!(
        said,
        Advertised {
            changed_from: None,
            skipped: 2,
            finished: vec![],
        }
    );
    assert_eq!(job_paths(&pool, id).await[&silent].len(), 4);
    assert_eq!(
        capabilities::totals(&pool, id).await.unwrap(),
        [PathSkips {
            path: Path::Software,
            hosts: 2,
            points: 5,
        }]
    );
    assert_eq!(capabilities::for_campaign(&pool, id, 1).await.unwrap(), [only_accel(3)]);
    // Skipped points are no jobs: the counts hold the 13 left.
    assert_eq!(campaigns::status(&pool, id).await.unwrap().unwrap().jobs.total(), 13);

    // The sibling installed later: a change, reported with what was before.
    let gained = capabilities::advertise(&pool, accel, &BOTH, &[]).await.unwrap();
    assert_eq!(gained.changed_from, Some(vec![Path::Accelerated]));
    assert_eq!(capabilities::paths_of(&pool, accel).await.unwrap(), Some(BOTH.to_vec()));
    // The same paths again: no change.
    let again = capabilities::advertise(&pool, accel, &BOTH, &[]).await.unwrap();
    assert_eq!(again.changed_from, None);

    // A campaign's own record of skips adds up per host and path.
    let mut tx = pool.begin().await.unwrap();
    let skip = Skipped {
        host_id: accel,
        path: Path::Software,
        points: 4,
    };
    capabilities::record(&mut tx, id, &[skip]).await.unwrap();
    capabilities::record(&mut tx, id, &[]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(capabilities::for_campaign(&pool, id, 1).await.unwrap(), [only_accel(7)]);
}

#[tokio::test]
async fn a_campaign_whose_remaining_jobs_are_all_skipped_completes() {
    let pool = fresh_db().await;
    let accel = hello(&pool, "accel-only").await;
    let late = hello(&pool, "late").await;
    capabilities::advertise(&pool, accel, &[Path::Accelerated], &[])
        .await
        .unwrap();

    // Nothing the host can run: no job at all, finished at once, the skips on record.
    let none = start(&pool, &["accel-only"], &[Path::Software]).await;
    assert_eq!((none.jobs, none.points_skipped), (0, 3));
    assert_eq!(status(&pool, none.campaign_id).await, CampaignStatus::Finished);

    // Queued for a host that had not said; its accelerated jobs end; then its
    // hello says it lacks the software path: the rest is skipped and the campaign ends.
    let queued = start(&pool, &["late"], &BOTH).await;
    assert_eq!((queued.jobs, queued.points_skipped), (6, 0));
    let id = queued.campaign_id;
    let ended = sqlx::query(
        "UPDATE jobs SET status = 'done', finished_at = now() WHERE campaign_id = $1 AND path = 'accelerated'",
    )
    .bind(id)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(ended.rows_affected(), 3);
    assert_eq!(status(&pool, id).await, CampaignStatus::Running);
    let said = capabilities::advertise(&pool, late, &[Path::Accelerated], &[])
        .await
        .unwrap();
    assert_eq!((said.skipped, said.finished), (3, vec![id]));
    assert_eq!(status(&pool, id).await, CampaignStatus::Finished);
    assert!(jobs::claim_next_for_host(&pool, late).await.unwrap().is_none());
}

#[tokio::test]
async fn verification_skips_a_missing_path_and_follows_a_sibling_installed_later() {
    let pool = fresh_db().await;
    let host = hello(&pool, "accel-only").await;
    capabilities::advertise(&pool, host, &[Path::Accelerated], &[])
        .await
        .unwrap();
    let config = verify::VerifyOnChange {
        enabled: true,
        min_interval: std::time::Duration::ZERO,
    };
    let first = verify::on_hello(&pool, &config, host, None)
        .await
        .unwrap()
        .expect("a new host");
    assert_eq!(job_paths(&pool, first).await[&host], vec![Path::Accelerated; 3]);
    assert_eq!(capabilities::totals(&pool, first).await.unwrap()[0].points, 3);

    // The sibling is installed: the paths changed, with the facts the same.
    let gained = capabilities::advertise(&pool, host, &BOTH, &[]).await.unwrap();
    let before = gained.changed_from.expect("a change");
    let change = verify::paths_change(&before, &BOTH);
    let second = verify::on_hello(&pool, &config, host, Some(&change))
        .await
        .unwrap()
        .expect("a paths change");
    assert_eq!(job_paths(&pool, second).await[&host].len(), 6);
    assert!(capabilities::totals(&pool, second).await.unwrap().is_empty());
    let name = campaigns::get(&pool, second).await.unwrap().unwrap().name;
    assert!(name.contains("paths"), "{name}");
}

/// Facts whose agent reports its providers: the host's OpenSSL runs AES-GCM
/// (and CBC), its kernel has no AF_ALG.
fn facts_with_providers() -> serde_json::Value {
    use cipherfleet_core::provider::Provider;
    use cipherfleet_core::provider::facts::{Capability, ProviderFacts};
    let capability = |provider: Provider, available: bool, reason: Option<&str>, algorithms: &[&str]| Capability {
        provider,
        available,
        reason: reason.map(str::to_string),
        algorithms: algorithms.iter().map(|a| a.parse().unwrap()).collect(),
        software_path: String::new(),
    };
    let providers = ProviderFacts {
        capabilities: vec![
            capability(Provider::RustCrypto, true, None, &["aes-128-gcm", "aes-128-cbc"]),
            capability(Provider::Ring, true, None, &["aes-128-gcm"]),
            capability(Provider::Openssl, true, None, &["aes-128-gcm", "aes-128-cbc"]),
            capability(
                Provider::Kernel,
                false,
                Some("<b>AF_ALG</b>: socket(AF_ALG) failed: EAFNOSUPPORT"),
                &[],
            ),
        ],
        cpu: Default::default(),
        openssl: None,
        kernel: None,
    };
    let mut f = facts(KERNEL);
    f["providers"] = serde_json::to_value(providers).unwrap();
    f
}

#[tokio::test]
async fn a_host_lacking_a_provider_skips_its_points_with_the_agents_reason() {
    use cipherfleet_coordinator::store::capabilities::{ProviderSkipped, ProviderSkips};
    use cipherfleet_core::provider::Provider;
    let pool = fresh_db().await;
    let new = hosts::upsert_host_with_facts(&pool, "new-agent", None, &facts_with_providers())
        .await
        .unwrap()
        .host_id;
    let old = hello(&pool, "old-agent").await;
    let known = capabilities::providers_of_hosts(&pool).await.unwrap();
    assert_eq!(
        known.keys().copied().collect::<Vec<_>>(),
        [new],
        "the old agent reported none"
    );
    assert_eq!(known[&new].len(), 4);

    // AES-128-GCM and AES-128-CBC, accelerated, on openssl and the kernel: the new
    // agent runs its OpenSSL's two and skips the kernel's two; the old one skips all four.
    let matrix = cipherfleet_core::spec::Matrix {
        algorithms: vec!["aes-128-gcm".parse().unwrap(), "aes-128-cbc".parse().unwrap()],
        sizes: vec![1024],
        directions: vec![cipherfleet_core::spec::Direction::Encrypt],
        threads: vec![1],
        concurrency: None,
        key_modes: vec![cipherfleet_core::spec::KeyMode::Static],
        paths: vec![Path::Accelerated],
        nonces: vec![cipherfleet_core::spec::Nonce::Counter],
        providers: vec![Provider::Openssl, Provider::Kernel],
        seconds: 0.5,
    };
    let launched = start_matrix(&pool, &[], matrix).await;
    assert_eq!((launched.jobs, launched.points_skipped), (2, 6));
    let id = launched.campaign_id;
    let jobs = jobs::for_campaign(&pool, id).await.unwrap();
    assert!(
        jobs.iter()
            .all(|j| j.host_id == new && j.point.provider == Provider::Openssl)
    );
    let totals = capabilities::provider_totals(&pool, id).await.unwrap();
    let [kernel, openssl] = totals.as_slice() else {
        panic!("a row per provider: {totals:?}");
    };
    assert_eq!(
        (kernel.provider, kernel.hosts, kernel.points, kernel.other_reasons),
        (Provider::Kernel, 2, 4, 1)
    );
    // The first host by name gives its reason: new-agent's, the agent's own words.
    assert_eq!(kernel.reason, "<b>AF_ALG</b>: socket(AF_ALG) failed: EAFNOSUPPORT");
    assert_eq!(
        *openssl,
        ProviderSkips {
            provider: Provider::Openssl,
            hosts: 1,
            points: 2,
            reason: "the host's agent does not report its providers (a release before them): upgrade it to measure on openssl"
                .into(),
            other_reasons: 0,
        }
    );
    let per_host = capabilities::providers_for_campaign(&pool, id, 10).await.unwrap();
    let listed: Vec<(&str, Provider, i64)> = per_host
        .iter()
        .map(|s| (s.host_name.as_str(), s.provider, s.points))
        .collect();
    assert_eq!(
        listed,
        [
            ("new-agent", Provider::Kernel, 2),
            ("old-agent", Provider::Kernel, 2),
            ("old-agent", Provider::Openssl, 2)
        ]
    );
    assert_eq!(per_host[0].reason, kernel.reason);
    assert_eq!(
        capabilities::providers_for_campaign(&pool, id, 1).await.unwrap().len(),
        1
    );
    // A campaign's own record, added in its transaction.
    let selector = Selector::default();
    let mut tx = pool.begin().await.unwrap();
    capabilities::record_providers(&mut tx, id, &[]).await.unwrap();
    let other = launch::insert(
        &mut tx,
        &Launch {
            points: &Points::Suite(cipherfleet_core::spec::Suite::Quick),
            selector: &selector,
            name: "",
            started_by: "tests",
            online: None,
            queued_ttl: campaigns::DEFAULT_QUEUED_TTL,
        },
    )
    .await
    .unwrap();
    capabilities::record_providers(
        &mut tx,
        other.campaign_id,
        &[ProviderSkipped {
            host_id: old,
            provider: Provider::Ring,
            points: 3,
            reason: "why".into(),
        }],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let ring = capabilities::provider_totals(&pool, other.campaign_id).await.unwrap();
    assert_eq!((ring.len(), ring[0].provider, ring[0].points), (1, Provider::Ring, 3));
}

/// `capabilities::skip_unrunnable_providers`: at a hello whose facts lost a
/// provider, the host's queued jobs on it are skipped with the agent's reason;
/// the built-in crates' and those the agent holds stay.
#[tokio::test]
async fn queued_jobs_on_a_provider_the_agent_lost_are_skipped_with_its_reason() {
    use cipherfleet_core::provider::Provider;
    use cipherfleet_core::provider::facts::Capability;
    use uuid::Uuid;

    let f = populate().await;
    let pool = &f.pool;
    let campaign: i64 = sqlx::query_scalar(
        "INSERT INTO campaigns (name, suite, matrix, started_by) VALUES ('lost openssl', 'providers', '{}', 'tests') \
         RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let mut jobs = Vec::new();
    for (position, provider) in ["openssl", "openssl", "rustcrypto"].into_iter().enumerate() {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
                 key_mode, path, provider, time_limit_seconds) \
             VALUES ($1, $2, $3, '{}', 'aes-128-gcm', 'encrypt', 1024, 1, 'static', 'accelerated', $4, 60) \
             RETURNING id",
        )
        .bind(campaign)
        .bind(f.vm)
        .bind(position as i32)
        .bind(provider)
        .fetch_one(pool)
        .await
        .unwrap();
        jobs.push(id);
    }
    let lost = [Capability {
        provider: Provider::Openssl,
        available: false,
        reason: Some("no openssl on PATH".into()),
        algorithms: Vec::new(),
        software_path: String::new(),
    }];
    let still = [Capability {
        available: true,
        reason: None,
        algorithms: vec!["aes-128-gcm".parse().unwrap()],
        ..lost[0].clone()
    }];
    let none = capabilities::skip_unrunnable_providers(pool, f.vm, Some(&still), &[])
        .await
        .unwrap();
    assert_eq!(none, (0, vec![]), "the agent still runs it");
    // The first job is held by the agent (spooled): it stays.
    let (skipped, finished) = capabilities::skip_unrunnable_providers(pool, f.vm, Some(&lost), &jobs[..1])
        .await
        .unwrap();
    assert_eq!((skipped, finished), (1, vec![]));
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM jobs WHERE campaign_id = $1 ORDER BY position")
        .bind(campaign)
        .fetch_all(pool)
        .await
        .unwrap();
    assert_eq!(left, [jobs[0], jobs[2]]);
    let rows = capabilities::providers_for_campaign(pool, campaign, 10).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].provider, rows[0].points, rows[0].reason.as_str()),
        (Provider::Openssl, 1, "no openssl on PATH")
    );
    // An agent before providers (no capabilities at all): the held one goes too once released.
    let (skipped, _) = capabilities::skip_unrunnable_providers(pool, f.vm, None, &[])
        .await
        .unwrap();
    assert_eq!(skipped, 1);
    let rows = capabilities::providers_for_campaign(pool, campaign, 10).await.unwrap();
    assert_eq!(rows[0].points, 2, "added to the campaign's skips: {rows:?}");
}
