//! Verification on change: a new host, or a host whose facts changed in a
//! way that can change crypto speed (CPU model, CPU flags advertised or
//! usable, kernel, hypervisor, agent version or build flavour), gets a small
//! campaign queued at its hello — before its first dispatch — measuring
//! AES-GCM, ChaCha20-Poly1305 and AES-CBC at 16 KiB on both paths, plus the
//! points it ran before, so the report compares like with like. A host whose
//! agent gained or lost a path (its software-build sibling installed or
//! removed) gets one too; the points of a path it lacks are skipped. At most
//! one per host per `--verify-interval` ([`crate::store::verifications::claim`]).

use std::time::Duration;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::{Direction, JobSpec, KeyMode, Matrix, Nonce};
use serde_json::{Map, Value, json};
use sqlx::PgPool;

use crate::analysis::changes;
use crate::domain::facts::FactColumns;
use crate::domain::selector::Selector;
use crate::launch;
use crate::store;

/// `serve --verify-on-change` and `--verify-interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyOnChange {
    pub enabled: bool,
    /// Shortest time between two verification campaigns of one host.
    pub min_interval: Duration,
}

impl Default for VerifyOnChange {
    fn default() -> Self {
        VerifyOnChange {
            enabled: true,
            min_interval: Duration::from_secs(3600),
        }
    }
}

/// Most earlier points a verification repeats: a host that ran `full` would
/// otherwise get hours of work for a kernel upgrade.
pub const MAX_PREVIOUS_POINTS: i64 = 200;

/// The facts in [`changes::diff`] that cannot change the speed a verification
/// measures (the built-in crates: the kernel's drivers and OpenSSL are other providers).
const NOT_SPEED: &[&str] = &["os_name", "kernel_drivers", "openssl_version"];

/// What changed that can change crypto speed, as a JSON object (`{"new_host":
/// true}` for a host without earlier facts); `None` when nothing did.
pub fn speed_changes(before: Option<&FactColumns>, after: &FactColumns) -> Option<Map<String, Value>> {
    let Some(before) = before else {
        let mut new = Map::new();
        new.insert("new_host".into(), json!(true));
        return Some(new);
    };
    let mut diff = changes::diff(before, after);
    diff.retain(|k, _| !NOT_SPEED.contains(&k.as_str()));
    (!diff.is_empty()).then_some(diff)
}

/// A change of the paths a host's agent can run, as [`on_hello`] records it
/// among the changes: `{"before": [...], "after": [...]}`.
pub fn paths_change(before: &[Path], after: &[Path]) -> Value {
    let names = |p: &[Path]| p.iter().map(|p| p.as_str()).collect::<Vec<_>>();
    json!({"before": names(before), "after": names(after)})
}

/// The small suite every verification runs.
pub fn matrix() -> Matrix {
    let algorithms: Vec<Algorithm> = ["aes-256-gcm", "chacha20-poly1305", "aes-128-cbc"]
        .iter()
        .map(|n| n.parse().expect("valid names"))
        .collect();
    Matrix {
        algorithms,
        sizes: vec![16 << 10],
        directions: vec![Direction::Encrypt],
        threads: vec![1],
        concurrency: None,
        key_modes: vec![KeyMode::Static],
        paths: vec![Path::Accelerated, Path::Software],
        nonces: vec![Nonce::Counter],
        seconds: 0.5,
        providers: vec![cipherfleet_core::provider::Provider::RustCrypto],
    }
}

/// The small suite, then the earlier points it does not already hold.
pub fn points(previous: Vec<JobSpec>) -> Vec<JobSpec> {
    let mut points = matrix().expand();
    for p in previous {
        if !points.contains(&p) {
            points.push(p);
        }
    }
    points
}

