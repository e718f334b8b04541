//! `findings`: why a host runs or measures crypto in software, as derived by
//! [`crate::findings`]. A finding is open while it holds; the deriver
//! refreshes it ([`upsert_open`]) and resolves it ([`resolve`]) once it no
//! longer does. A finding that comes back is a new row, so a host's rows are
//! its history.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};

use super::Result;

/// How urgent a finding is; ordered `Info < Warning < Critical`.
///
/// - `critical`: acceleration the silicon has is lost (a hypervisor hides
///   it, or the accelerated path measures at software speed);
/// - `warning`: the host runs or measures crypto in software, or slower than
///   it should (no AES in the CPU, a software build, AVX state off, a drop);
/// - `info`: worth knowing, nothing to do (only wide-vector features off).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    /// Every severity, most urgent first.
    pub const ALL: [Severity; 3] = [Severity::Critical, Severity::Warning, Severity::Info];

    /// The spelling stored in `findings.severity`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Severity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Severity::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("unknown severity {s:?} (critical, warning or info)"))
    }
}

impl TryFrom<String> for Severity {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// One stored finding, with its host's name.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Finding {
    pub id: i64,
    pub host_id: i64,
    pub host_name: String,
    /// One of [`crate::findings::REASONS`].
    pub reason: String,
    /// For `slow-accelerated`: `near-software`, `below-peers` or `dropped-vs-history`.
    pub kind: Option<String>,
    /// An algorithm (slow-accelerated) or a feature group (`aes`, `avx-state`, `build`).
    pub subject: String,
    #[sqlx(try_from = "String")]
    pub severity: Severity,
    /// `open` or `resolved`.
    pub status: String,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    /// The numbers behind the finding (medians, reference, ratio, z, counts) or the flags.
    pub evidence: Value,
    /// The host's fact changes from its last good state to the one the finding was seen on.
    pub fact_changes: Value,
    /// One human sentence.
    pub summary: String,
}

/// A finding as the deriver states it; identity is (host, reason, kind, subject).
#[derive(Debug, Clone, PartialEq)]
pub struct NewFinding {
    pub host_id: i64,
    pub reason: String,
    pub kind: Option<String>,
    pub subject: String,
    pub severity: Severity,
    /// When the evidence starts; kept from the first derivation of an open finding.
    pub first_seen: Option<DateTime<Utc>>,
    pub evidence: Value,
    /// Kept from the first derivation: the changes around first-seen.
    pub fact_changes: Value,
    pub summary: String,
}

impl NewFinding {
    /// Whether `stored` is this finding (same host, reason, kind and subject).
    pub fn same_as(&self, stored: &Finding) -> bool {
        self.host_id == stored.host_id
            && self.reason == stored.reason
            && self.kind == stored.kind
            && self.subject == stored.subject
    }
}

/// The columns of [`Finding`] over `findings f JOIN hosts h`, as a literal for `concat!`.
macro_rules! finding_columns {
    () => {
        "f.id, f.host_id, h.name AS host_name, f.reason, f.kind, f.subject, f.severity, f.status, \
         f.first_seen, f.last_seen, f.resolved_at, f.evidence, f.fact_changes, f.summary \
         FROM findings f JOIN hosts h ON h.id = f.host_id"
    };
}

/// Opens `new`, or refreshes the open finding with its identity: last-seen,
/// severity, evidence and summary follow the latest derivation; first-seen and
/// the fact changes stay as first found. Returns the finding's id.
pub async fn upsert_open(conn: &mut PgConnection, new: &NewFinding) -> Result<i64> {
    let ids = upsert_open_all(conn, std::slice::from_ref(new)).await?;
    Ok(ids[0])
}

