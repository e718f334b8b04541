//! Which outcome of a job counts. Every dispatch of a job is an attempt with
//! its own id (`jobs.attempt_id`, new on each claim, sent in `RunJob`), and an
//! agent names the attempt in every outcome. Only the current attempt's
//! outcome can finish a job, and only an unfinished one: a result of an
//! attempt that was timed out, cancelled or dispatched again is acknowledged
//! and ignored, so it can neither fail the retry nor flip a failed or
//! cancelled job to done.
//!
//! "Unfinished" is running, or queued again after its agent was lost and not
//! dispatched anew: the attempt id is still the one the agent ran, so its
//! spooled outcome, re-sent after a reconnect, is that attempt's and counts.
//! An attempt past its time limit is withdrawn instead (the sweep clears the
//! job's attempt id and tells the agent to stop): nothing it reports counts.

use std::fmt;

use uuid::Uuid;

use crate::domain::job::JobStatus;

/// Why an outcome was acknowledged without changing its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// It names an attempt other than the job's current one (or none).
    EarlierAttempt,
    /// The job already ended in this state.
    Finished(JobStatus),
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ignored::EarlierAttempt => {
                f.write_str("outcome of an earlier attempt of the job (it was dispatched again since); ignored")
            }
            Ignored::Finished(status) => write!(f, "the job is already {status}; outcome ignored"),
        }
    }
}

/// Whether an outcome naming attempt `named` may finish a job that is in
/// `status` with current attempt `current`.
pub fn judge(status: JobStatus, current: Option<Uuid>, named: Option<Uuid>) -> Result<(), Ignored> {
    if current.is_none() || current != named {
        return Err(Ignored::EarlierAttempt);
    }
    match status {
        JobStatus::Queued | JobStatus::Running => Ok(()),
        finished => Err(Ignored::Finished(finished)),
    }
}

/// An attempt id as an agent sent it: empty (an outcome spooled by an agent
/// from before attempts) names no attempt; anything else must be a UUID.
pub fn parse(field: &str, s: &str) -> Result<Option<Uuid>, String> {
    if s.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(s).map(Some).map_err(|_| {
        let shown: String = s.chars().take(64).collect();
        format!("{field}: {shown:?} is not an attempt id")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_current_attempt_of_an_unfinished_job_counts() {
        let (a1, a2) = (Some(Uuid::new_v4()), Some(Uuid::new_v4()));
        let cases = [
            (JobStatus::Running, a2, a2, Ok(())),
            // Queued again after a lost agent, not yet dispatched anew: still attempt 2.
            (JobStatus::Queued, a2, a2, Ok(())),
            (JobStatus::Running, a2, a1, Err(Ignored::EarlierAttempt)),
            (JobStatus::Running, a2, None, Err(Ignored::EarlierAttempt)),
            (JobStatus::Queued, None, None, Err(Ignored::EarlierAttempt)),
            (JobStatus::Failed, a2, a1, Err(Ignored::EarlierAttempt)),
            (JobStatus::Failed, a2, a2, Err(Ignored::Finished(JobStatus::Failed))),
            (
                JobStatus::Cancelled,
                a2,
                a2,
                Err(Ignored::Finished(JobStatus::Cancelled)),
            ),
            (JobStatus::Done, a2, a2, Err(Ignored::Finished(JobStatus::Done))),
        ];
        for (status, current, named, want) in cases {
            assert_eq!(judge(status, current, named), want, "{status} {current:?} {named:?}");
        }
    }

    #[test]
    fn attempt_ids_parse_or_name_the_field() {
        let id = Uuid::new_v4();
        assert_eq!(parse("job_result.attempt_id", &id.to_string()), Ok(Some(id)));
        assert_eq!(parse("job_result.attempt_id", ""), Ok(None));
        let err = parse("job_result.attempt_id", "<script>").unwrap_err();
        assert!(err.starts_with("job_result.attempt_id: "), "{err}");
        assert!(
            Ignored::Finished(JobStatus::Cancelled)
                .to_string()
                .contains("cancelled")
        );
    }
}
