//! `hosts`: machines running an agent, keyed by the name the agent reports.

use chrono::{DateTime, Utc};
use cipherfleet_core::path::Flavour;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgExecutor, PgPool};

use super::Result;
use super::snapshots;
use crate::analysis::acceleration::{Acceleration, acceleration};
use crate::analysis::fallback::Primitive;
use crate::analysis::marks::{self, EmulationFacts};
use crate::analysis::unexplained;
use crate::domain::facts::NormalisedFacts;
use crate::domain::labels::Labels;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Host {
    pub id: i64,
    pub name: String,
    pub labels: Json<Labels>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// The latest facts; `None` only for a host whose snapshots were deleted.
    pub current_snapshot_id: Option<i64>,
    /// When an operator retired it ([`super::identity::retire`]); retired hosts keep their history.
    pub retired_at: Option<DateTime<Utc>>,
}

/// What [`upsert_host_with_facts`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostUpsert {
    pub host_id: i64,
    /// The snapshot matching the facts just received (new or the existing current one).
    pub snapshot_id: i64,
    /// A new snapshot was stored: the facts differ from the host's current
    /// ones, or the host had none (see `new_host`).
    pub facts_changed: bool,
    /// The host was seen for the first time.
    pub new_host: bool,
}

/// Records that host `name` said hello with `facts` (the agent's `probe` JSON):
/// creates the host or refreshes `last_seen`, replaces its labels when
/// `labels` is given, and stores a new facts snapshot only if the normalised
/// facts differ from the current snapshot. One transaction; concurrent hellos
/// of the same host serialise on its row. A known host's row is written once,
/// labels and current snapshot together, so the summary trigger on them
/// (migrations/0023) runs at most once, and no `INSERT` (whose statement
/// trigger runs for no rows too) is tried.
pub async fn upsert_host_with_facts(
    pool: &PgPool,
    name: &str,
    labels: Option<&Labels>,
    facts: &Value,
) -> Result<HostUpsert> {
    let facts = NormalisedFacts::new(facts);
    let mut tx = pool.begin().await?;
    // Twice at most: a new name inserted meanwhile by another hello is found the second time.
    let (mut tried, mut new_host) = (false, false);
    let (host_id, current, current_hash) = loop {
        let found: Option<(i64, Option<i64>, Option<Vec<u8>>)> = sqlx::query_as(
            "SELECT h.id, h.current_snapshot_id, s.facts_hash \
             FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
             WHERE h.name = $1 FOR NO KEY UPDATE OF h",
        )
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(found) = found {
            break found;
        }
        if tried {
            return Err(sqlx::Error::RowNotFound.into());
        }
        tried = true;
        let inserted: Option<i64> = sqlx::query_scalar(
            "INSERT INTO hosts (name, labels) VALUES ($1, COALESCE($2, '{}'::jsonb)) \
             ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(name)
        .bind(labels.map(Json))
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(host_id) = inserted {
            new_host = true;
            break (host_id, None, None);
        }
    };
    let unchanged = current.filter(|_| current_hash.as_deref() == Some(&facts.hash[..]));
    let snapshot_id = match unchanged {
        Some(snapshot_id) => snapshot_id,
        None => snapshots::insert(&mut tx, host_id, &facts).await?,
    };
    sqlx::query(
        "UPDATE hosts SET last_seen = now(), labels = COALESCE($2, labels), current_snapshot_id = $3 \
         WHERE id = $1",
    )
    .bind(host_id)
    .bind(labels.map(Json))
    .bind(snapshot_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(HostUpsert {
        host_id,
        snapshot_id,
        facts_changed: unchanged.is_none(),
        new_host,
    })
}

/// The columns of [`Host`], as a literal for `concat!`.
macro_rules! host_columns {
    () => {
        "id, name, labels, first_seen, last_seen, current_snapshot_id, retired_at"
    };
}

pub async fn get(db: impl PgExecutor<'_>, host_id: i64) -> Result<Option<Host>> {
    Ok(
        sqlx::query_as(concat!("SELECT ", host_columns!(), " FROM hosts WHERE id = $1"))
            .bind(host_id)
            .fetch_optional(db)
            .await?,
    )
}

pub async fn find_by_name(db: impl PgExecutor<'_>, name: &str) -> Result<Option<Host>> {
    Ok(
        sqlx::query_as(concat!("SELECT ", host_columns!(), " FROM hosts WHERE name = $1"))
            .bind(name)
            .fetch_optional(db)
            .await?,
    )
}

/// Every host, by name.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<Host>> {
    Ok(
        sqlx::query_as(concat!("SELECT ", host_columns!(), " FROM hosts ORDER BY name"))
            .fetch_all(db)
            .await?,
    )
}

/// Refreshes `last_seen` of `host_ids` in one statement (the coalesced
/// marks of [`crate::seen::LastSeen`]).
pub async fn touch_all(db: impl PgExecutor<'_>, host_ids: &[i64]) -> Result<()> {
    sqlx::query("UPDATE hosts SET last_seen = now() WHERE id = ANY($1)")
        .bind(host_ids)
        .execute(db)
        .await?;
    Ok(())
}

/// A host with the typed facts of its current snapshot.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct HostWithFacts {
    #[sqlx(flatten)]
    pub host: Host,
    pub arch: Option<String>,
    pub cpu_model_name: Option<String>,
    pub kernel_release: Option<String>,
    pub logical_cores: Option<i32>,
    pub features_usable: Option<Vec<String>>,
    pub build_flavour: Option<String>,
    pub hypervisor: Option<String>,
    pub cpuinfo_foreign: Option<bool>,
    /// Primitives its latest results ran in software against its facts: the
    /// subjects of its open `unexplained-fallback` findings.
    pub ran_in_software: Vec<String>,
}

