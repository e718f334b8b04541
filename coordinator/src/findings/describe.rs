//! What a finding says: turns what the rules found for one host into stored
//! findings — reason, subject, severity, evidence, one human sentence — and
//! dates a new one (first-seen, and the fact changes around it).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::analysis::changes;
use crate::analysis::class::MachineClass;
use crate::analysis::fallback::{CpuGroups, HostCrypto, Reason, hardware_features, primitive_of};
use crate::analysis::marks;
use crate::analysis::providers;
use crate::analysis::series::{self, HostSeries, PeerMedians, SeriesVerdict, SlowVerdict};
use crate::analysis::slow::{SlowKind, Thresholds};
use crate::analysis::unexplained::{self, Promise, Ran, Unexplained};
use crate::store::findings::{NewFinding, Severity};
use crate::store::series::CurrentFacts;
use crate::store::snapshots::Snapshot;

mod summary;

use summary::{EMULATED_NOTE, fact_summary, slow_summary};

/// Flagged series kept in a slow finding's evidence (the headline is the first).
const EVIDENCE_SERIES: usize = 10;

/// A finding as derived, and what dates it.
pub(super) struct Derived {
    pub finding: NewFinding,
    pub anchor: Anchor,
}

/// Where a new finding's first-seen and fact changes come from.
pub(super) enum Anchor {
    /// The host's snapshots: the first one of the latest run where the reason holds.
    Facts(Reason),
    /// The flagged series: its last good result.
    Series(Box<SeriesVerdict>),
    /// The results that ran in software: the oldest dates it, the newest's
    /// snapshot is compared with the one before it.
    Results {
        first: DateTime<Utc>,
        snapshot: Option<i64>,
    },
}

/// Results listed in an `unexplained-fallback` finding's evidence.
const EVIDENCE_RESULTS: usize = 10;

/// The findings that hold for `host` now; `latest` is its latest
/// accelerated result per point (for `unexplained-fallback`).
pub(super) fn for_host(
    host: &CurrentFacts,
    fleet: &CpuGroups,
    mine: &HostSeries,
    peers: &PeerMedians,
    latest: &[Ran],
    only: Option<&BTreeSet<String>>,
    t: &Thresholds,
) -> Vec<Derived> {
    let emulated = host.emulated();
    let facts = &host.snapshot.columns;
    let me = host.crypto();
    let mut out = Vec::new();
    for f in fleet.findings(&me) {
        // Hosts with the same (known) CPU identity that advertise what this one lacks.
        let features: Vec<&str> = f.features.iter().map(String::as_str).collect();
        let peers_with = fleet.others_advertising(&me, &features);
        let mut evidence = json!({
            "features": f.features,
            "advertised": facts.features_advertised,
            "usable": facts.features_usable,
            "hypervisor_present": facts.hypervisor_present,
            "hypervisor": facts.hypervisor,
            "cpu_model_name": facts.cpu_model_name,
            "kernel_release": facts.kernel_release,
            "build_flavour": facts.build_flavour,
            "agent_version": facts.agent_version,
            "same_cpu_hosts_advertising": peers_with,
            "snapshot_id": host.snapshot.id,
            "emulated": emulated,
        });
        // The providers' facts the reason read, and its remedy.
        match f.reason {
            Reason::KernelCryptoGeneric => {
                evidence["kernel_drivers"] = json!(facts.kernel_drivers);
                evidence["load_modules"] = json!(providers::kernel_remedy(
                    f.features.iter().map(String::as_str),
                    facts.arch.as_deref().unwrap_or_default()
                ));
            }
            Reason::OpensslMasked => evidence["openssl"] = json!(facts.openssl_build),
            Reason::OpensslNoAcceleration => {
                evidence["openssl"] = json!(facts.openssl_build);
                evidence["openssl_paths"] = json!(me.openssl_paths);
            }
            _ => {}
        }
        out.push(Derived {
            finding: NewFinding {
                host_id: host.host_id(),
                reason: f.reason.as_str().to_string(),
                kind: None,
                subject: fact_subject(f.reason, &f.features),
                severity: fact_severity(f.reason, &f.features),
                first_seen: None,
                evidence,
                fact_changes: json!({}),
                summary: fact_summary(f.reason, &f.features, facts, peers_with, emulated),
            },
            anchor: Anchor::Facts(f.reason),
        });
    }
    let promise = Promise {
        arch: facts.arch.as_deref(),
        usable: &facts.features_usable,
        build_flavour: me.build_flavour,
    };
    for u in unexplained::unexplained(promise, latest) {
        out.push(unexplained_finding(host, &u, emulated));
    }
    let slow = series::slow_verdicts(host.host_id(), mine, peers, t);
    for v in slow
        .into_iter()
        .filter(|v| only.is_none_or(|a| a.contains(v.algorithm.name())))
    {
        out.push(slow_finding(v, emulated, t));
    }
    out
}

