//! What each host's agent can run (`hosts.paths`, from its hello's
//! `Capabilities.paths`) and the campaign points skipped for lack of a path
//! (`campaign_skips`). A host without the software-build sibling advertises
//! the accelerated path alone; its software-path points are counted as
//! skipped instead of queued as jobs that would fail at once. Likewise the
//! points of a provider the host's agent lacks (`campaign_provider_skips`,
//! from the providers' capabilities in its facts): the path rule is the
//! built-in crates' (their software path is the sibling build); the other
//! providers run both paths in the agent itself.

use std::collections::HashMap;

use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::provider::facts::Capability;
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use super::Result;
use super::campaigns;

/// Points of one campaign that one host skips on one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    pub host_id: i64,
    pub path: Path,
    pub points: i64,
}

/// Why a host skips the points of `path`, for the campaign page, the API and
/// `campaign status`: the one wording of the rule.
pub fn reason(path: Path) -> &'static str {
    match path {
        Path::Software => {
            "the host's agent has no software-build sibling (cipherfleet-agent-soft beside cipherfleet-agent; \
             deploy/build.sh builds both), so it does not offer the software path"
        }
        Path::Accelerated => "the host's agent does not offer the accelerated path",
    }
}

/// Parses stored or advertised path names; a name this coordinator does not
/// know is left out (the column's CHECK keeps the stored ones known).
fn parse(names: &[String]) -> Vec<Path> {
    names.iter().filter_map(|n| n.parse().ok()).collect()
}

fn names(paths: &[Path]) -> Vec<&'static str> {
    paths.iter().map(|p| p.as_str()).collect()
}

/// Every host that said which paths it has, with them. A host missing here
/// has not said hello since the paths were stored: it is given every path.
pub async fn paths_of_hosts(db: impl PgExecutor<'_>) -> Result<HashMap<i64, Vec<Path>>> {
    let rows: Vec<(i64, Vec<String>)> = sqlx::query_as("SELECT id, paths FROM hosts WHERE paths IS NOT NULL")
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|(id, p)| (id, parse(&p))).collect())
}

/// The paths host `host_id` said it has; `None` if it has not said (or there is no such host).
pub async fn paths_of(db: impl PgExecutor<'_>, host_id: i64) -> Result<Option<Vec<Path>>> {
    let row: Option<Option<Vec<String>>> = sqlx::query_scalar("SELECT paths FROM hosts WHERE id = $1")
        .bind(host_id)
        .fetch_optional(db)
        .await?;
    Ok(row.flatten().map(|p| parse(&p)))
}

/// What [`advertise`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Advertised {
    /// The paths changed from these (the host had said others before); `None`
    /// when unchanged or said for the first time.
    pub changed_from: Option<Vec<Path>>,
    /// Queued jobs of the host taken out of the queue as skipped points.
    pub skipped: u64,
    /// Campaigns those jobs were of, finished now if nothing else was left.
    pub finished: Vec<i64>,
}

