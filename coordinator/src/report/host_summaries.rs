//! `host_summaries`: per host, the verdicts the hosts list and the overview
//! show beside its facts — its [`Acceleration`] and whether it is emulated or
//! simulated — so those pages count, group, filter and page the fleet in SQL
//! (migrations/0023).
//!
//! The verdicts are judged here, by the one rule each
//! ([`HostWithFacts::acceleration`], [`HostWithFacts::emulated`],
//! [`HostWithFacts::simulated`]); the database only counts the changes of
//! what they are judged by. Every read first judges again the hosts changed
//! since ([`refresh`]): none in the steady state, every host once after a
//! bulk load.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgExecutor, PgPool};

use crate::analysis::acceleration::Acceleration;
use crate::store::Result;
use crate::store::hosts::{self, Host, HostWithFacts};

/// Judges again every host whose inputs changed since its verdicts were
/// written; how many it judged. The stale summaries are locked first, in key
/// order (the triggers count changes in the same order), and the inputs read
/// after: a change committed before is read, one committing after waits for
/// the lock and leaves its host stale for the next read. Two readers at once
/// take turns, the second finding nothing left to judge.
pub async fn refresh(pool: &PgPool) -> Result<usize> {
    let stale: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM host_summaries WHERE summarised IS DISTINCT FROM changes)")
            .fetch_one(pool)
            .await?;
    if !stale {
        return Ok(0);
    }
    let mut tx = pool.begin().await?;
    let locked: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT host_id, changes FROM host_summaries WHERE summarised IS DISTINCT FROM changes \
         ORDER BY host_id FOR UPDATE",
    )
    .fetch_all(&mut *tx)
    .await?;
    if locked.is_empty() {
        return Ok(0);
    }
    let ids: Vec<i64> = locked.iter().map(|(id, _)| *id).collect();
    let changes: HashMap<i64, i64> = locked.into_iter().collect();
    // Held locks keep every host (its deletion cascades to the summary), so each is read.
    let judged: Vec<HostWithFacts> = hosts::with_facts_of(&mut *tx, &ids).await?;
    let judged_at: Vec<i64> = judged.iter().map(|h| changes[&h.host.id]).collect();
    sqlx::query(
        "UPDATE host_summaries t SET acceleration = d.acceleration, emulated = d.emulated, \
             simulated = d.simulated, summarised = d.changes \
         FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::boolean[], $5::boolean[]) \
             AS d(host_id, changes, acceleration, emulated, simulated) \
         WHERE t.host_id = d.host_id",
    )
    .bind(judged.iter().map(|h| h.host.id).collect::<Vec<_>>())
    .bind(&judged_at)
    .bind(judged.iter().map(|h| h.acceleration().as_str()).collect::<Vec<_>>())
    .bind(judged.iter().map(HostWithFacts::emulated).collect::<Vec<_>>())
    .bind(judged.iter().map(HostWithFacts::simulated).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(judged.len())
}

/// Which hosts a list shows: each field narrows it, `None` is "any".
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Selection<'a> {
    /// Carries the label `key` (with `Some(value)`: with that value).
    pub label: Option<(&'a str, Option<&'a str>)>,
    pub arch: Option<&'a str>,
    /// Exact CPU model name.
    pub cpu: Option<&'a str>,
    /// Exact kernel release.
    pub kernel: Option<&'a str>,
    /// Connected now (the ids given to the query).
    pub online: Option<bool>,
    pub acceleration: Option<Acceleration>,
}

/// The hosts, their current snapshot `s`, their summary `hs` and whether
/// they are online (`o`, the ids bound as `$1`), with a [`Selection`] in
/// `$2`–`$9`. Hosts not judged yet (new since the [`refresh`] before the
/// read) are left out rather than shown without a verdict.
macro_rules! selected_hosts {
    () => {
        " FROM hosts h JOIN host_summaries hs ON hs.host_id = h.id AND hs.summarised IS NOT NULL \
           LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
           LEFT JOIN unnest($1::bigint[]) AS o(id) ON o.id = h.id \
         WHERE ($2::text IS NULL OR CASE WHEN $3::text IS NULL THEN h.labels ? $2 ELSE h.labels ->> $2 = $3 END) \
           AND ($4::text IS NULL OR s.arch = $4) AND ($5::text IS NULL OR s.cpu_model_name = $5) \
           AND ($6::text IS NULL OR s.kernel_release = $6) AND ($7::boolean IS NULL OR (o.id IS NOT NULL) = $7) \
           AND ($8::text IS NULL OR hs.acceleration = $8)"
    };
}