fn unexplained_finding(host: &CurrentFacts, u: &Unexplained, emulated: bool) -> Derived {
    let facts = &host.snapshot.columns;
    let needs: Vec<&str> = hardware_features(facts.arch.as_deref())
        .iter()
        .filter(|(_, p)| *p == u.primitive)
        .map(|(f, _)| *f)
        .collect();
    let result_json = |r: &&Ran| {
        json!({
            "result_id": r.result_id,
            "series": r.result.point,
            "path_used": r.result.path_used,
            "backends": r.backends.as_ref().map(|b| &b.0),
            "throughput_mb_s": r.result.throughput_mb_s,
            "created_at": r.result.created_at,
            "snapshot_id": r.result.snapshot_id,
        })
    };
    let evidence = json!({
        "primitive": u.primitive.as_str(),
        "features_needed": needs,
        "usable": facts.features_usable,
        "advertised": facts.features_advertised,
        "build_flavour": facts.build_flavour,
        "agent_version": facts.agent_version,
        "hypervisor": facts.hypervisor,
        "snapshot_id": host.snapshot.id,
        "results_in_software": u.in_software.len(),
        "results_checked": u.checked,
        "results": u.in_software.iter().take(EVIDENCE_RESULTS).map(result_json).collect::<Vec<_>>(),
        "emulated": emulated,
    });
    let (newest, oldest) = (&u.in_software[0].result, &u.in_software[u.in_software.len() - 1].result);
    let s = &newest.point;
    let backend = u.in_software[0]
        .backends
        .as_ref()
        .map(|b| {
            format!(
                "worker backends aes={} ghash={} chacha20={} sha256={}",
                b.aes, b.ghash, b.chacha20, b.sha256
            )
        })
        .unwrap_or_else(|| format!("path used {}", newest.path_used));
    let text = format!(
        "{} ran in software in {} of {} latest accelerated results (e.g. {} {} B {}: {backend}, {:.0} MB/s) \
         although the facts show {} usable in an accelerated build: something between the probe and the \
         worker (an emulator, a hypervisor, a library) took the hardware path away.",
        u.primitive.what(),
        u.in_software.len(),
        u.checked,
        s.algorithm,
        s.size_bytes,
        s.direction,
        newest.throughput_mb_s,
        needs.join(", "),
    );
    Derived {
        finding: NewFinding {
            host_id: host.host_id(),
            reason: unexplained::REASON.into(),
            kind: None,
            subject: u.primitive.as_str().into(),
            severity: Severity::Critical,
            first_seen: None,
            evidence,
            fact_changes: json!({}),
            summary: if emulated {
                format!("{text}{EMULATED_NOTE}")
            } else {
                text
            },
        },
        anchor: Anchor::Results {
            first: oldest.created_at,
            snapshot: newest.snapshot_id,
        },
    }
}

/// First-seen and fact changes of a new `unexplained-fallback`: its oldest
/// result in software, and the change into the snapshot its newest one ran on
/// (often none: the facts did not move, which is the point).
pub(super) fn anchor_results(
    first: DateTime<Utc>,
    snapshot: Option<i64>,
    history: &[Snapshot],
) -> (Option<DateTime<Utc>>, Value) {
    let at = snapshot
        .and_then(|id| history.iter().position(|s| s.id == id))
        .or(history.len().checked_sub(1));
    let Some(at) = at else {
        return (Some(first), json!({}));
    };
    let before = at.checked_sub(1).map(|i| &history[i]);
    (Some(first), fact_changes(before, &history[at]))
}

fn slow_finding(v: SlowVerdict, emulated: bool, t: &Thresholds) -> Derived {
    let h = &v.headline;
    let series_json = |s: &SeriesVerdict| {
        json!({
            "series": s.series,
            "value_mb_s": s.finding.value_mb_s,
            "reference_mb_s": s.finding.reference_mb_s,
            "ratio": s.finding.ratio,
            "z": s.finding.z,
            "results": s.finding.results,
            "reference_results": s.finding.reference_results,
        })
    };
    let evidence = json!({
        "kind": v.kind.as_str(),
        "value_mb_s": h.finding.value_mb_s,
        "reference_mb_s": h.finding.reference_mb_s,
        "ratio": h.finding.ratio,
        "z": h.finding.z,
        "results": h.finding.results,
        "reference_results": h.finding.reference_results,
        "series": h.series,
        "series_flagged": v.flagged.len(),
        "series_checked": v.series_checked,
        "flagged": v.flagged.iter().take(EVIDENCE_SERIES).map(series_json).collect::<Vec<_>>(),
        "thresholds": {
            "near_software_ratio": t.near_software_ratio,
            "min_results": t.min_results,
            "min_peers": t.min_peers,
            "min_drop": t.min_drop,
            "min_z": t.min_z,
            "min_baseline": t.min_baseline,
            "recent": t.recent,
            "big_drop_ratio": t.big_drop_ratio,
            "big_drop_min_baseline": t.big_drop_min_baseline,
        },
        "emulated": emulated,
    });
    Derived {
        finding: NewFinding {
            host_id: v.host_id,
            reason: "slow-accelerated".into(),
            kind: Some(v.kind.as_str().into()),
            subject: series::slow_subject(v.provider, v.algorithm),
            severity: slow_severity(v.kind),
            first_seen: None,
            evidence,
            fact_changes: json!({}),
            summary: slow_summary(&v, emulated),
        },
        anchor: Anchor::Series(Box::new(v.headline)),
    }
}

