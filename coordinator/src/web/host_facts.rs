//! A host's facts as the host page reads them: the current snapshot as a
//! table with units, every CPU feature the probe checked, advertised against
//! usable (an absent feature and the gap are what hide acceleration), and
//! the history of changes between snapshots (kernel upgrades, flags gained
//! or lost, agent upgrades), built on [`changes::diff`] so the page and the
//! findings agree on what changed.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use cipherfleet_core::facts::ArmId;
use cipherfleet_core::provider::facts::WatchedService;
use serde::Serialize;
use serde_json::Value;

use super::format;
use crate::analysis::changes;
use crate::analysis::marks::EmulationFacts;
use crate::domain::facts::FactColumns;
use crate::store::snapshots::Snapshot;

/// One fact of the current snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub name: &'static str,
    /// With its unit; `–` when the agent did not report it.
    pub value: String,
}

/// `v` as text, or `–` for a fact the agent did not report (older agents,
/// other platforms): an unknown must not read as zero or "no".
pub fn or_dash<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(T::to_string).unwrap_or_else(|| "–".into())
}

/// The current snapshot as (name, value) rows, in the order an engineer
/// checks them: what CPU, what kernel and OS, virtualised or emulated or not,
/// the clock the engine times with, which agent.
pub fn facts_table(s: &Snapshot) -> Vec<Fact> {
    let c = &s.columns;
    let fact = |name, value| Fact { name, value };
    let text = |pointer: &str| s.facts.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
    let clock_read = s.facts.pointer("/noise/clock_read_ns").and_then(Value::as_f64);
    let mut facts = vec![fact("Architecture", or_dash(&c.arch))];
    facts.extend(cpu_identity(s));
    facts.extend([
        fact("Logical cores", or_dash(&c.logical_cores)),
        fact(
            "Memory",
            c.memory_total_bytes
                .map(|b| format::bytes(b.max(0) as u64))
                .unwrap_or_else(|| "–".into()),
        ),
        fact("Kernel", or_dash(&c.kernel_release)),
        fact("OS", or_dash(&c.os_name)),
        fact(
            "Hypervisor",
            match (c.hypervisor_present, &c.hypervisor) {
                (Some(true), Some(kind)) => format!("yes ({kind})"),
                (Some(true), None) => "yes".into(),
                (Some(false), _) => "none (bare metal)".into(),
                (None, kind) => or_dash(kind),
            },
        ),
        fact(
            "Device-tree hypervisor",
            or_dash(&text("/virtualization/device_tree_hypervisor")),
        ),
        fact("CPU emulation", emulation_text(c)),
        fact("Clock source", or_dash(&text("/noise/clocksource"))),
        fact(
            "Clock read",
            match clock_read {
                // A read in microseconds shortens every timed batch.
                Some(ns) if ns >= SLOW_CLOCK_NS => format!("{ns:.0} ns (slow: timings of small payloads read low)"),
                Some(ns) => format!("{ns:.1} ns"),
                None => "–".into(),
            },
        ),
        fact("Agent build", or_dash(&c.build_flavour)),
        fact("Agent version", or_dash(&c.agent_version)),
        fact("Agent compiled with", or_dash(&c.build_codegen)),
        fact(
            "Compile-time target features",
            if c.build_target_features.is_empty() {
                "–".into()
            } else {
                c.build_target_features.join(" ")
            },
        ),
    ]);
    facts
}

/// Who made the CPU and which it is. x86 reports a brand string and CPUID's
/// family, model and stepping; aarch64 only numbers (MIDR_EL1's implementer,
/// part, variant and revision), named here from the one table both programs
/// share ([`cipherfleet_core::facts::arm`]), so facts stored before the table
/// knew a part are named too, each with its number beside it.
fn cpu_identity(s: &Snapshot) -> [Fact; 3] {
    let c = &s.columns;
    let arm = s
        .facts
        .pointer("/cpu/arm")
        .and_then(|v| serde_json::from_value::<ArmId>(v.clone()).ok())
        .filter(|a| a.implementer.is_some() || a.part.is_some());
    let fact = |name, value| Fact { name, value };
    match arm {
        Some(arm) => [
            fact(
                "CPU vendor",
                arm.implementer_text()
                    .or_else(|| c.cpu_vendor.clone())
                    .unwrap_or_else(|| "–".into()),
            ),
            // A `model name` the kernel printed (32-bit tasks) wins; the part otherwise.
            fact(
                "CPU model",
                c.cpu_model_name
                    .clone()
                    .or_else(|| arm.model_text())
                    .unwrap_or_else(|| "–".into()),
            ),
            fact(
                "Implementer / part / revision",
                format!(
                    "{} / {} / {}",
                    arm.implementer.map_or_else(|| "–".into(), |i| format!("{i:#04x}")),
                    arm.part.map_or_else(|| "–".into(), |p| format!("{p:#05x}")),
                    arm.revision_text().unwrap_or_else(|| "–".into())
                ),
            ),
        ],
        None => [
            fact("CPU vendor", or_dash(&c.cpu_vendor)),
            fact("CPU model", or_dash(&c.cpu_model_name)),
            fact(
                "Family / model / stepping",
                format!(
                    "{} / {} / {}",
                    or_dash(&c.cpu_family),
                    or_dash(&c.cpu_model),
                    or_dash(&c.cpu_stepping)
                ),
            ),
        ],
    }
}

