//! Results past the raw window folded into summaries (migrations/0037): one
//! per point and UTC day, and days past the daily window one per month.
//! [`crate::retention`] decides when; this is how, one period per statement,
//! so a fold is all or nothing and a day is never counted twice.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use super::Result;

/// What one fold did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// Rows folded away: raw results (a day) or daily summaries (a month).
    pub removed: i64,
    /// Summaries written, new or merged into one already there.
    pub summaries: i64,
}

/// A raw result `r` that is not the latest of its point, on either
/// latest-points table: those stay raw whatever their age (the report names
/// them). Macros, so the statements stay literals (`concat!`).
macro_rules! not_latest {
    () => {
        "NOT EXISTS (SELECT 1 FROM result_points p WHERE p.result_id = r.id) \
         AND NOT EXISTS (SELECT 1 FROM provider_points p WHERE p.result_id = r.id)"
    };
}

/// A summary that meets one already stored for its period: the two become one.
macro_rules! merge {
    () => {
        "ON CONFLICT (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, \
         path, nonce, provider, resolution, period_start) DO UPDATE SET \
     median_mb_s = (result_rollups.median_mb_s * result_rollups.results \
         + EXCLUDED.median_mb_s * EXCLUDED.results) / (result_rollups.results + EXCLUDED.results), \
     p10_mb_s = (result_rollups.p10_mb_s * result_rollups.results \
         + EXCLUDED.p10_mb_s * EXCLUDED.results) / (result_rollups.results + EXCLUDED.results), \
     p90_mb_s = (result_rollups.p90_mb_s * result_rollups.results \
         + EXCLUDED.p90_mb_s * EXCLUDED.results) / (result_rollups.results + EXCLUDED.results), \
     min_mb_s = least(result_rollups.min_mb_s, EXCLUDED.min_mb_s), \
     max_mb_s = greatest(result_rollups.max_mb_s, EXCLUDED.max_mb_s), \
     results = result_rollups.results + EXCLUDED.results, \
     accelerated = result_rollups.accelerated + EXCLUDED.accelerated, \
     partial = result_rollups.partial + EXCLUDED.partial, \
     software = result_rollups.software + EXCLUDED.software"
    };
}

/// The start of the oldest UTC day before `before` holding a raw result that
/// may fold ([`fold_day`]); `None` when there is none.
pub async fn oldest_day(db: impl PgExecutor<'_>, before: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
    Ok(sqlx::query_scalar(concat!(
        "SELECT date_trunc('day', r.created_at, 'UTC') FROM results r WHERE r.created_at < $1 AND ",
        not_latest!(),
        " ORDER BY r.created_at LIMIT 1"
    ))
    .bind(before)
    .fetch_optional(db)
    .await?)
}

/// How long one fold may run: a day of a large fleet's results (about 16 s
/// at 1,000 hosts of hourly `quick`, docs/performance.md) must not meet the
/// pool's [`super::STATEMENT_TIMEOUT`], or the same day would fail on every
/// pass. It runs in the background and locks only rows no one else writes.
const FOLD_TIMEOUT: &str = "30min";

/// A transaction whose statements may run [`FOLD_TIMEOUT`].
async fn fold_transaction(pool: &PgPool) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(FOLD_TIMEOUT)
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

/// [`fold_day`] in a transaction of its own that may run [`FOLD_TIMEOUT`].
pub async fn fold_day_alone(pool: &PgPool, day: DateTime<Utc>) -> Result<Folded> {
    let mut tx = fold_transaction(pool).await?;
    let folded = fold_day(&mut *tx, day).await?;
    tx.commit().await?;
    Ok(folded)
}

/// [`fold_month`] in a transaction of its own that may run [`FOLD_TIMEOUT`].
pub async fn fold_month_alone(pool: &PgPool, month: DateTime<Utc>, before: DateTime<Utc>) -> Result<Folded> {
    let mut tx = fold_transaction(pool).await?;
    let folded = fold_month(&mut *tx, month, before).await?;
    tx.commit().await?;
    Ok(folded)
}

