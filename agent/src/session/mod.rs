//! The agent side of the protocol, written once: the daemon (`run`) and every
//! simulated host of `cipherfleet-sim` speak it through [`run`], and plug in
//! what differs between them as a [`Host`]: how a job runs (a worker process,
//! or a timer and synthetic figures), where outcomes wait for their
//! acknowledgement (the spool on disk, or memory), what `Hello` presents, and
//! what becomes of each [`Event`] (a log line for an operator, or a counter).
//!
//! Protocol, agent side:
//! - `Hello` presents the host credential when there is one, the enrollment
//!   token (which admits a host that has none) and the agent's own proposal
//!   for its credential, stored before the first `Hello` ([`credential`]); a
//!   credential in `Welcome` is stored before anything else happens;
//! - after `Welcome`, every spooled outcome is re-sent, oldest first;
//! - every job message names the job's attempt (`RunJob.attempt_id`);
//! - `RunJob`: a bad spec is answered `JobFailed` (spooled); when idle the job
//!   starts and `JobAccepted` goes out; the same attempt again is re-accepted;
//!   another job, or another attempt of the running one, while busy gets
//!   `JobFailed "agent busy with job X"` (not spooled, `busy` set; so is the
//!   refusal while shutting down); an attempt whose outcome is still spooled
//!   gets that outcome again, while a new attempt of a spooled job runs afresh;
//! - `CancelJob` stops the job: `JobFailed "cancelled: <reason>"` (spooled);
//! - `ResultAck` deletes the spooled outcome of that attempt;
//! - `Ping{seq}` is answered `Heartbeat{seq}`; `Heartbeat`s with a counter go
//!   out every `heartbeat_interval_ms`, and a later `Welcome` re-paces them;
//! - a lost session is retried with backoff ([`backoff`]), on the next
//!   coordinator of the list unless the one that answered holds the host
//!   elsewhere or is busy; a refusal ends the agent.
//!
//! - [`connect`]: dialling, `Hello` → `Welcome`, how a refusal is judged.
//! - [`serve`]: a welcomed session's messages, jobs, acks and heartbeats.
//! - [`heartbeat`]: when heartbeats are due, and re-pacing.
//! - [`outcome`]: how a job ended, as kept and as sent.
//! - [`credential`]: the host credential and the proposal it enrolls with.
//! - [`backoff`]: reconnect delays.

mod backoff;
mod connect;
mod credential;
mod heartbeat;
mod outcome;
mod serve;

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::token::Secret;
use cipherfleet_proto::v1;
use tokio_util::sync::CancellationToken;

pub use connect::CoordinatorUrl;
pub use credential::HostCredential;
pub use outcome::{Outcome, OutcomeResult};

use backoff::Backoff;
use connect::SessionEnd;

/// What runs the jobs of an agent and keeps their outcomes: the part of an
/// agent the protocol does not fix. Methods are called from the session's
/// task, one at a time.
pub trait Host: Send {
    /// Messages queued for the coordinator before sending waits.
    const OUTBOUND_QUEUE: usize = 64;
    /// Whether shutdown while connected lets the running job finish and waits
    /// a moment for the coordinator to acknowledge what is left ([`ACK_WAIT`]),
    /// rather than ending the session at once.
    const DRAINS: bool = true;

    /// What the next `Hello` presents: facts, capabilities, and the job
    /// running and the outcomes spooled now.
    fn presence(&mut self) -> Presence;

    /// The job running and its attempt, if any.
    fn running(&self) -> Option<(String, String)>;

    /// Starts attempt `attempt_id` of job `job_id`, a valid spec, while no job
    /// runs; `time_limit` is the coordinator's, if it gave one. The outcome
    /// comes out of [`Host::next`], already spooled.
    fn start(
        &mut self,
        job_id: &str,
        attempt_id: &str,
        spec: JobSpec,
        time_limit: Option<Duration>,
    ) -> Result<(), StartRefusal>;

    /// Stops the running job if it is `job_id` (any job when `None`) in
    /// `attempt_id` (any attempt when `None`); its outcome, failed with
    /// `error`, comes out of [`Host::next`]. Returns whether a job was told to stop.
    fn cancel(&mut self, job_id: Option<&str>, attempt_id: Option<&str>, error: String) -> bool;

    /// Waits for the next thing the host reports: a finished job's outcome
    /// (each once, spooled before it is handed over), or that it drops the
    /// session. Cancel-safe: a session drops this future whenever another
    /// message comes first.
    fn next(&mut self) -> impl Future<Output = Happening> + Send;

    /// An outcome [`Host::next`] would hand over at once, without waiting; the
    /// outcome of a job no longer [`Host::running`] always is.
    fn ready(&mut self) -> Option<Outcome>;

    /// Every spooled outcome, oldest first.
    fn spooled(&self) -> io::Result<Vec<Outcome>>;

    /// The spooled outcome of this attempt of `job_id`, if it has one.
    fn spooled_attempt(&self, job_id: &str, attempt_id: &str) -> Option<Outcome>;

    /// Spools an outcome the session made (a job that could not start).
    fn spool(&mut self, outcome: &Outcome) -> io::Result<()>;

    /// Drops the spooled outcome of attempt `attempt_id` of `job_id` (the
    /// coordinator acknowledged it); returns whether there was one.
    fn unspool(&mut self, job_id: &str, attempt_id: &str) -> io::Result<bool>;

    /// The wait from one heartbeat to the next when the coordinator asks for
    /// one every `interval`; `first`: from `Welcome` to the first. A fleet in
    /// one process spreads its heartbeats out here.
    fn heartbeat_gap(&mut self, interval: Duration, first: bool) -> Duration {
        let _ = first;
        interval
    }

