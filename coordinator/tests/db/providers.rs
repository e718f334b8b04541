//! The providers page's read-model (`report::providers`, migrations/0036):
//! results stored with a provider, rebuilt into `result_points` and
//! `provider_points` as a bulk load does, read back per machine class as
//! medians over hosts, ranked against the fastest provider, with each
//! provider's fallback cost; an emulated host is never the fastest. And
//! `/fallback` on another provider: its pairs from `provider_points`.

use std::collections::BTreeSet;

use cipherfleet_coordinator::domain::labels::Labels;
use cipherfleet_coordinator::findings::{Work, derive, derive_fleet};
use cipherfleet_coordinator::report::providers::{self, ProviderRow};
use cipherfleet_coordinator::store::findings;
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::provider::Provider;

use crate::helpers::{fresh_db, hello, store_provider_results, with_features};

fn find(rows: &[ProviderRow], marked: bool, provider: Provider) -> &ProviderRow {
    rows.iter()
        .find(|r| r.marked == marked && r.provider == provider)
        .unwrap_or_else(|| panic!("a {provider} row (marked: {marked}) in {rows:#?}"))
}

#[tokio::test]
async fn providers_are_ranked_per_class_by_their_median_with_their_fallback_cost() {
    let pool = fresh_db().await;
    let pool = &pool;
    let cpu = with_features(&["aes", "pclmulqdq", "avx"]);
    let emulated: Labels = [("emulated".to_string(), "qemu".to_string())].into();
    let (a1, a2, a3) = (
        hello(pool, "a1", None, &cpu).await,
        hello(pool, "a2", None, &cpu).await,
        hello(pool, "a3", None, &cpu).await,
    );
    // The same CPU, emulated: a class row of its own, and the fastest figure of all.
    let vm = hello(pool, "<script>alert(1)</script>", Some(&emulated), &cpu).await;
    const K16: i64 = 16384;
    store_provider_results(
        pool,
        &[
            (a1, "openssl", "accelerated", "accelerated", 4000.0, K16, 1, 0),
            (a2, "openssl", "accelerated", "accelerated", 6000.0, K16, 1, 0),
            (a3, "openssl", "accelerated", "accelerated", 5000.0, K16, 1, 0),
            // An older result of a point: the latest counts.
            (a3, "openssl", "accelerated", "accelerated", 9000.0, K16, 1, 2),
            // Four threads: another point, not the page's.
            (a3, "openssl", "accelerated", "accelerated", 20000.0, K16, 4, 0),
            (a1, "openssl", "software", "software", 500.0, K16, 1, 0),
            (a2, "openssl", "software", "software", 1500.0, K16, 1, 0),
            (a1, "rustcrypto", "accelerated", "accelerated", 2500.0, K16, 1, 0),
            (a2, "rustcrypto", "accelerated", "partial", 2500.0, K16, 1, 0),
            // The built-in provider alone at 1 KiB: no comparison, not read.
            (a1, "rustcrypto", "accelerated", "accelerated", 1900.0, 1024, 1, 0),
            (a1, "ring", "accelerated", "accelerated", 4500.0, K16, 1, 0),
            (vm, "kernel", "accelerated", "accelerated", 90000.0, K16, 1, 0),
            (vm, "openssl", "accelerated", "accelerated", 80000.0, K16, 1, 0),
        ],
    )
    .await;

    let rows = providers::table(pool).await.unwrap();
    assert!(rows.iter().all(|r| r.size_bytes == 16384), "{rows:#?}");
    let openssl = find(&rows, false, Provider::Openssl);
    assert_eq!(
        openssl.accelerated_mb_s,
        Some(5000.0),
        "the median of 4000, 6000 and 5000"
    );
    assert_eq!(openssl.accelerated_hosts, Some(3));
    assert_eq!(openssl.accelerated_path_used, Some(PathUsed::Accelerated));
    assert_eq!(openssl.software_mb_s, Some(1000.0), "the median of 500 and 1500");
    assert_eq!(openssl.software_hosts, Some(2));
    assert_eq!(openssl.fallback_cost, Some(5.0));
    assert_eq!(openssl.ratio_to_fastest, Some(1.0));
    let rustcrypto = find(&rows, false, Provider::RustCrypto);
    assert_eq!(rustcrypto.accelerated_mb_s, Some(2500.0));
    assert_eq!(
        rustcrypto.accelerated_path_used,
        Some(PathUsed::Partial),
        "the slowest path a host ran"
    );
    assert_eq!(rustcrypto.ratio_to_fastest, Some(0.5));
    assert_eq!(rustcrypto.fallback_cost, None, "its software path was not measured");
    let ring = find(&rows, false, Provider::Ring);
    assert_eq!((ring.ratio_to_fastest, ring.software_mb_s), (Some(0.9), None));

    // The emulated host's figures are shown in their own row, never ranked.
    let kernel = find(&rows, true, Provider::Kernel);
    assert_eq!(kernel.accelerated_mb_s, Some(90000.0));
    assert!(kernel.class_id.ends_with("-emulated"), "{}", kernel.class_id);
    assert!(rows.iter().filter(|r| r.marked).all(|r| r.ratio_to_fastest.is_none()));
    let fastest: Vec<(Provider, bool)> = rows
        .iter()
        .filter(|r| r.is_fastest())
        .map(|r| (r.provider, r.marked))
        .collect();
    assert_eq!(fastest, [(Provider::Openssl, false)]);
    assert_eq!(rows.len(), 5, "{rows:#?}");
}