/// Folds the raw results of the UTC day starting at `day` (but the latest of
/// each point) into one `day` summary per host and point, and deletes them,
/// in one statement. A summary already there (a latest result folded after
/// its day was) is merged: counts add, min and max stay exact, the quantiles
/// become results-weighted means.
pub async fn fold_day(db: impl PgExecutor<'_>, day: DateTime<Utc>) -> Result<Folded> {
    let (removed, summaries): (i64, i64) = sqlx::query_as(concat!(
        "WITH gone AS ( \
             DELETE FROM results r \
             WHERE r.created_at >= $1 AND r.created_at < $1 + interval '1 day' AND ",
        not_latest!(),
        " RETURNING r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, \
                 coalesce(r.concurrency, 0) AS concurrency, r.key_mode, r.path, r.nonce, r.provider, \
                 r.path_used, r.throughput_mb_s), \
         folded AS ( \
             INSERT INTO result_rollups (host_id, algorithm, direction, size_bytes, threads, concurrency, \
                 key_mode, path, nonce, provider, resolution, period_start, results, median_mb_s, p10_mb_s, \
                 p90_mb_s, min_mb_s, max_mb_s, accelerated, partial, software) \
             SELECT host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                 provider, 'day', $1, count(*), \
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput_mb_s), \
                 percentile_cont(0.1) WITHIN GROUP (ORDER BY throughput_mb_s), \
                 percentile_cont(0.9) WITHIN GROUP (ORDER BY throughput_mb_s), \
                 min(throughput_mb_s), max(throughput_mb_s), \
                 count(*) FILTER (WHERE path_used = 'accelerated'), \
                 count(*) FILTER (WHERE path_used = 'partial'), \
                 count(*) FILTER (WHERE path_used = 'software') \
             FROM gone \
             GROUP BY host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                 provider ",
        merge!(),
        " RETURNING 1) \
         SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM folded)"
    ))
    .bind(day)
    .fetch_one(db)
    .await?;
    Ok(Folded { removed, summaries })
}

/// The start of the oldest UTC month holding a daily summary that begins
/// before `before`; `None` when there is none.
pub async fn oldest_month(db: impl PgExecutor<'_>, before: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
    Ok(sqlx::query_scalar(
        "SELECT date_trunc('month', min(period_start), 'UTC') FROM result_rollups \
         WHERE resolution = 'day' AND period_start < $1",
    )
    .bind(before)
    .fetch_one(db)
    .await?)
}

/// Folds the daily summaries of the UTC month starting at `month` that begin
/// before `before` into one `month` summary per host and point, and deletes
/// them, in one statement.
pub async fn fold_month(db: impl PgExecutor<'_>, month: DateTime<Utc>, before: DateTime<Utc>) -> Result<Folded> {
    let (removed, summaries): (i64, i64) = sqlx::query_as(concat!(
        "WITH gone AS ( \
             DELETE FROM result_rollups \
             WHERE resolution = 'day' AND period_start >= $1 \
                 AND period_start < least($2, ($1 AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC') \
             RETURNING *), \
         folded AS ( \
             INSERT INTO result_rollups (host_id, algorithm, direction, size_bytes, threads, concurrency, \
                 key_mode, path, nonce, provider, resolution, period_start, results, median_mb_s, p10_mb_s, \
                 p90_mb_s, min_mb_s, max_mb_s, accelerated, partial, software) \
             SELECT host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                 provider, 'month', $1, sum(results), \
                 sum(median_mb_s * results) / sum(results), sum(p10_mb_s * results) / sum(results), \
                 sum(p90_mb_s * results) / sum(results), min(min_mb_s), max(max_mb_s), \
                 sum(accelerated), sum(partial), sum(software) \
             FROM gone \
             GROUP BY host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                 provider ",
        merge!(),
        " RETURNING 1) \
         SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM folded)"
    ))
    .bind(month)
    .bind(before)
    .fetch_one(db)
    .await?;
    Ok(Folded { removed, summaries })
}

/// One period of a host's history at one point: a stored summary, or a UTC
/// day of raw results summarised on the fly.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct HistoryRow {
    pub algorithm: String,
    /// `day` or `month`.
    pub resolution: String,
    pub period_start: DateTime<Utc>,
    pub results: i64,
    pub median_mb_s: f64,
    pub p10_mb_s: f64,
    pub p90_mb_s: f64,
    pub min_mb_s: f64,
    pub max_mb_s: f64,
    pub accelerated: i64,
    pub partial: i64,
    pub software: i64,
}