/// Stores the paths host `host_id` advertised at its hello, and turns its
/// queued jobs on any other path into skipped points of their campaigns (jobs
/// queued before it said, or before it lost the path). Jobs in `keep` stay:
/// the agent still runs one of them or holds its outcome. Then the campaigns
/// left with nothing queued or running are finished. Run before the
/// session's first dispatch.
pub async fn advertise(pool: &PgPool, host_id: i64, paths: &[Path], keep: &[Uuid]) -> Result<Advertised> {
    let (before, changed, to_skip): (Option<Vec<String>>, bool, bool) = sqlx::query_as(
        "WITH before AS (SELECT paths FROM hosts WHERE id = $1), \
         changed AS ( \
             UPDATE hosts SET paths = $2 WHERE id = $1 AND paths IS DISTINCT FROM $2 RETURNING id) \
         SELECT (SELECT paths FROM before), EXISTS (SELECT 1 FROM changed), \
             EXISTS (SELECT 1 FROM jobs WHERE host_id = $1 AND status = 'queued' \
                 AND path <> ALL($2) AND id <> ALL($3) AND provider = 'rustcrypto')",
    )
    .bind(host_id)
    .bind(names(paths))
    .bind(keep)
    .fetch_one(pool)
    .await?;
    let changed_from = before.filter(|_| changed).map(|b| parse(&b));
    if !to_skip {
        // The usual hello: nothing to take out of the queue, and no statement on
        // `jobs` (whose statement triggers would run for no rows).
        return Ok(Advertised {
            changed_from,
            ..Advertised::default()
        });
    }
    let (skipped, campaign_ids): (i64, Vec<i64>) = sqlx::query_as(
        "WITH gone AS ( \
             DELETE FROM jobs WHERE host_id = $1 AND status = 'queued' \
                 AND path <> ALL($2) AND id <> ALL($3) AND provider = 'rustcrypto' \
             RETURNING campaign_id, path), \
         counted AS ( \
             INSERT INTO campaign_skips AS s (campaign_id, host_id, path, points) \
             SELECT campaign_id, $1, path, count(*) FROM gone GROUP BY campaign_id, path \
             ORDER BY campaign_id, path \
             ON CONFLICT (campaign_id, host_id, path) DO UPDATE SET points = s.points + EXCLUDED.points \
             RETURNING campaign_id) \
         SELECT (SELECT count(*) FROM gone), ARRAY(SELECT DISTINCT campaign_id FROM counted)",
    )
    .bind(host_id)
    .bind(names(paths))
    .bind(keep)
    .fetch_one(pool)
    .await?;
    // The jobs are gone with that statement's commit: whichever campaign has
    // nothing else left ends now ([`campaigns::close_if_complete`]'s rule).
    let finished = campaigns::close_if_complete(pool, &campaign_ids).await?;
    Ok(Advertised {
        changed_from,
        skipped: u64::try_from(skipped).unwrap_or(0),
        finished,
    })
}

/// Takes the host's queued jobs on a provider its agent cannot run now
/// (`capabilities` from the facts of its hello, `None`: it reported none;
/// [`provider_refusal`]'s rule) out of the queue as skipped points of their
/// campaigns, with the agent's reason, as [`advertise`] does for paths: an
/// agent that lost its `openssl`, or was replaced by one before providers,
/// is not sent jobs that would fail at once. Jobs in `keep` stay. Then the
/// campaigns left with nothing queued or running are finished. Returns the
/// jobs skipped and those campaigns.
pub async fn skip_unrunnable_providers(
    pool: &PgPool,
    host_id: i64,
    capabilities: Option<&[Capability]>,
    keep: &[Uuid],
) -> Result<(u64, Vec<i64>)> {
    let queued: Vec<(Uuid, String, String)> = sqlx::query_as(
        "SELECT id, provider, algorithm FROM jobs WHERE host_id = $1 AND status = 'queued' \
             AND provider <> 'rustcrypto' AND id <> ALL($2)",
    )
    .bind(host_id)
    .bind(keep)
    .fetch_all(pool)
    .await?;
    let (mut ids, mut providers, mut reasons) = (Vec::new(), Vec::new(), Vec::new());
    for (id, provider, algorithm) in queued {
        let (Ok(p), Ok(a)) = (provider.parse::<Provider>(), algorithm.parse()) else {
            continue;
        };
        if let Some(reason) = provider_refusal(capabilities, p, a) {
            ids.push(id);
            providers.push(provider);
            reasons.push(reason);
        }
    }
    if ids.is_empty() {
        return Ok((0, Vec::new()));
    }
    // One reason per campaign and provider (the first job's; an algorithm the
    // provider lacks says so in it), added to the points of one stored before.
    let (skipped, campaign_ids): (i64, Vec<i64>) = sqlx::query_as(
        "WITH why AS (SELECT * FROM UNNEST($2::uuid[], $3::text[], $4::text[]) AS w(id, provider, reason)), \
         gone AS ( \
             DELETE FROM jobs j USING why w WHERE j.id = w.id AND j.host_id = $1 AND j.status = 'queued' \
             RETURNING j.campaign_id, j.provider, w.reason), \
         counted AS ( \
             INSERT INTO campaign_provider_skips AS s (campaign_id, host_id, provider, points, reason) \
             SELECT campaign_id, $1, provider, count(*), min(reason) FROM gone GROUP BY campaign_id, provider \
             ORDER BY campaign_id, provider \
             ON CONFLICT (campaign_id, host_id, provider) DO UPDATE SET points = s.points + EXCLUDED.points \
             RETURNING campaign_id) \
         SELECT (SELECT count(*) FROM gone), ARRAY(SELECT DISTINCT campaign_id FROM counted)",
    )
    .bind(host_id)
    .bind(&ids)
    .bind(&providers)
    .bind(&reasons)
    .fetch_one(pool)
    .await?;
    let finished = campaigns::close_if_complete(pool, &campaign_ids).await?;
    Ok((u64::try_from(skipped).unwrap_or(0), finished))
}

