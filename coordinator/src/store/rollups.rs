//! Results past the raw window folded into summaries (migrations/0037): one
//! per point and UTC day, a week's partition at a time and then dropped, or a
//! day at a time for the results stored before the weeks and those kept past
//! their week (migrations/0040), the jobs of the results folded deleted with
//! them ([`super::campaign_folds`]); and days past the daily window one per
//! month. [`crate::retention`] decides when; this is how, one period per
//! transaction, so a fold is all or nothing and a day is never counted twice.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, PgPool};

use tokio_stream::StreamExt;
use uuid::Uuid;

use super::campaign_folds::delete_jobs;
use super::partitions::RawPartition;
use super::{Result, fold_transaction};
use crate::analysis::rollup::Summary;

/// What one fold did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// Rows folded away: raw results (a day) or daily summaries (a month).
    pub removed: i64,
    /// Summaries written, new or merged into one already there.
    pub summaries: i64,
    /// The jobs of those results deleted with them (a day; their campaigns had ended).
    pub jobs: i64,
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

/// The raw results `r` that fold by day ([`fold_day`]): those kept past
/// their week's fold (`results_kept`) and those stored before `$2`, the first
/// week's start (`results_before`, the table before migration 0040). A week
/// folds whole ([`fold_week`]).
macro_rules! by_day {
    () => {
        "(r.kept OR r.created_at < $2)"
    };
}

/// The start of the oldest UTC day before `before` holding a raw result that
/// may fold ([`fold_day`]), of those kept or stored before `weeks_from` (the
/// first week partition's start); `None` when there is none.
pub async fn oldest_day(
    db: impl PgExecutor<'_>,
    before: DateTime<Utc>,
    weeks_from: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    Ok(sqlx::query_scalar(concat!(
        "SELECT date_trunc('day', r.created_at, 'UTC') FROM results r WHERE r.created_at < $1 AND ",
        by_day!(),
        " AND ",
        not_latest!(),
        " ORDER BY r.created_at LIMIT 1"
    ))
    .bind(before)
    .bind(weeks_from)
    .fetch_optional(db)
    .await?)
}

/// [`fold_day`] in a transaction of its own that may run [`FOLD_TIMEOUT`](super::FOLD_TIMEOUT).
pub async fn fold_day_alone(pool: &PgPool, day: DateTime<Utc>, weeks_from: DateTime<Utc>) -> Result<Folded> {
    let mut tx = fold_transaction(pool).await?;
    let folded = fold_day(&mut tx, day, weeks_from).await?;
    tx.commit().await?;
    Ok(folded)
}

/// [`fold_week`] in a transaction of its own that may run [`FOLD_TIMEOUT`](super::FOLD_TIMEOUT).
pub async fn fold_week_alone(pool: &PgPool, week: &RawPartition) -> Result<Folded> {
    let mut tx = fold_transaction(pool).await?;
    let folded = fold_week(&mut tx, week).await?;
    tx.commit().await?;
    Ok(folded)
}

/// [`fold_month`] in a transaction of its own that may run [`FOLD_TIMEOUT`](super::FOLD_TIMEOUT).
pub async fn fold_month_alone(pool: &PgPool, month: DateTime<Utc>, before: DateTime<Utc>) -> Result<Folded> {
    let mut tx = fold_transaction(pool).await?;
    let folded = fold_month(&mut *tx, month, before).await?;
    tx.commit().await?;
    Ok(folded)
}

/// One point of one host, as a day's fold groups its results.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
struct PointKey {
    host_id: i64,
    algorithm: String,
    direction: String,
    size_bytes: i64,
    threads: i32,
    concurrency: i32,
    key_mode: String,
    path: String,
    nonce: String,
    provider: String,
}

/// A raw result a fold summarises, in its point's order.
#[derive(sqlx::FromRow)]
struct Gone {
    #[sqlx(flatten)]
    key: PointKey,
    path_used: String,
    throughput_mb_s: f64,
    job_id: Uuid,
}

/// Raw results in their point's order, grouped into one [`Summary`] per
/// point as they come: one point's results held at a time.
#[derive(Default)]
struct Grouper {
    point: Option<PointKey>,
    results: Vec<(f64, String)>,
    summaries: Vec<(PointKey, Summary)>,
    jobs: Vec<Uuid>,
    rows: i64,
}

