//! Retention (docs/operations.md, "Retention"): storage that stays bounded
//! under continuous watching. On the cluster's leader, at start and then
//! every hour, raw results older than `--keep-raw` fold into one summary per
//! point and UTC day, and daily summaries older than `--keep-daily` into one
//! per month ([`crate::store::rollups`]). The latest result of every point
//! stays raw whatever its age: the report's latest-point tables name it.
//! The jobs of ended campaigns past the raw window go too, but for those of
//! results kept raw; each campaign keeps its counts, per host until it is
//! past the daily window, then for all its hosts in one row.
//!
//! One day (or month) per transaction, oldest first: a pass stopped half-way
//! (a restart, a lost leadership, the database gone for a moment) has folded
//! whole periods only and the next pass goes on from there; nothing is lost
//! or counted twice. The windows are aligned to UTC days and months, so a
//! day is folded once, whole.
//!
//! A coordinator older than the database's schema folds nothing: during a
//! rolling upgrade the newer release may store results otherwise (the planned
//! partitioning, docs/operations.md "Retention"), and folds them itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, TimeZone, Utc};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::cluster::leader::Leader;
use crate::store::rollups::CampaignFold;
use crate::store::{self, rollups};

/// How long results are kept at each resolution; `None` keeps them for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// `--keep-raw`: raw results (every sample, latency percentile and the measurement document).
    pub keep_raw: Option<chrono::Duration>,
    /// `--keep-daily`: daily summaries, before they fold into monthly ones.
    pub keep_daily: Option<chrono::Duration>,
}

/// `--keep-raw`'s default: a quarter of hourly results per point, and far
/// more than the 30 latest results per series the findings judge.
pub const DEFAULT_KEEP_RAW_DAYS: i64 = 90;
/// `--keep-daily`'s default: two years of daily points.
pub const DEFAULT_KEEP_DAILY_DAYS: i64 = 730;

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_raw: Some(chrono::Duration::days(DEFAULT_KEEP_RAW_DAYS)),
            keep_daily: Some(chrono::Duration::days(DEFAULT_KEEP_DAILY_DAYS)),
        }
    }
}

impl Retention {
    /// Keeps everything raw: what a coordinator did before retention.
    pub const FOREVER: Retention = Retention {
        keep_raw: None,
        keep_daily: None,
    };

    /// Raw results before this (a UTC midnight) fold, at `now`.
    pub fn raw_before(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.keep_raw.map(|keep| day_start(now - keep))
    }

    /// Daily summaries before this (the first of a UTC month) fold, at `now`.
    pub fn daily_before(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.keep_daily.map(|keep| month_start(now - keep))
    }
}

fn day_start(t: DateTime<Utc>) -> DateTime<Utc> {
    Utc.from_utc_datetime(&t.date_naive().and_hms_opt(0, 0, 0).expect("midnight"))
}

fn month_start(t: DateTime<Utc>) -> DateTime<Utc> {
    day_start(t.with_day(1).expect("the first of a month"))
}

/// What a pass folded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub days: u32,
    pub results: i64,
    pub months: u32,
    pub daily_summaries: i64,
    /// Summaries written (new or merged), days and months.
    pub summaries: i64,
    /// Ended campaigns past the raw window whose jobs were folded.
    pub campaigns: u32,
    /// Jobs deleted: those of the results folded, and the campaigns' others.
    pub jobs: i64,
    /// Ended campaigns past the daily window whose counts per host became one row.
    pub campaign_counts: u32,
    /// The database's newest migration when it is newer than this build's:
    /// the pass folded nothing, leaving it to a coordinator that knows how the
    /// newer schema stores results (during a rolling upgrade).
    pub left_to_newer: Option<i64>,
}

