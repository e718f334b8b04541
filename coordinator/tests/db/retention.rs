//! Retention (`retention::pass`, migrations/0037) on a real PostgreSQL:
//! raw results past the raw window fold into one summary per point and UTC
//! day whose count, median, quantiles, min, max and path mix are those of the
//! results they replace; days past the daily window fold into months; the
//! latest result of every point stays raw; a second pass folds nothing; a
//! kept result folded later merges into its day; and a host's history reads
//! every result once, whatever its resolution.

use chrono::{DateTime, Duration, Timelike, Utc};
use cipherfleet_coordinator::report::{campaign_compare, campaign_summaries};
use cipherfleet_coordinator::retention::{self, Retention};
use cipherfleet_coordinator::store::{jobs, partitions, rollups};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::helpers::{fresh_db, hello, store_provider_results, with_features};

/// Per (size, period): results, median, min, max, accelerated — from `results` before a pass.
type Expected = Vec<(i64, DateTime<Utc>, i64, f64, f64, f64, i64)>;

async fn expected_days(pool: &PgPool, from: DateTime<Utc>, before: DateTime<Utc>) -> Expected {
    sqlx::query_as(
        "SELECT size_bytes, date_trunc('day', created_at, 'UTC'), count(*), \
             percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput_mb_s), min(throughput_mb_s), \
             max(throughput_mb_s), count(*) FILTER (WHERE path_used = 'accelerated') \
         FROM results r WHERE created_at >= $1 AND created_at < $2 \
             AND NOT EXISTS (SELECT 1 FROM result_points p WHERE p.result_id = r.id) \
         GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .bind(from)
    .bind(before)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn stored(pool: &PgPool, resolution: &str) -> Expected {
    sqlx::query_as(
        "SELECT size_bytes, period_start, results::bigint, median_mb_s, min_mb_s, max_mb_s, accelerated::bigint \
         FROM result_rollups WHERE resolution = $1 ORDER BY 1, 2",
    )
    .bind(resolution)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn raw_results_fold_into_days_then_months_and_the_latest_of_each_point_stays() {
    let pool = fresh_db().await;
    let pool = &pool;
    let host = hello(pool, "long-lived", None, &with_features(&["aes", "pclmulqdq", "avx"])).await;
    const K16: i64 = 16384;
    // 16 KiB: three results a day for 200 days, one of each day in software.
    // 1 KiB: measured 150 days ago only, so its latest result is old.
    let mut results = Vec::new();
    for day in 0..200 {
        for (i, hour) in [1, 9, 17].into_iter().enumerate() {
            let used = if i == 2 { "software" } else { "accelerated" };
            let mb_s = 1000.0 + f64::from(day) + 100.0 * i as f64;
            results.push((host, "rustcrypto", "accelerated", used, mb_s, K16, 1, day * 24 + hour));
        }
    }
    for hour in [3600, 3601, 3602] {
        results.push((
            host,
            "rustcrypto",
            "accelerated",
            "accelerated",
            500.0 + f64::from(hour),
            1024,
            1,
            hour,
        ));
    }
    store_provider_results(pool, &results).await;
    let total = count(pool, "SELECT count(*) FROM results").await;
    assert_eq!(total, 603);

    let keep = Retention {
        keep_raw: Some(Duration::days(30)),
        keep_daily: Some(Duration::days(120)),
    };
    let now = Utc::now();
    let (raw_before, daily_before) = (keep.raw_before(now).unwrap(), keep.daily_before(now).unwrap());
    let want_days = expected_days(pool, daily_before, raw_before).await;
    let month_totals: Vec<(i64, i64, f64, f64)> = sqlx::query_as(
        "SELECT size_bytes, count(*), min(throughput_mb_s), max(throughput_mb_s) FROM results r \
         WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM result_points p WHERE p.result_id = r.id) \
         GROUP BY 1 ORDER BY 1",
    )
    .bind(daily_before)
    .fetch_all(pool)
    .await
    .unwrap();

    let stop = CancellationToken::new();
    let done = retention::pass(pool, &keep, now, &stop).await.unwrap();
    let kept_raw = count(pool, "SELECT count(*) FROM results").await;
    assert_eq!(done.results, total - kept_raw, "{done:?}");
    // Inside the raw window, and the latest 1 KiB result, which is older.
    let old: i64 = sqlx::query_scalar("SELECT count(*) FROM results WHERE created_at < $1")
        .bind(raw_before)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(
        old, 1,
        "only the latest result of the 1 KiB point is left past the raw window"
    );
    assert_eq!(
        count(pool, "SELECT count(*) FROM result_points").await,
        2,
        "both points keep their latest result"
    );

    assert_eq!(stored(pool, "day").await, want_days, "each day as its results were");
    let months = stored(pool, "month").await;
    assert!(months.iter().all(|m| m.1 < daily_before));
    let per_size: Vec<(i64, i64, f64, f64)> = month_totals
        .iter()
        .map(|&(size, ..)| {
            let of: Vec<_> = months.iter().filter(|m| m.0 == size).collect();
            (
                size,
                of.iter().map(|m| m.2).sum(),
                of.iter().map(|m| m.4).fold(f64::MAX, f64::min),
                of.iter().map(|m| m.5).fold(f64::MIN, f64::max),
            )
        })
        .collect();
    assert_eq!(per_size, month_totals, "months hold every result, min and max exact");
    let software: i64 = count(pool, "SELECT sum(software)::bigint FROM result_rollups").await;
    assert!(software > 0 && software * 3 <= done.results + 3, "the path mix is kept");

    // Nothing left to fold: a second pass does nothing.
    let again = retention::pass(pool, &keep, now, &stop).await.unwrap();
    assert_eq!(again, retention::Pass::default());

    // The host's history reads every 16 KiB result once: months, days, then raw days.
    let history = rollups::history(pool, host, &["aes-256-gcm"], K16).await.unwrap();
    assert_eq!(history.iter().map(|r| r.summary.results).sum::<i64>(), 600);
    assert!(history.windows(2).all(|w| w[0].period_start < w[1].period_start));
    assert_eq!(history.first().unwrap().resolution, "month");

    // A newer 1 KiB result: the old one is no longer the latest, and folds
    // into its day's summary, which counts it with the two before.
    store_provider_results(
        pool,
        &[(host, "rustcrypto", "accelerated", "accelerated", 600.0, 1024, 1, 0)],
    )
    .await;
    let merged = retention::pass(pool, &keep, now, &stop).await.unwrap();
    assert_eq!((merged.days, merged.results), (1, 1), "{merged:?}");
    let one_k: Vec<i64> =
        sqlx::query_scalar("SELECT results::bigint FROM result_rollups WHERE size_bytes = 1024 ORDER BY period_start")
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(one_k.iter().sum::<i64>(), 3, "{one_k:?}");
}

#[tokio::test]
async fn forever_folds_nothing() {
    let pool = fresh_db().await;
    let host = hello(&pool, "kept", None, &with_features(&["aes"])).await;
    store_provider_results(
        &pool,
        &[
            (
                host,
                "rustcrypto",
                "accelerated",
                "accelerated",
                1.0,
                16384,
                1,
                24 * 400,
            ),
            (host, "rustcrypto", "accelerated", "accelerated", 2.0, 16384, 1, 0),
        ],
    )
    .await;
    let done = retention::pass(&pool, &Retention::FOREVER, Utc::now(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(done, retention::Pass::default());
    assert_eq!(count(&pool, "SELECT count(*) FROM results").await, 2);
}

/// The weeks (migrations/0040): a pass a year from now finds every week
/// partition past the raw window, folds each whole and drops it; the latest
/// result of a point moves to `results_kept`, and once a newer one replaces
/// it, folds by day into the summary its week left. Every result is counted
/// once.
#[tokio::test]
async fn weeks_past_the_raw_window_fold_whole_and_a_kept_result_folds_once_replaced() {
    let pool = fresh_db().await;
    let pool = &pool;
    let host = hello(pool, "weekly", None, &with_features(&["aes"])).await;
    // Next week: three results of one point, the last the latest; and one of
    // another point, its only one. All at 01:00–03:59 UTC of one day, so that
    // the day they fold into does not depend on the hour the test runs.
    let now_hour = i32::try_from(Utc::now().hour()).unwrap();
    let h = |days: i32, hour: i32| -(days * 24 + hour - now_hour);
    let point = |mb_s: f64, size: i64, hours_ago: i32| {
        (
            host,
            "rustcrypto",
            "accelerated",
            "accelerated",
            mb_s,
            size,
            1,
            hours_ago,
        )
    };
    store_provider_results(
        pool,
        &[
            point(100.0, 16384, h(8, 1)),
            point(110.0, 16384, h(8, 2)),
            point(120.0, 16384, h(8, 3)),
            point(50.0, 1024, h(8, 1)),
        ],
    )
    .await;
    let weeks_before = partitions::raw(pool).await.unwrap().len();
    let stop = CancellationToken::new();
    let later = Utc::now() + Duration::days(365);

    let done = retention::pass(pool, &Retention::default(), later, &stop)
        .await
        .unwrap();

    assert_eq!(
        done.weeks as usize, weeks_before,
        "every week, and the results before them: {done:?}"
    );
    assert_eq!((done.results, done.days), (2, 0), "{done:?}");
    assert_eq!(
        partitions::raw(pool).await.unwrap(),
        [],
        "every partition past the window dropped"
    );
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'results_raw'::regclass"
        )
        .await,
        1,
        "but the default, results_later, which no week past the window is"
    );
    let kept: Vec<(f64, bool)> = sqlx::query_as("SELECT throughput_mb_s, kept FROM results ORDER BY 1")
        .fetch_all(pool)
        .await
        .unwrap();
    assert_eq!(kept, [(50.0, true), (120.0, true)], "the latest of each point kept");
    let day: DateTime<Utc> = sqlx::query_scalar("SELECT period_start FROM result_rollups")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(
        stored(pool, "day").await,
        [(16384, day, 2, 105.0, 100.0, 110.0, 2)],
        "the two older results of the 16 KiB point"
    );

    // A newer result replaces the kept one as its point's latest (the
    // latest-point table as a new result leaves it): the kept one folds by
    // day, into its week's summary, once.
    sqlx::query("DELETE FROM result_points WHERE result_id = (SELECT id FROM results WHERE throughput_mb_s = 120)")
        .execute(pool)
        .await
        .unwrap();
    let again = retention::pass(pool, &Retention::default(), later, &stop)
        .await
        .unwrap();
    assert_eq!((again.weeks, again.days, again.results), (0, 1, 1), "{again:?}");
    assert_eq!(stored(pool, "day").await, [(16384, day, 3, 110.0, 100.0, 120.0, 3)]);
    let third = retention::pass(pool, &Retention::default(), later, &stop)
        .await
        .unwrap();
    assert_eq!((third.weeks, third.days, third.results), (0, 0, 0), "nothing twice");
}

/// Weeks not made ahead (migrations/0041): while only coordinators that make
/// none run (a rollback past the weeks made ahead), a result whose week has no
/// partition waits in the default one, `results_later`, rather than being
/// refused. The next coordinator that makes weeks makes theirs too, however
/// far ahead, and moves each result into its week: the same row, which the
/// latest-point table still names.
#[tokio::test]
async fn a_result_whose_week_was_not_made_waits_in_the_default_partition_then_moves_into_its_week() {
    let pool = fresh_db().await;
    let pool = &pool;
    for week in partitions::raw(pool).await.unwrap() {
        if week.from.is_some() {
            sqlx::query("SELECT cipherfleet_results_drop($1)")
                .bind(&week.name)
                .execute(pool)
                .await
                .unwrap();
        }
    }
    let host = hello(pool, "unmade", None, &with_features(&["aes"])).await;
    let point = |size: i64, hours_ago: i32| {
        (
            host,
            "rustcrypto",
            "accelerated",
            "accelerated",
            10.0,
            size,
            1,
            hours_ago,
        )
    };
    // Next week's and one ten weeks ahead, past the four that would be made.
    store_provider_results(pool, &[point(1024, -8 * 24), point(16384, -70 * 24)]).await;
    let stored: Vec<(i64, DateTime<Utc>, String)> =
        sqlx::query_as("SELECT id, created_at, tableoid::regclass::text FROM results ORDER BY created_at")
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(
        stored.iter().map(|r| r.2.as_str()).collect::<Vec<_>>(),
        ["results_later", "results_later"],
        "{stored:?}"
    );
    let refused = sqlx::query("SELECT cipherfleet_results_drop('results_later')")
        .execute(pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("results_later is not a week's partition of results_raw"),
        "{refused}"
    );

    let made = partitions::ensure_weeks(pool).await.unwrap();

    let weeks = partitions::raw(pool).await.unwrap();
    assert!(made >= 10, "every week up to the later result's: {made}, {weeks:?}");
    assert!(weeks.last().unwrap().to > stored[1].1, "{weeks:?}");
    let moved: Vec<(i64, DateTime<Utc>, String)> =
        sqlx::query_as("SELECT id, created_at, tableoid::regclass::text FROM results ORDER BY created_at")
            .fetch_all(pool)
            .await
            .unwrap();
    let week_of = |at: DateTime<Utc>| {
        weeks
            .iter()
            .find(|w| w.from.is_some_and(|from| from <= at) && at < w.to)
            .map(|w| w.name.clone())
            .unwrap_or_else(|| panic!("a week for {at}: {weeks:?}"))
    };
    assert_eq!(
        moved,
        stored
            .iter()
            .map(|(id, at, _)| (*id, *at, week_of(*at)))
            .collect::<Vec<_>>(),
        "each in its week, the same row"
    );
    assert_eq!(count(pool, "SELECT count(*) FROM results_later").await, 0);
    assert_eq!(
        count(
            pool,
            "SELECT count(*) FROM result_points JOIN results r ON r.id = result_id"
        )
        .await,
        2,
        "the latest-point table names them where they are"
    );
    assert_eq!(partitions::ensure_weeks(pool).await.unwrap(), 0, "none missing");
}

/// Making a week locks `results_raw`, which a report's reader holds: it waits
/// at most 10 s for the lock (functions/cipherfleet_results_weeks.sql) rather
/// than every insert queueing behind it until the reader is done, and makes
/// the week once the reader is gone.
#[tokio::test]
async fn making_a_week_waits_at_most_ten_seconds_for_a_reader_of_results() {
    let pool = fresh_db().await;
    let last = partitions::raw(&pool).await.unwrap().pop().unwrap();
    sqlx::query("SELECT cipherfleet_results_drop($1)")
        .bind(&last.name)
        .execute(&pool)
        .await
        .unwrap();
    let mut reader = pool.begin().await.unwrap();
    sqlx::query("SELECT count(*) FROM results")
        .execute(&mut *reader)
        .await
        .unwrap();

    let started = std::time::Instant::now();
    let refused = partitions::ensure_weeks(&pool).await.unwrap_err().to_string();
    let waited = started.elapsed().as_secs_f64();

    assert!(refused.contains("lock timeout"), "{refused}");
    assert!((9.5..30.0).contains(&waited), "gave up after {waited} s");
    reader.commit().await.unwrap();
    assert_eq!(partitions::ensure_weeks(&pool).await.unwrap(), 1);
    assert_eq!(partitions::raw(&pool).await.unwrap().last(), Some(&last));
}

#[tokio::test]
async fn a_coordinator_older_than_the_schema_leaves_the_fold_to_a_newer_one() {
    let pool = fresh_db().await;
    let host = hello(&pool, "old", None, &with_features(&["aes"])).await;
    let old = (
        host,
        "rustcrypto",
        "accelerated",
        "accelerated",
        1.0,
        16384,
        1,
        24 * 400,
    );
    let latest = (host, "rustcrypto", "accelerated", "accelerated", 2.0, 16384, 1, 0);
    store_provider_results(&pool, &[old, latest]).await;
    // A newer release's migration, as it would be during a rolling upgrade.
    let newer = cipherfleet_coordinator::store::schema::newest_migration() + 1;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'a newer release', true, '\\x00', 0)",
    )
    .bind(newer)
    .execute(&pool)
    .await
    .unwrap();
    let stop = CancellationToken::new();

    let done = retention::pass(&pool, &Retention::default(), Utc::now(), &stop)
        .await
        .unwrap();
    assert_eq!(
        done,
        retention::Pass {
            left_to_newer: Some(newer),
            ..Default::default()
        }
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM results").await, 2, "nothing folded");

    // Once the newer release is gone (as in a test: it never is), this one folds again.
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1")
        .bind(newer)
        .execute(&pool)
        .await
        .unwrap();
    let done = retention::pass(&pool, &Retention::default(), Utc::now(), &stop)
        .await
        .unwrap();
    assert_eq!((done.left_to_newer, done.days, done.results), (None, 1, 1));
    assert_eq!(count(&pool, "SELECT count(*) FROM results").await, 1);
}

/// Each campaign's counts per status, summed over its hosts.
async fn counts(pool: &PgPool, campaign: i64) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT coalesce(sum(done), 0)::bigint, coalesce(sum(failed), 0)::bigint, coalesce(sum(cancelled), 0)::bigint \
         FROM campaign_host_jobs WHERE campaign_id = $1",
    )
    .bind(campaign)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn jobs_of(pool: &PgPool, campaign: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Stores `results` as one finished campaign, its jobs and the campaign ended
/// `days_ago`; returns the campaign.
async fn campaign_ended(pool: &PgPool, days_ago: i32, results: &[crate::helpers::ProviderResult<'_>]) -> i64 {
    store_provider_results(pool, results).await;
    let id: i64 = sqlx::query_scalar("SELECT max(id) FROM campaigns")
        .fetch_one(pool)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE campaigns SET created_at = now() - make_interval(days => $2), \
             finished_at = now() - make_interval(days => $2) WHERE id = $1",
    )
    .bind(id)
    .bind(days_ago)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE jobs SET finished_at = now() - make_interval(days => $2) WHERE campaign_id = $1")
        .bind(id)
        .bind(days_ago)
        .execute(pool)
        .await
        .unwrap();
    id
}

#[tokio::test]
async fn an_old_campaigns_jobs_go_with_its_results_and_its_counts_stay() {
    let pool = fresh_db().await;
    let pool = &pool;
    let host = hello(pool, "watched", None, &with_features(&["aes", "pclmulqdq"])).await;
    let hours = 24 * 40;
    // 40 days ago: 16 KiB three times (measured again since), 1 KiB once (never since), and one failure.
    let old = campaign_ended(
        pool,
        40,
        &[
            (
                host,
                "rustcrypto",
                "accelerated",
                "accelerated",
                100.0,
                16384,
                1,
                hours + 3,
            ),
            (
                host,
                "rustcrypto",
                "accelerated",
                "accelerated",
                101.0,
                16384,
                1,
                hours + 2,
            ),
            (
                host,
                "rustcrypto",
                "accelerated",
                "accelerated",
                102.0,
                16384,
                1,
                hours + 1,
            ),
            (host, "rustcrypto", "accelerated", "accelerated", 50.0, 1024, 1, hours),
        ],
    )
    .await;
    sqlx::query(
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
             key_mode, path, provider, time_limit_seconds, status, finished_at, error) \
         VALUES ($1, $2, 9, '{}', 'aes-256-gcm', 'encrypt', 64, 1, 'static', 'software', 'rustcrypto', 60, \
             'failed', now() - interval '40 days', 'the worker crashed')",
    )
    .bind(old)
    .bind(host)
    .execute(pool)
    .await
    .unwrap();
    // Yesterday's campaign measured 16 KiB again.
    let recent = campaign_ended(
        pool,
        1,
        &[(host, "rustcrypto", "accelerated", "accelerated", 103.0, 16384, 1, 24)],
    )
    .await;
    let (old_counts, recent_counts) = (counts(pool, old).await, counts(pool, recent).await);
    assert_eq!(old_counts, (4, 1, 0));
    assert_eq!(jobs_of(pool, old).await, 5);

    let keep = Retention {
        keep_raw: Some(Duration::days(30)),
        keep_daily: Some(Duration::days(730)),
    };
    let stop = CancellationToken::new();
    let done = retention::pass(pool, &keep, Utc::now(), &stop).await.unwrap();
    assert_eq!((done.results, done.campaigns, done.jobs), (3, 1, 4), "{done:?}");
    let kept: Vec<i64> = sqlx::query_scalar(
        "SELECT r.size_bytes FROM jobs j JOIN results r ON r.job_id = j.id WHERE j.campaign_id = $1",
    )
    .bind(old)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(
        (jobs_of(pool, old).await, kept),
        (1, vec![1024]),
        "only the job of the result kept raw (the latest 1 KiB) is left"
    );
    assert_eq!(counts(pool, old).await, old_counts, "the campaign keeps its counts");
    assert_eq!(counts(pool, recent).await, recent_counts);
    assert_eq!(
        jobs_of(pool, recent).await,
        1,
        "a campaign inside the raw window keeps its jobs"
    );
    assert_eq!(
        campaign_compare::folded(pool, &[old]).await.unwrap(),
        3,
        "three of its four results were folded"
    );
    assert!(jobs::failures(pool, old, 10).await.unwrap().is_empty());

    let again = retention::pass(pool, &keep, Utc::now(), &stop).await.unwrap();
    assert_eq!(again, retention::Pass::default(), "nothing left to fold");

    // Any other delete of jobs still counts: the setting lasted one transaction.
    sqlx::query("DELETE FROM jobs WHERE campaign_id = $1")
        .bind(recent)
        .execute(pool)
        .await
        .unwrap();
    assert_eq!(counts(pool, recent).await, (0, 0, 0));
}

#[tokio::test]
async fn an_old_campaigns_counts_per_host_fold_into_one_row_and_its_totals_stay() {
    let pool = fresh_db().await;
    let pool = &pool;
    let a = hello(pool, "rack-a", None, &with_features(&["aes"])).await;
    let b = hello(pool, "rack-b", None, &with_features(&["aes"])).await;
    let hours = 24 * 100;
    let old = campaign_ended(
        pool,
        100,
        &[
            (a, "rustcrypto", "accelerated", "accelerated", 100.0, 16384, 1, hours),
            (b, "rustcrypto", "accelerated", "accelerated", 90.0, 16384, 1, hours),
        ],
    )
    .await;
    let recent = campaign_ended(
        pool,
        1,
        &[
            (a, "rustcrypto", "accelerated", "accelerated", 101.0, 16384, 1, 24),
            (b, "rustcrypto", "accelerated", "accelerated", 91.0, 16384, 1, 24),
        ],
    )
    .await;
    let totals = campaign_summaries::totals(pool, old).await.unwrap();
    assert_eq!(totals.1, 2);
    let keep = Retention {
        keep_raw: Some(Duration::days(30)),
        keep_daily: Some(Duration::days(40)),
    };
    let stop = CancellationToken::new();
    let done = retention::pass(pool, &keep, Utc::now(), &stop).await.unwrap();
    assert_eq!((done.campaigns, done.campaign_counts), (1, 1), "{done:?}");
    let rows: Vec<(i64, i32, i64)> =
        sqlx::query_as("SELECT host_id, hosts, done FROM campaign_host_jobs WHERE campaign_id = $1")
            .bind(old)
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(rows, vec![(0, 2, 2)], "one row for both hosts");
    assert_eq!(campaign_summaries::totals(pool, old).await.unwrap(), totals);
    assert!(
        campaign_summaries::host_progress(pool, old, None, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        campaign_summaries::host_progress(pool, recent, None, 0)
            .await
            .unwrap()
            .len(),
        2,
        "a campaign inside the daily window keeps its hosts"
    );
    let again = retention::pass(pool, &keep, Utc::now(), &stop).await.unwrap();
    assert_eq!(again, retention::Pass::default());
}