/// A clock read this slow (ns) or slower is worth a word: a fast clock source
/// costs tens of nanoseconds; `hpet`, `acpi_pm` or emulation microseconds.
const SLOW_CLOCK_NS: f64 = 500.0;

/// What the facts say of an emulated CPU ([`crate::analysis::marks`]).
fn emulation_text(c: &FactColumns) -> String {
    let facts = EmulationFacts::of(c);
    match (facts.cpuinfo_foreign, facts.show_emulation()) {
        (Some(true), _) => "emulated: /proc/cpuinfo describes another CPU (user-mode emulator)".into(),
        (_, true) => "emulated: QEMU's software CPU (TCG)".into(),
        (Some(false), false) => "none seen".into(),
        (None, false) => "–".into(),
    }
}

/// A CPU feature the probe looked at: what CPUID/HWCAP says against what
/// the OS lets programs use.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureRow {
    pub name: String,
    /// CPUID (x86) or HWCAP (ARM) says the CPU has it.
    pub advertised: bool,
    /// Programs may use it: on x86 the OS enabled its register state (XCR0).
    pub usable: bool,
}

impl FeatureRow {
    /// The CPU has it but programs cannot use it (hidden state, old kernel):
    /// the case the page highlights.
    pub fn unusable(&self) -> bool {
        self.advertised && !self.usable
    }
}

/// Every feature the probe checked, in the order of the snapshot's
/// `features.checked` list, with what CPUID/HWCAP and the OS said of it. A
/// checked name that is not advertised is known to be absent and shows as
/// such: an emulated Nehalem's missing `aes` is the row that matters. Names
/// advertised or usable but never checked follow in name order, so nothing
/// a list names is hidden; for snapshots without a `checked` list (older
/// agents) they are all there is.
///
/// The coordinator stores facts normalised, `checked` sorted by name (see
/// [`crate::domain::facts::NormalisedFacts`]), so stored snapshots list
/// their features alphabetically.
pub fn feature_rows(s: &Snapshot) -> Vec<FeatureRow> {
    let c = &s.columns;
    let mut names: Vec<&str> = Vec::new();
    for name in checked_features(s) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let unchecked: BTreeSet<&str> = c
        .features_advertised
        .iter()
        .chain(&c.features_usable)
        .map(String::as_str)
        .filter(|n| !names.contains(n))
        .collect();
    names.extend(unchecked);
    names
        .into_iter()
        .map(|n| FeatureRow {
            name: n.to_string(),
            advertised: c.features_advertised.iter().any(|a| a == n),
            usable: c.features_usable.iter().any(|u| u == n),
        })
        .collect()
}

/// Whether the snapshot says which features the probe checked; without that
/// list a feature [`feature_rows`] does not name is unknown, not absent.
pub fn features_checked(s: &Snapshot) -> bool {
    checked_features(s).next().is_some()
}

/// The snapshot's `features.checked` names, as stored.
fn checked_features(s: &Snapshot) -> impl Iterator<Item = &str> {
    s.facts
        .pointer("/features/checked")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The kernel crypto API's chosen driver for one algorithm name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelDriverRow {
    /// `gcm(aes)`.
    pub name: String,
    /// `generic-gcm-aesni`.
    pub driver: String,
    /// `aesni_intel`, or `kernel` when built in.
    pub module: String,
    /// `accelerated`, `partial` or `software`, as the driver name says.
    pub path: String,
    /// The kernel's portable C rather than an architecture's own code.
    pub generic: bool,
}

/// The kernel's chosen crypto drivers of the snapshot, `None` when its agent
/// did not report them (older agents, `/proc/crypto` unreadable).
pub fn kernel_drivers(s: &Snapshot) -> Option<Vec<KernelDriverRow>> {
    let drivers = s.columns.kernel_drivers.as_ref()?;
    Some(
        drivers
            .0
            .iter()
            .map(|d| KernelDriverRow {
                name: d.name.clone(),
                driver: d.driver.clone(),
                module: d.module.clone(),
                path: d.path.to_string(),
                generic: d.generic,
            })
            .collect(),
    )
}

