//! Who a host is: its credential (stored as a SHA-256, see
//! [`crate::domain::credential`]) and whether it is retired. The enrollment token
//! admits only a host without a credential — a new name, a host enrolled
//! before credentials existed, or one whose credential an operator reset —
//! and that host takes the `Hello`'s new credential (the agent's proposal, or
//! one drawn for it) in the same transaction. Anyone else must present the
//! credential of the name they claim. Enrolling is idempotent: a `Hello` whose
//! new credential is the host's already (the same proposal again, after the
//! `Welcome` of the first was lost) is enrolled again rather than refused.
//! Nothing about a host is changed by a refused `Hello`.

use sqlx::types::Json;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{Result, campaigns};
use crate::domain::credential::{self, NewCredential};
use crate::domain::labels::Labels;

/// A `Hello` that was let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A known host with the credential it presented.
    Known { host_id: i64 },
    /// The host's credential is the new one given to [`admit`], which the
    /// agent is to store: `Welcome` carries it.
    Enrolled { host_id: i64, how: Enrollment },
}

/// How a host came to hold the new credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enrollment {
    /// A new name.
    New,
    /// An existing host that had no credential (enrolled before credentials
    /// existed, or reset by an operator).
    Claimed,
    /// It held this credential already: an earlier `Hello` with the same
    /// proposal enrolled it, and the agent never got that `Welcome`.
    Repeated,
}

impl Admission {
    pub fn host_id(self) -> i64 {
        match self {
            Admission::Known { host_id } | Admission::Enrolled { host_id, .. } => host_id,
        }
    }
}

/// Why a `Hello` was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The name belongs to an enrolled host and the credential presented is not its own.
    WrongCredential,
    /// Enrolling needs the enrollment token, and it was wrong.
    BadToken,
    /// An operator retired the host.
    Retired,
}

/// An enrolled host as a `Hello` finds it, read before anything is written:
/// enough to admit a known host that presents its credential, and to tell
/// whether its hello changes anything stored (a reconnect, mostly, changes
/// nothing). Any other `Hello` goes through [`admit`].
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Enrolled {
    pub host_id: i64,
    credential_hash: Option<Vec<u8>>,
    retired: bool,
    pub labels: Json<Labels>,
    /// The paths it said it has ([`super::capabilities`]), `None` before it said.
    pub paths: Option<Vec<String>>,
    /// The hash of its current facts ([`crate::domain::facts::NormalisedFacts`]).
    pub facts_hash: Option<Vec<u8>>,
    /// How long the live lease of another coordinator than the one looking
    /// still lives, in milliseconds: that one serves the host meanwhile.
    pub held_elsewhere_ms: Option<i64>,
}

impl Enrolled {
    /// Whether `presented` admits the host as itself ([`admit`]'s
    /// `Admission::Known`): it is not retired and that is its credential.
    pub fn admits(&self, presented: &str) -> bool {
        !self.retired
            && self
                .credential_hash
                .as_deref()
                .is_some_and(|hash| credential::matches(hash, presented))
    }
}

/// Host `name` as a `Hello` finds it, with the live lease of any coordinator
/// but `coordinator`; `None` if there is no such host. One read, no lock:
/// a credential reset or retirement racing it ends the session it admits, as
/// it would one admitted a moment earlier.
pub async fn lookup(db: impl PgExecutor<'_>, name: &str, coordinator: Uuid) -> Result<Option<Enrolled>> {
    Ok(sqlx::query_as(
        "SELECT h.id AS host_id, h.credential_hash, h.retired_at IS NOT NULL AS retired, h.labels, h.paths, \
             s.facts_hash, \
             (SELECT ceil(extract(epoch FROM l.expires_at - now()) * 1000)::bigint FROM host_leases l \
              WHERE l.host_id = h.id AND l.expires_at > now() AND l.coordinator <> $2) AS held_elsewhere_ms \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         WHERE h.name = $1",
    )
    .bind(name)
    .bind(coordinator)
    .fetch_optional(db)
    .await?)
}

