//! Job counts kept by the transaction that changes the jobs, instead of by
//! the update trigger of `jobs` (`campaign_host_jobs`, migration 0044).
//!
//! An ingest batch finishes a host's job and claims its next one in two
//! statements, and the trigger, run once for each, changes the host's row of
//! `campaign_host_jobs` twice and joins each statement's old and new rows to
//! find what changed. The statements here know what they change (a job's
//! campaign, host and status before, from their `RETURNING`), so the
//! transaction adds it up and changes each row once, just before it commits.

use sqlx::PgConnection;

use crate::domain::job::JobStatus;
use crate::store::Result;

/// The changes to job counts of one transaction that counts its own
/// ([`Counts::take_over`]), each a signed count of one campaign, host and status.
#[derive(Debug)]
pub(crate) struct Counts {
    campaigns: Vec<i64>,
    hosts: Vec<i64>,
    statuses: Vec<&'static str>,
    ns: Vec<i64>,
}

impl Counts {
    /// From now until `tx` ends, the update trigger leaves the counts of the
    /// jobs that `tx` changes to the caller, which passes the returned
    /// `Counts` to every status change it makes ([`super::claim_locked`],
    /// [`super::finish_locked`], [`super::fail_locked`]) and applies it
    /// before it commits ([`Counts::apply`]). Only those may change a job's
    /// status in `tx`: any other change would go uncounted.
    pub(crate) async fn take_over(tx: &mut PgConnection) -> Result<Counts> {
        sqlx::query("SELECT set_config('cipherfleet.jobs_counted', 'on', true)")
            .execute(&mut *tx)
            .await?;
        Ok(Counts {
            campaigns: Vec::new(),
            hosts: Vec::new(),
            statuses: Vec::new(),
            ns: Vec::new(),
        })
    }

    /// A job of `campaign` on `host` moved from status `from` to `to`.
    pub(crate) fn moved(&mut self, campaign: i64, host: i64, from: JobStatus, to: JobStatus) {
        if from == to {
            return;
        }
        for (status, n) in [(from, -1), (to, 1)] {
            self.campaigns.push(campaign);
            self.hosts.push(host);
            self.statuses.push(status.as_str());
            self.ns.push(n);
        }
    }

    /// Adds the changes to `campaign_host_jobs`, each (campaign, host) row
    /// once, in `tx`, the transaction that made them.
    pub(crate) async fn apply(self, tx: &mut PgConnection) -> Result<()> {
        if self.ns.is_empty() {
            return Ok(());
        }
        sqlx::query("SELECT cipherfleet_campaign_host_jobs_add($1, $2, $3, $4)")
            .bind(self.campaigns)
            .bind(self.hosts)
            .bind(self.statuses)
            .bind(self.ns)
            .execute(tx)
            .await?;
        Ok(())
    }
}