/// A host's whole history of one key point per algorithm (`algorithms`, by
/// name: single-thread encryption on the accelerated path of the built-in
/// crates at `size_bytes`, a static key): the stored summaries, then the raw
/// results summarised per UTC day; a day with both (a latest result kept raw
/// past its day's fold) is one row. Oldest first per algorithm.
pub async fn history(
    db: impl PgExecutor<'_>,
    host_id: i64,
    algorithms: &[&str],
    size_bytes: i64,
) -> Result<Vec<HistoryRow>> {
    let rows: Vec<HistoryRow> = sqlx::query_as(
        "SELECT algorithm, resolution, period_start, results::bigint AS results, median_mb_s, p10_mb_s, \
             p90_mb_s, min_mb_s, max_mb_s, accelerated::bigint AS accelerated, partial::bigint AS partial, \
             software::bigint AS software \
         FROM result_rollups \
         WHERE host_id = $1 AND algorithm = ANY($2) AND size_bytes = $3 AND direction = 'encrypt' \
             AND path = 'accelerated' AND threads = 1 AND concurrency = 0 AND key_mode = 'static' \
             AND nonce = 'counter' AND provider = 'rustcrypto' \
         UNION ALL \
         SELECT algorithm, 'day', date_trunc('day', created_at, 'UTC'), count(*), \
             percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput_mb_s), \
             percentile_cont(0.1) WITHIN GROUP (ORDER BY throughput_mb_s), \
             percentile_cont(0.9) WITHIN GROUP (ORDER BY throughput_mb_s), \
             min(throughput_mb_s), max(throughput_mb_s), \
             count(*) FILTER (WHERE path_used = 'accelerated'), count(*) FILTER (WHERE path_used = 'partial'), \
             count(*) FILTER (WHERE path_used = 'software') \
         FROM results \
         WHERE host_id = $1 AND algorithm = ANY($2) AND size_bytes = $3 AND direction = 'encrypt' \
             AND path = 'accelerated' AND threads = 1 AND concurrency IS NULL AND key_mode = 'static' \
             AND nonce = 'counter' AND provider = 'rustcrypto' \
         GROUP BY algorithm, date_trunc('day', created_at, 'UTC') \
         ORDER BY algorithm, period_start, resolution",
    )
    .bind(host_id)
    .bind(algorithms)
    .bind(size_bytes)
    .fetch_all(db)
    .await?;
    Ok(merge_same_period(rows))
}

/// Rows of one algorithm, resolution and period (sorted so they are
/// adjacent) merged as [`fold_day`] merges: counts add, min and max exact,
/// quantiles results-weighted.
fn merge_same_period(rows: Vec<HistoryRow>) -> Vec<HistoryRow> {
    let mut out: Vec<HistoryRow> = Vec::with_capacity(rows.len());
    for r in rows {
        match out.last_mut() {
            Some(last)
                if last.algorithm == r.algorithm
                    && last.resolution == r.resolution
                    && last.period_start == r.period_start =>
            {
                let (a, b) = (last.results as f64, r.results as f64);
                let weigh = |x: f64, y: f64| (x * a + y * b) / (a + b);
                last.median_mb_s = weigh(last.median_mb_s, r.median_mb_s);
                last.p10_mb_s = weigh(last.p10_mb_s, r.p10_mb_s);
                last.p90_mb_s = weigh(last.p90_mb_s, r.p90_mb_s);
                last.min_mb_s = last.min_mb_s.min(r.min_mb_s);
                last.max_mb_s = last.max_mb_s.max(r.max_mb_s);
                last.results += r.results;
                last.accelerated += r.accelerated;
                last.partial += r.partial;
                last.software += r.software;
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn row(period: i64, results: i64, median: f64, min: f64, max: f64) -> HistoryRow {
        HistoryRow {
            algorithm: "aes-256-gcm".into(),
            resolution: "day".into(),
            period_start: Utc.timestamp_opt(period * 86_400, 0).unwrap(),
            results,
            median_mb_s: median,
            p10_mb_s: median,
            p90_mb_s: median,
            min_mb_s: min,
            max_mb_s: max,
            accelerated: results,
            partial: 0,
            software: 0,
        }
    }

    #[test]
    fn a_day_stored_and_raw_reads_as_one_row_weighted_by_its_results() {
        let merged = merge_same_period(vec![
            row(1, 3, 100.0, 90.0, 110.0),
            row(1, 1, 200.0, 200.0, 200.0),
            row(2, 2, 50.0, 40.0, 60.0),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(
            (
                merged[0].results,
                merged[0].median_mb_s,
                merged[0].min_mb_s,
                merged[0].max_mb_s
            ),
            (4, 125.0, 90.0, 200.0)
        );
        assert_eq!(merged[0].accelerated, 4);
        assert_eq!(merged[1], row(2, 2, 50.0, 40.0, 60.0));
    }
}