/// The capacity planner plans with the provider the service runs: its points
/// come from `provider_points` (no memory figures there), the built-in
/// crates' from `result_points`, never the one for the other.
#[tokio::test]
async fn the_capacity_planner_reads_the_chosen_providers_points() {
    use cipherfleet_coordinator::report::capacity::{self, PointFilter};
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::Direction;
    let pool = fresh_db().await;
    let pool = &pool;
    let cpu = with_features(&["aes", "pclmulqdq", "avx"]);
    let host = hello(pool, "planned", None, &cpu).await;
    store_provider_results(
        pool,
        &[
            (host, "openssl", "accelerated", "accelerated", 4000.0, 16384, 1, 0),
            (host, "rustcrypto", "accelerated", "accelerated", 2500.0, 16384, 1, 0),
        ],
    )
    .await;
    let gcm = "aes-256-gcm".parse().unwrap();
    let filter = |provider| PointFilter {
        size_bytes: 16384,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
        provider,
        algorithms: std::slice::from_ref(&gcm),
        hosts: std::slice::from_ref(&host),
    };
    let figures = |rows: Vec<cipherfleet_coordinator::domain::latest::LatestResult>| -> Vec<(Provider, f64)> {
        rows.iter().map(|r| (r.point.provider, r.throughput_mb_s)).collect()
    };
    let openssl = capacity::points(pool, filter(Provider::Openssl)).await.unwrap();
    assert_eq!(openssl[0].memory.cipher_state_bytes, None);
    assert_eq!(figures(openssl), [(Provider::Openssl, 4000.0)]);
    let crates = capacity::points(pool, filter(Provider::RustCrypto)).await.unwrap();
    assert_eq!(figures(crates), [(Provider::RustCrypto, 2500.0)]);
    assert!(capacity::points(pool, filter(Provider::Ring)).await.unwrap().is_empty());
}

