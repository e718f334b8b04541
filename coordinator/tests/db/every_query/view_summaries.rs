//! The compare matrix's summaries (migrations/0018) against what the page
//! computed from every point before: the class cells equal `cell_stats` over
//! the same latest results, to the bit, and follow new results, removed
//! hosts and a new assignment of hosts to rows; the host rows page by name.

use std::time::Duration;

use cipherfleet_coordinator::analysis::cells::cell_stats;
use cipherfleet_coordinator::domain::latest::LatestResult;
use cipherfleet_coordinator::report::matrix::{self, View};
use cipherfleet_coordinator::report::view_summaries::{self, Assignment, Cells, ClassCell, Stale};
use cipherfleet_coordinator::store::jobs;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use sqlx::PgPool;

use crate::helpers::{campaign, fresh_db, host, job, measurement, record};

const GCM: &str = "aes-256-gcm";

fn view() -> View {
    View {
        size_bytes: 16384,
        threads: 1,
        direction: Direction::Encrypt,
        path: Path::Accelerated,
        provider: Provider::RustCrypto,
    }
}

/// One aes-256-gcm result at 16 KiB on `host_id`, as an agent reports it.
async fn store(pool: &PgPool, host_id: i64, mb_s: f64, path_used: PathUsed) {
    let new = job(host_id, 16384);
    campaign(pool, std::slice::from_ref(&new)).await;
    let claimed = jobs::claim_next_for_host(pool, host_id).await.unwrap().unwrap();
    record(pool, claimed.id, host_id, &measurement(&new.spec, path_used, mb_s))
        .await
        .unwrap();
}

/// The cell `cell_stats` makes of the latest results of `hosts`.
async fn expected(pool: &PgPool, hosts: &[i64]) -> (Vec<LatestResult>, ClassCell) {
    let points = matrix::view_points(pool, &view(), &[], hosts).await.unwrap();
    let refs: Vec<&LatestResult> = points.iter().collect();
    let stats = cell_stats(&refs).unwrap();
    let mb_s = points.iter().map(|p| p.throughput_mb_s);
    let p99 = points.iter().map(|p| p.latency_p99_ns);
    let cell = ClassCell {
        algorithm: GCM.into(),
        class_row: String::new(),
        hosts: stats.hosts,
        median_mb_s: stats.throughput_mb_s,
        median_p99_ns: stats.latency_p99_ns,
        cv: stats.cv,
        fell_back: stats.fell_back,
        partial: stats.partial,
        min_mb_s: mb_s.clone().fold(f64::INFINITY, f64::min),
        max_mb_s: mb_s.fold(f64::NEG_INFINITY, f64::max),
        min_p99_ns: p99.clone().min().unwrap(),
        max_p99_ns: p99.max().unwrap(),
    };
    (points, cell)
}

fn in_row(cell: ClassCell, row: &str) -> ClassCell {
    ClassCell {
        class_row: row.into(),
        ..cell
    }
}

