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

const EMULATED_NOTE: &str = " (emulated host: detection is real, timings are not)";

fn fact_summary(
    reason: Reason,
    features: &[String],
    facts: &crate::domain::facts::FactColumns,
    peers_with: usize,
    emulated: bool,
) -> String {
    let list = features.join(", ");
    // What runs in software for want of them.
    let mut lost: Vec<&str> = features
        .iter()
        .filter_map(|f| primitive_of(f))
        .map(|p| p.what())
        .collect();
    lost.dedup();
    let lost = if lost.is_empty() {
        "AES".to_string()
    } else {
        lost.join(" and ")
    };
    let text = match reason {
        Reason::CpuLacks => format!("The CPU does not advertise {list}: {lost} runs in software."),
        Reason::HypervisorMasks => format!(
            "The hypervisor hides {list}, which {peers_with} host(s) with the same CPU model advertise: {lost} runs in software."
        ),
        Reason::OsDisabled => format!(
            "CPUID advertises {list} but the OS has not enabled the register state (XCR0) on kernel {}.",
            facts.kernel_release.as_deref().unwrap_or("unknown")
        ),
        Reason::SoftwareBuild => format!(
            "The agent (version {}) runs the build that forces software backends.",
            facts.agent_version.as_deref().unwrap_or("unknown")
        ),
        Reason::KernelCryptoGeneric => kernel_generic_summary(features, facts),
        Reason::OpensslMasked => openssl_masked_summary(features, facts),
        Reason::OpensslNoAcceleration => openssl_unaccelerated_summary(features, facts),
    };
    if emulated {
        format!("{text}{EMULATED_NOTE}")
    } else {
        text
    }
}

/// `kernel-crypto-generic`: which names run what, the module to load and what runs slow meanwhile.
fn kernel_generic_summary(names: &[String], facts: &crate::domain::facts::FactColumns) -> String {
    let arch = facts.arch.as_deref().unwrap_or_default();
    let chosen: Vec<String> = facts
        .kernel_drivers
        .iter()
        .flat_map(|d| d.0.iter())
        .filter(|d| names.contains(&d.name))
        .map(|d| format!("{} → {} ({})", d.name, d.driver, d.module))
        .collect();
    let needs: Vec<&str> = names
        .iter()
        .filter_map(|n| providers::kernel_needs(n, arch))
        .flatten()
        .copied()
        .fold(Vec::new(), |mut all, f| {
            if !all.contains(&f) {
                all.push(f);
            }
            all
        });
    let modules = providers::kernel_remedy(names.iter().map(String::as_str), arch);
    let load: Vec<&str> = modules.iter().filter_map(|m| m.split_whitespace().next()).collect();
    format!(
        "The CPU has {} usable, but the kernel's chosen crypto drivers run AES in software: {}. \
         Load {} (`modprobe {}`; check it is not blacklisted and that kernel {} builds it): until then \
         {} on this host encrypt in software.",
        needs.join(", "),
        chosen.join(", "),
        modules.join(" and "),
        load.join(" "),
        facts.kernel_release.as_deref().unwrap_or("unknown"),
        providers::KERNEL_USERS,
    )
}

/// `openssl-masked`: for each environment that masks (the agent's, each
/// watched service's), the variable, what it masks and how to remove it.
fn openssl_masked_summary(masked: &[String], facts: &crate::domain::facts::FactColumns) -> String {
    let build = facts.openssl_build.as_ref().map(|b| &b.0);
    let openssl = build.map_or_else(
        || "the host's OpenSSL".to_string(),
        |b| format!("{} ({})", b.version, b.binary),
    );
    let sources = build.map(providers::openssl_masking).unwrap_or_default();
    if sources.is_empty() {
        // No build to name the sources from: the features alone.
        return format!(
            "An OpenSSL capability variable masks {} from {openssl}: every program started with it runs them \
             in software.",
            masked.join(", ")
        );
    }
    let said: Vec<String> = sources.iter().map(|m| masking_sentence(m, &openssl)).collect();
    said.join(" ")
}