/// Each provider's regressions are its own: a host whose OpenSSL runs at a
/// third of the same OpenSSL on its same-class peers gets a `slow-accelerated`
/// finding about OpenSSL (`openssl/aes-256-gcm`), while its built-in crates,
/// at their peers' speed, get none; and a per-result pass over the algorithm
/// keeps it, as it keeps the built-in crates' findings.
#[tokio::test]
async fn each_providers_regressions_are_found_against_the_same_provider_on_peers() {
    let pool = fresh_db().await;
    let pool = &pool;
    let cpu = with_features(&["aes", "pclmulqdq", "avx"]);
    let mut hosts = Vec::new();
    for name in ["p1", "p2", "p3", "slow-openssl"] {
        hosts.push(hello(pool, name, None, &cpu).await);
    }
    const K16: i64 = 16384;
    let mut results = Vec::new();
    for (i, &host) in hosts.iter().enumerate() {
        let openssl = if i == 3 { 1300.0 } else { 4000.0 + 100.0 * i as f64 };
        for hours_ago in 0..3 {
            let wobble = 1.0 + 0.01 * hours_ago as f64;
            results.push((
                host,
                "openssl",
                "accelerated",
                "accelerated",
                openssl * wobble,
                K16,
                1,
                hours_ago,
            ));
            results.push((
                host,
                "rustcrypto",
                "accelerated",
                "accelerated",
                2000.0 * wobble,
                K16,
                1,
                hours_ago,
            ));
        }
    }
    store_provider_results(pool, &results).await;

    derive_fleet(pool).await.unwrap();
    let open = findings::list_open(pool).await.unwrap();
    let slow: Vec<(&str, &str, Option<&str>, &str)> = open
        .iter()
        .map(|f| {
            (
                f.host_name.as_str(),
                f.reason.as_str(),
                f.kind.as_deref(),
                f.subject.as_str(),
            )
        })
        .collect();
    assert_eq!(
        slow,
        [(
            "slow-openssl",
            "slow-accelerated",
            Some("below-peers"),
            "openssl/aes-256-gcm"
        )],
        "{open:#?}"
    );
    let f = &open[0];
    assert!(f.summary.contains("on the openssl provider"), "{}", f.summary);
    assert_eq!(f.evidence["series"]["provider"], "openssl");
    let reference = f.evidence["reference_mb_s"].as_f64().unwrap();
    assert!(
        (4000.0..4300.0).contains(&reference),
        "the same provider's peers, not the built-in crates': {reference}"
    );

    // The per-result pass of that host and algorithm judges it again: it stays.
    let work = Work::Hosts([(hosts[3], Some(BTreeSet::from(["aes-256-gcm".to_string()])))].into());
    let o = derive(pool, &work).await.unwrap();
    assert_eq!((o.opened, o.resolved), (0, 0), "{o:?}");
    assert_eq!(findings::list_open(pool).await.unwrap().len(), 1);
}