impl Grouper {
    fn push(&mut self, row: Gone) {
        self.rows += 1;
        self.jobs.push(row.job_id);
        if self.point.as_ref().is_some_and(|p| *p != row.key) {
            self.close();
        }
        self.point.get_or_insert(row.key);
        self.results.push((row.throughput_mb_s, row.path_used));
    }

    fn close(&mut self) {
        if let Some(point) = self.point.take()
            && let Some(s) = Summary::of(self.results.iter().map(|(v, used)| (*v, used.as_str())))
        {
            self.summaries.push((point, s));
        }
        self.results.clear();
    }

    fn finish(mut self) -> (Vec<(PointKey, Summary)>, Vec<Uuid>, i64) {
        self.close();
        (self.summaries, self.jobs, self.rows)
    }
}

/// Folds the raw results of the UTC day starting at `day` that fold by day
/// ([`by_day!`]: kept past their week's fold, or stored before `weeks_from`)
/// but the latest of each point, into one `day` summary per host and point
/// ([`Summary`], the statistics computed here rather than in SQL), and
/// deletes them: one statement deletes and hands the rows over in their
/// points' order, one writes the summaries; `conn` should be a transaction,
/// so the two are all or nothing. A summary already there (a latest result
/// folded after its day was) is merged: counts add, min and max stay exact,
/// the quantiles become results-weighted means.
pub async fn fold_day(conn: &mut PgConnection, day: DateTime<Utc>, weeks_from: DateTime<Utc>) -> Result<Folded> {
    let mut grouper = Grouper::default();
    {
        let mut gone = sqlx::query_as::<_, Gone>(concat!(
            "WITH gone AS ( \
                 DELETE FROM results r \
                 WHERE r.created_at >= $1 AND r.created_at < $1 + interval '1 day' AND ",
            by_day!(),
            " AND ",
            not_latest!(),
            " RETURNING r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, \
                     coalesce(r.concurrency, 0) AS concurrency, r.key_mode, r.path, r.nonce, r.provider, \
                     r.path_used, r.throughput_mb_s, r.job_id) \
             SELECT * FROM gone ORDER BY host_id, algorithm, direction, size_bytes, threads, concurrency, \
                 key_mode, path, nonce, provider"
        ))
        .bind(day)
        .bind(weeks_from)
        .fetch(&mut *conn);
        while let Some(row) = gone.next().await {
            grouper.push(row?);
        }
    }
    let (summaries, jobs, removed) = grouper.finish();
    let written = write_summaries(conn, "day", day, &summaries).await?;
    let jobs = delete_jobs(conn, &jobs).await?;
    Ok(Folded {
        removed,
        summaries: written,
        jobs,
    })
}

/// Folds the partition `week` of `results_raw` whole, in `conn`'s
/// transaction: the latest result of each point moves to `results_kept`
/// first (one that stops being the latest later folds by day from there;
/// none becomes it in a week past), then every other result folds into one
/// `day` summary per host, point and UTC day, one day at a time (merged into
/// any already there), the partition is dropped (waiting at most 10 s for
/// its lock: functions/cipherfleet_results_drop.sql), and the jobs of the results
/// folded are deleted as a day's fold deletes them. Nothing is deleted row
/// by row: the week's space goes back to the file system.
pub async fn fold_week(conn: &mut PgConnection, week: &RawPartition) -> Result<Folded> {
    sqlx::query(concat!(
        "UPDATE results r SET kept = true \
         WHERE NOT r.kept AND r.created_at < $2 AND ($1::timestamptz IS NULL OR r.created_at >= $1) \
           AND NOT (",
        not_latest!(),
        ")"
    ))
    .bind(week.from)
    .bind(week.to)
    .execute(&mut *conn)
    .await?;
    let mut folded = Folded::default();
    let mut jobs: Vec<Uuid> = Vec::new();
    let mut from = week.from;
    loop {
        let day: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT date_trunc('day', min(r.created_at), 'UTC') FROM results r \
             WHERE NOT r.kept AND r.created_at < $2 AND ($1::timestamptz IS NULL OR r.created_at >= $1)",
        )
        .bind(from)
        .bind(week.to)
        .fetch_one(&mut *conn)
        .await?;
        let Some(day) = day else { break };
        let mut grouper = Grouper::default();
        {
            let mut rows = sqlx::query_as::<_, Gone>(
                "SELECT r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, \
                     coalesce(r.concurrency, 0) AS concurrency, r.key_mode, r.path, r.nonce, r.provider, \
                     r.path_used, r.throughput_mb_s, r.job_id \
                 FROM results r WHERE NOT r.kept AND r.created_at >= $1 AND r.created_at < $1 + interval '1 day' \
                 ORDER BY r.host_id, r.algorithm, r.direction, r.size_bytes, r.threads, coalesce(r.concurrency, 0), \
                     r.key_mode, r.path, r.nonce, r.provider",
            )
            .bind(day)
            .fetch(&mut *conn);
            while let Some(row) = rows.next().await {
                grouper.push(row?);
            }
        }
        let (summaries, day_jobs, removed) = grouper.finish();
        folded.summaries += write_summaries(conn, "day", day, &summaries).await?;
        folded.removed += removed;
        jobs.extend(day_jobs);
        from = Some(day + chrono::Duration::days(1));
    }
    sqlx::query("SELECT cipherfleet_results_drop($1)")
        .bind(&week.name)
        .execute(&mut *conn)
        .await?;
    folded.jobs = delete_jobs(conn, &jobs).await?;
    Ok(folded)
}

