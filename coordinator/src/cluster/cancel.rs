//! Cancels across coordinators: a campaign cancelled through any coordinator
//! is stopped on every agent. Cancelling a campaign notifies the
//! `cipherfleet_campaign_cancelled` channel (a trigger, `migrations/0021`);
//! each coordinator hears it ([`super::wake`]) and tells its own agents to stop
//! their running jobs of the campaign, and looks again at every poll for any
//! still running (a notification missed, an agent that reconnected here with
//! such a job). An agent reports the stopped job as failed, which ends it.

use cipherfleet_proto::v1::{self, coordinator_message::Body};
use sqlx::PgPool;

use crate::scheduler::Scheduler;
use crate::store;

/// The channel the campaigns trigger notifies, with the campaign's id.
pub const CHANNEL: &str = "cipherfleet_campaign_cancelled";

/// Tells this coordinator's agents to stop their running jobs of cancelled
/// campaigns (of `campaign` only, when given). Returns how many were told.
pub async fn stop_running(pool: &PgPool, scheduler: &Scheduler, campaign: Option<i64>) -> Result<usize, store::Error> {
    let here = scheduler.online_hosts();
    let jobs = store::campaigns::running_of_cancelled(pool, &here, campaign).await?;
    let mut told = 0;
    for job in jobs {
        let cancel = v1::CancelJob {
            job_id: job.job_id.to_string(),
            reason: job.reason,
            attempt_id: job.attempt_id.map(|a| a.to_string()).unwrap_or_default(),
        };
        // A host whose session just ended is told by its next coordinator's poll.
        if scheduler.send(job.host_id, Body::CancelJob(cancel)) {
            told += 1;
        }
    }
    Ok(told)
}