/// Stores the points a new campaign skips, in its creating transaction.
pub async fn record(tx: &mut PgConnection, campaign_id: i64, skipped: &[Skipped]) -> Result<()> {
    if skipped.is_empty() {
        return Ok(());
    }
    let hosts: Vec<i64> = skipped.iter().map(|s| s.host_id).collect();
    let paths: Vec<&str> = skipped.iter().map(|s| s.path.as_str()).collect();
    let points: Vec<i64> = skipped.iter().map(|s| s.points).collect();
    sqlx::query(
        "INSERT INTO campaign_skips AS s (campaign_id, host_id, path, points) \
         SELECT $1, h, p, n FROM UNNEST($2::bigint[], $3::text[], $4::bigint[]) AS u(h, p, n) \
         ON CONFLICT (campaign_id, host_id, path) DO UPDATE SET points = s.points + EXCLUDED.points",
    )
    .bind(campaign_id)
    .bind(&hosts)
    .bind(&paths)
    .bind(&points)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The points one host skipped in a campaign, by path.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HostSkips {
    pub host_id: i64,
    /// The host's name as its agent reported it: untrusted text.
    pub host_name: String,
    #[sqlx(try_from = "String")]
    pub path: Path,
    pub points: i64,
}

/// A campaign's skipped points per host and path, by host name, at most `limit` rows.
pub async fn for_campaign(db: impl PgExecutor<'_>, campaign_id: i64, limit: i64) -> Result<Vec<HostSkips>> {
    Ok(sqlx::query_as(
        "SELECT s.host_id, h.name AS host_name, s.path, s.points \
         FROM campaign_skips s JOIN hosts h ON h.id = s.host_id \
         WHERE s.campaign_id = $1 ORDER BY h.name, s.path LIMIT $2",
    )
    .bind(campaign_id)
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// A campaign's skipped points on one path, over all its hosts.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PathSkips {
    #[sqlx(try_from = "String")]
    pub path: Path,
    /// Hosts that skipped points of this path.
    pub hosts: i64,
    pub points: i64,
}

/// A campaign's skipped points per path (one row per path at most).
pub async fn totals(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Vec<PathSkips>> {
    Ok(sqlx::query_as(
        "SELECT path, count(*) AS hosts, sum(points)::bigint AS points \
         FROM campaign_skips WHERE campaign_id = $1 GROUP BY path ORDER BY path",
    )
    .bind(campaign_id)
    .fetch_all(db)
    .await?)
}

/// What each host's agent said of its providers: the capabilities in its
/// current facts (`providers.capabilities`). A host missing here reported
/// none (an agent before providers), or a list this coordinator cannot read.
pub async fn providers_of_hosts(db: impl PgExecutor<'_>) -> Result<HashMap<i64, Vec<Capability>>> {
    let rows: Vec<(i64, serde_json::Value)> = sqlx::query_as(
        "SELECT h.id, s.facts #> '{providers,capabilities}' FROM hosts h \
         JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         WHERE jsonb_typeof(s.facts #> '{providers,capabilities}') = 'array'",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, v)| serde_json::from_value(v).ok().map(|c| (id, c)))
        .collect())
}

/// Points of one campaign that one host skips for lack of their provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSkipped {
    pub host_id: i64,
    pub provider: Provider,
    pub points: i64,
    /// The agent's reason (untrusted text) or the coordinator's.
    pub reason: String,
}