/// Writes `summaries` of `resolution` for the period starting at `period`,
/// merged into any already stored ([`merge!`]); returns how many.
async fn write_summaries(
    conn: &mut PgConnection,
    resolution: &str,
    period: DateTime<Utc>,
    summaries: &[(PointKey, Summary)],
) -> Result<i64> {
    let mut written = 0;
    // Bounded statements: a day of a large fleet is hundreds of thousands of points.
    for part in summaries.chunks(10_000) {
        let col = |f: &dyn Fn(&PointKey) -> String| part.iter().map(|(k, _)| f(k)).collect::<Vec<String>>();
        let num = |f: &dyn Fn(&Summary) -> f64| part.iter().map(|(_, s)| f(s)).collect::<Vec<f64>>();
        let count = |f: &dyn Fn(&Summary) -> i64| part.iter().map(|(_, s)| f(s)).collect::<Vec<i64>>();
        let result = sqlx::query(concat!(
            "INSERT INTO result_rollups (host_id, algorithm, direction, size_bytes, threads, concurrency, \
                 key_mode, path, nonce, provider, resolution, period_start, results, median_mb_s, p10_mb_s, \
                 p90_mb_s, min_mb_s, max_mb_s, accelerated, partial, software) \
             SELECT u.host_id, u.algorithm, u.direction, u.size_bytes, u.threads, u.concurrency, u.key_mode, \
                 u.path, u.nonce, u.provider, $1, $2, u.results, u.median, u.p10, u.p90, u.min, u.max, \
                 u.accelerated, u.partial, u.software \
             FROM UNNEST($3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::integer[], $8::integer[], \
                 $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::float8[], $15::float8[], \
                 $16::float8[], $17::float8[], $18::float8[], $19::bigint[], $20::bigint[], $21::bigint[]) \
                 AS u(host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                      provider, results, median, p10, p90, min, max, accelerated, partial, software) ",
            merge!()
        ))
        .bind(resolution)
        .bind(period)
        .bind(part.iter().map(|(k, _)| k.host_id).collect::<Vec<i64>>())
        .bind(col(&|k| k.algorithm.clone()))
        .bind(col(&|k| k.direction.clone()))
        .bind(part.iter().map(|(k, _)| k.size_bytes).collect::<Vec<i64>>())
        .bind(part.iter().map(|(k, _)| k.threads).collect::<Vec<i32>>())
        .bind(part.iter().map(|(k, _)| k.concurrency).collect::<Vec<i32>>())
        .bind(col(&|k| k.key_mode.clone()))
        .bind(col(&|k| k.path.clone()))
        .bind(col(&|k| k.nonce.clone()))
        .bind(col(&|k| k.provider.clone()))
        .bind(count(&|s| s.results))
        .bind(num(&|s| s.median_mb_s))
        .bind(num(&|s| s.p10_mb_s))
        .bind(num(&|s| s.p90_mb_s))
        .bind(num(&|s| s.min_mb_s))
        .bind(num(&|s| s.max_mb_s))
        .bind(count(&|s| s.accelerated))
        .bind(count(&|s| s.partial))
        .bind(count(&|s| s.software))
        .execute(&mut *conn)
        .await?;
        written += result.rows_affected() as i64;
    }
    Ok(written)
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
    Ok(Folded {
        removed,
        summaries,
        jobs: 0,
    })
}