/// What a fact-based finding concerns: the features for a missing flag, a
/// fixed group for the others (so a growing list of disabled features stays
/// one finding).
fn fact_subject(reason: Reason, features: &[String]) -> String {
    match reason {
        Reason::CpuLacks | Reason::HypervisorMasks => features.join(","),
        Reason::OsDisabled => "avx-state".into(),
        Reason::SoftwareBuild => "build".into(),
        Reason::KernelCryptoGeneric => providers::KERNEL_SUBJECT.into(),
        Reason::OpensslMasked => providers::OPENSSL_SUBJECT.into(),
        Reason::OpensslNoAcceleration => providers::OPENSSL_PATHS_SUBJECT.into(),
    }
}

/// The severity scheme (see [`Severity`]): lost silicon is critical; software
/// crypto or a drop is a warning; only the wide vector extensions off is info.
/// A hidden AES or GHASH flag is critical; a hidden AVX2 or SHA-256 flag
/// costs one family of algorithms, a warning.
pub fn fact_severity(reason: Reason, features: &[String]) -> Severity {
    let major = features.iter().any(|f| primitive_of(f).is_some_and(|p| p.is_major()));
    match reason {
        Reason::HypervisorMasks if major => Severity::Critical,
        Reason::HypervisorMasks => Severity::Warning,
        // The kernel's or OpenSSL's AES in software: what uses them runs at software speed.
        Reason::CpuLacks
        | Reason::SoftwareBuild
        | Reason::KernelCryptoGeneric
        | Reason::OpensslMasked
        | Reason::OpensslNoAcceleration => Severity::Warning,
        // AVX/AVX2 state off costs GCM its fast GHASH; AVX-512 and VAES off only the widest paths.
        Reason::OsDisabled if features.iter().any(|f| f == "avx" || f == "avx2") => Severity::Warning,
        Reason::OsDisabled => Severity::Info,
    }
}

/// Accelerated at software speed means the hardware path is not doing its
/// job: critical. Below peers or below its own past: a warning.
pub fn slow_severity(kind: SlowKind) -> Severity {
    match kind {
        SlowKind::NearSoftware => Severity::Critical,
        SlowKind::BelowPeers | SlowKind::DroppedVsHistory => Severity::Warning,
    }
}

/// First-seen and fact changes of a new fact-based finding: the first
/// snapshot of the latest run of snapshots where it holds, and what changed
/// from the snapshot before it.
pub(super) fn anchor_facts(
    host_id: i64,
    reason: Reason,
    subject: &str,
    history: &[Snapshot],
    fleet: &CpuGroups,
) -> (Option<DateTime<Utc>>, Value) {
    let holds = |s: &Snapshot| {
        let then = crypto_of(host_id, s);
        fleet
            .findings(&then)
            .iter()
            .any(|f| f.reason == reason && fact_subject(f.reason, &f.features) == subject)
    };
    let Some(last) = history.last() else {
        return (None, json!({}));
    };
    let start = history.iter().rposition(|s| !holds(s)).map_or(0, |i| i + 1);
    let first = history.get(start).unwrap_or(last);
    let before = start.checked_sub(1).map(|i| &history[i]);
    (Some(first.taken_at), fact_changes(before, first))
}

/// First-seen and fact changes of a new slow finding: from the series' last
/// good result (its snapshot) to its latest result.
pub(super) fn anchor_series(v: &SeriesVerdict, history: &[Snapshot]) -> (Option<DateTime<Utc>>, Value) {
    let find = |id: Option<i64>| id.and_then(|id| history.iter().find(|s| s.id == id));
    let Some(latest) = find(v.latest_snapshot).or(history.last()) else {
        return (Some(v.first_bad), json!({}));
    };
    let good = v.last_good.and_then(|(snapshot, _)| find(snapshot));
    let mut changes = fact_changes(good, latest);
    changes["last_good_result_at"] = json!(v.last_good.map(|(_, at)| at));
    (Some(v.first_bad), changes)
}

