//! One simulated host: a task (no thread) with its own gRPC connection and
//! stream, name and host credential, speaking the agent protocol through the
//! agent's own session engine ([`cipherfleet_agent::session`]). What it plugs
//! in: a job is a timer, not a measurement, and its result comes from
//! [`crate::figures`]; outcomes wait for their acknowledgement in memory;
//! heartbeats are jittered so a fleet in one process spreads out; every event
//! is counted in [`Stats`] rather than logged.

use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cipherfleet_agent::session::{
    self, Agent, CoordinatorUrl, Ended, Event, Happening, HostCredential, Outcome, OutcomeResult, Presence,
    StartRefusal,
};
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::token::Secret;
use cipherfleet_proto::v1;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::figures;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::template::Profile;

/// A slow job (`--slow-prob`) takes this many times its delay.
pub const SLOW_FACTOR: f64 = 10.0;

/// What every simulated host shares.
pub struct Fleet {
    /// Host `index` starts with coordinator `index % len` and moves to the
    /// next after a lost session, as `run` does with its list.
    pub coordinators: Vec<CoordinatorUrl>,
    /// `--local-address`: host `index` dials from `index % len` (empty: the kernel's choice).
    pub local_addresses: Vec<IpAddr>,
    pub token: Secret,
    /// `--label`s plus `simulated=true`.
    pub labels: Vec<v1::Label>,
    pub behaviour: Behaviour,
    pub stats: Arc<Stats>,
    pub shutdown: CancellationToken,
}

/// How simulated hosts answer jobs.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// From `RunJob` to its outcome: each job takes 0.5 to 1.5 times this.
    pub job_delay: Duration,
    /// A job fails (`JobFailed`) instead of measuring.
    pub fail_prob: f64,
    /// The session drops while a job runs; the host reconnects and reports it.
    pub disconnect_prob: f64,
    /// A job takes [`SLOW_FACTOR`] times as long.
    pub slow_prob: f64,
}

impl Fleet {
    /// The source address host `index` dials from.
    fn local_address(&self, index: u64) -> Option<IpAddr> {
        let n = self.local_addresses.len() as u64;
        (n > 0).then(|| self.local_addresses[(index % n) as usize])
    }
}

/// One simulated host, kept across its sessions.
pub struct Host {
    index: u64,
    labels: Vec<v1::Label>,
    /// Its credential and proposal: in `--state-dir`, or in memory.
    credential: HostCredential,
    machine: Simulated,
}

/// What a simulated host plugs into the session engine.
struct Simulated {
    name: String,
    fleet: Arc<Fleet>,
    profile: Profile,
    /// Built once: the facts never change.
    facts: v1::HostFacts,
    job: Option<Running>,
    /// Outcomes until acknowledged (the daemon's spool, in memory), oldest first.
    outbox: Vec<Outcome>,
    /// Outcomes of jobs that ended outside [`session::Host::next`] (cancelled,
    /// or over while disconnected), still to hand over.
    ready: VecDeque<Outcome>,
    /// When this session drops on purpose (`--disconnect-prob`).
    drop_at: Option<Instant>,
    rng: Rng,
}

/// The job "running" on the host: it ends at `done_at`.
struct Running {
    job_id: String,
    attempt_id: String,
    spec: JobSpec,
    done_at: Instant,
    fails: bool,
}

impl Host {
    /// Host `index` named `name`; its credential in `state_dir/<name>/credential` when given.
    /// Blocking: the proposal for its credential is stored before its first `Hello`.
    pub fn new(
        index: u64,
        name: String,
        state_dir: Option<&std::path::Path>,
        fleet: Arc<Fleet>,
    ) -> anyhow::Result<Host> {
        let profile = Profile::of(index, &name);
        let mut credential = match state_dir {
            Some(dir) => HostCredential::open(&dir.join(&name), &name)?,
            None => HostCredential::in_memory(),
        };
        credential
            .prepare()
            .with_context(|| format!("storing the credential proposal of simulated host {name}"))?;
        let mut labels = fleet.labels.clone();
        labels.push(v1::Label {
            key: "sim-template".into(),
            value: profile.template.key.into(),
        });
        Ok(Host {
            index,
            labels,
            credential,
            machine: Simulated {
                name,
                fleet,
                facts: v1::HostFacts::from(&profile.facts),
                profile,
                job: None,
                outbox: Vec::new(),
                ready: VecDeque::new(),
                drop_at: None,
                rng: Rng::from_os(),
            },
        })
    }

    /// Runs sessions until shutdown or a refusal.
    pub async fn run(mut self) {
        let (fleet, name) = (self.machine.fleet.clone(), self.machine.name.clone());
        let agent = Agent {
            name: &name,
            labels: &self.labels,
            token: &fleet.token,
            coordinators: &fleet.coordinators,
            first: self.index as usize,
            local_address: fleet.local_address(self.index),
            shutdown: &fleet.shutdown,
        };
        if let Ended::Rejected(reason) = session::run(&agent, &mut self.credential, &mut self.machine).await {
            fleet.stats.bump(|s| &s.refused);
            tracing::warn!("simulated host {name}: {reason}; it stops");
        }
    }
}

impl Simulated {
    /// The running job is over: its outcome joins the outbox.
    fn finish_job(&mut self) -> Option<Outcome> {
        let job = self.job.take()?;
        let outcome = if job.fails {
            self.fleet.stats.bump(|s| &s.failures);
            Outcome::failed(job.job_id, job.attempt_id, "simulated failure (--fail-prob)")
        } else {
            self.fleet.stats.bump(|s| &s.results);
            let measurement = figures::measure(&self.profile, &job.spec, &mut self.rng);
            Outcome::measured(job.job_id, job.attempt_id, measurement)
        };
        self.outbox.push(outcome.clone());
        Some(outcome)
    }
}