    /// Something happened that the host may log or count.
    fn note(&mut self, event: Event<'_>);
}

/// What a `Hello` says of the host besides who the agent is.
#[derive(Debug, Clone, Default)]
pub struct Presence {
    pub facts: v1::HostFacts,
    /// The paths it can measure (`accelerated`, `software`).
    pub paths: Vec<String>,
    /// Most threads a job may ask for.
    pub max_threads: u32,
    /// The job running and its attempt.
    pub running: Option<(String, String)>,
    /// Job ids with a spooled outcome, oldest first.
    pub spooled: Vec<String>,
}

/// Why [`Host::start`] did not start a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartRefusal {
    /// This host never runs the job (past a ceiling): its outcome, failed
    /// `refused by this agent: <why>`, is spooled and sent like any other.
    Refused(String),
    /// Not started this time, answered `JobFailed` without spooling; `busy`
    /// asks the coordinator to queue it again.
    NotStarted { error: String, busy: bool },
}

/// What [`Host::next`] reports.
#[derive(Debug)]
pub enum Happening {
    /// A job ended; its outcome is spooled.
    Finished(Outcome),
    /// The host drops the session (a simulated disconnect) and reconnects.
    Disconnect(&'static str),
}

/// What the session tells its host; the daemon logs it, the simulator counts it.
#[derive(Debug)]
pub enum Event<'a> {
    /// A `Welcome` confirmed a credential, now stored in `credential_file` (or memory).
    Enrolled { credential_file: Option<&'a Path> },
    /// A session was welcomed.
    Welcomed {
        coordinator: &'a str,
        welcome: &'a v1::Welcome,
    },
    /// Spooled outcomes are sent again at the start of a session.
    Resending(usize),
    /// A heartbeat went out, `late` after it was due.
    Heartbeat { late: Duration },
    /// A later `Welcome` changed the heartbeat interval to this.
    Repaced(Duration),
    /// `RunJob` refused: the host is busy with job `current`.
    Busy {
        job_id: &'a str,
        attempt_id: &'a str,
        current: &'a str,
    },
    /// A `RunJob` for an attempt already finished: its outcome goes again.
    Redelivering { job_id: &'a str, attempt_id: &'a str },
    /// `CancelJob`: `stopped` whether it named the running job.
    Cancelled {
        job_id: &'a str,
        reason: &'a str,
        stopped: bool,
    },
    /// `ResultAck`. `waited`: since the outcome was last sent in this session;
    /// `unspooled`: whether the spool held it.
    Acknowledged {
        ack: &'a v1::ResultAck,
        waited: Option<Duration>,
        unspooled: bool,
    },
    /// Shutdown while connected: no new jobs; the running one may finish.
    Draining { job_id: &'a str },
    /// Connecting failed or the session broke (neither side ended it on purpose).
    Broken(&'a str),
    /// A welcomed session ended, however it ended.
    Closed,
    /// The session is lost, or was never had (`welcomed` false: it could not
    /// connect, or was not admitted); the next try comes after `delay`.
    Reconnecting {
        reason: &'a str,
        welcomed: bool,
        delay: Duration,
    },
}

/// Who the agent is and where it connects: what all its sessions share.
#[derive(Debug, Clone, Copy)]
pub struct Agent<'a> {
    /// `Hello.name`.
    pub name: &'a str,
    pub labels: &'a [v1::Label],
    /// The enrollment token.
    pub token: &'a Secret,
    /// Tried in turn: the next one after a lost session, the same one while
    /// it says the host is held elsewhere or it is busy.
    pub coordinators: &'a [CoordinatorUrl],
    /// Which of `coordinators` the first session dials.
    pub first: usize,
    /// Source address of the connections (`None`: the kernel's choice).
    pub local_address: Option<IpAddr>,
    pub shutdown: &'a CancellationToken,
}

/// How [`run`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was requested; for a host that drains, the session finished first.
    Shutdown,
    /// The coordinator refused the agent; retrying would not help.
    Rejected(String),
}

/// On shutdown, how long a draining session waits for the coordinator to acknowledge what was just sent.
pub const ACK_WAIT: Duration = Duration::from_secs(3);

/// Runs sessions to the coordinators of `agent`, reconnecting with backoff,
/// until shutdown or a refusal. The running job is the host's: it outlives a
/// session, and the caller decides what becomes of it afterwards.
pub async fn run<H: Host>(agent: &Agent<'_>, credential: &mut HostCredential, host: &mut H) -> Ended {
    let mut backoff = Backoff::default();
    let mut turn = agent.first;
    while !agent.shutdown.is_cancelled() {
        let coordinator = &agent.coordinators[turn % agent.coordinators.len()];
        match serve::session(agent, credential, host, coordinator).await {
            SessionEnd::Shutdown => return Ended::Shutdown,
            SessionEnd::Rejected(reason) => return Ended::Rejected(reason),
            SessionEnd::Lost {
                reason,
                welcomed,
                held_elsewhere,
                pushback,
            } => {
                if welcomed {
                    backoff.reset();
                }
                // The next coordinator of the list, if there are several; the same one when it
                // answered that the host's session is held elsewhere or that it is busy (it is
                // up: it admits the host once that lease ends, or at the time it named).
                if !held_elsewhere {
                    turn = turn.wrapping_add(1);
                }
                let delay = backoff.after(held_elsewhere, pushback);
                host.note(Event::Reconnecting {
                    reason: &reason,
                    welcomed,
                    delay,
                });
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = agent.shutdown.cancelled() => {}
                }
            }
        }
    }
    Ended::Shutdown
}

#[cfg(test)]
mod tests;
