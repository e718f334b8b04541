//! `fallback_views` (migrations/0030): after every kind of change, the
//! fallback page's stored list of hosts at software speed, and the count of
//! the point's rows, equal the plain judgement of every row
//! (`software_speed::judge`, the page's order) once the page has had it
//! refreshed as the stored list says it must; and without the change
//! markers, the same check fails.

use std::collections::HashMap;

use cipherfleet_coordinator::analysis::slow::Thresholds;
use cipherfleet_coordinator::analysis::software_speed::{HostCpu, judge, ratio};
use cipherfleet_coordinator::domain::labels::Labels;
use cipherfleet_coordinator::report::fallback::{self, PathPoint};
use cipherfleet_coordinator::report::fallback_views::{self, SlowCases};
use cipherfleet_coordinator::store::hosts;
use cipherfleet_coordinator::store::{jobs, points};
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{Direction, KeyMode};
use sqlx::PgPool;

use crate::helpers::{campaign, fresh_db, hello, job_on, measurement, record, with_features};

/// The page's default point.
const POINT: PathPoint = PathPoint {
    size_bytes: 16384,
    threads: 1,
    direction: Direction::Encrypt,
    key_mode: KeyMode::Static,
    provider: cipherfleet_core::provider::Provider::RustCrypto,
};

/// The point's row count and its hosts at software speed, worst row first.
type List = (i64, Vec<i64>);

/// Judged now, row by row, from every row of the point in the page's order.
async fn plain(pool: &PgPool) -> List {
    let hosts: HashMap<i64, fallback::FallbackHost> = fallback::hosts(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.id, h))
        .collect();
    let pairs = fallback::pairs(pool, &POINT, None, None, 0).await.unwrap();
    let mut slow = Vec::new();
    for p in &pairs {
        let h = &hosts[&p.host_id];
        let cpu = HostCpu {
            arch: h.arch.as_deref(),
            advertised: h.features_advertised.as_deref(),
        };
        let r = ratio(p.accelerated_mb_s, p.software_mb_s);
        let speed = judge(
            p.algorithm,
            POINT.key_mode,
            cpu,
            p.accelerated_path_used,
            r,
            h.emulated(),
            POINT.size_bytes,
            &Thresholds::default(),
        );
        if speed.is_some() && !slow.contains(&p.host_id) {
            slow.push(p.host_id);
        }
    }
    (pairs.len() as i64, slow)
}

/// The rule's cases on every host, as the page works them out.
async fn cases(pool: &PgPool) -> SlowCases {
    let mut hosts = fallback::hosts(pool).await.unwrap();
    hosts.sort_by_key(|h| h.id);
    SlowCases::of(
        hosts
            .iter()
            .map(|h| (h.id, h.arch.as_deref(), h.features_advertised.as_deref(), h.emulated())),
        POINT.key_mode,
        POINT.size_bytes,
    )
}

/// What the page shows once the list it read is refreshed, if the list said
/// it must be (what the background refresh does when the page asks).
async fn stored(pool: &PgPool) -> List {
    let cases = cases(pool).await;
    let mut view = fallback_views::slow_view(pool, &POINT, &cases).await.unwrap();
    if view.changed {
        fallback_views::compute(pool, &POINT, &cases).await.unwrap();
        view = fallback_views::read(pool, &POINT, &cases)
            .await
            .unwrap()
            .expect("stored");
        assert!(!view.changed, "recomputed, the list sees every change");
    }
    (view.pairs, view.slow_hosts)
}

const FULL: &[&str] = &["aes", "pclmulqdq", "avx", "avx2"];

/// One result of `host` at `algorithm`, 16 KiB (or `size`), asked on `path`, that ran `used`.
async fn result(pool: &PgPool, host: i64, algorithm: &str, size: u64, (path, used): (Path, PathUsed), mb_s: f64) {
    let mut new = job_on(host, size, path);
    new.spec.point.algorithm = algorithm.parse().unwrap();
    campaign(pool, std::slice::from_ref(&new)).await;
    let job = jobs::claim_next_for_host(pool, host)
        .await
        .unwrap()
        .expect("a queued job");
    record(pool, job.id, host, &measurement(&new.spec, used, mb_s))
        .await
        .unwrap();
}

const ACCELERATED: (Path, PathUsed) = (Path::Accelerated, PathUsed::Accelerated);
const FELL_BACK: (Path, PathUsed) = (Path::Accelerated, PathUsed::Software);
const SOFTWARE: (Path, PathUsed) = (Path::Software, PathUsed::Software);
const GCM: &str = "aes-256-gcm";
const CHACHA: &str = "chacha20-poly1305";