impl HostWithFacts {
    /// Emulated, by label or facts ([`marks::is_emulated`]).
    pub fn emulated(&self) -> bool {
        let facts = EmulationFacts {
            cpuinfo_foreign: self.cpuinfo_foreign,
            hypervisor: self.hypervisor.as_deref(),
        };
        marks::is_emulated(&self.host.labels.0, facts)
    }

    /// Carries the simulated label.
    pub fn simulated(&self) -> bool {
        marks::is_marked(&self.host.labels.0, marks::SIMULATED_LABEL)
    }

    /// The host's [`Acceleration`] by the one rule in [`crate::analysis::acceleration`]:
    /// its facts, and what its latest results ran.
    pub fn acceleration(&self) -> Acceleration {
        let flavour = self.build_flavour.as_deref().and_then(|f| f.parse::<Flavour>().ok());
        let ran: Vec<Primitive> = self
            .ran_in_software
            .iter()
            .filter_map(|p| Primitive::named(p))
            .collect();
        acceleration(self.arch.as_deref(), self.features_usable.as_deref(), flavour, &ran)
    }
}

/// The columns of [`HostWithFacts`] and their joins, as a literal for
/// `concat!`: `h` the host, `s` its current snapshot; `$1` is the
/// unexplained-fallback reason.
macro_rules! with_facts_from {
    () => {
        "SELECT h.id, h.name, h.labels, h.first_seen, h.last_seen, h.current_snapshot_id, h.retired_at, \
             s.arch, s.cpu_model_name, s.kernel_release, s.logical_cores, s.features_usable, s.build_flavour, \
             s.hypervisor, s.cpuinfo_foreign, \
             ARRAY(SELECT f.subject FROM findings f WHERE f.host_id = h.id AND f.status = 'open' \
                 AND f.reason = $1 ORDER BY f.subject) AS ran_in_software \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id"
    };
}

/// Every host with its current facts, by name.
pub async fn list_with_facts(db: impl PgExecutor<'_>) -> Result<Vec<HostWithFacts>> {
    Ok(sqlx::query_as(concat!(with_facts_from!(), " ORDER BY h.name"))
        .bind(unexplained::REASON)
        .fetch_all(db)
        .await?)
}

/// The hosts `host_ids` (those that exist) with their current facts, by id.
pub async fn with_facts_of(db: impl PgExecutor<'_>, host_ids: &[i64]) -> Result<Vec<HostWithFacts>> {
    Ok(
        sqlx::query_as(concat!(with_facts_from!(), " WHERE h.id = ANY($2) ORDER BY h.id"))
            .bind(unexplained::REASON)
            .bind(host_ids)
            .fetch_all(db)
            .await?,
    )
}
