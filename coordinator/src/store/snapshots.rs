//! `host_fact_snapshots`: the history of what each host's agent probed.
//!
//! Facts arrive as the agent's `probe` JSON. Before comparing, they are
//! normalised ([`NormalisedFacts`]); the SHA-256 of that form decides whether
//! the facts changed since the host's current snapshot.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use cipherfleet_core::facts::HostFacts;
use serde_json::Value;
use serde_json::value::RawValue;
use sqlx::{PgConnection, PgExecutor};

use super::Result;
use super::raw::{RawObject, same};
use crate::domain::facts::{FactColumns, NormalisedFacts};

/// One stored snapshot.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Snapshot {
    pub id: i64,
    pub host_id: i64,
    pub taken_at: DateTime<Utc>,
    pub facts: Value,
    /// The typed copies of the facts.
    #[sqlx(flatten)]
    pub columns: FactColumns,
}

/// A host's current snapshot: its id and its (normalised) facts.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentFacts {
    pub snapshot_id: i64,
    pub facts: serde_json::Map<String, Value>,
    /// Facts as text the way an agent writes them in a measurement's `host`
    /// (its [`HostFacts`] serialised), each known equal to its fact, so that
    /// [`CurrentFacts::holds`] need not parse a member written so.
    agent_texts: HashMap<String, String>,
}

impl CurrentFacts {
    pub fn new(snapshot_id: i64, facts: serde_json::Map<String, Value>) -> Self {
        // Typed through a `Value` that owns the facts, and unwrapped again: no copy of them.
        let facts = Value::Object(facts);
        let text = serde_json::from_value::<HostFacts>(facts.clone()).and_then(|typed| serde_json::to_string(&typed));
        let Value::Object(facts) = facts else {
            unreachable!("an object")
        };
        let agent_texts = match text.as_deref().map(serde_json::from_str::<RawObject>) {
            Ok(Ok(members)) => members
                .into_iter()
                .filter(|(k, raw)| facts.get(*k).is_some_and(|fact| same(raw, fact)))
                .map(|(k, raw)| (k.to_owned(), raw.get().to_owned()))
                .collect(),
            // Facts of another layout: compared parsed.
            _ => HashMap::new(),
        };
        CurrentFacts {
            snapshot_id,
            facts,
            agent_texts,
        }
    }

    /// Whether the fact `key` is the JSON value written `raw` (a member of a
    /// measurement's `host`): by its text when it is the agent's, else parsed
    /// ([`crate::store::results::Checked::stored_once`]).
    pub fn holds(&self, key: &str, raw: &RawValue) -> bool {
        match self.agent_texts.get(key) {
            Some(text) if text == raw.get() => true,
            _ => self.facts.get(key).is_some_and(|fact| same(raw, fact)),
        }
    }

    /// The facts whose agent's text is known.
    #[cfg(test)]
    pub fn agent_texts(&self) -> Vec<&str> {
        self.agent_texts.keys().map(String::as_str).collect()
    }
}

/// `host_id`'s current snapshot, if it has one whose facts are an object.
pub async fn current(db: impl PgExecutor<'_>, host_id: i64) -> Result<Option<CurrentFacts>> {
    let row: Option<(i64, Value)> = sqlx::query_as(
        "SELECT s.id, s.facts FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id WHERE h.id = $1",
    )
    .bind(host_id)
    .fetch_optional(db)
    .await?;
    Ok(row.and_then(|(snapshot_id, facts)| match facts {
        Value::Object(facts) => Some(CurrentFacts::new(snapshot_id, facts)),
        _ => None,
    }))
}

/// Stores a new snapshot of `host_id`; returns its id. Callers decide whether
/// the facts changed (see [`super::hosts::upsert_host_with_facts`]).
pub async fn insert(conn: &mut PgConnection, host_id: i64, facts: &NormalisedFacts) -> Result<i64> {
    let c = FactColumns::from_facts(&facts.facts);
    let id = sqlx::query_scalar(
        "INSERT INTO host_fact_snapshots (host_id, facts_hash, facts, arch, cpu_vendor, \
         cpu_model_name, cpu_family, cpu_model, cpu_stepping, logical_cores, memory_total_bytes, \
         os_name, kernel_release, hypervisor_present, hypervisor, features_advertised, \
         features_usable, build_flavour, agent_version, cpuinfo_foreign, build_codegen, \
         build_target_features, kernel_drivers, openssl_build) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
         $20, $21, $22, $23, $24) \
         RETURNING id",
    )
    .bind(host_id)
    .bind(&facts.hash[..])
    .bind(&facts.facts)
    .bind(c.arch)
    .bind(c.cpu_vendor)
    .bind(c.cpu_model_name)
    .bind(c.cpu_family)
    .bind(c.cpu_model)
    .bind(c.cpu_stepping)
    .bind(c.logical_cores)
    .bind(c.memory_total_bytes)
    .bind(c.os_name)
    .bind(c.kernel_release)
    .bind(c.hypervisor_present)
    .bind(c.hypervisor)
    .bind(c.features_advertised)
    .bind(c.features_usable)
    .bind(c.build_flavour)
    .bind(c.agent_version)
    .bind(c.cpuinfo_foreign)
    .bind(c.build_codegen)
    .bind(c.build_target_features)
    .bind(c.kernel_drivers)
    .bind(c.openssl_build)
    .fetch_one(conn)
    .await?;
    Ok(id)
}

/// How many snapshots are stored, and the latest id: what changes when any
/// coordinator stores new facts (the findings leader's poll).
pub async fn stored(db: impl PgExecutor<'_>) -> Result<(i64, i64)> {
    Ok(
        sqlx::query_as("SELECT count(*), COALESCE(max(id), 0) FROM host_fact_snapshots")
            .fetch_one(db)
            .await?,
    )
}

/// Hash of a snapshot's facts, to compare with freshly probed ones.
pub async fn hash_of(db: impl PgExecutor<'_>, snapshot_id: i64) -> Result<Option<Vec<u8>>> {
    Ok(
        sqlx::query_scalar("SELECT facts_hash FROM host_fact_snapshots WHERE id = $1")
            .bind(snapshot_id)
            .fetch_optional(db)
            .await?,
    )
}

/// A host's snapshots, oldest first: its history of changes.
pub async fn history(db: impl PgExecutor<'_>, host_id: i64) -> Result<Vec<Snapshot>> {
    Ok(sqlx::query_as(
        "SELECT id, host_id, taken_at, facts, arch, cpu_vendor, cpu_model_name, cpu_family, \
         cpu_model, cpu_stepping, logical_cores, memory_total_bytes, os_name, kernel_release, \
         hypervisor_present, hypervisor, features_advertised, features_usable, build_flavour, \
         agent_version, cpuinfo_foreign, build_codegen, build_target_features, \
         kernel_drivers, openssl_build \
         FROM host_fact_snapshots WHERE host_id = $1 ORDER BY taken_at, id",
    )
    .bind(host_id)
    .fetch_all(db)
    .await?)
}
