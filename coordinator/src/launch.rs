//! Turning points and a host selector into a campaign: what `StartCampaign`,
//! a firing schedule and a verification after a fact change all do, so the
//! rules (which hosts, how many jobs, the emulated time budget, the points a
//! host skips for lack of their path) live once.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use cipherfleet_core::path::Path;
use cipherfleet_core::provider::facts::Capability;
use cipherfleet_core::spec::{Execution, JobSpec, Matrix, Suite};
use sqlx::PgConnection;

use crate::domain::selector::{Candidate, Selector};
use crate::store::capabilities::{ProviderSkipped, Skipped, provider_refusal};
use crate::store::{self, campaigns::NewJob, hosts::HostWithFacts};

/// Most jobs one campaign may queue (points × selected hosts), checked
/// before any job is built.
pub const MAX_CAMPAIGN_JOBS: u64 = 1_000_000;

/// What a campaign measures on each host.
#[derive(Debug, Clone, PartialEq)]
pub enum Points {
    /// A named suite, expanded per host (its thread counts follow the cores).
    Suite(Suite),
    /// An explicit matrix, the same on every host (boxed: a matrix is many lists).
    Matrix(Box<Matrix>),
}

impl Points {
    /// The campaign's `suite` column: the suite's name, or `matrix`.
    pub fn label(&self) -> String {
        match self {
            Points::Suite(s) => s.to_string(),
            Points::Matrix(_) => "matrix".into(),
        }
    }

    fn for_host(&self, host: &HostWithFacts) -> Vec<JobSpec> {
        match self {
            Points::Suite(s) => s.expand_on(host.logical_cores.unwrap_or(1).max(1) as u32, execution(host)),
            Points::Matrix(m) => m.expand(),
        }
    }
}

/// Why no campaign was created.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("the selector matches none of the {known} known hosts")]
    NoHost { known: usize },
    #[error(
        "the selector matches {offline} host(s), none of them online; set include_offline \
         (--include-offline) to queue jobs for them until they come back"
    )]
    AllOffline { offline: usize },
    #[error(
        "{points} points on each selected host make more than {MAX_CAMPAIGN_JOBS} jobs per campaign; \
         select fewer hosts or ask for fewer points"
    )]
    TooManyJobs { points: usize },
    #[error(transparent)]
    Db(#[from] store::Error),
}

/// A job of `spec` on `host`, with the emulated time budget when the host
/// (by label or by facts) runs its workers under an emulator.
pub fn job_for(host: &HostWithFacts, spec: JobSpec) -> NewJob {
    NewJob {
        host_id: host.host.id,
        spec,
        execution: execution(host),
    }
}

/// Whether `host` (by label or by facts) runs its workers under an emulator.
fn execution(host: &HostWithFacts) -> Execution {
    if host.emulated() {
        Execution::Emulated
    } else {
        Execution::Native
    }
}

/// What a host's agent said it can run: its paths (`None`: it has not said,
/// so every path is tried) and its providers' capabilities (`None`: it
/// reported none, an agent before providers).
#[derive(Debug, Clone, Copy, Default)]
pub struct CanRun<'a> {
    pub paths: Option<&'a [Path]>,
    pub providers: Option<&'a [Capability]>,
}

/// The jobs of `specs` on `host`, and the points it skips: those of a
/// provider its agent lacks (with the reason), and the built-in crates'
/// points on a path it lacks.
pub fn jobs_for(
    host: &HostWithFacts,
    can: CanRun<'_>,
    specs: Vec<JobSpec>,
) -> (Vec<NewJob>, Vec<Skipped>, Vec<ProviderSkipped>) {
    let mut skipped: Vec<Skipped> = Vec::new();
    let mut provider_skipped: Vec<ProviderSkipped> = Vec::new();
    let mut jobs = Vec::with_capacity(specs.len());
    for spec in specs {
        let p = spec.point;
        if let Some(reason) = provider_refusal(can.providers, p.provider, p.algorithm) {
            match provider_skipped.iter_mut().find(|s| s.provider == p.provider) {
                Some(s) => s.points += 1,
                None => provider_skipped.push(ProviderSkipped {
                    host_id: host.host.id,
                    provider: p.provider,
                    points: 1,
                    reason,
                }),
            }
        } else if p.provider.is_rustcrypto() && can.paths.is_some_and(|paths| !paths.contains(&p.path)) {
            match skipped.iter_mut().find(|s| s.path == p.path) {
                Some(s) => s.points += 1,
                None => skipped.push(Skipped {
                    host_id: host.host.id,
                    path: p.path,
                    points: 1,
                }),
            }
        } else {
            jobs.push(job_for(host, spec));
        }
    }
    (jobs, skipped, provider_skipped)
}

/// Whether `selector` picks `host`. Retired hosts keep their history but are
/// never selected again.
pub fn selects(selector: &Selector, host: &HostWithFacts) -> bool {
    host.host.retired_at.is_none()
        && selector.matches(&Candidate {
            name: &host.host.name,
            labels: &host.host.labels.0,
            arch: host.arch.as_deref(),
            cpu_model_name: host.cpu_model_name.as_deref(),
        })
}

