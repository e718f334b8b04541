//! The background refresh of the report's stored figures: the compare
//! matrix's class cells ([`view_summaries`]) and the fallback page's list of
//! hosts at software speed ([`fallback_views`]), each stored per point and
//! made stale by new results of that point.
//!
//! Each coordinator runs one refresh ([`keep_fresh`]). A round recomputes
//! the stale figures once ingest has paused for [`QUIET`] (a campaign's
//! batches come closer together, and each recomputation reads a whole
//! point: every host's latest result of it), or once the oldest change has
//! waited [`PATIENCE`]; a page that shows stale figures (saying as of when)
//! asks for a round at once ([`Wanted::now`]), whatever ingest does. Rounds
//! run one at a time, so at most one recomputation per coordinator runs
//! however many views ask; recomputations of one point are serialised across
//! coordinators and re-check what is stale, so the second finds nothing to do.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{classes, fallback_hosts, fallback_views, view_summaries};
use crate::store::Result;

/// How often a round looks for stale figures.
const EVERY: Duration = Duration::from_secs(2);
/// How long ingest must have paused before stale figures are recomputed.
const QUIET: Duration = Duration::from_secs(2);
/// How long stale figures wait at most while ingest goes on.
const PATIENCE: Duration = Duration::from_secs(60);

/// How the pages ask this coordinator's refresh for a round: cheap to clone,
/// one per coordinator (given to its pages and to its [`keep_fresh`]).
#[derive(Clone, Debug, Default)]
pub struct Wanted(Arc<Asked>);

#[derive(Debug, Default)]
struct Asked {
    /// Views that showed stale figures, counted: a round that sees the count
    /// move recomputes at once, without waiting for ingest to pause.
    count: AtomicU64,
    wake: Notify,
}

impl Wanted {
    /// A view showed stored figures that miss newer results: recompute them now.
    pub fn now(&self) {
        self.0.count.fetch_add(1, Ordering::Relaxed);
        self.0.wake.notify_waiters();
    }

    fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }
}

/// Recomputes stale figures in the background until `shutdown`.
pub async fn keep_fresh(pool: PgPool, wanted: Wanted, shutdown: CancellationToken) {
    let mut seen = wanted.count();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = wanted.0.wake.notified() => {}
            _ = tokio::time::sleep(EVERY) => {}
        }
        let now = wanted.count();
        let quiet = if now == seen { QUIET } else { Duration::ZERO };
        seen = now;
        if let Err(e) = round(&pool, quiet, PATIENCE).await {
            tracing::warn!(error = %e, "refreshing the report's stored figures");
        }
    }
}

/// One round: the figures due (after `quiet` without changes, or `patience`
/// since the first), recomputed under the fleet's current classes and
/// hosts; and the change markers no stored list needs, deleted. How many
/// slices and points were recomputed.
pub async fn round(pool: &PgPool, quiet: Duration, patience: Duration) -> Result<usize> {
    let mut done = 0;
    let due = view_summaries::due(pool, quiet, patience).await?;
    if !due.is_empty() {
        let (_, assignment) = classes::current(pool).await?;
        for (view, algorithms) in &due {
            let algorithms: Vec<&str> = algorithms.iter().map(String::as_str).collect();
            view_summaries::refresh(pool, view, &algorithms, &assignment).await?;
        }
        done += due.len();
    }
    for point in fallback_views::due(pool, quiet, patience).await? {
        let cases = fallback_hosts::cases_now(pool, &point).await?;
        fallback_views::compute(pool, &point, &cases).await?;
        done += 1;
    }
    fallback_views::forget_changes(pool).await?;
    Ok(done)
}