/// `/fallback?provider=openssl` reads the host's OpenSSL pairs from
/// `provider_points` (both paths side by side, their ratio, the page's
/// order), judges its list at software speed there without storing it, and
/// the default view still reads the built-in crates' pairs, whose figures differ.
#[tokio::test]
async fn the_fallback_view_of_another_provider_pairs_its_own_two_paths() {
    use cipherfleet_coordinator::report::fallback::{self, PathPair, PathPoint};
    use cipherfleet_coordinator::report::{fallback_hosts, fallback_views};
    use cipherfleet_core::spec::{Direction, KeyMode};
    let pool = fresh_db().await;
    let pool = &pool;
    let cpu = with_features(&["aes", "pclmulqdq", "avx"]);
    let (a, b) = (hello(pool, "a", None, &cpu).await, hello(pool, "b", None, &cpu).await);
    const K16: i64 = 16384;
    store_provider_results(
        pool,
        &[
            (a, "openssl", "accelerated", "accelerated", 4000.0, K16, 1, 0),
            (a, "openssl", "software", "software", 1000.0, K16, 1, 0),
            // An older accelerated result of the same point: the latest counts.
            (a, "openssl", "accelerated", "accelerated", 9000.0, K16, 1, 3),
            // Another point of the same provider: not paired with this one.
            (a, "openssl", "software", "software", 50.0, K16, 4, 0),
            (a, "rustcrypto", "accelerated", "accelerated", 2500.0, K16, 1, 0),
            (a, "rustcrypto", "software", "software", 500.0, K16, 1, 0),
            // b's OpenSSL asked for hardware and ran software: at software speed.
            (b, "openssl", "accelerated", "software", 900.0, K16, 1, 0),
            (b, "openssl", "software", "software", 1000.0, K16, 1, 0),
            // ring's software side never exists.
            (b, "ring", "accelerated", "accelerated", 3000.0, K16, 1, 0),
        ],
    )
    .await;
    let id = |host: i64, provider: &str, path: &str| {
        sqlx::query_scalar::<_, i64>(
            "SELECT id FROM results WHERE host_id = $1 AND provider = $2 AND path = $3 AND threads = 1 \
             ORDER BY created_at DESC LIMIT 1",
        )
        .bind(host)
        .bind(provider.to_string())
        .bind(path.to_string())
        .fetch_one(pool)
    };
    let gcm = "aes-256-gcm".parse().unwrap();
    let pair = |host, acc_id, used, acc, soft_id, soft| PathPair {
        host_id: host,
        algorithm: gcm,
        accelerated_result_id: acc_id,
        accelerated_path_used: used,
        accelerated_mb_s: acc,
        accelerated_cv: acc.map(|_| 0.01),
        software_result_id: soft_id,
        software_mb_s: soft,
        software_cv: soft.map(|_| 0.01),
    };
    let at = |provider| PathPoint {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        key_mode: KeyMode::Static,
        provider,
    };
    let openssl = at(Provider::Openssl);

    let pairs = fallback::pairs(pool, &openssl, None, None, 0).await.unwrap();
    let expected = [
        // Worst ratio first: b's 0.9× before a's 4×.
        pair(
            b,
            Some(id(b, "openssl", "accelerated").await.unwrap()),
            Some(PathUsed::Software),
            Some(900.0),
            Some(id(b, "openssl", "software").await.unwrap()),
            Some(1000.0),
        ),
        pair(
            a,
            Some(id(a, "openssl", "accelerated").await.unwrap()),
            Some(PathUsed::Accelerated),
            Some(4000.0),
            Some(id(a, "openssl", "software").await.unwrap()),
            Some(1000.0),
        ),
    ];
    assert_eq!(pairs, expected);
    let ratio =
        cipherfleet_coordinator::analysis::software_speed::ratio(pairs[1].accelerated_mb_s, pairs[1].software_mb_s);
    assert_eq!(ratio, Some(4.0));
    assert_eq!(
        fallback::pairs(pool, &openssl, None, Some(1), 1).await.unwrap(),
        [expected[1].clone()],
        "a page from an offset"
    );
    assert_eq!(fallback::count_pairs(pool, &openssl, None).await.unwrap(), 2);
    assert_eq!(fallback::count_pairs(pool, &openssl, Some(&[a])).await.unwrap(), 1);
    assert_eq!(
        fallback::slow_candidates(pool, &openssl, None, &["aes-256-gcm"], 1.5)
            .await
            .unwrap(),
        [expected[0].clone()]
    );
    assert_eq!(
        fallback::algorithm_pairs(pool, &openssl, None, gcm, &[b], 10)
            .await
            .unwrap(),
        [expected[1].clone()]
    );
    assert_eq!(fallback::sizes(pool, Provider::Openssl).await.unwrap(), [16384]);

    // The default view: the built-in crates' pair of the same host and point.
    let crates = at(Provider::RustCrypto);
    assert_eq!(
        fallback::pairs(pool, &crates, None, None, 0).await.unwrap(),
        [pair(
            a,
            Some(id(a, "rustcrypto", "accelerated").await.unwrap()),
            Some(PathUsed::Accelerated),
            Some(2500.0),
            Some(id(a, "rustcrypto", "software").await.unwrap()),
            Some(500.0),
        )]
    );

    // ring: the accelerated side alone.
    let ring = fallback::pairs(pool, &at(Provider::Ring), None, None, 0).await.unwrap();
    assert_eq!(
        ring.iter()
            .map(|p| (p.host_id, p.accelerated_mb_s, p.software_mb_s))
            .collect::<Vec<_>>(),
        [(b, Some(3000.0), None)]
    );

    // The list at software speed: judged now, b alone, and not stored.
    let cases = fallback_hosts::cases_now(pool, &openssl).await.unwrap();
    let list = fallback_views::slow_view(pool, &openssl, &cases).await.unwrap();
    assert_eq!(
        (list.pairs, list.slow_hosts.as_slice(), list.changed),
        (2, [b].as_slice(), false)
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM fallback_views")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "another provider's list is never stored");
    let crates_list = fallback_views::slow_view(pool, &crates, &cases).await.unwrap();
    assert_eq!((crates_list.pairs, crates_list.slow_hosts), (1, vec![]));
}