/// Admits the `Hello` of host `name` that presented `presented` (empty: no
/// credential) and an enrollment token that was right (`token_ok`) or not.
/// When it enrolls the host, `new` becomes the host's credential; a host whose
/// credential `new` is already is admitted as [`Enrollment::Repeated`].
pub async fn admit(
    pool: &PgPool,
    name: &str,
    presented: &str,
    token_ok: bool,
    new: &NewCredential,
) -> Result<Result<Admission, Refusal>> {
    let mut tx = pool.begin().await?;
    // Twice at most: when the name is enrolled between the lookup and the
    // insert (the same agent's earlier Hello, say), the second lookup finds it.
    let mut looked_up = 0;
    let admission = loop {
        looked_up += 1;
        // Locked: two enrollments of one name take turns, and the second finds a credential.
        let row: Option<(i64, Option<Vec<u8>>, bool)> = sqlx::query_as(
            "SELECT id, credential_hash, retired_at IS NOT NULL FROM hosts WHERE name = $1 FOR NO KEY UPDATE",
        )
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
        break match row {
            Some((_, _, true)) => Err(Refusal::Retired),
            Some((host_id, Some(hash), false)) => {
                if credential::matches(&hash, presented) {
                    Ok(Admission::Known { host_id })
                } else if credential::matches(&hash, new.secret()) {
                    Ok(Admission::Enrolled {
                        host_id,
                        how: Enrollment::Repeated,
                    })
                } else {
                    Err(Refusal::WrongCredential)
                }
            }
            _ if !token_ok => Err(Refusal::BadToken),
            Some((host_id, None, false)) => {
                sqlx::query("UPDATE hosts SET credential_hash = $2, credential_issued_at = now() WHERE id = $1")
                    .bind(host_id)
                    .bind(&new.hash()[..])
                    .execute(&mut *tx)
                    .await?;
                Ok(Admission::Enrolled {
                    host_id,
                    how: Enrollment::Claimed,
                })
            }
            None => {
                let inserted: Option<i64> = sqlx::query_scalar(
                    "INSERT INTO hosts (name, credential_hash, credential_issued_at) VALUES ($1, $2, now()) \
                     ON CONFLICT (name) DO NOTHING RETURNING id",
                )
                .bind(name)
                .bind(&new.hash()[..])
                .fetch_optional(&mut *tx)
                .await?;
                match inserted {
                    Some(host_id) => Ok(Admission::Enrolled {
                        host_id,
                        how: Enrollment::New,
                    }),
                    None if looked_up < 2 => continue,
                    None => Err(Refusal::WrongCredential),
                }
            }
        };
    };
    tx.commit().await?;
    Ok(admission)
}

/// Forgets host `name`'s credential: the next `Hello` with the enrollment
/// token enrolls it anew. Returns the host's id, `None` if there is no such host.
pub async fn reset_credential(pool: &PgPool, name: &str) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        "UPDATE hosts SET credential_hash = NULL, credential_issued_at = NULL WHERE name = $1 RETURNING id",
    )
    .bind(name)
    .fetch_optional(pool)
    .await?)
}

/// What [`retire`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retired {
    pub host_id: i64,
    /// Its queued and running jobs, failed with the host (none when it was retired already).
    pub failed_jobs: Vec<Uuid>,
}

/// Retires host `name`: no campaign selects it again and its `Hello` is
/// refused; its credential goes, and its unfinished jobs fail saying why, so
/// no campaign waits for it. Its facts, sessions and results stay. Retiring
/// twice keeps the first time. `None` if there is no such host.
pub async fn retire(pool: &PgPool, name: &str) -> Result<Option<Retired>> {
    let mut tx = pool.begin().await?;
    let host_id: Option<i64> = sqlx::query_scalar(
        "UPDATE hosts SET retired_at = COALESCE(retired_at, now()), credential_hash = NULL, \
             credential_issued_at = NULL \
         WHERE name = $1 RETURNING id",
    )
    .bind(name)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(host_id) = host_id else {
        return Ok(None);
    };
    // Locked in id order first, as every statement over several jobs' rows.
    // Its queue and its running job are read apart, each through its partial
    // index by host: as one `status IN (…)`, the planner may read every active
    // job of the fleet (`jobs_active_per_campaign`) for this host's few.
    let failed: Vec<(Uuid, i64)> = sqlx::query_as(
        "UPDATE jobs SET status = 'failed', finished_at = now(), error = $2 \
         FROM (SELECT id FROM jobs WHERE id IN ( \
                   SELECT id FROM jobs WHERE host_id = $1 AND status = 'queued' \
                   UNION ALL SELECT id FROM jobs WHERE host_id = $1 AND status = 'running') \
               ORDER BY id FOR NO KEY UPDATE) unfinished \
         WHERE jobs.id = unfinished.id AND jobs.status IN ('queued', 'running') \
         RETURNING jobs.id, jobs.campaign_id",
    )
    .bind(host_id)
    .bind(format!("host {name} was retired by an operator"))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut campaign_ids: Vec<i64> = failed.iter().map(|(_, c)| *c).collect();
    campaign_ids.sort_unstable();
    campaign_ids.dedup();
    campaigns::close_if_complete(pool, &campaign_ids).await?;
    Ok(Some(Retired {
        host_id,
        failed_jobs: failed.into_iter().map(|(id, _)| id).collect(),
    }))
}
