//! What the daemon plugs into the session engine ([`crate::session`]): jobs
//! measured in worker processes within the ceilings, outcomes in the spool on
//! disk, this machine's probed facts (its providers' included) in every `Hello`, and each event logged
//! for an operator.

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{info, warn};

use super::DaemonConfig;
use super::executor::{Executor, StartError};
use super::spool::Spool;
use crate::session::{Event, Happening, Host, Outcome, Presence, StartRefusal};
use crate::{probe, worker};
use cipherfleet_core::facts::HostFacts;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::text::printable;
use cipherfleet_proto::v1;

/// This machine, as the session engine sees it.
pub(super) struct Machine<'a> {
    pub config: &'a DaemonConfig,
    pub spool: Spool,
    pub executor: Executor,
    /// Every finished job's outcome, after it is spooled.
    pub done: mpsc::UnboundedReceiver<Outcome>,
    /// Why each `--watch-env` target could not be read, as last logged: a
    /// failure is logged once, not at every hello.
    pub watch_logged: HashMap<String, String>,
}

impl Machine<'_> {
    /// Waits until no job runs (its outcome is then spooled).
    pub async fn wait_idle(&mut self) {
        loop {
            // An outcome is queued before the executor reads as idle, so draining first is race-free.
            while self.done.try_recv().is_ok() {}
            if self.executor.running().is_none() {
                return;
            }
            if self.done.recv().await.is_none() {
                return;
            }
        }
    }

    /// Logs each `--watch-env` target that could not be read, once per
    /// reason; the facts carry it at every hello.
    fn log_watch_failures(&mut self, facts: &HostFacts) {
        if self.config.watch_env.is_empty() {
            return;
        }
        let openssl = facts.providers.as_ref().and_then(|p| p.openssl.as_ref());
        let failures: Vec<(String, String)> = match openssl {
            Some(build) => build
                .watched
                .iter()
                .filter_map(|w| Some((w.target.clone(), w.error.clone()?)))
                .collect(),
            // The watched services travel with the host's OpenSSL build.
            None => self
                .config
                .watch_env
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        "not reported: the agent found no `openssl` to report it with".into(),
                    )
                })
                .collect(),
        };
        for (target, why) in not_logged_yet(&mut self.watch_logged, failures) {
            warn!("--watch-env {target}: {}", printable(&why));
        }
    }
}

/// Of `failures` (target, why), those `logged` does not hold yet; `logged`
/// then holds just `failures`, so a target that recovers and fails again is
/// logged again.
fn not_logged_yet(logged: &mut HashMap<String, String>, failures: Vec<(String, String)>) -> Vec<(String, String)> {
    logged.retain(|target, _| failures.iter().any(|(t, _)| t == target));
    failures
        .into_iter()
        .filter(|(target, why)| logged.insert(target.clone(), why.clone()).as_ref() != Some(why))
        .collect()
}

