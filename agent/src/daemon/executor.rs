//! Runs one job at a time in a worker process, from a blocking thread, and
//! can kill it. The job outlives sessions: a connection that drops does not
//! stop the measurement, and its outcome is spooled before anyone is told.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;

use super::spool::Spool;
use crate::session::{Outcome, OutcomeResult};
use crate::worker::{self, WorkerError};
use cipherfleet_core::spec::JobSpec;
use cipherfleet_core::wire;

use crate::probe;

/// Why a job could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("agent busy with job {0}")]
    Busy(String),
    #[error("cannot record the job in the spool: {0}")]
    Spool(#[from] std::io::Error),
}

/// The job in progress.
struct Running {
    job_id: String,
    /// Its attempt, from `RunJob`.
    attempt_id: String,
    cancel: Arc<Cancel>,
}

/// Raised to kill the worker; `error` is what the outcome will say.
#[derive(Default)]
struct Cancel {
    flag: AtomicBool,
    error: Mutex<Option<String>>,
}

/// Starts jobs, one at a time; cheap to clone (all clones share the job).
#[derive(Clone)]
pub struct Executor {
    running: Arc<Mutex<Option<Running>>>,
    spool: Spool,
    /// Every finished job's outcome, after it is spooled.
    done: mpsc::UnboundedSender<Outcome>,
    /// Niceness of the workers.
    nice: i32,
}

impl Executor {
    pub fn new(spool: Spool, done: mpsc::UnboundedSender<Outcome>, nice: i32) -> Self {
        Executor {
            running: Arc::default(),
            spool,
            done,
            nice,
        }
    }

    /// The id of the job in progress, if any.
    pub fn running(&self) -> Option<String> {
        lock(&self.running).as_ref().map(|r| r.job_id.clone())
    }

    /// The job in progress and its attempt, if any.
    pub fn running_attempt(&self) -> Option<(String, String)> {
        lock(&self.running)
            .as_ref()
            .map(|r| (r.job_id.clone(), r.attempt_id.clone()))
    }

    /// Starts attempt `attempt_id` of `spec` on a blocking thread. `limit` is
    /// the coordinator's time limit (`None`: the worker's own generous default).
    pub fn start(
        &self,
        job_id: String,
        attempt_id: String,
        spec: JobSpec,
        limit: Option<Duration>,
    ) -> Result<(), StartError> {
        let mut running = lock(&self.running);
        if let Some(r) = running.as_ref() {
            return Err(StartError::Busy(r.job_id.clone()));
        }
        self.spool.mark_running(&job_id, &spec)?;
        let cancel = Arc::new(Cancel::default());
        *running = Some(Running {
            job_id: job_id.clone(),
            attempt_id: attempt_id.clone(),
            cancel: cancel.clone(),
        });
        drop(running);
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.execute(job_id, attempt_id, spec, limit, &cancel));
        Ok(())
    }

    /// Kills the job in progress if it is `job_id` (any job when `None`) in
    /// `attempt_id` (any attempt when `None`); its outcome will be
    /// `JobFailed { error }`. Returns whether a job was told to stop.
    pub fn cancel(&self, job_id: Option<&str>, attempt_id: Option<&str>, error: String) -> bool {
        let running = lock(&self.running);
        let Some(r) = running
            .as_ref()
            .filter(|r| job_id.is_none_or(|id| id == r.job_id) && attempt_id.is_none_or(|a| a == r.attempt_id))
        else {
            return false;
        };
        lock(&r.cancel.error).get_or_insert(error);
        r.cancel.flag.store(true, Ordering::Relaxed);
        true
    }

    fn execute(&self, job_id: String, attempt_id: String, spec: JobSpec, limit: Option<Duration>, cancel: &Cancel) {
        tracing::info!("job {job_id:?}: measuring {}", spec.label());
        // Facts as of this job (load average, governor) travel with its measurement.
        let host = probe::probe();
        let outcome = match worker::run_point_with(&spec, limit, &cancel.flag, Some(self.nice)) {
            Ok(output) => Outcome::measured(job_id.clone(), attempt_id, output.measurement(&spec, Some(host))),
            Err(WorkerError::Cancelled) => {
                let error = lock(&cancel.error).clone().unwrap_or_else(|| "cancelled".into());
                Outcome::failed(job_id.clone(), attempt_id, error)
            }
            Err(e) => Outcome::failed(
                job_id.clone(),
                attempt_id,
                wire::truncate(e.to_string(), wire::MAX_ERROR_LEN),
            ),
        };
        match &outcome.result {
            OutcomeResult::Measured(m) => {
                let mbs = m.figures.as_ref().map_or(0.0, |f| f.throughput_mb_s);
                tracing::info!("job {job_id:?}: done, {mbs:.1} MB/s");
            }
            OutcomeResult::Failed(e) => tracing::warn!("job {job_id:?}: failed: {e}"),
        }
        if let Err(e) = self.spool.write(&outcome) {
            // Still delivered if a session is open; only a restart before the ack loses it.
            tracing::error!("job {job_id:?}: cannot spool its outcome: {e}");
        }
        // Told and cleared under one lock: whoever sees the agent idle can also
        // see this outcome in the channel.
        let mut running = lock(&self.running);
        let _ = self.done.send(outcome);
        *running = None;
        if let Err(e) = self.spool.clear_running() {
            tracing::warn!("cannot clear the running-job marker: {e}");
        }
    }
}

/// A panic while holding one of these locks leaves consistent data (plain
/// assignments), so a poisoned lock is used as is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