/// One period of a host's history at one point: a stored summary, or a UTC
/// day of raw results summarised on the fly.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct HistoryRow {
    pub algorithm: String,
    /// `day` or `month`.
    pub resolution: String,
    pub period_start: DateTime<Utc>,
    #[sqlx(flatten)]
    #[serde(flatten)]
    pub summary: Summary,
}

/// The key point's filter of [`history`], on `results` (`concurrency IS NULL`)
/// or `result_rollups` (`concurrency = 0`).
macro_rules! key_point {
    () => {
        "host_id = $1 AND algorithm = ANY($2) AND size_bytes = $3 AND direction = 'encrypt' \
         AND path = 'accelerated' AND threads = 1 AND key_mode = 'static' AND nonce = 'counter' \
         AND provider = 'rustcrypto'"
    };
}

/// A host's whole history of one key point per algorithm (`algorithms`, by
/// name: single-thread encryption on the accelerated path of the built-in
/// crates at `size_bytes`, a static key): the stored summaries, and the raw
/// results summarised per UTC day ([`Summary`]); a day with both (a latest
/// result kept raw past its day's fold) is one row. Oldest first per algorithm.
pub async fn history(pool: &PgPool, host_id: i64, algorithms: &[&str], size_bytes: i64) -> Result<Vec<HistoryRow>> {
    let mut rows: Vec<HistoryRow> = sqlx::query_as(concat!(
        "SELECT algorithm, resolution, period_start, results::bigint AS results, median_mb_s, p10_mb_s, \
             p90_mb_s, min_mb_s, max_mb_s, accelerated::bigint AS accelerated, partial::bigint AS partial, \
             software::bigint AS software \
         FROM result_rollups WHERE concurrency = 0 AND ",
        key_point!()
    ))
    .bind(host_id)
    .bind(algorithms)
    .bind(size_bytes)
    .fetch_all(pool)
    .await?;
    let raw: Vec<(String, DateTime<Utc>, String, f64)> = sqlx::query_as(concat!(
        "SELECT algorithm, date_trunc('day', created_at, 'UTC') AS day, path_used, throughput_mb_s \
         FROM results WHERE concurrency IS NULL AND ",
        key_point!(),
        " ORDER BY algorithm, day"
    ))
    .bind(host_id)
    .bind(algorithms)
    .bind(size_bytes)
    .fetch_all(pool)
    .await?;
    for day in raw.chunk_by(|a, b| a.0 == b.0 && a.1 == b.1) {
        let (algorithm, start) = (&day[0].0, day[0].1);
        if let Some(s) = Summary::of(day.iter().map(|(_, _, used, v)| (*v, used.as_str()))) {
            rows.push(HistoryRow {
                algorithm: algorithm.clone(),
                resolution: "day".into(),
                period_start: start,
                summary: s,
            });
        }
    }
    rows.sort_by(|a, b| {
        (a.algorithm.as_str(), a.period_start, a.resolution.as_str()).cmp(&(
            b.algorithm.as_str(),
            b.period_start,
            b.resolution.as_str(),
        ))
    });
    Ok(merge_same_period(rows))
}

/// Rows of one algorithm, resolution and period (sorted so they are
/// adjacent) merged by [`Summary::merge`], as a fold merges them.
fn merge_same_period(rows: Vec<HistoryRow>) -> Vec<HistoryRow> {
    let mut out: Vec<HistoryRow> = Vec::with_capacity(rows.len());
    for r in rows {
        match out.last_mut() {
            Some(last)
                if last.algorithm == r.algorithm
                    && last.resolution == r.resolution
                    && last.period_start == r.period_start =>
            {
                last.summary = last.summary.merge(r.summary);
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
            summary: Summary {
                results,
                median_mb_s: median,
                p10_mb_s: median,
                p90_mb_s: median,
                min_mb_s: min,
                max_mb_s: max,
                accelerated: results,
                partial: 0,
                software: 0,
            },
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
                merged[0].summary.results,
                merged[0].summary.median_mb_s,
                merged[0].summary.min_mb_s,
                merged[0].summary.max_mb_s
            ),
            (4, 125.0, 90.0, 200.0)
        );
        assert_eq!(merged[0].summary.accelerated, 4);
        assert_eq!(merged[1], row(2, 2, 50.0, 40.0, 60.0));
    }
}