/// `{"from": {snapshot}, "to": {snapshot}, "changes": {...}}`; `from` is null
/// when there is no earlier state to compare with.
fn fact_changes(before: Option<&Snapshot>, after: &Snapshot) -> Value {
    let at = |s: &Snapshot| json!({"snapshot_id": s.id, "taken_at": s.taken_at});
    json!({
        "from": before.map(at),
        "to": at(after),
        "changes": before.map(|b| changes::diff(&b.columns, &after.columns)).unwrap_or_default(),
    })
}

pub(super) fn crypto_of(host_id: i64, s: &Snapshot) -> HostCrypto {
    let c = &s.columns;
    HostCrypto {
        host_id,
        arch: c.arch.clone(),
        cpu: (c.cpu_vendor.clone(), c.cpu_family, c.cpu_model, c.cpu_stepping),
        hypervisor: c.hypervisor_present,
        advertised: c.features_advertised.clone(),
        usable: c.features_usable.clone(),
        // A flavour this coordinator does not know is judged as unknown.
        build_flavour: c.build_flavour.as_deref().and_then(|f| f.parse().ok()),
        cpuinfo_foreign: c.cpuinfo_foreign,
        // The facts alone; [`CurrentFacts::crypto`] adds the host's labels.
        emulated: marks::EmulationFacts::of(c).show_emulation(),
        kernel_drivers: c.kernel_drivers.as_ref().map(|d| d.0.clone()).unwrap_or_default(),
        openssl_masked: c
            .openssl_build
            .as_ref()
            .map(|b| providers::openssl_masked(&b.0))
            .unwrap_or_default(),
        openssl_paths: Vec::new(),
    }
}

impl CurrentFacts {
    /// What the fact rules judge of the host: its snapshot's crypto facts and
    /// its OpenSSL's latest points on both paths.
    pub(super) fn crypto(&self) -> HostCrypto {
        HostCrypto {
            openssl_paths: self.openssl_paths.as_ref().map(|p| p.0.clone()).unwrap_or_default(),
            emulated: self.emulated(),
            ..crypto_of(self.host_id(), &self.snapshot)
        }
    }

    /// Whether the host's CPU is emulated, by the one rule in [`marks`].
    pub(super) fn emulated(&self) -> bool {
        marks::is_emulated(&self.labels.0, marks::EmulationFacts::of(&self.snapshot.columns))
    }

    /// Who a host is compared with: its [`MachineClass`] (the one definition
    /// the report and the planner group by), emulated hosts only with
    /// emulated ones.
    pub(super) fn class(&self) -> (MachineClass, bool) {
        let c = &self.snapshot.columns;
        let class = MachineClass::of(
            c.arch.as_deref(),
            c.cpu_vendor.as_deref(),
            c.cpu_model_name.as_deref(),
            &c.features_usable,
            c.build_flavour.as_deref(),
        );
        (class, self.emulated())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::REASONS;

    pub(super) fn features(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn severity_follows_what_was_lost() {
        let cases = [
            (Reason::HypervisorMasks, features(&["aes"]), Severity::Critical),
            (Reason::HypervisorMasks, features(&["pclmulqdq"]), Severity::Critical),
            (Reason::HypervisorMasks, features(&["sha"]), Severity::Warning),
            (Reason::CpuLacks, features(&["aes"]), Severity::Warning),
            (Reason::CpuLacks, features(&["pmull"]), Severity::Warning),
            (Reason::SoftwareBuild, features(&[]), Severity::Warning),
            (Reason::OsDisabled, features(&["avx", "avx2"]), Severity::Warning),
            (Reason::OsDisabled, features(&["avx512f", "vaes"]), Severity::Info),
            (Reason::KernelCryptoGeneric, features(&["aes"]), Severity::Warning),
            (
                Reason::OpensslMasked,
                features(&["aes", "pclmulqdq"]),
                Severity::Warning,
            ),
        ];
        for (reason, f, want) in cases {
            assert_eq!(fact_severity(reason, &f), want, "{reason:?} {f:?}");
        }
        assert_eq!(slow_severity(SlowKind::NearSoftware), Severity::Critical);
        assert_eq!(slow_severity(SlowKind::BelowPeers), Severity::Warning);
        assert_eq!(slow_severity(SlowKind::DroppedVsHistory), Severity::Warning);
    }

    #[test]
    fn every_reason_has_its_spelling_in_reasons() {
        for r in [
            Reason::CpuLacks,
            Reason::HypervisorMasks,
            Reason::OsDisabled,
            Reason::SoftwareBuild,
            Reason::KernelCryptoGeneric,
            Reason::OpensslMasked,
        ] {
            assert!(REASONS.contains(&r.as_str()));
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }
}