/// One pass at `now`: every whole UTC day of raw results before the raw
/// window (with their jobs), then the other jobs of every ended campaign that
/// finished before it (one campaign a transaction), then every month of daily
/// summaries before the daily window and the counts per host of every
/// campaign that ended before it,
/// oldest first, each in one transaction; stops between two periods once
/// `stop` is cancelled.
pub async fn pass(pool: &PgPool, r: &Retention, now: DateTime<Utc>, stop: &CancellationToken) -> store::Result<Pass> {
    let mut done = Pass::default();
    // A newer release may store results otherwise (the planned partitioning
    // of `results`, docs/operations.md "Upgrading"): folding them by this
    // build's rules beside it could count a result twice or miss one.
    let database = store::schema::database_migration(pool).await?;
    if database > store::schema::newest_migration() {
        done.left_to_newer = Some(database);
        return Ok(done);
    }
    if let Some(before) = r.raw_before(now) {
        while !stop.is_cancelled() {
            let Some(day) = rollups::oldest_day(pool, before).await? else {
                break;
            };
            let started = Instant::now();
            let folded = rollups::fold_day_alone(pool, day).await?;
            tracing::info!(
                day = %day.date_naive(),
                results = folded.removed,
                summaries = folded.summaries,
                jobs = folded.jobs,
                took_ms = started.elapsed().as_millis() as u64,
                "raw results past --keep-raw folded into daily summaries"
            );
            done.days += 1;
            done.results += folded.removed;
            done.summaries += folded.summaries;
            done.jobs += folded.jobs;
            // A day that would not fold (a result that became the latest of its point meanwhile) is tried next pass.
            if folded.removed == 0 {
                break;
            }
        }
    }
    // Then the other jobs of ended campaigns past the raw window (failed,
    // cancelled): a campaign keeps its counts and the jobs of results kept raw.
    if let Some(before) = r.raw_before(now) {
        while !stop.is_cancelled() {
            let Some(campaign) = rollups::oldest_campaign_to_fold(pool, CampaignFold::Jobs, before).await? else {
                break;
            };
            let started = Instant::now();
            let jobs = rollups::fold_campaign_jobs_alone(pool, campaign, before).await?;
            tracing::info!(
                campaign,
                jobs,
                took_ms = started.elapsed().as_millis() as u64,
                "the jobs of an ended campaign past --keep-raw folded, its counts kept"
            );
            done.campaigns += 1;
            done.jobs += jobs;
        }
    }
    if let Some(before) = r.daily_before(now) {
        while !stop.is_cancelled() {
            let Some(month) = rollups::oldest_month(pool, before).await? else {
                break;
            };
            let folded = rollups::fold_month_alone(pool, month, before).await?;
            tracing::info!(
                month = %month.format("%Y-%m"),
                daily_summaries = folded.removed,
                summaries = folded.summaries,
                "daily summaries past --keep-daily folded into monthly ones"
            );
            done.months += 1;
            done.daily_summaries += folded.removed;
            done.summaries += folded.summaries;
            if folded.removed == 0 {
                break;
            }
        }
        // And campaigns as old: their counts per host become one row each.
        while !stop.is_cancelled() {
            let Some(campaign) = rollups::oldest_campaign_to_fold(pool, CampaignFold::Counts, before).await? else {
                break;
            };
            let rows = rollups::fold_campaign_counts_alone(pool, campaign).await?;
            tracing::info!(
                campaign,
                rows,
                "the counts per host of a campaign past --keep-daily folded into one row"
            );
            done.campaign_counts += 1;
        }
    }
    Ok(done)
}

/// How often the leader looks for something to fold.
const EVERY: Duration = Duration::from_secs(3600);

/// Runs [`pass`] at start and every hour while this coordinator leads, until `shutdown`.
pub async fn run(pool: PgPool, leader: Arc<Leader>, r: Retention, shutdown: CancellationToken) {
    if r == Retention::FOREVER {
        return;
    }
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !leader.is_leader().await {
            continue;
        }
        let started = Instant::now();
        match pass(&pool, &r, Utc::now(), &shutdown).await {
            Ok(p) if p.days > 0 || p.months > 0 || p.campaigns > 0 || p.campaign_counts > 0 => tracing::info!(
                days = p.days,
                results = p.results,
                campaigns = p.campaigns,
                jobs = p.jobs,
                campaign_counts = p.campaign_counts,
                months = p.months,
                daily_summaries = p.daily_summaries,
                took_ms = started.elapsed().as_millis() as u64,
                "retention pass"
            ),
            Ok(Pass {
                left_to_newer: Some(database),
                ..
            }) => tracing::warn!(
                database,
                known = store::schema::newest_migration(),
                "retention pass skipped: the database has a migration newer than this build's, so a newer \
                 coordinator shares it and folds its results; upgrade this coordinator"
            ),
            Ok(_) => {}
            // Whole periods only were folded; the next pass goes on from there.
            Err(e) => tracing::warn!(error = %e, "retention pass stopped; it goes on at the next one"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn windows_end_at_utc_midnight_and_the_first_of_a_month() {
        let r = Retention::default();
        let now = t("2026-12-05T17:49:04Z");
        assert_eq!(
            r.raw_before(now),
            Some(t("2026-09-06T00:00:00Z")),
            "90 days before, its midnight"
        );
        assert_eq!(
            r.daily_before(now),
            Some(t("2024-12-01T00:00:00Z")),
            "730 days before, its month"
        );
        assert_eq!(Retention::FOREVER.raw_before(now), None);
        assert_eq!(Retention::FOREVER.daily_before(now), None);
    }
}