/// What one masking environment does and its remedy.
fn masking_sentence(m: &providers::Masking<'_>, openssl: &str) -> String {
    let variable = m.capability_env.unwrap_or("An OpenSSL capability variable");
    let name = providers::variable_name(variable);
    let masked = m.masked.join(", ");
    let Some(service) = m.service else {
        return format!(
            "{variable} in the agent's environment masks {masked} from {openssl}: every program started with it \
             runs them in software. Remove {name} from the services' environment (a unit's Environment=, \
             /etc/environment, a profile script) unless it is there on purpose."
        );
    };
    let who = match &service.name {
        Some(process) => format!("{} ({process})", service.target),
        None => service.target.clone(),
    };
    let remedy = match service.target.strip_prefix("unit ") {
        Some(unit) => format!(
            "Remove {name} from the unit's Environment= or EnvironmentFile= (`systemctl edit {unit}`), then \
             `systemctl restart {unit}`."
        ),
        None => format!(
            "Remove {name} from that service's environment (its unit's Environment=, its start script) and \
             restart it."
        ),
    };
    format!(
        "{variable} in the environment of the watched service {who} masks {masked} from the OpenSSL it \
         links: it runs them in software. {remedy}"
    )
}

/// `openssl-no-acceleration`: which OpenSSL, the points, and the likely cause.
fn openssl_unaccelerated_summary(points: &[String], facts: &crate::domain::facts::FactColumns) -> String {
    let build = facts.openssl_build.as_ref().map(|b| &b.0);
    let openssl = build.map_or_else(
        || "The host's OpenSSL".to_string(),
        |b| format!("The host's {} ({})", b.version, b.binary),
    );
    let cause = if build.is_some_and(|b| b.no_asm) {
        "It is a no-asm build (C code only): install one with its assembly, such as the distribution's package."
    } else {
        "A no-asm build, a capability variable in the services' environment, or a CPU too new for this \
         OpenSSL to recognise: upgrade it, or check `openssl version -a` and the services' environment."
    };
    format!(
        "{openssl} runs AES no faster asked for its accelerated path than with its capability vector masked \
         ({}), on a CPU with AES: nginx, HAProxy, PostgreSQL and every service linking it encrypt at software \
         speed. {cause}",
        points.join("; ")
    )
}