impl Host for Machine<'_> {
    fn presence(&mut self) -> Presence {
        let paths = [Path::Accelerated, Path::Software]
            .into_iter()
            .filter(|p| worker::daemon_binary_for(*p).is_ok())
            .map(|p| p.as_str().to_string())
            .collect();
        let spooled = self.spool.list().unwrap_or_else(|e| {
            warn!("cannot read the spool: {e}");
            Vec::new()
        });
        // With the providers' facts: the coordinator's kernel-crypto and OpenSSL findings read them.
        // The watched services are read again at every hello: a restarted service has a new process.
        let facts = probe::probe_with_providers(None, &self.config.watch_env);
        self.log_watch_failures(&facts);
        Presence {
            facts: v1::HostFacts::from(&facts),
            paths,
            max_threads: self.config.ceilings.max_threads,
            running: self.executor.running_attempt(),
            spooled: spooled.into_iter().map(|o| o.job_id).collect(),
        }
    }

    fn running(&self) -> Option<(String, String)> {
        self.executor.running_attempt()
    }

    fn start(
        &mut self,
        job_id: &str,
        attempt_id: &str,
        spec: JobSpec,
        time_limit: Option<Duration>,
    ) -> Result<(), StartRefusal> {
        let ceilings = &self.config.ceilings;
        if let Some(why) = ceilings.refusal(&spec) {
            warn!("job {job_id:?}: refused: {why}");
            return Err(StartRefusal::Refused(why));
        }
        let limit = Some(ceilings.time_limit(&spec, time_limit));
        self.executor
            .start(job_id.to_string(), attempt_id.to_string(), spec, limit)
            .map_err(|e| StartRefusal::NotStarted {
                busy: matches!(e, StartError::Busy(_)),
                error: e.to_string(),
            })
    }

    fn cancel(&mut self, job_id: Option<&str>, attempt_id: Option<&str>, error: String) -> bool {
        self.executor.cancel(job_id, attempt_id, error)
    }

    async fn next(&mut self) -> Happening {
        match self.done.recv().await {
            Some(outcome) => Happening::Finished(outcome),
            // The executor lives as long as the daemon: never closed while a session runs.
            None => std::future::pending().await,
        }
    }

    fn ready(&mut self) -> Option<Outcome> {
        self.done.try_recv().ok()
    }

    fn spooled(&self) -> io::Result<Vec<Outcome>> {
        self.spool.list()
    }

    fn spooled_attempt(&self, job_id: &str, attempt_id: &str) -> Option<Outcome> {
        self.spool.read(job_id).filter(|o| o.attempt_id == attempt_id)
    }

    fn spool(&mut self, outcome: &Outcome) -> io::Result<()> {
        self.spool.write(outcome)
    }

    fn unspool(&mut self, job_id: &str, attempt_id: &str) -> io::Result<bool> {
        self.spool.remove(job_id, attempt_id)
    }

    fn note(&mut self, event: Event<'_>) {
        match event {
            Event::Enrolled { credential_file } => info!(
                "enrolled as host {:?}; its credential is in {}",
                self.config.name,
                credential_file.unwrap_or(std::path::Path::new("")).display()
            ),
            Event::Welcomed { coordinator, welcome } => info!(
                "connected to {coordinator} as agent {:?} (heartbeat every {} ms)",
                welcome.agent_id, welcome.heartbeat_interval_ms
            ),
            Event::Resending(n) => info!("re-sending {n} spooled outcome(s)"),
            Event::Repaced(every) => info!(
                "the coordinator asks for a heartbeat every {} ms from now on",
                every.as_millis()
            ),
            Event::Busy {
                job_id,
                attempt_id,
                current,
            } => warn!("RunJob {job_id:?} (attempt {attempt_id:?}) while busy with {current:?}; refused"),
            Event::Redelivering { job_id, attempt_id } => {
                info!("job {job_id:?} (attempt {attempt_id:?}) already finished; re-sending its outcome")
            }
            Event::Cancelled {
                job_id,
                reason,
                stopped: true,
            } => info!("job {job_id:?}: cancelled by the coordinator ({reason:?})"),
            Event::Cancelled { job_id, .. } => info!("CancelJob for job {job_id:?}, which is not running; ignored"),
            Event::Acknowledged { ack, .. } => {
                if !ack.rejected.is_empty() {
                    // Refused for good: re-sending would not help, so it is dropped all the same.
                    warn!(
                        "job {:?}: the coordinator refused its outcome: {:?}",
                        ack.job_id, ack.rejected
                    );
                }
            }
            Event::Draining { job_id } => info!(
                "shutting down: no new jobs; waiting up to {:?} for job {job_id:?}",
                self.config.grace
            ),
            Event::Reconnecting {
                reason,
                welcomed,
                delay,
            } => {
                let running = self
                    .executor
                    .running()
                    .map(|job| format!(" (job {job:?} keeps running)"))
                    .unwrap_or_default();
                let ms = delay.as_millis();
                if welcomed {
                    warn!("session lost: {reason}; reconnecting in {ms} ms{running}");
                } else {
                    // No session yet: "cannot connect: …", "the coordinator is busy: …".
                    warn!("{reason}; retrying in {ms} ms{running}");
                }
            }
            // What broke is in the reconnect line; heartbeats are routine.
            Event::Heartbeat { .. } | Event::Broken(_) | Event::Closed => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_failure_is_logged_once_until_it_changes_or_recovers() {
        let mut logged = HashMap::new();
        let f = |target: &str, why: &str| (target.to_string(), why.to_string());
        let gone = f("pid 7", "no process 7");
        assert_eq!(not_logged_yet(&mut logged, vec![gone.clone()]).len(), 1);
        assert!(
            not_logged_yet(&mut logged, vec![gone.clone()]).is_empty(),
            "the next hello says nothing"
        );
        let denied = f("pid 7", "permission denied");
        assert_eq!(not_logged_yet(&mut logged, vec![denied.clone()]), vec![denied.clone()]);
        assert!(not_logged_yet(&mut logged, Vec::new()).is_empty(), "read again");
        assert_eq!(not_logged_yet(&mut logged, vec![denied.clone()]), vec![denied]);
    }
}