/// Why a host whose agent has `capabilities` (`None`: it reported none)
/// cannot run `algorithm` on `provider`, if it cannot. The built-in crates
/// always can (their paths are [`reason`]'s rule).
pub fn provider_refusal(
    capabilities: Option<&[Capability]>,
    provider: Provider,
    algorithm: cipherfleet_core::algorithm::Algorithm,
) -> Option<String> {
    if provider == Provider::RustCrypto {
        return None;
    }
    let Some(capabilities) = capabilities else {
        return Some(format!(
            "the host's agent does not report its providers (a release before them): upgrade it to measure on {provider}"
        ));
    };
    let Some(c) = capabilities.iter().find(|c| c.provider == provider) else {
        return Some(format!("the host's agent does not know the {provider} provider"));
    };
    if !c.available {
        return Some(
            c.reason
                .clone()
                .unwrap_or_else(|| format!("{provider} is not available on the host")),
        );
    }
    if !c.algorithms.contains(&algorithm) {
        return Some(match &c.reason {
            Some(why) => format!("the host's {provider} has no {algorithm}: {why}"),
            None => format!("the host's {provider} has no {algorithm}"),
        });
    }
    None
}

/// Stores the points a new campaign skips for lack of their provider, in its creating transaction.
pub async fn record_providers(tx: &mut PgConnection, campaign_id: i64, skipped: &[ProviderSkipped]) -> Result<()> {
    if skipped.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO campaign_provider_skips (campaign_id, host_id, provider, points, reason) \
         SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::bigint[], $5::text[])",
    )
    .bind(campaign_id)
    .bind(skipped.iter().map(|s| s.host_id).collect::<Vec<_>>())
    .bind(skipped.iter().map(|s| s.provider.to_string()).collect::<Vec<_>>())
    .bind(skipped.iter().map(|s| s.points).collect::<Vec<_>>())
    .bind(skipped.iter().map(|s| s.reason.clone()).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The points one host skipped in a campaign for lack of a provider.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HostProviderSkips {
    pub host_id: i64,
    /// The host's name as its agent reported it: untrusted text.
    pub host_name: String,
    #[sqlx(try_from = "String")]
    pub provider: Provider,
    pub points: i64,
    /// Why (the agent's words: untrusted text).
    pub reason: String,
}

/// A campaign's skipped points per host and provider, by host name, at most `limit` rows.
pub async fn providers_for_campaign(
    db: impl PgExecutor<'_>,
    campaign_id: i64,
    limit: i64,
) -> Result<Vec<HostProviderSkips>> {
    Ok(sqlx::query_as(
        "SELECT s.host_id, h.name AS host_name, s.provider, s.points, s.reason \
         FROM campaign_provider_skips s JOIN hosts h ON h.id = s.host_id \
         WHERE s.campaign_id = $1 ORDER BY h.name, s.host_id, s.provider LIMIT $2",
    )
    .bind(campaign_id)
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// A campaign's skipped points of one provider, over all its hosts, with one
/// host's reason (the first by host name) and how many hosts gave another.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProviderSkips {
    #[sqlx(try_from = "String")]
    pub provider: Provider,
    pub hosts: i64,
    pub points: i64,
    pub reason: String,
    pub other_reasons: i64,
}

/// A campaign's skipped points per provider (one row per provider at most).
pub async fn provider_totals(db: impl PgExecutor<'_>, campaign_id: i64) -> Result<Vec<ProviderSkips>> {
    Ok(sqlx::query_as(
        "SELECT s.provider, count(*) AS hosts, sum(s.points)::bigint AS points, \
             (array_agg(s.reason ORDER BY h.name, h.id))[1] AS reason, \
             count(DISTINCT s.reason) - 1 AS other_reasons \
         FROM campaign_provider_skips s JOIN hosts h ON h.id = s.host_id \
         WHERE s.campaign_id = $1 GROUP BY s.provider ORDER BY s.provider",
    )
    .bind(campaign_id)
    .fetch_all(db)
    .await?)
}
