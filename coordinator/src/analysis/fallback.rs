//! Why a host would run AES in software, from its facts alone (DESIGN.md
//! reasons 1–4). Peers are hosts with the same CPU identity (vendor, family,
//! model, stepping); a flag hidden on this host but advertised by a peer with
//! the same identity points at the hypervisor, not the silicon.

use cipherfleet_core::path::Flavour;
use serde::Serialize;

/// The facts a fallback decision looks at.
#[derive(Clone, Debug, Default)]
pub struct HostCrypto {
    pub host_id: i64,
    /// (vendor, family, model, stepping); `None` parts are unknown.
    pub cpu: (Option<String>, Option<i32>, Option<i32>, Option<i32>),
    pub hypervisor: Option<bool>,
    pub advertised: Vec<String>,
    pub usable: Vec<String>,
    /// The agent's build; `None` when unknown.
    pub build_flavour: Option<Flavour>,
}

/// A reason, as the report and `check` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The CPU does not advertise the instructions.
    CpuLacks,
    /// Hypervisor bit set and same-model peers advertise what this host does not.
    HypervisorMasks,
    /// Advertised, but the OS has not enabled the register state (XCR0).
    OsDisabled,
    /// The agent is a build that forces software backends.
    SoftwareBuild,
}

impl Reason {
    /// The spelling stored in `findings.reason` (as serialised).
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::CpuLacks => "cpu-lacks",
            Reason::HypervisorMasks => "hypervisor-masks",
            Reason::OsDisabled => "os-disabled",
            Reason::SoftwareBuild => "software-build",
        }
    }
}

/// One facts-based finding: the reason and the features it concerns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FactFinding {
    pub host_id: i64,
    pub reason: Reason,
    pub features: Vec<String>,
}

/// Features whose absence sends AES (or GCM's GHASH) to software.
const AES_FEATURES: &[&str] = &["aes"];
/// Features that need OS-enabled AVX state (XCR0); advertised but unusable = os-disabled.
const STATEFUL_FEATURES: &[&str] = &["avx", "avx2", "vaes", "vpclmulqdq", "avx512f"];

fn has(list: &[String], f: &str) -> bool {
    list.iter().any(|x| x == f)
}

fn same_cpu(a: &HostCrypto, b: &HostCrypto) -> bool {
    let known = |c: &(Option<String>, Option<i32>, Option<i32>, Option<i32>)| {
        c.0.is_some() && c.1.is_some() && c.2.is_some() && c.3.is_some()
    };
    known(&a.cpu) && a.cpu == b.cpu
}

/// Findings for `host`, judged against the whole fleet (`fleet` may include `host`).
pub fn findings(host: &HostCrypto, fleet: &[HostCrypto]) -> Vec<FactFinding> {
    let mut out = Vec::new();
    let finding = |reason, features: Vec<&str>| FactFinding {
        host_id: host.host_id,
        reason,
        features: features.into_iter().map(str::to_string).collect(),
    };
    if host.build_flavour == Some(Flavour::Software) {
        out.push(finding(Reason::SoftwareBuild, vec![]));
    }
    let missing: Vec<&str> = AES_FEATURES
        .iter()
        .copied()
        .filter(|f| !has(&host.advertised, f))
        .collect();
    if !missing.is_empty() {
        let peers_have = fleet
            .iter()
            .filter(|p| p.host_id != host.host_id && same_cpu(p, host))
            .any(|p| missing.iter().all(|f| has(&p.advertised, f)));
        let reason = if host.hypervisor == Some(true) && peers_have {
            Reason::HypervisorMasks
        } else {
            Reason::CpuLacks
        };
        out.push(finding(reason, missing));
    }
    let disabled: Vec<&str> = STATEFUL_FEATURES
        .iter()
        .copied()
        .filter(|f| has(&host.advertised, f) && !has(&host.usable, f))
        .collect();
    if !disabled.is_empty() {
        out.push(finding(Reason::OsDisabled, disabled));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: i64, model: i32, hypervisor: bool, advertised: &[&str], usable: &[&str], flavour: &str) -> HostCrypto {
        HostCrypto {
            host_id: id,
            cpu: (Some("GenuineIntel".into()), Some(6), Some(model), Some(7)),
            hypervisor: Some(hypervisor),
            advertised: advertised.iter().map(|s| s.to_string()).collect(),
            usable: usable.iter().map(|s| s.to_string()).collect(),
            build_flavour: Some(flavour.parse().unwrap()),
        }
    }

    #[test]
    fn each_reason_from_facts() {
        let full = ["aes", "pclmulqdq", "avx", "avx2"];
        let healthy = host(1, 85, true, &full, &full, "accelerated");
        let masked = host(2, 85, true, &["pclmulqdq"], &["pclmulqdq"], "accelerated");
        let bare_metal_lacking = host(3, 85, false, &["pclmulqdq"], &["pclmulqdq"], "accelerated");
        let old_model = host(4, 26, true, &[], &[], "accelerated");
        let old_kernel = host(5, 85, false, &full, &["aes", "pclmulqdq"], "accelerated");
        let soft = host(6, 85, false, &full, &full, "software");
        let lone_vm = HostCrypto {
            cpu: (None, None, None, None),
            ..host(7, 0, true, &[], &[], "accelerated")
        };
        let fleet = vec![
            healthy.clone(),
            masked.clone(),
            bare_metal_lacking.clone(),
            old_model.clone(),
            old_kernel.clone(),
            soft.clone(),
            lone_vm.clone(),
        ];
        let reasons = |h: &HostCrypto| findings(h, &fleet).into_iter().map(|f| f.reason).collect::<Vec<_>>();
        let cases: Vec<(&HostCrypto, Vec<Reason>)> = vec![
            (&healthy, vec![]),
            (&masked, vec![Reason::HypervisorMasks]),
            (&bare_metal_lacking, vec![Reason::CpuLacks]),
            (&old_model, vec![Reason::CpuLacks]),
            (&old_kernel, vec![Reason::OsDisabled]),
            (&soft, vec![Reason::SoftwareBuild]),
            (&lone_vm, vec![Reason::CpuLacks]),
        ];
        for (h, want) in cases {
            assert_eq!(reasons(h), want, "host {}", h.host_id);
        }
        let f = findings(&old_kernel, &fleet);
        assert_eq!(f[0].features, ["avx", "avx2"]);
    }

    #[test]
    fn a_masked_vm_without_same_model_peers_is_not_blamed_on_the_hypervisor() {
        let masked = host(2, 85, true, &["pclmulqdq"], &["pclmulqdq"], "accelerated");
        let other_model = host(1, 106, true, &["aes"], &["aes"], "accelerated");
        let f = findings(&masked, &[masked.clone(), other_model]);
        assert_eq!(f[0].reason, Reason::CpuLacks, "no evidence the silicon has it");
    }
}