#[tokio::test]
async fn class_cells_equal_the_per_host_computation_and_follow_every_change() {
    let pool = fresh_db().await;
    let mut ids = Vec::new();
    for name in ["h1", "h2", "h3", "h4", "h5", "h6"] {
        ids.push(host(&pool, name).await);
    }
    // Five measured hosts (one fell back, one partly in software), one never measured.
    for (id, mb_s, used) in [
        (ids[0], 1000.0, PathUsed::Accelerated),
        (ids[1], 3000.0, PathUsed::Accelerated),
        (ids[2], 2000.5, PathUsed::Software),
        (ids[3], 4000.25, PathUsed::Partial),
        (ids[4], 1234.5, PathUsed::Accelerated),
    ] {
        store(&pool, id, mb_s, used).await;
    }
    let all = Assignment::new([("all", ids.as_slice())]);
    let algorithms = [GCM, "chacha20-poly1305"];
    let cells = view_summaries::class_cells(&pool, &view(), &algorithms, &all, Stale::Recompute)
        .await
        .unwrap()
        .cells;
    let (_, want) = expected(&pool, &ids).await;
    assert_eq!(want.hosts, 5);
    assert_eq!((want.fell_back, want.partial), (1, 1));
    assert_eq!(cells, [in_row(want, "all")], "an odd count: the middle value");
    // Read again: the same, from the stored cells.
    assert_eq!(
        view_summaries::class_cells(&pool, &view(), &algorithms, &all, Stale::Recompute)
            .await
            .unwrap()
            .cells,
        cells
    );

    // A new result moves the median (an even count of hosts now: the mean of the middle two).
    store(&pool, ids[5], 2500.0, PathUsed::Accelerated).await;
    store(&pool, ids[0], 9000.0, PathUsed::Accelerated).await;
    // Shown as stored until recomputed, saying since when.
    let Cells {
        cells: shown,
        changed_since,
    } = view_summaries::class_cells(&pool, &view(), &algorithms, &all, Stale::Show)
        .await
        .unwrap();
    assert_eq!(shown, cells, "the stored cells, as they were");
    assert!(
        changed_since.is_some_and(|t| t <= chrono::Utc::now()),
        "{changed_since:?}"
    );
    let cells = view_summaries::class_cells(&pool, &view(), &algorithms, &all, Stale::Recompute)
        .await
        .unwrap()
        .cells;
    let (points, want) = expected(&pool, &ids).await;
    assert_eq!(points.len(), 6);
    assert_eq!(want.median_mb_s, (2500.0 + 3000.0) / 2.0);
    assert_eq!(cells, [in_row(want, "all")]);

    // Another assignment of hosts to rows: its own cells, a one-host row with that host's own CV.
    let split = Assignment::new([("a", &ids[..1]), ("b", &ids[1..])]);
    let cells = view_summaries::class_cells(&pool, &view(), &algorithms, &split, Stale::Recompute)
        .await
        .unwrap()
        .cells;
    let (_, a) = expected(&pool, &ids[..1]).await;
    let (_, b) = expected(&pool, &ids[1..]).await;
    assert_eq!(a.cv, Some(0.02), "the one host's sample CV");
    assert_eq!(cells, [in_row(a, "a"), in_row(b, "b")]);

    // Row host counts and host pages, by name.
    let mut counts = view_summaries::row_hosts(&pool, &view(), &[GCM], &split).await.unwrap();
    counts.sort();
    assert_eq!(counts, [("a".to_string(), 1), ("b".to_string(), 5)]);
    let none = view_summaries::row_hosts(&pool, &view(), &["des-cbc"], &split)
        .await
        .unwrap();
    assert!(none.is_empty(), "{none:?}");
    let page = view_summaries::host_page(&pool, &view(), &[GCM], None, 2, 2)
        .await
        .unwrap();
    assert_eq!(page, (6, vec![(ids[2], "h3".to_string()), (ids[3], "h4".to_string())]));
    let only = [ids[1], ids[4]];
    let page = view_summaries::host_page(&pool, &view(), &[GCM], Some(&only), 0, 50)
        .await
        .unwrap();
    assert_eq!(page, (2, vec![(ids[1], "h2".to_string()), (ids[4], "h5".to_string())]));
    let past = view_summaries::host_page(&pool, &view(), &[GCM], None, 50, 50)
        .await
        .unwrap();
    assert_eq!(past, (6, vec![]), "past the last page: no rows, and the count");

    // A host removed takes its point out of the cells and the pages.
    sqlx::query("DELETE FROM hosts WHERE id = $1")
        .bind(ids[1])
        .execute(&pool)
        .await
        .unwrap();
    let rest: Vec<i64> = ids.iter().copied().filter(|id| *id != ids[1]).collect();
    // The same assignment: the change marker alone makes the cells stale.
    let cells = view_summaries::class_cells(&pool, &view(), &algorithms, &all, Stale::Recompute)
        .await
        .unwrap()
        .cells;
    let (_, want) = expected(&pool, &rest).await;
    assert_eq!(cells, [in_row(want, "all")]);
    let page = view_summaries::host_page(&pool, &view(), &[GCM], None, 0, 50)
        .await
        .unwrap();
    assert_eq!(page.0, 5);
}

/// The stored cells of the slice of [`view`], as they are (no recomputation).
async fn stored(pool: &PgPool) -> Vec<(String, String, i32, f64)> {
    sqlx::query_as(
        "SELECT algorithm, class_row, hosts, median_mb_s FROM class_cells \
         WHERE size_bytes = 16384 AND threads = 1 AND direction = 'encrypt' AND path = 'accelerated' \
         ORDER BY algorithm, class_row",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_background_refresh_recomputes_what_new_results_made_stale_once_ingest_pauses() {
    let pool = fresh_db().await;
    let mut ids = Vec::new();
    for name in ["h1", "h2", "h3"] {
        ids.push(host(&pool, name).await);
    }
    store(&pool, ids[0], 1000.0, PathUsed::Accelerated).await;
    store(&pool, ids[1], 3000.0, PathUsed::Accelerated).await;
    let all = Assignment::new([("all", ids.as_slice())]);
    let (hour, none) = (Duration::from_secs(3600), Duration::ZERO);
    // Nothing computed yet, so nothing is due: only viewed slices are kept.
    assert!(view_summaries::due(&pool, none, hour).await.unwrap().is_empty());
    view_summaries::class_cells(&pool, &view(), &[GCM], &all, Stale::Recompute)
        .await
        .unwrap();
    assert!(view_summaries::due(&pool, none, hour).await.unwrap().is_empty());

    // A new result: due once ingest has been quiet long enough (here at once), not before.
    store(&pool, ids[2], 2500.0, PathUsed::Accelerated).await;
    assert!(view_summaries::due(&pool, hour, hour).await.unwrap().is_empty());
    let due = view_summaries::due(&pool, none, hour).await.unwrap();
    assert_eq!(due, [(view(), vec![GCM.to_string()])]);
    // Waited long enough, even while ingest goes on.
    assert_eq!(view_summaries::due(&pool, hour, none).await.unwrap(), due);

    // Refreshed: the stored cells are the plain computation over every latest result, and nothing is due.
    let before = stored(&pool).await;
    view_summaries::refresh(&pool, &view(), &[GCM], &all).await.unwrap();
    let (_, want) = expected(&pool, &ids).await;
    let after = stored(&pool).await;
    assert_ne!(after, before);
    assert_eq!(after, [(GCM.to_string(), "all".to_string(), 3, want.median_mb_s)]);
    assert!(view_summaries::due(&pool, none, none).await.unwrap().is_empty());
    assert_eq!(
        view_summaries::class_cells(&pool, &view(), &[GCM], &all, Stale::Recompute)
            .await
            .unwrap()
            .cells,
        [in_row(want, "all")]
    );
    // A refresh with nothing stale changes nothing.
    view_summaries::refresh(&pool, &view(), &[GCM], &all).await.unwrap();
    assert_eq!(stored(&pool).await, after);
}