/// [`upsert_open`] for each of `list` in order, in one statement; returns
/// each one's id. Two of the same identity end as that order leaves them: the
/// first opens (or refreshes), the later ones refresh it.
pub async fn upsert_open_all(conn: &mut PgConnection, list: &[NewFinding]) -> Result<Vec<i64>> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    // One row per identity (a statement may not update a row twice), with
    // what the later ones of that identity would have refreshed.
    let mut rows: Vec<NewFinding> = Vec::with_capacity(list.len());
    let mut row_of: Vec<usize> = Vec::with_capacity(list.len());
    let mut by_identity: HashMap<Identity<'_>, usize> = HashMap::with_capacity(list.len());
    for new in list {
        match by_identity.entry(new.identity()) {
            Entry::Occupied(at) => {
                let row = &mut rows[*at.get()];
                row.severity = new.severity;
                row.evidence = new.evidence.clone();
                row.summary = new.summary.clone();
                row_of.push(*at.get());
            }
            Entry::Vacant(slot) => {
                slot.insert(rows.len());
                row_of.push(rows.len());
                rows.push(new.clone());
            }
        }
    }
    let stored: Vec<(i64, i64, String, Option<String>, String)> = sqlx::query_as(
        "INSERT INTO findings (host_id, reason, kind, subject, severity, first_seen, last_seen, \
             evidence, fact_changes, summary) \
         SELECT host_id, reason, kind, subject, severity, LEAST(COALESCE(first_seen, now()), now()), now(), \
             evidence, fact_changes, summary \
         FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], \
             $7::jsonb[], $8::jsonb[], $9::text[]) \
             AS n (host_id, reason, kind, subject, severity, first_seen, evidence, fact_changes, summary) \
         ON CONFLICT (host_id, reason, COALESCE(kind, ''), subject) WHERE status = 'open' \
         DO UPDATE SET last_seen = GREATEST(now(), findings.first_seen), severity = EXCLUDED.severity, \
             evidence = EXCLUDED.evidence, summary = EXCLUDED.summary \
         RETURNING id, host_id, reason, kind, subject",
    )
    .bind(rows.iter().map(|r| r.host_id).collect::<Vec<i64>>())
    .bind(rows.iter().map(|r| r.reason.as_str()).collect::<Vec<&str>>())
    .bind(rows.iter().map(|r| r.kind.as_deref()).collect::<Vec<Option<&str>>>())
    .bind(rows.iter().map(|r| r.subject.as_str()).collect::<Vec<&str>>())
    .bind(rows.iter().map(|r| r.severity.as_str()).collect::<Vec<&str>>())
    .bind(
        rows.iter()
            .map(|r| r.first_seen)
            .collect::<Vec<Option<DateTime<Utc>>>>(),
    )
    .bind(rows.iter().map(|r| r.evidence.clone()).collect::<Vec<Value>>())
    .bind(rows.iter().map(|r| r.fact_changes.clone()).collect::<Vec<Value>>())
    .bind(rows.iter().map(|r| r.summary.as_str()).collect::<Vec<&str>>())
    .fetch_all(conn)
    .await?;
    let id_of: HashMap<Identity<'_>, i64> = stored
        .iter()
        .map(|(id, host_id, reason, kind, subject)| {
            ((*host_id, reason.as_str(), kind.as_deref(), subject.as_str()), *id)
        })
        .collect();
    // Every row is inserted or updated, so each comes back.
    row_of
        .into_iter()
        .map(|row| {
            id_of
                .get(&rows[row].identity())
                .copied()
                .ok_or(sqlx::Error::RowNotFound.into())
        })
        .collect()
}

/// What makes a finding the same one: (host, reason, kind, subject).
type Identity<'a> = (i64, &'a str, Option<&'a str>, &'a str);

impl NewFinding {
    fn identity(&self) -> Identity<'_> {
        (self.host_id, &self.reason, self.kind.as_deref(), &self.subject)
    }
}

/// Resolves the given open findings (they no longer hold); returns how many changed.
pub async fn resolve(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    Ok(sqlx::query(
        "UPDATE findings SET status = 'resolved', resolved_at = GREATEST(now(), first_seen) \
         WHERE id = ANY($1) AND status = 'open'",
    )
    .bind(ids)
    .execute(db)
    .await?
    .rows_affected())
}

/// Every open finding, most severe first, then by host name.
pub async fn list_open(db: impl PgExecutor<'_>) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        finding_columns!(),
        " WHERE f.status = 'open' \
         ORDER BY CASE f.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, \
             h.name, f.reason, f.subject, f.id"
    ))
    .fetch_all(db)
    .await?)
}

/// The first `limit` open findings in [`list_open`]'s order: what the
/// overview lists, without reading every open finding of a large fleet.
pub async fn list_open_first(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        finding_columns!(),
        " WHERE f.status = 'open' \
         ORDER BY CASE f.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, \
             h.name, f.reason, f.subject, f.id LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// How many findings are open.
pub async fn count_open(db: impl PgExecutor<'_>) -> Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM findings WHERE status = 'open'")
            .fetch_one(db)
            .await?,
    )
}

/// The open findings of the given hosts (what the deriver reconciles against).
pub async fn list_open_for_hosts(db: impl PgExecutor<'_>, host_ids: &[i64]) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        finding_columns!(),
        " WHERE f.status = 'open' AND f.host_id = ANY($1) ORDER BY f.id"
    ))
    .bind(host_ids)
    .fetch_all(db)
    .await?)
}

/// A host's findings, open and resolved, newest first: its history.
pub async fn list_for_host(db: impl PgExecutor<'_>, host_id: i64) -> Result<Vec<Finding>> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        finding_columns!(),
        " WHERE f.host_id = $1 ORDER BY f.first_seen DESC, f.id DESC"
    ))
    .bind(host_id)
    .fetch_all(db)
    .await?)
}

/// Open findings of one reason and severity, and how many hosts they are on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct OpenCount {
    pub reason: String,
    #[sqlx(try_from = "String")]
    pub severity: Severity,
    pub findings: i64,
    pub hosts: i64,
}

/// Open findings grouped by reason and severity (for `/metrics`), by reason.
pub async fn count_open_by(db: impl PgExecutor<'_>) -> Result<Vec<OpenCount>> {
    Ok(sqlx::query_as(
        "SELECT reason, severity, count(*) AS findings, count(DISTINCT host_id) AS hosts \
         FROM findings WHERE status = 'open' GROUP BY reason, severity ORDER BY reason, severity",
    )
    .fetch_all(db)
    .await?)
}

/// Hosts with at least one open finding, per reason (for `/metrics`).
pub async fn hosts_by_reason(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT reason, count(DISTINCT host_id) FROM findings WHERE status = 'open' \
         GROUP BY reason ORDER BY reason",
    )
    .fetch_all(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_order_and_parse() {
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Critical);
        for s in Severity::ALL {
            assert_eq!(s.as_str().parse::<Severity>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert!("fatal".parse::<Severity>().is_err());
    }
}
