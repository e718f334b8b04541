//! How a job ended: the outcome an agent keeps until the coordinator
//! acknowledges it (the daemon on disk, the simulator in memory) and sends as
//! `JobResult` or `JobFailed`.

use std::time::{SystemTime, UNIX_EPOCH};

use cipherfleet_core::measurement::Measurement;
use serde::{Deserialize, Serialize};

/// How one job ended, as spooled and as sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The coordinator's id from `RunJob`.
    pub job_id: String,
    /// The attempt from `RunJob`, named when the outcome is sent. Empty in
    /// outcomes spooled before attempts existed (the coordinator ignores those).
    #[serde(default)]
    pub attempt_id: String,
    /// When the job ended, milliseconds since the Unix epoch; outcomes are re-sent oldest first.
    pub finished_unix_ms: u64,
    pub result: OutcomeResult,
}

/// A measurement (sent as `JobResult`) or an error (sent as `JobFailed`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeResult {
    Measured(Box<Measurement>),
    Failed(String),
}

impl Outcome {
    pub fn measured(job_id: String, attempt_id: String, measurement: Measurement) -> Self {
        Self::new(job_id, attempt_id, OutcomeResult::Measured(Box::new(measurement)))
    }

    pub fn failed(job_id: String, attempt_id: String, error: impl Into<String>) -> Self {
        Self::new(job_id, attempt_id, OutcomeResult::Failed(error.into()))
    }

    /// Identifies this outcome: its job and when it ended.
    pub fn key(&self) -> (String, u64) {
        (self.job_id.clone(), self.finished_unix_ms)
    }

    fn new(job_id: String, attempt_id: String, result: OutcomeResult) -> Self {
        let finished_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Outcome {
            job_id,
            attempt_id,
            finished_unix_ms,
            result,
        }
    }
}
