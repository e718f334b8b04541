//! Hosts whose timings are not performance: emulated ones (their findings
//! are real detections, their figures are not) and simulated ones (not
//! measured at all). One rule, which every page, the planner and the
//! findings apply; and [`ranks`], the rule that keeps their figures out of
//! every colour scale, "fastest" and ordering by speed.
//!
//! An operator marks a host with a label; the facts mark an emulated host
//! without one: `/proc/cpuinfo` describing another CPU than the one the agent
//! runs on (qemu-user), or QEMU's TCG signature in CPUID's hypervisor leaf.

use std::collections::BTreeMap;

use crate::domain::facts::FactColumns;

/// A host with this label (any value but `false`, `no`, `0`) runs on an
/// emulated CPU.
pub const EMULATED_LABEL: &str = "emulated";

/// A host with this label is a simulated agent (`cipherfleet-sim`): its
/// figures are made up.
pub const SIMULATED_LABEL: &str = "simulated";

/// The hypervisor kind the agent gives QEMU's software CPU (`TCGTCGTCGTCG`).
const QEMU_TCG: &str = "qemu-tcg";

/// Whether `labels` carry `key` with a value that does not say no: `false`,
/// `no` and `0` (any case, surrounding blanks ignored) leave a host unmarked.
pub fn is_marked(labels: &BTreeMap<String, String>, key: &str) -> bool {
    labels
        .get(key)
        .is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "no" | "0"))
}

/// The facts that show emulation, as the current snapshot holds them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmulationFacts<'a> {
    /// The agent's `virtualization.cpuinfo_foreign`.
    pub cpuinfo_foreign: Option<bool>,
    /// The snapshot's hypervisor kind (or signature).
    pub hypervisor: Option<&'a str>,
}

impl EmulationFacts<'_> {
    /// The facts of a snapshot's typed columns.
    pub fn of(columns: &FactColumns) -> EmulationFacts<'_> {
        EmulationFacts {
            cpuinfo_foreign: columns.cpuinfo_foreign,
            hypervisor: columns.hypervisor.as_deref(),
        }
    }

    /// Whether the facts alone show an emulated CPU.
    pub fn show_emulation(&self) -> bool {
        self.cpuinfo_foreign == Some(true) || self.hypervisor == Some(QEMU_TCG)
    }
}

/// Whether a host's timings come from an emulated CPU: labelled so, or its
/// facts show it. An `emulated=false` label does not overrule the facts.
pub fn is_emulated(labels: &BTreeMap<String, String>, facts: EmulationFacts) -> bool {
    is_marked(labels, EMULATED_LABEL) || facts.show_emulation()
}

/// Whether the figures of a host (or of a class of hosts all marked alike)
/// may rank: set a colour scale's ends, be called fastest or slowest, order
/// a list by speed. Emulated and simulated figures are shown, badged and
/// greyed, but never rank: a qemu-emulated 3DES beating a real one says
/// nothing about either machine.
pub fn ranks(emulated: bool, simulated: bool) -> bool {
    !emulated && !simulated
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_label_marks_unless_it_says_no() {
        let cases = [
            (vec![], false),
            (vec![("emulated", "qemu-nehalem")], true),
            (vec![("emulated", "")], true),
            (vec![("emulated", "false")], false),
            (vec![("emulated", " No ")], false),
            (vec![("emulated", "FALSE")], false),
            (vec![("emulated", "0")], false),
            (vec![("simulated", "yes")], false),
        ];
        for (pairs, want) in cases {
            assert_eq!(is_marked(&labels(&pairs), EMULATED_LABEL), want, "{pairs:?}");
        }
    }

    #[test]
    fn only_unmarked_hosts_rank() {
        for (emulated, simulated, ranked) in [
            (false, false, true),
            (true, false, false),
            (false, true, false),
            (true, true, false),
        ] {
            assert_eq!(
                ranks(emulated, simulated),
                ranked,
                "emulated {emulated}, simulated {simulated}"
            );
        }
    }

    #[test]
    fn facts_mark_an_emulated_host_without_a_label() {
        let none = labels(&[]);
        let qemu_user = EmulationFacts {
            cpuinfo_foreign: Some(true),
            hypervisor: None,
        };
        let tcg = EmulationFacts {
            cpuinfo_foreign: None,
            hypervisor: Some("qemu-tcg"),
        };
        let kvm = EmulationFacts {
            cpuinfo_foreign: Some(false),
            hypervisor: Some("kvm"),
        };
        assert!(is_emulated(&none, qemu_user));
        assert!(is_emulated(&none, tcg));
        assert!(!is_emulated(&none, kvm), "a VM runs the real CPU");
        assert!(!is_emulated(&none, EmulationFacts::default()));
        assert!(is_emulated(&labels(&[("emulated", "yes")]), kvm));
        assert!(
            is_emulated(&labels(&[("emulated", "no")]), qemu_user),
            "a label does not overrule the facts"
        );
    }
}