impl session::Host for Simulated {
    /// Thousands of hosts share the process: each queues less.
    const OUTBOUND_QUEUE: usize = 16;
    /// A simulated job is a timer, and the fleet's summary is due at once: nothing is worth waiting for.
    const DRAINS: bool = false;

    fn presence(&mut self) -> Presence {
        // A job that ended while disconnected is an outcome to report, not a running job.
        if self.job.as_ref().is_some_and(|j| j.done_at <= Instant::now())
            && let Some(outcome) = self.finish_job()
        {
            self.ready.push_back(outcome);
        }
        Presence {
            facts: self.facts.clone(),
            paths: vec!["accelerated".into(), "software".into()],
            max_threads: self.profile.template.cores,
            running: self.running(),
            spooled: self.outbox.iter().map(|o| o.job_id.clone()).collect(),
        }
    }

    fn running(&self) -> Option<(String, String)> {
        self.job.as_ref().map(|j| (j.job_id.clone(), j.attempt_id.clone()))
    }

    fn start(
        &mut self,
        job_id: &str,
        attempt_id: &str,
        spec: JobSpec,
        _time_limit: Option<Duration>,
    ) -> Result<(), StartRefusal> {
        let b = self.fleet.behaviour;
        let mut delay = b.job_delay.mul_f64(self.rng.range(0.5, 1.5));
        if self.rng.chance(b.slow_prob) {
            delay = delay.mul_f64(SLOW_FACTOR);
        }
        let now = Instant::now();
        if self.rng.chance(b.disconnect_prob) {
            self.drop_at = Some(now + delay.mul_f64(self.rng.range(0.2, 0.8)));
        }
        self.fleet.stats.bump(|s| &s.jobs);
        self.job = Some(Running {
            job_id: job_id.to_string(),
            attempt_id: attempt_id.to_string(),
            spec,
            done_at: now + delay,
            fails: self.rng.chance(b.fail_prob),
        });
        Ok(())
    }

    fn cancel(&mut self, job_id: Option<&str>, attempt_id: Option<&str>, error: String) -> bool {
        let named =
            |r: &Running| job_id.is_none_or(|id| id == r.job_id) && attempt_id.is_none_or(|a| a == r.attempt_id);
        let Some(job) = self.job.take_if(|r| named(r)) else {
            return false;
        };
        self.fleet.stats.bump(|s| &s.failures);
        let outcome = Outcome::failed(job.job_id, job.attempt_id, error);
        self.outbox.push(outcome.clone());
        self.ready.push_back(outcome);
        true
    }

    async fn next(&mut self) -> Happening {
        if let Some(outcome) = self.ready.pop_front() {
            return Happening::Finished(outcome);
        }
        let job_done = self.job.as_ref().map(|j| j.done_at);
        tokio::select! {
            () = sleep_until(job_done) => {}
            () = sleep_until(self.drop_at) => {
                self.drop_at = None;
                self.fleet.stats.bump(|s| &s.disconnects);
                return Happening::Disconnect("simulated disconnect (--disconnect-prob)");
            }
        }
        match self.finish_job() {
            Some(outcome) => Happening::Finished(outcome),
            // Not reached: the timer runs only while a job does.
            None => std::future::pending().await,
        }
    }

    fn ready(&mut self) -> Option<Outcome> {
        self.ready.pop_front()
    }

    fn spooled(&self) -> io::Result<Vec<Outcome>> {
        Ok(self.outbox.clone())
    }

    fn spooled_attempt(&self, job_id: &str, attempt_id: &str) -> Option<Outcome> {
        self.outbox
            .iter()
            .find(|o| o.job_id == job_id && o.attempt_id == attempt_id)
            .cloned()
    }

    fn spool(&mut self, outcome: &Outcome) -> io::Result<()> {
        if let OutcomeResult::Failed(_) = outcome.result {
            self.fleet.stats.bump(|s| &s.failures);
        }
        self.outbox.push(outcome.clone());
        Ok(())
    }

    fn unspool(&mut self, job_id: &str, attempt_id: &str) -> io::Result<bool> {
        let at = self
            .outbox
            .iter()
            .position(|o| o.job_id == job_id && (attempt_id.is_empty() || o.attempt_id == attempt_id));
        Ok(at.map(|at| self.outbox.remove(at)).is_some())
    }

    fn heartbeat_gap(&mut self, interval: Duration, first: bool) -> Duration {
        if first {
            // Anywhere in the first interval, so a fleet that connected at once spreads out.
            interval.mul_f64(self.rng.unit())
        } else {
            interval.mul_f64(self.rng.range(0.8, 1.0))
        }
    }

    fn note(&mut self, event: Event<'_>) {
        let stats = &self.fleet.stats;
        match event {
            Event::Welcomed { .. } => {
                stats.connected();
                // A disconnect drawn for an earlier session is forgotten with it.
                self.drop_at = None;
            }
            Event::Closed => stats.disconnected(),
            Event::Broken(reason) => stats.error(reason),
            Event::Heartbeat { late } => stats.heartbeat_sent(late),
            Event::Repaced(_) => stats.bump(|s| &s.repaced),
            Event::Busy { .. } => stats.bump(|s| &s.busy),
            Event::Acknowledged {
                ack,
                waited,
                unspooled: true,
            } => stats.acked(waited.unwrap_or_default(), !ack.rejected.is_empty()),
            Event::Reconnecting { reason, .. } => tracing::debug!("simulated host {}: {reason}", self.name),
            Event::Acknowledged { .. }
            | Event::Enrolled { .. }
            | Event::Resending(_)
            | Event::Redelivering { .. }
            | Event::Cancelled { .. }
            | Event::Draining { .. } => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