/// `sql` with the online ids and `selection` bound as [`selected_hosts!`] reads them.
fn bind_selection<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    online: &HashSet<i64>,
    selection: &Selection<'q>,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    query
        .bind(online.iter().copied().collect::<Vec<i64>>())
        .bind(selection.label.map(|(k, _)| k))
        .bind(selection.label.and_then(|(_, v)| v))
        .bind(selection.arch)
        .bind(selection.cpu)
        .bind(selection.kernel)
        .bind(selection.online)
        .bind(selection.acceleration.map(|a| a.as_str()))
}

/// A host as the hosts list shows it: its row, the facts of its current
/// snapshot that the list prints, its verdicts, and whether it is online.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ListedHost {
    #[sqlx(flatten)]
    pub host: Host,
    pub arch: Option<String>,
    pub cpu_model_name: Option<String>,
    pub kernel_release: Option<String>,
    pub logical_cores: Option<i32>,
    #[sqlx(try_from = "String")]
    pub acceleration: Acceleration,
    pub emulated: bool,
    pub simulated: bool,
    /// Its id was among the online ones given.
    pub online: bool,
}

/// How many hosts `selection` picks, `online` being the hosts connected now.
pub async fn count(pool: &PgPool, online: &HashSet<i64>, selection: &Selection<'_>) -> Result<u64> {
    refresh(pool).await?;
    let n: i64 = bind_selection(
        sqlx::query_as(concat!("SELECT count(*)", selected_hosts!())),
        online,
        selection,
    )
    .fetch_one(pool)
    .await
    .map(|(n,): (i64,)| n)?;
    Ok(u64::try_from(n).unwrap_or_default())
}

/// How many hosts there are, and how many have each [`Acceleration`]
/// (statuses no host has left out): `/metrics`.
pub async fn by_acceleration(pool: &PgPool) -> Result<(u64, Vec<(Acceleration, u64)>)> {
    refresh(pool).await?;
    let (hosts, statuses, counts): (i64, Vec<String>, Vec<i64>) = sqlx::query_as(
        "WITH s AS (SELECT hs.acceleration, count(*) AS n FROM host_summaries hs \
                    WHERE hs.summarised IS NOT NULL GROUP BY 1) \
         SELECT (SELECT count(*) FROM hosts), coalesce(array_agg(acceleration), '{}'), \
             coalesce(array_agg(n), '{}') FROM s",
    )
    .fetch_one(pool)
    .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or_default();
    let mut by = Vec::with_capacity(statuses.len());
    for (status, n) in statuses.into_iter().zip(counts) {
        let status = Acceleration::try_from(status).map_err(|e| sqlx::Error::Decode(e.into()))?;
        by.push((status, count(n)));
    }
    Ok((count(hosts), by))
}

/// The hosts `selection` picks, by name: `limit` of them after `offset`, or all.
pub async fn list(
    pool: &PgPool,
    online: &HashSet<i64>,
    selection: &Selection<'_>,
    page: Option<(u64, u64)>,
) -> Result<Vec<ListedHost>> {
    refresh(pool).await?;
    let (limit, offset) = page.map_or((None, 0), |(limit, offset)| (Some(limit as i64), offset as i64));
    Ok(bind_selection(
        sqlx::query_as(concat!(
            "SELECT h.id, h.name, h.labels, h.first_seen, h.last_seen, h.current_snapshot_id, h.retired_at, \
                 s.arch, s.cpu_model_name, s.kernel_release, s.logical_cores, hs.acceleration, hs.emulated, \
                 hs.simulated, o.id IS NOT NULL AS online",
            selected_hosts!(),
            " ORDER BY h.name LIMIT $9 OFFSET $10"
        )),
        online,
        selection,
    )
    .bind(limit)
    .bind(offset)
    .fetch_all(pool)
    .await?)
}