/// Every kind of change, each followed by `check` (which gets what changed).
async fn changes(pool: &PgPool, mut check: impl AsyncFnMut(&PgPool, &str)) {
    let fast = hello(pool, "fast", None, &with_features(FULL)).await;
    let masked = hello(pool, "masked", None, &with_features(&["avx", "avx2"])).await;
    for (host, gcm) in [(fast, ACCELERATED), (masked, FELL_BACK)] {
        result(pool, host, GCM, 16384, gcm, 2000.0).await;
        result(pool, host, GCM, 16384, SOFTWARE, 500.0).await;
        result(pool, host, CHACHA, 16384, ACCELERATED, 1500.0).await;
    }
    check(pool, "two hosts measured").await;
    result(pool, fast, GCM, 16384, FELL_BACK, 480.0).await;
    check(pool, "fast fell back to software").await;
    result(pool, fast, CHACHA, 16384, SOFTWARE, 1400.0).await;
    check(
        pool,
        "fast's software ChaCha20 measured: its accelerated one at software speed",
    )
    .await;
    result(pool, fast, GCM, 16384, ACCELERATED, 2100.0).await;
    check(pool, "fast's GCM accelerated again").await;
    result(pool, masked, GCM, 1024, ACCELERATED, 900.0).await;
    check(pool, "a result at another point").await;
    hello(pool, "masked", None, &with_features(FULL)).await;
    check(pool, "masked's facts changed: AES advertised now").await;
    let emulated: Labels = [("emulated".to_string(), "qemu".to_string())].into();
    hello(pool, "fast", Some(&emulated), &with_features(FULL)).await;
    check(pool, "fast's labels changed: emulated").await;
    let late = hello(pool, "late", None, &with_features(FULL)).await;
    result(pool, late, GCM, 16384, FELL_BACK, 300.0).await;
    check(pool, "a new host, fallen back").await;
    sqlx::query("DELETE FROM results WHERE host_id = $1 AND path = 'software'")
        .bind(fast)
        .execute(pool)
        .await
        .unwrap();
    points::refresh(pool).await.unwrap();
    check(pool, "fast's software results deleted, result_points rebuilt").await;
    sqlx::query("DELETE FROM hosts WHERE id = $1")
        .bind(masked)
        .execute(pool)
        .await
        .unwrap();
    check(pool, "masked deleted").await;
}

#[tokio::test]
async fn the_stored_list_equals_the_plain_judgement_after_every_kind_of_change() {
    let pool = fresh_db().await;
    let mut lists = Vec::new();
    changes(&pool, async |pool, what| {
        let want = plain(pool).await;
        assert_eq!(stored(pool).await, want, "after: {what}");
        lists.push(want);
    })
    .await;
    // The changes moved the list: hosts came onto it and left it.
    lists.dedup();
    assert!(lists.len() >= 4, "{lists:?}");
    assert!(lists.iter().any(|(_, slow)| slow.len() >= 2), "{lists:?}");
    // A list computed once is read back while nothing changes.
    let cases = cases(&pool).await;
    let read = fallback_views::read(&pool, &POINT, &cases)
        .await
        .unwrap()
        .expect("stored");
    assert!(!read.changed);
    // Its markers were all seen; those of the 1 KiB point, which has no list, go.
    assert!(fallback_views::forget_changes(&pool).await.unwrap() > 0);
    // A new result makes the list due for the background refresh once ingest
    // has paused (here at once), or has waited long enough; not before.
    let (hour, none) = (std::time::Duration::from_secs(3600), std::time::Duration::ZERO);
    assert!(fallback_views::due(&pool, none, none).await.unwrap().is_empty());
    let late = hosts::find_by_name(&pool, "late").await.unwrap().unwrap().id;
    result(&pool, late, GCM, 16384, ACCELERATED, 2000.0).await;
    assert!(fallback_views::due(&pool, hour, hour).await.unwrap().is_empty());
    assert_eq!(fallback_views::due(&pool, none, hour).await.unwrap(), [POINT]);
    assert_eq!(fallback_views::due(&pool, hour, none).await.unwrap(), [POINT]);
    // A list with markers keeps them through the clean-up of unlisted points.
    assert_eq!(fallback_views::forget_changes(&pool).await.unwrap(), 0);
    assert_eq!(stored(&pool).await, plain(&pool).await);
    assert!(fallback_views::due(&pool, none, none).await.unwrap().is_empty());
    let markers: i64 = sqlx::query_scalar("SELECT count(*) FROM fallback_pair_changes")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(markers, 0);
}

#[tokio::test]
async fn without_the_change_markers_the_stored_list_goes_wrong() {
    let pool = fresh_db().await;
    // Every marker the triggers write, swallowed.
    sqlx::query("CREATE RULE no_markers AS ON INSERT TO fallback_pair_changes DO INSTEAD NOTHING")
        .execute(&pool)
        .await
        .unwrap();
    let mut wrong = Vec::new();
    changes(&pool, async |pool, what| {
        if stored(pool).await != plain(pool).await {
            wrong.push(what.to_string());
        }
    })
    .await;
    assert!(!wrong.is_empty(), "without markers every check still agreed");
}
