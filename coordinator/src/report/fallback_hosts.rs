//! The hosts of the fallback page: every host with the facts the page shows
//! and judges rows by, kept between requests while the hosts do not change
//! ([`host_summaries::generation`]: a new host, labels, current facts), so a
//! page reads the fleet's 10,000 hosts only after a change; and the cases
//! of the software-speed rule on their CPUs ([`SlowCases`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cipherfleet_core::path::PathUsed;
use cipherfleet_core::spec::KeyMode;
use sqlx::PgPool;

use super::fallback::{self, FallbackHost, PathPoint};
use super::fallback_views::SlowCases;
use super::host_summaries::{self, Generation};
use crate::analysis::marks::{SIMULATED_LABEL, is_marked};
use crate::analysis::software_speed::best_path;
use crate::store::Result;

/// Which hosts a filtered view keeps.
pub type Keep<'a> = dyn Fn(&FallbackHost) -> bool + Send + Sync + 'a;

/// A host of the view, its marks worked out once.
pub struct HostInfo {
    pub host: FallbackHost,
    pub emulated: bool,
    pub simulated: bool,
}

/// Every host, by id and in the order of ids (the order cases are numbered in).
struct Fleet {
    by_id: HashMap<i64, Arc<HostInfo>>,
    in_order: Vec<Arc<HostInfo>>,
}

/// The last fleet read and the [`Generation`] it was read at. Process-wide,
/// as the pages reach it with only a pool; the generation names the
/// database, so pools of two databases never share it.
static FLEET: Mutex<Option<(Generation, Arc<Fleet>)>> = Mutex::new(None);

fn cached() -> MutexGuard<'static, Option<(Generation, Arc<Fleet>)>> {
    // A panic while holding it left a whole fleet or none: still usable.
    FLEET.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every host with its marks: read again only when the hosts changed since
/// the last read (the price of a pass over `host_summaries`' narrow rows otherwise).
async fn fleet(pool: &PgPool) -> Result<Arc<Fleet>> {
    // Read before the hosts: a change committed in between makes the next
    // call read again, never keeps an older fleet.
    let generation = host_summaries::generation(pool).await?;
    if let Some((at, fleet)) = &*cached()
        && *at == generation
    {
        return Ok(fleet.clone());
    }
    let mut in_order: Vec<Arc<HostInfo>> = fallback::hosts(pool)
        .await?
        .into_iter()
        .map(|host| {
            Arc::new(HostInfo {
                emulated: host.emulated(),
                simulated: is_marked(&host.labels.0, SIMULATED_LABEL),
                host,
            })
        })
        .collect();
    in_order.sort_by_key(|h| h.host.id);
    let by_id = in_order.iter().map(|h| (h.host.id, h.clone())).collect();
    let fleet = Arc::new(Fleet { by_id, in_order });
    *cached() = Some((generation, fleet.clone()));
    Ok(fleet)
}

/// The hosts of a view: the fleet, and when a filter leaves some out, the
/// ids of those kept (the rows' SQL filter).
pub struct ViewHosts {
    fleet: Arc<Fleet>,
    kept: Option<(HashSet<i64>, Vec<i64>)>,
}

impl ViewHosts {
    /// The fleet, and those of its hosts `keep` keeps when given (a filter).
    pub async fn load(pool: &PgPool, keep: Option<&Keep<'_>>) -> Result<Self> {
        let fleet = fleet(pool).await?;
        let kept = keep.map(|keep| {
            let ids: Vec<i64> = fleet
                .in_order
                .iter()
                .filter(|h| keep(&h.host))
                .map(|h| h.host.id)
                .collect();
            (ids.iter().copied().collect(), ids)
        });
        Ok(ViewHosts { fleet, kept })
    }

    /// Host `id`, if the view keeps it.
    pub fn get(&self, id: i64) -> Option<&Arc<HostInfo>> {
        match &self.kept {
            Some((set, _)) if !set.contains(&id) => None,
            _ => self.fleet.by_id.get(&id),
        }
    }

    /// The hosts the view keeps.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<HostInfo>> {
        self.fleet.in_order.iter().filter(|h| self.get(h.host.id).is_some())
    }

    /// The ids of the hosts kept when a filter leaves some out; `None`: every host.
    pub fn kept(&self) -> Option<&[i64]> {
        self.kept.as_ref().map(|(_, ids)| ids.as_slice())
    }

    /// Whether a filter leaves hosts out.
    pub fn filtered(&self) -> bool {
        self.kept.is_some()
    }

    /// The cases of the rule on every host of the fleet (not only those kept:
    /// the stored list is the whole fleet's, and a filter picks from it).
    pub fn fleet_cases(&self, point: &PathPoint) -> SlowCases {
        cases_of(&self.fleet, point)
    }

    /// The algorithms that can be at software speed on some host of the
    /// view: those whose best path ([`best_path`], what the rule measures
    /// against) is not software there. Worked out per distinct arch and
    /// feature list, of which a fleet has a handful.
    pub fn judged_algorithms(&self, key_mode: KeyMode) -> Vec<&'static str> {
        let cpus: HashSet<(Option<&str>, Option<&[String]>)> = self
            .iter()
            .map(|h| (h.host.arch.as_deref(), h.host.features_advertised.as_deref()))
            .collect();
        cipherfleet_core::algorithm::ALL
            .iter()
            .filter(|&&a| {
                cpus.iter()
                    .any(|&(arch, advertised)| best_path(a, key_mode, arch, advertised) != PathUsed::Software)
            })
            .map(|a| a.name())
            .collect()
    }
}

fn cases_of(fleet: &Fleet, point: &PathPoint) -> SlowCases {
    SlowCases::of(
        fleet.in_order.iter().map(|h| {
            (
                h.host.id,
                h.host.arch.as_deref(),
                h.host.features_advertised.as_deref(),
                h.emulated,
            )
        }),
        point.key_mode,
        point.size_bytes,
    )
}

/// The cases of the rule on the fleet's hosts now, at `point`: what the
/// background refresh recomputes a stored list with.
pub async fn cases_now(pool: &PgPool, point: &PathPoint) -> Result<SlowCases> {
    Ok(cases_of(&*fleet(pool).await?, point))
}
