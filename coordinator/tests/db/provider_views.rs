//! `/compare` and `/modes` of a provider other than the built-in crates: the
//! same queries (`report::matrix`, `report::view_summaries`) with the view's
//! provider, read from `provider_points`, never mixed with the built-in
//! crates' `result_points`, and the built-in view unchanged beside them.

use cipherfleet_coordinator::report::classes;
use cipherfleet_coordinator::report::matrix::{self, Slice, View};
use cipherfleet_coordinator::report::view_summaries::{self, Stale};
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;

use crate::helpers::{fresh_db, hello, store_provider_results, with_features};

const GCM: &str = "aes-256-gcm";

fn view(provider: Provider) -> View {
    View {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
        provider,
    }
}

#[tokio::test]
async fn a_providers_view_reads_that_providers_points_alone() {
    let pool = fresh_db().await;
    let pool = &pool;
    let cpu = with_features(&["aes", "pclmulqdq", "avx"]);
    let (a1, a2, a3) = (
        hello(pool, "a1", None, &cpu).await,
        hello(pool, "a2", None, &cpu).await,
        hello(pool, "a3", None, &cpu).await,
    );
    const K16: i64 = 16384;
    store_provider_results(
        pool,
        &[
            (a1, "rustcrypto", "accelerated", "accelerated", 2000.0, K16, 1, 0),
            (a2, "rustcrypto", "accelerated", "accelerated", 2200.0, K16, 1, 0),
            (a3, "rustcrypto", "accelerated", "accelerated", 2100.0, K16, 1, 0),
            (a1, "openssl", "accelerated", "accelerated", 4000.0, K16, 1, 0),
            (a2, "openssl", "accelerated", "software", 6000.0, K16, 1, 0),
            // An older result of a point: the latest counts.
            (a2, "openssl", "accelerated", "accelerated", 9000.0, K16, 1, 2),
            (a1, "openssl", "software", "software", 500.0, K16, 1, 0),
            (a1, "openssl", "accelerated", "accelerated", 1500.0, 1024, 1, 0),
            (a3, "ring", "accelerated", "accelerated", 4500.0, K16, 1, 0),
        ],
    )
    .await;
    let all = [a1, a2, a3];
    let (rows, assignment) = classes::current(pool).await.unwrap();
    assert_eq!(rows.len(), 1, "one CPU, one class: {rows:#?}");
    let row = rows[0].id.clone();

    // The host cells: OpenSSL's figures on its hosts, its provider in the point.
    let openssl = matrix::view_points(pool, &view(Provider::Openssl), &[], &all)
        .await
        .unwrap();
    let got: Vec<(i64, f64, Provider)> = openssl
        .iter()
        .map(|p| (p.host_id, p.throughput_mb_s, p.point.provider))
        .collect();
    assert_eq!(got, [(a1, 4000.0, Provider::Openssl), (a2, 6000.0, Provider::Openssl)]);
    let builtin = matrix::view_points(pool, &view(Provider::RustCrypto), &[], &all)
        .await
        .unwrap();
    assert_eq!(
        builtin.iter().map(|p| p.throughput_mb_s).collect::<Vec<_>>(),
        [2000.0, 2200.0, 2100.0]
    );
    assert!(
        matrix::view_points(pool, &view(Provider::Kernel), &[], &all)
            .await
            .unwrap()
            .is_empty()
    );

    // The class cells: the median over the provider's hosts, computed as read.
    for stale in [Stale::Show, Stale::Recompute] {
        let cells = view_summaries::class_cells(pool, &view(Provider::Openssl), &[GCM], &assignment, stale)
            .await
            .unwrap();
        assert_eq!(cells.changed_since, None, "always up to date");
        let [cell] = cells.cells.as_slice() else {
            panic!("{cells:#?}")
        };
        assert_eq!((cell.class_row.as_str(), cell.hosts), (row.as_str(), 2));
        assert_eq!(cell.median_mb_s, 5000.0, "the median of 4000 and 6000");
        assert_eq!((cell.min_mb_s, cell.max_mb_s), (4000.0, 6000.0));
        assert_eq!(cell.fell_back, 1, "a2's accelerated request ran in software");
    }
    let builtin = view_summaries::class_cells(pool, &view(Provider::RustCrypto), &[GCM], &assignment, Stale::Recompute)
        .await
        .unwrap();
    assert_eq!(
        builtin
            .cells
            .iter()
            .map(|c| (c.hosts, c.median_mb_s))
            .collect::<Vec<_>>(),
        [(3, 2100.0)]
    );
    // Another provider's cells are never stored: refreshing them is nothing to do.
    view_summaries::refresh(pool, &view(Provider::Openssl), &[GCM], &assignment)
        .await
        .unwrap();

    // Host rows and class host counts: the hosts with a point of the provider.
    let (total, page) = view_summaries::host_page(pool, &view(Provider::Openssl), &[GCM], None, 0, 50)
        .await
        .unwrap();
    assert_eq!((total, page), (2, vec![(a1, "a1".to_string()), (a2, "a2".to_string())]));
    let (total, page) = view_summaries::host_page(pool, &view(Provider::Openssl), &[GCM], Some(&[a2, a3]), 0, 50)
        .await
        .unwrap();
    assert_eq!((total, page), (1, vec![(a2, "a2".to_string())]));
    let (total, page) = view_summaries::host_page(pool, &view(Provider::Openssl), &[GCM], None, 1, 1)
        .await
        .unwrap();
    assert_eq!((total, page), (2, vec![(a2, "a2".to_string())]), "paged by name");
    let (total, _) = view_summaries::host_page(pool, &view(Provider::Ring), &[GCM], None, 0, 50)
        .await
        .unwrap();
    assert_eq!(total, 1);
    let (total, _) = view_summaries::host_page(pool, &view(Provider::RustCrypto), &[GCM], None, 0, 50)
        .await
        .unwrap();
    assert_eq!(total, 3);
    assert_eq!(
        view_summaries::row_hosts(pool, &view(Provider::Openssl), &[GCM], &assignment)
            .await
            .unwrap(),
        [(row.clone(), 2)]
    );
    assert_eq!(
        view_summaries::row_hosts(pool, &view(Provider::Openssl), &["des-cbc"], &assignment)
            .await
            .unwrap(),
        []
    );

    // The modes page's curves: every size of the provider on the host and path.
    let curves = matrix::host_points(pool, &[a1], Direction::Encrypt, Path::Accelerated, Provider::Openssl)
        .await
        .unwrap();
    assert_eq!(
        curves
            .iter()
            .map(|p| (p.point.size_bytes, p.throughput_mb_s))
            .collect::<Vec<_>>(),
        [(1024, 1500.0), (16384, 4000.0)]
    );
    let software = matrix::host_points(pool, &[a1], Direction::Encrypt, Path::Software, Provider::Openssl)
        .await
        .unwrap();
    assert_eq!(software.iter().map(|p| p.throughput_mb_s).collect::<Vec<_>>(), [500.0]);
    let builtin = matrix::host_points(pool, &[a1], Direction::Encrypt, Path::Accelerated, Provider::RustCrypto)
        .await
        .unwrap();
    assert_eq!(builtin.iter().map(|p| p.throughput_mb_s).collect::<Vec<_>>(), [2000.0]);

    // The sizes and thread counts the filters offer: the provider's own.
    let slice = |size_bytes, threads| Slice { size_bytes, threads };
    assert_eq!(
        matrix::slices(pool, Provider::Openssl).await.unwrap(),
        [slice(1024, 1), slice(16384, 1)]
    );
    assert_eq!(matrix::slices(pool, Provider::Ring).await.unwrap(), [slice(16384, 1)]);
    assert_eq!(
        matrix::slices(pool, Provider::RustCrypto).await.unwrap(),
        [slice(16384, 1)]
    );
    assert_eq!(matrix::slices(pool, Provider::Kernel).await.unwrap(), []);
}
