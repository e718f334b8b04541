//! Retention (docs/operations.md, "Retention"): storage that stays bounded
//! under continuous watching. On the cluster's leader, at start and then
//! every hour, raw results older than `--keep-raw` fold into one summary per
//! point and UTC day, and daily summaries older than `--keep-daily` into one
//! per month ([`crate::store::rollups`]). `results` is partitioned by UTC
//! week (migrations/0040): a week wholly past the raw window folds whole and
//! its partition is dropped; the results stored before the first week, and
//! those kept past their week's fold, fold by day. The latest result of every
//! point stays raw whatever its age: the report's latest-point tables name it.
//! The jobs of ended campaigns past the raw window go too, but for those of
//! results kept raw; each campaign keeps its counts, per host until it is
//! past the daily window, then for all its hosts in one row
//! ([`crate::store::campaign_folds`]). Every
//! coordinator, leader or not, makes the weeks ahead.
//!
//! One day, week or month per transaction, oldest first: a pass stopped
//! half-way (a restart, a lost leadership, the database gone for a moment)
//! has folded whole periods only and the next pass goes on from there;
//! nothing is lost or counted twice. The windows are aligned to UTC days,
//! weeks and months, so a day is folded once, whole.
//!
//! A coordinator older than the database's schema folds nothing: during a
//! rolling upgrade the newer release may store results otherwise, and folds
//! them itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, TimeZone, Utc};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::cluster::leader::Leader;
use crate::store::campaign_folds::CampaignFold;
use crate::store::{self, campaign_folds, rollups};

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
    /// Days folded: of the results before the first week, or kept past their week's fold.
    pub days: u32,
    /// Week partitions folded and dropped.
    pub weeks: u32,
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

impl Pass {
    /// Counts a fold of raw results, a day's or a week's.
    fn add_raw(&mut self, folded: rollups::Folded) {
        self.results += folded.removed;
        self.summaries += folded.summaries;
        self.jobs += folded.jobs;
    }
}

/// One pass at `now`: every whole UTC day before the raw window of the raw
/// results that fold by day (stored before the first week, or kept past their
/// week's fold), then every week partition wholly before it (each with its
/// results' jobs), then the other jobs of every ended campaign that finished
/// before it (one campaign a transaction), then every month of daily
/// summaries before the daily window and the counts per host of every
/// campaign that ended before it, oldest first, each in one transaction;
/// stops between two periods once `stop` is cancelled.
pub async fn pass(pool: &PgPool, r: &Retention, now: DateTime<Utc>, stop: &CancellationToken) -> store::Result<Pass> {
    let mut done = Pass::default();
    // A newer release may store results otherwise (as migration 0040 did,
    // docs/operations.md "Upgrading"): folding them by this build's rules
    // beside it could count a result twice or miss one.
    let database = store::schema::database_migration(pool).await?;
    if database > store::schema::newest_migration() {
        done.left_to_newer = Some(database);
        return Ok(done);
    }
    if let Some(before) = r.raw_before(now) {
        let weeks_from = store::partitions::weeks_from(&store::partitions::raw(pool).await?).unwrap_or(before);
        while !stop.is_cancelled() {
            let Some(day) = rollups::oldest_day(pool, before, weeks_from).await? else {
                break;
            };
            let started = Instant::now();
            let folded = rollups::fold_day_alone(pool, day, weeks_from).await?;
            tracing::info!(
                day = %day.date_naive(),
                results = folded.removed,
                summaries = folded.summaries,
                jobs = folded.jobs,
                took_ms = started.elapsed().as_millis() as u64,
                "raw results past --keep-raw folded into daily summaries"
            );
            done.days += 1;
            done.add_raw(folded);
            // A day that would not fold (a result that became the latest of its point meanwhile) is tried next pass.
            if folded.removed == 0 {
                break;
            }
        }
    }
    // Then every week wholly past the raw window, whole, its partition dropped.
    if let Some(before) = r.raw_before(now) {
        for week in store::partitions::raw(pool).await?.iter().filter(|w| w.to <= before) {
            if stop.is_cancelled() {
                break;
            }
            let started = Instant::now();
            let folded = rollups::fold_week_alone(pool, week).await?;
            tracing::info!(
                partition = %week.name,
                results = folded.removed,
                summaries = folded.summaries,
                jobs = folded.jobs,
                took_ms = started.elapsed().as_millis() as u64,
                "a week of raw results past --keep-raw folded into daily summaries, its partition dropped"
            );
            done.weeks += 1;
            done.add_raw(folded);
        }
    }
    // Then the other jobs of ended campaigns past the raw window (failed,
    // cancelled): a campaign keeps its counts and the jobs of results kept raw.
    if let Some(before) = r.raw_before(now) {
        while !stop.is_cancelled() {
            let Some(campaign) = campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Jobs, before).await?
            else {
                break;
            };
            let started = Instant::now();
            let jobs = campaign_folds::fold_campaign_jobs_alone(pool, campaign, before).await?;
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
            let Some(campaign) = campaign_folds::oldest_campaign_to_fold(pool, CampaignFold::Counts, before).await?
            else {
                break;
            };
            let rows = campaign_folds::fold_campaign_counts_alone(pool, campaign).await?;
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

/// Runs [`pass`] at start and every hour while this coordinator leads, until
/// `shutdown`; and on every coordinator, first, makes the weeks ahead
/// ([`store::partitions::ensure_weeks`]).
pub async fn run(pool: PgPool, leader: Arc<Leader>, r: Retention, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        // Every coordinator, leader or not, keeps weeks made ahead for its results.
        match store::partitions::ensure_weeks(&pool).await {
            Ok(0) => {}
            Ok(made) => tracing::info!(made, "week partitions of results made ahead"),
            Err(e) => tracing::warn!(error = %e, "making the week partitions of results ahead"),
        }
        if r == Retention::FOREVER || !leader.is_leader().await {
            continue;
        }
        let started = Instant::now();
        match pass(&pool, &r, Utc::now(), &shutdown).await {
            Ok(p) if p.days > 0 || p.weeks > 0 || p.months > 0 || p.campaigns > 0 || p.campaign_counts > 0 => {
                tracing::info!(
                    days = p.days,
                    weeks = p.weeks,
                    results = p.results,
                    campaigns = p.campaigns,
                    jobs = p.jobs,
                    campaign_counts = p.campaign_counts,
                    months = p.months,
                    daily_summaries = p.daily_summaries,
                    took_ms = started.elapsed().as_millis() as u64,
                    "retention pass"
                )
            }
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