/// What a campaign queues.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub jobs: Vec<NewJob>,
    /// Points left out on hosts that lack their path ([`jobs_for`]).
    pub skipped: Vec<Skipped>,
    /// Points left out on hosts that lack their provider ([`jobs_for`]).
    pub provider_skipped: Vec<ProviderSkipped>,
    /// Hosts chosen.
    pub hosts: usize,
}

impl Plan {
    /// Points skipped over all hosts.
    pub fn points_skipped(&self) -> i64 {
        self.skipped.iter().map(|s| s.points).sum::<i64>() + self.provider_skipped.iter().map(|s| s.points).sum::<i64>()
    }
}

/// The jobs of `points` on the hosts `selector` picks. With `online`, a
/// selected host outside it is left out: a host that is gone would keep the
/// campaign waiting. `paths` holds what each host said it can run
/// ([`store::capabilities::paths_of_hosts`]) and `providers` each host's
/// providers ([`store::capabilities::providers_of_hosts`]); the points its
/// host lacks the path or provider for are skipped, not queued.
pub fn plan(
    points: &Points,
    selector: &Selector,
    hosts: &[HostWithFacts],
    online: Option<&HashSet<i64>>,
    paths: &HashMap<i64, Vec<Path>>,
    providers: &HashMap<i64, Vec<Capability>>,
) -> Result<Plan, LaunchError> {
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    let mut provider_skipped = Vec::new();
    let mut chosen = 0;
    let mut offline = 0;
    for h in hosts.iter().filter(|h| selects(selector, h)) {
        if online.is_some_and(|online| !online.contains(&h.host.id)) {
            offline += 1;
            continue;
        }
        chosen += 1;
        let specs = points.for_host(h);
        if (jobs.len() + specs.len()) as u64 > MAX_CAMPAIGN_JOBS {
            return Err(LaunchError::TooManyJobs { points: specs.len() });
        }
        let can = CanRun {
            paths: paths.get(&h.host.id).map(Vec::as_slice),
            providers: providers.get(&h.host.id).map(Vec::as_slice),
        };
        let (host_jobs, host_skipped, host_provider_skipped) = jobs_for(h, can, specs);
        jobs.extend(host_jobs);
        skipped.extend(host_skipped);
        provider_skipped.extend(host_provider_skipped);
    }
    if chosen == 0 && offline > 0 {
        return Err(LaunchError::AllOffline { offline });
    }
    if chosen == 0 {
        return Err(LaunchError::NoHost { known: hosts.len() });
    }
    Ok(Plan {
        jobs,
        skipped,
        provider_skipped,
        hosts: chosen,
    })
}

/// A campaign to start.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    pub points: &'a Points,
    pub selector: &'a Selector,
    /// Empty: "<suite> on <n> host(s)".
    pub name: &'a str,
    pub started_by: &'a str,
    /// The hosts online now: only they are selected. `None` also queues for
    /// offline hosts (`--include-offline`), which run the jobs when they return.
    pub online: Option<&'a HashSet<i64>>,
    /// How long a job may wait in the queue before it fails.
    pub queued_ttl: Duration,
}

/// The campaign that was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launched {
    pub campaign_id: i64,
    pub jobs: usize,
    pub hosts: usize,
    /// Points skipped on hosts that lack their path or provider.
    pub points_skipped: i64,
}

/// Creates the campaign and its jobs in the caller's transaction. The caller
/// dispatches after commit ([`crate::scheduler::Scheduler::dispatch_all`]).
pub async fn insert(tx: &mut PgConnection, launch: &Launch<'_>) -> Result<Launched, LaunchError> {
    let hosts = store::hosts::list_with_facts(&mut *tx).await?;
    let paths = store::capabilities::paths_of_hosts(&mut *tx).await?;
    let providers = store::capabilities::providers_of_hosts(&mut *tx).await?;
    let plan = plan(
        launch.points,
        launch.selector,
        &hosts,
        launch.online,
        &paths,
        &providers,
    )?;
    let points_skipped = plan.points_skipped();
    let Plan {
        jobs,
        skipped,
        provider_skipped,
        hosts: chosen,
    } = plan;
    let suite = launch.points.label();
    let matrix = match launch.points {
        Points::Matrix(m) => serde_json::to_value(m).expect("serialises"),
        Points::Suite(_) => serde_json::Value::Null,
    };
    let selector = serde_json::to_value(launch.selector).expect("serialises");
    let name = if launch.name.is_empty() {
        format!("{suite} on {chosen} host(s)")
    } else {
        launch.name.to_string()
    };
    let new = store::campaigns::NewCampaign {
        name: &name,
        suite: &suite,
        matrix: &matrix,
        selector: &selector,
        started_by: launch.started_by,
        queued_ttl: launch.queued_ttl,
    };
    let campaign_id = store::campaigns::insert_with_jobs(tx, &new, &jobs).await?;
    store::capabilities::record(tx, campaign_id, &skipped).await?;
    store::capabilities::record_providers(tx, campaign_id, &provider_skipped).await?;
    tracing::info!(
        campaign = campaign_id,
        jobs = jobs.len(),
        hosts = chosen,
        points_skipped,
        started_by = launch.started_by,
        "campaign started"
    );
    Ok(Launched {
        campaign_id,
        jobs: jobs.len(),
        hosts: chosen,
        points_skipped,
    })
}