/// The host's OpenSSL build as (name, value) rows, `None` when the agent
/// reported none: what a service linking it runs, and whether its assembly is in.
pub fn openssl_facts(s: &Snapshot) -> Option<Vec<Fact>> {
    let b = &s.columns.openssl_build.as_ref()?.0;
    let fact = |name, value| Fact { name, value };
    let mut facts = vec![
        fact("Version", b.version.clone()),
        fact("Library", or_dash(&b.library_version)),
        fact("Platform", or_dash(&b.platform)),
        fact(
            "Assembly",
            if b.no_asm {
                "no-asm build: C code only, whatever the CPU".into()
            } else {
                "yes".into()
            },
        ),
        fact(
            "libcrypto",
            b.libcrypto.clone().unwrap_or_else(|| "– (static, or not seen)".into()),
        ),
        fact("Binary", b.binary.clone()),
    ];
    if let Some(env) = &b.capability_env {
        let masks = if b.masked.is_empty() {
            "masks nothing".to_string()
        } else {
            format!("masks {}", b.masked.join(", "))
        };
        facts.push(fact("Capability override", format!("{env} ({masks})")));
    }
    // The services the agent watches (`--watch-env`): what each one's environment masks.
    facts.extend(b.watched.iter().map(|w| fact("Watched service", watched_service(w))));
    Some(facts)
}

/// One watched service as its row says it: who, then what its environment
/// holds of the capability variable and where that was read, or why it was
/// not. Agent text throughout: the template escapes it.
fn watched_service(w: &WatchedService) -> String {
    let who = match &w.name {
        Some(name) => format!("{} ({name})", w.target),
        None => w.target.clone(),
    };
    let what = match (&w.error, &w.capability_env) {
        (Some(error), _) => format!("not read: {error}"),
        (None, Some(env)) if w.masked.is_empty() => format!("{env} (masks nothing), from {}", w.source),
        (None, Some(env)) => format!("{env} (masks {}), from {}", w.masked.join(", "), w.source),
        (None, None) => format!("no capability variable, from {}", w.source),
    };
    format!("{who}: {what}")
}

/// One changed fact between two consecutive snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactChange {
    /// When the snapshot with the new value was taken.
    pub at: DateTime<Utc>,
    pub snapshot_id: i64,
    /// In an operator's words: `kernel`, `usable CPU features`, ….
    pub fact: &'static str,
    /// `old → new`, or `lost: …; gained: …` for feature lists.
    pub change: String,
    /// A feature went missing: worth a second look.
    pub lost: bool,
}

impl FactChange {
    /// [`FactChange::at`] as the page prints times.
    pub fn when(&self) -> String {
        format::timestamp(self.at)
    }
}

/// What an operator calls the facts [`changes::diff`] compares, in the order
/// the page lists them.
const FACT_NAMES: [(&str, &str); 13] = [
    ("kernel_release", "kernel"),
    ("os_name", "OS"),
    ("cpu_model_name", "CPU model"),
    ("hypervisor_present", "hypervisor bit"),
    ("hypervisor", "hypervisor"),
    ("agent_version", "agent version"),
    ("build_flavour", "agent build"),
    ("build_codegen", "agent compiler settings"),
    ("build_target_features", "agent target features"),
    ("features_advertised", "advertised CPU features"),
    ("features_usable", "usable CPU features"),
    ("kernel_drivers", "kernel crypto drivers"),
    ("openssl_version", "OpenSSL"),
];

/// (position, name) of a diff key; keys the list does not know go last.
fn fact_name(key: &str) -> (usize, &'static str) {
    FACT_NAMES
        .iter()
        .position(|(k, _)| *k == key)
        .map_or((FACT_NAMES.len(), "other fact"), |i| (i, FACT_NAMES[i].1))
}

/// A value of [`changes::diff`]'s output as the page prints it.
fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// The changes between consecutive snapshots of `history` (oldest first, as
/// [`snapshots::history`] returns it), newest first; one row per changed fact.
pub fn fact_changes(history: &[Snapshot]) -> Vec<FactChange> {
    let mut out = Vec::new();
    for pair in history.windows(2).rev() {
        let (before, after) = (&pair[0], &pair[1]);
        let mut diff: Vec<(String, Value)> = changes::diff(&before.columns, &after.columns).into_iter().collect();
        diff.sort_by_key(|(key, _)| fact_name(key).0);
        for (key, change) in diff {
            let list = |k: &str| change.get(k).map(value_text).unwrap_or_default();
            let (text, lost) = if change.get("gained").is_some() {
                let (lost, gained) = (list("lost"), list("gained"));
                let parts: Vec<String> = [("lost", &lost), ("gained", &gained)]
                    .into_iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect();
                (parts.join("; "), !lost.is_empty())
            } else {
                (format!("{} → {}", list("from"), list("to")), false)
            };
            out.push(FactChange {
                at: after.taken_at,
                snapshot_id: after.id,
                fact: fact_name(&key).1,
                change: text,
                lost,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
