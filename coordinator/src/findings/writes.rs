//! How a pass stores what it found: per host, what holds (new or already
//! open) and what no longer does; per chunk of hosts, in a few statements.

use std::collections::{BTreeSet, HashMap};

use super::Outcome;
use super::describe::{self, Anchor, Derived};
use crate::analysis::fallback::CpuGroups;
use crate::analysis::series;
use crate::store;
use crate::store::findings::{self as stored, Finding, NewFinding};
use crate::store::snapshots::{self, Snapshot};

/// How a pass stores what it found.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// A chunk's new and held findings in one statement, its resolved ones
    /// in another, and the snapshots that date its new ones in one query:
    /// what every pass does.
    Batched,
    /// One statement per finding and per host, as passes once did: the
    /// reference a test holds the batched writes to.
    OneByOne,
}

/// What one host's pass changes: what was derived for it, each marked new
/// or already open, and its open findings that no longer hold.
pub(super) struct HostChanges {
    host_id: i64,
    derived: Vec<(Derived, bool)>,
    gone: Vec<i64>,
}

impl HostChanges {
    /// Compares what was `derived` for `host_id` with the `open` findings (of
    /// the pass's hosts). A pass over some algorithms leaves the slow findings
    /// of the others alone.
    pub fn new(host_id: i64, derived: Vec<Derived>, open: &[Finding], only: Option<&BTreeSet<String>>) -> Self {
        let in_scope = |f: &Finding| {
            f.reason != "slow-accelerated" || only.is_none_or(|a| a.contains(series::subject_algorithm(&f.subject)))
        };
        let stored: Vec<&Finding> = open.iter().filter(|f| f.host_id == host_id && in_scope(f)).collect();
        let gone = stored
            .iter()
            .filter(|f| !derived.iter().any(|d| d.finding.same_as(f)))
            .map(|f| f.id)
            .collect();
        let derived = derived
            .into_iter()
            .map(|d| {
                let new = !stored.iter().any(|f| d.finding.same_as(f));
                (d, new)
            })
            .collect();
        HostChanges { host_id, derived, gone }
    }

    fn has_new(&self) -> bool {
        self.derived.iter().any(|(_, new)| *new)
    }

    /// The findings to store: new ones dated from the host's snapshot
    /// `history` (first-seen, what changed around then), held ones as derived.
    fn dated(self, history: &[Snapshot], fleet: &CpuGroups, outcome: &mut Outcome) -> (Vec<NewFinding>, Vec<i64>) {
        let host_id = self.host_id;
        let findings = self
            .derived
            .into_iter()
            .map(|(Derived { mut finding, anchor }, new)| {
                if new {
                    (finding.first_seen, finding.fact_changes) = match &anchor {
                        Anchor::Facts(reason) => {
                            describe::anchor_facts(host_id, *reason, &finding.subject, history, fleet)
                        }
                        Anchor::Series(v) => describe::anchor_series(v, history),
                        Anchor::Results { first, snapshot } => describe::anchor_results(*first, *snapshot, history),
                    };
                    outcome.opened += 1;
                } else {
                    outcome.refreshed += 1;
                }
                finding
            })
            .collect();
        (findings, self.gone)
    }
}

/// Stores a chunk's `changes`: new findings dated and opened, held ones
/// refreshed, the rest resolved.
pub(super) async fn write_chunk(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    changes: Vec<HostChanges>,
    fleet: &CpuGroups,
    writes: Writes,
    outcome: &mut Outcome,
) -> store::Result<()> {
    match writes {
        Writes::Batched => {
            let dating: Vec<i64> = changes.iter().filter(|c| c.has_new()).map(|c| c.host_id).collect();
            let snapshots = store::series::snapshot_histories(&mut **tx, &dating).await?;
            let mut histories: HashMap<i64, &[Snapshot]> = HashMap::new();
            for run in snapshots.chunk_by(|a, b| a.host_id == b.host_id) {
                histories.insert(run[0].host_id, run);
            }
            let (mut upserts, mut gone) = (Vec::new(), Vec::new());
            for c in changes {
                let history = histories.get(&c.host_id).copied().unwrap_or_default();
                let (findings, resolved) = c.dated(history, fleet, outcome);
                upserts.extend(findings);
                gone.extend(resolved);
            }
            stored::upsert_open_all(tx, &upserts).await?;
            outcome.resolved += stored::resolve(&mut **tx, &gone).await? as usize;
        }
        Writes::OneByOne => {
            for c in changes {
                let history = if c.has_new() {
                    snapshots::history(&mut **tx, c.host_id).await?
                } else {
                    Vec::new()
                };
                let (findings, gone) = c.dated(&history, fleet, outcome);
                for finding in &findings {
                    stored::upsert_open(tx, finding).await?;
                }
                outcome.resolved += stored::resolve(&mut **tx, &gone).await? as usize;
            }
        }
    }
    Ok(())
}