/// Queues a verification campaign for `host_id` if its latest facts changed
/// something that can change crypto speed, or the paths its agent can run
/// changed (`paths_changed`: [`paths_change`], e.g. the software sibling
/// installed), and its rate limit allows; returns the campaign's id. The
/// caller dispatches.
pub async fn on_hello(
    pool: &PgPool,
    config: &VerifyOnChange,
    host_id: i64,
    paths_changed: Option<&Value>,
) -> store::Result<Option<i64>> {
    if !config.enabled {
        return Ok(None);
    }
    let history = store::snapshots::history(pool, host_id).await?;
    let Some((after, earlier)) = history.split_last() else {
        return Ok(None);
    };
    let mut changes = speed_changes(earlier.last().map(|s| &s.columns), &after.columns).unwrap_or_default();
    if let Some(paths) = paths_changed {
        changes.insert("paths".into(), paths.clone());
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let changes = Value::Object(changes);
    let mut tx = pool.begin().await?;
    if !store::verifications::claim(&mut tx, host_id, config.min_interval.as_secs_f64(), &changes).await? {
        tracing::info!(host = host_id, %changes, "facts changed; verification rate-limited");
        return Ok(None);
    }
    let hosts = store::hosts::with_facts_of(&mut *tx, &[host_id]).await?;
    let Some(host) = hosts.first() else {
        return Ok(None);
    };
    let previous = store::verifications::previous_points(&mut *tx, host_id, MAX_PREVIOUS_POINTS).await?;
    // Stored at this hello, before this runs: a host without the software
    // sibling skips the software half.
    let paths = store::capabilities::paths_of(&mut *tx, host_id).await?;
    // A verification measures the built-in crates' points alone: no provider to skip.
    let can = launch::CanRun {
        paths: paths.as_deref(),
        providers: None,
    };
    let (jobs, skipped, _) = launch::jobs_for(host, can, points(previous));
    let what: Vec<&str> = changes
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let name = format!("verify {}: {}", host.host.name, what.join(", "));
    let selector = Selector {
        host_names: vec![host.host.name.clone()],
        ..Selector::default()
    };
    let new = store::campaigns::NewCampaign {
        name: &name,
        suite: "verify",
        matrix: &serde_json::to_value(matrix()).expect("serialises"),
        selector: &serde_json::to_value(&selector).expect("serialises"),
        started_by: "verify-on-change",
        queued_ttl: store::campaigns::DEFAULT_QUEUED_TTL,
    };
    let campaign_id = store::campaigns::insert_with_jobs(&mut tx, &new, &jobs).await?;
    store::capabilities::record(&mut tx, campaign_id, &skipped).await?;
    store::verifications::set_campaign(&mut tx, host_id, campaign_id).await?;
    tx.commit().await?;
    tracing::info!(host = host_id, campaign = campaign_id, jobs = jobs.len(), %changes, "verification queued");
    Ok(Some(campaign_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(kernel: &str, os: &str) -> FactColumns {
        FactColumns {
            kernel_release: Some(kernel.into()),
            os_name: Some(os.into()),
            features_usable: vec!["aes".into()],
            ..FactColumns::default()
        }
    }

    #[test]
    fn a_new_host_or_a_speed_relevant_change_asks_for_verification() {
        let base = facts("6.1.0", "Debian 12");
        assert_eq!(
            speed_changes(None, &base).map(Value::Object),
            Some(json!({"new_host": true}))
        );
        assert_eq!(speed_changes(Some(&base), &base), None);
        assert_eq!(
            speed_changes(Some(&base), &facts("6.1.0", "Debian 12.1")),
            None,
            "the OS name alone"
        );
        let kernel = speed_changes(Some(&base), &facts("3.10.0-1160.el7.x86_64", "Debian 12")).unwrap();
        assert_eq!(kernel.keys().collect::<Vec<_>>(), ["kernel_release"]);
        let mut lost = base.clone();
        lost.features_usable.clear();
        assert!(
            speed_changes(Some(&base), &lost)
                .unwrap()
                .contains_key("features_usable")
        );
    }

    #[test]
    fn verification_measures_the_small_suite_on_both_paths_then_earlier_points() {
        let small = matrix().expand();
        assert_eq!(small.len(), 6);
        assert!(
            small
                .iter()
                .all(|p| p.point.size_bytes == 16 << 10 && p.validate().is_ok())
        );
        let earlier = small[0].clone();
        let mut other = small[0].clone();
        other.point.size_bytes = 1024;
        let all = points(vec![earlier, other.clone()]);
        assert_eq!(all.len(), 7, "a point already in the small suite is measured once");
        assert_eq!(all.last(), Some(&other));
    }
}