/// Hosts sharing arch, CPU model, kernel and acceleration status: a machine
/// configuration. Missing facts group as `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Configuration {
    pub arch: Option<String>,
    pub cpu_model: Option<String>,
    pub kernel: Option<String>,
    pub acceleration: Acceleration,
    pub hosts: usize,
    pub online: usize,
    pub emulated: usize,
    /// The first hosts (id, name) by name, as many as asked for.
    #[serde(skip)]
    pub members: Vec<(i64, String)>,
}

/// A [`Configuration`] as the query returns it.
#[derive(sqlx::FromRow)]
struct ConfigurationRow {
    arch: Option<String>,
    cpu_model: Option<String>,
    kernel: Option<String>,
    #[sqlx(try_from = "String")]
    acceleration: Acceleration,
    hosts: i64,
    online: i64,
    emulated: i64,
    member_ids: Vec<i64>,
    member_names: Vec<String>,
}

/// Every configuration with its first `members` hosts by name, ordered by
/// arch, CPU model, kernel (missing first, then by byte) and status (best
/// first): one grouped pass over the hosts.
pub async fn configurations(pool: &PgPool, online: &HashSet<i64>, members: usize) -> Result<Vec<Configuration>> {
    refresh(pool).await?;
    let rows: Vec<ConfigurationRow> = bind_selection(
        sqlx::query_as(concat!(
            "SELECT s.arch, s.cpu_model_name AS cpu_model, s.kernel_release AS kernel, hs.acceleration, \
                 count(*) AS hosts, count(o.id) AS online, count(*) FILTER (WHERE hs.emulated) AS emulated, \
                 (array_agg(h.id ORDER BY h.name))[:$9] AS member_ids, \
                 (array_agg(h.name ORDER BY h.name))[:$9] AS member_names",
            selected_hosts!(),
            " GROUP BY 1, 2, 3, 4"
        )),
        online,
        &Selection::default(),
    )
    .bind(i32::try_from(members).unwrap_or(i32::MAX))
    .fetch_all(pool)
    .await?;
    let count = |n: i64| usize::try_from(n).unwrap_or_default();
    let mut groups: Vec<Configuration> = rows
        .into_iter()
        .map(|r| Configuration {
            arch: r.arch,
            cpu_model: r.cpu_model,
            kernel: r.kernel,
            acceleration: r.acceleration,
            hosts: count(r.hosts),
            online: count(r.online),
            emulated: count(r.emulated),
            members: r.member_ids.into_iter().zip(r.member_names).collect(),
        })
        .collect();
    // Rust's order, not the database collation's: the status best first.
    groups.sort_by(|a, b| {
        (&a.arch, &a.cpu_model, &a.kernel, a.acceleration).cmp(&(&b.arch, &b.cpu_model, &b.kernel, b.acceleration))
    });
    Ok(groups)
}

/// How many hosts there are, and the arches of their current facts (sorted).
pub async fn fleet(db: impl PgExecutor<'_>) -> Result<(u64, Vec<String>)> {
    let (hosts, mut arches): (i64, Vec<String>) = sqlx::query_as(
        "SELECT count(*), coalesce(array_agg(DISTINCT s.arch) FILTER (WHERE s.arch IS NOT NULL), '{}') \
         FROM hosts h LEFT JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id",
    )
    .fetch_one(db)
    .await?;
    arches.sort();
    Ok((u64::try_from(hosts).unwrap_or_default(), arches))
}

/// Where the hosts' inputs stand: it differs after any change to the set of
/// hosts, their labels, current facts or open findings, and between
/// databases, so it keys a cache of what is read from them.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Generation {
    /// Which database: its server's start, port and the database's oid.
    started: DateTime<Utc>,
    port: Option<i32>,
    database: i64,
    /// Every host's id and change count, hashed and combined.
    hosts: i64,
    changes: i64,
}

/// The [`Generation`] now: one pass over `host_summaries`' narrow rows.
pub async fn generation(db: impl PgExecutor<'_>) -> Result<Generation> {
    Ok(sqlx::query_as(
        "SELECT pg_postmaster_start_time() AS started, inet_server_port() AS port, \
             (SELECT oid::bigint FROM pg_database WHERE datname = current_database()) AS database, \
             count(*) AS hosts, coalesce(bit_xor(hashint8extended(host_id, changes)), 0) AS changes \
         FROM host_summaries",
    )
    .fetch_one(db)
    .await?)
}