fn slow_summary(v: &SlowVerdict, emulated: bool) -> String {
    let h = &v.headline;
    let s = &h.series;
    // Another provider than the built-in crates is named: its figures are
    // that library's (or the kernel's), not the agent's.
    let point = match s.provider {
        p if p.is_rustcrypto() => format!("{} {} B {}", s.algorithm, s.size_bytes, s.direction),
        p => format!("{} {} B {} on the {p} provider", s.algorithm, s.size_bytes, s.direction),
    };
    let (value, reference, ratio) = (h.finding.value_mb_s, h.finding.reference_mb_s, h.finding.ratio);
    // A drop too large to be noise fires from one result: say so.
    let one = if h.finding.results == 1 {
        " in its latest result"
    } else {
        ""
    };
    let comparison = match v.kind {
        SlowKind::NearSoftware => {
            format!("the accelerated path runs at {ratio:.2}× the software path ({value:.0} vs {reference:.0} MB/s)")
        }
        SlowKind::BelowPeers => {
            format!("{value:.0} MB/s{one} is {ratio:.2}× the median of same-class hosts ({reference:.0} MB/s)")
        }
        SlowKind::DroppedVsHistory if h.finding.results == 1 => {
            format!("{value:.0} MB/s in its latest result, {ratio:.2}× its own earlier {reference:.0} MB/s")
        }
        SlowKind::DroppedVsHistory => {
            format!("{value:.0} MB/s recently, {ratio:.2}× its own earlier {reference:.0} MB/s")
        }
    };
    let more = match v.flagged.len() {
        1 => String::new(),
        n => format!(" ({n} of {} series)", v.series_checked),
    };
    let text = format!("{point}: {comparison}{more}.");
    if emulated {
        format!("{text}{EMULATED_NOTE}")
    } else {
        text
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

    fn features(list: &[&str]) -> Vec<String> {
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

    #[test]
    fn the_providers_findings_name_their_remedy() {
        use cipherfleet_core::provider::facts::OpensslBuild;
        use sqlx::types::Json;
        let facts = crate::domain::facts::FactColumns {
            arch: Some("x86_64".into()),
            kernel_release: Some("6.12.48".into()),
            kernel_drivers: Some(Json(vec![crate::analysis::providers::tests::driver(
                "aes",
                "aes-fixed-time",
            )])),
            openssl_build: Some(Json(OpensslBuild {
                binary: "/usr/bin/openssl".into(),
                version: "OpenSSL 3.0.19 27 Jan 2026".into(),
                capability_env: Some("OPENSSL_ia32cap=~0x200000200000000".into()),
                masked: features(&["aes", "pclmulqdq"]),
                ..OpensslBuild::default()
            })),
            ..Default::default()
        };
        let kernel = fact_summary(Reason::KernelCryptoGeneric, &features(&["aes"]), &facts, 0, false);
        assert_eq!(
            kernel,
            "The CPU has aes usable, but the kernel's chosen crypto drivers run AES in software: \
             aes → aes-fixed-time (kernel). Load aesni_intel (`modprobe aesni_intel`; check it is not \
             blacklisted and that kernel 6.12.48 builds it): until then dm-crypt/LUKS, IPsec and kTLS on \
             this host encrypt in software."
        );
        let openssl = fact_summary(
            Reason::OpensslMasked,
            &features(&["aes", "pclmulqdq"]),
            &facts,
            0,
            false,
        );
        assert!(
            openssl.starts_with(
                "OPENSSL_ia32cap=~0x200000200000000 in the agent's environment masks aes, pclmulqdq from \
                 OpenSSL 3.0.19 27 Jan 2026 (/usr/bin/openssl)"
            ) && openssl.contains("Remove OPENSSL_ia32cap from"),
            "{openssl}"
        );
        assert_eq!(
            (
                fact_subject(Reason::KernelCryptoGeneric, &[]),
                fact_subject(Reason::OpensslMasked, &[])
            ),
            ("kernel-aes".to_string(), "openssl".to_string())
        );
    }

    #[test]
    fn openssl_masked_names_each_environment_that_masks_and_its_remedy() {
        use cipherfleet_core::provider::facts::{OpensslBuild, WatchedService};
        use sqlx::types::Json;
        let service = |target: &str, name: Option<&str>, masked: &[&str]| WatchedService {
            target: target.into(),
            name: name.map(str::to_string),
            source: "/proc/4242/environ".into(),
            capability_env: (!masked.is_empty()).then(|| "OPENSSL_ia32cap=~0x200000200000000".to_string()),
            masked: features(masked),
            error: None,
        };
        let build = OpensslBuild {
            binary: "/usr/bin/openssl".into(),
            version: "OpenSSL 3.0.19 27 Jan 2026".into(),
            watched: vec![
                service("pid 4242", Some("nginx"), &["pclmulqdq", "aes"]),
                service("pid 4243", Some("haproxy"), &[]),
                service("unit postgresql.service", None, &["pclmulqdq", "aes"]),
            ],
            ..OpensslBuild::default()
        };
        let facts = |build: &OpensslBuild| crate::domain::facts::FactColumns {
            arch: Some("x86_64".into()),
            openssl_build: Some(Json(build.clone())),
            ..Default::default()
        };
        let summary = |build: &OpensslBuild| {
            let features = providers::openssl_masked(build);
            fact_summary(Reason::OpensslMasked, &features, &facts(build), 0, false)
        };
        assert_eq!(
            summary(&build),
            "OPENSSL_ia32cap=~0x200000200000000 in the environment of the watched service pid 4242 (nginx) \
             masks pclmulqdq, aes from the OpenSSL it links: it runs them in software. Remove OPENSSL_ia32cap \
             from that service's environment (its unit's Environment=, its start script) and restart it. \
             OPENSSL_ia32cap=~0x200000200000000 in the environment of the watched service unit \
             postgresql.service masks pclmulqdq, aes from the OpenSSL it links: it runs them in software. \
             Remove OPENSSL_ia32cap from the unit's Environment= or EnvironmentFile= (`systemctl edit \
             postgresql.service`), then `systemctl restart postgresql.service`."
        );
        // The agent's own environment too: named first, as before, then the services.
        let both = OpensslBuild {
            capability_env: Some("OPENSSL_ia32cap=:~0x20".into()),
            masked: features(&["avx2"]),
            ..build.clone()
        };
        let text = summary(&both);
        assert!(
            text.starts_with(
                "OPENSSL_ia32cap=:~0x20 in the agent's environment masks avx2 from OpenSSL 3.0.19 27 Jan 2026 \
                 (/usr/bin/openssl)"
            ) && text.contains("pid 4242 (nginx) masks pclmulqdq, aes")
                && text.contains("unit postgresql.service masks")
                && !text.contains("haproxy"),
            "{text}"
        );
        assert_eq!(providers::openssl_masked(&both), ["avx2", "pclmulqdq", "aes"]);
    }
}
