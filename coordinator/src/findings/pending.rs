//! What the deriver has marked to derive, and when a pass for it is due.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Work marked within this long of the first is derived in one pass, and a
/// pass for new results waits until none came for this long: while a campaign
/// streams results in (thousands a second), passes would take PostgreSQL's
/// time from ingest and re-read the same hosts every few seconds.
pub(super) const COALESCE: Duration = Duration::from_secs(2);
/// The longest a host's new results wait for their pass while others keep
/// coming: a finding shows within a minute however busy ingest is.
pub(super) const PATIENCE: Duration = Duration::from_secs(60);

/// What a background pass should derive.
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) fleet: bool,
    /// A host's facts changed: fact-based reasons of every host (peers matter).
    pub(super) facts: bool,
    /// Dirty hosts and the algorithms of their new results.
    pub(super) hosts: BTreeMap<i64, BTreeSet<String>>,
    /// When the first and the latest of those results were marked.
    pub(super) first_result: Option<tokio::time::Instant>,
    pub(super) last_result: Option<tokio::time::Instant>,
}

impl Pending {
    /// When a pass for the marked results is due: once they stopped coming
    /// for [`COALESCE`], or [`PATIENCE`] after the first; `None`: no results.
    pub(super) fn results_due(&self) -> Option<tokio::time::Instant> {
        let (first, last) = (self.first_result?, self.last_result?);
        Some((last + COALESCE).min(first + PATIENCE))
    }

    /// Results are marked whose pass is not due yet.
    pub(super) fn results_waiting(&self) -> bool {
        self.results_due().is_some_and(|due| due > tokio::time::Instant::now())
    }

    /// A pass must wait: only results that are not due are marked. New facts
    /// and a fleet pass never wait for results to pause — a host that lost
    /// its acceleration shows at the next pass however busy ingest is.
    pub(super) fn must_wait(&self) -> bool {
        !self.fleet && !self.facts && self.results_waiting()
    }

    /// The work due now, leaving results that wait for their pause marked
    /// (a fleet pass takes them: it derives every host anyway).
    pub(super) fn take_due(&mut self) -> Pending {
        if self.fleet || !self.results_waiting() {
            return std::mem::take(self);
        }
        Pending {
            facts: std::mem::take(&mut self.facts),
            ..Pending::default()
        }
    }
}
