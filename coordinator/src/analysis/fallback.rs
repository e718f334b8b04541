//! Why a host would run a primitive in software, from its facts alone
//! (DESIGN.md reasons 1–4): AES, GCM's GHASH, ChaCha20/Poly1305's vector
//! code and SHA-256 each need CPU features of their own. Peers are hosts with
//! the same CPU identity (vendor, family, model, stepping); a flag hidden on
//! this host but advertised by a peer with the same identity points at the
//! hypervisor, not the silicon.
//!
//! The providers add three reasons ([`super::providers`]): the kernel's
//! chosen AES drivers generic on a CPU with the instructions, an OpenSSL
//! capability variable masking them (both from facts), and the host's
//! OpenSSL measured no faster on its accelerated path than on its masked
//! software path (from its latest `openssl` provider points).
//!
//! A CPU without AES or GHASH instructions is a finding (`cpu-lacks`); one
//! without AVX2 or SHA-256 instructions is not: most servers before 2019 lack
//! SHA-NI, and a finding on each would drown the ones that matter. Hidden or
//! disabled, any of them is.

use std::collections::HashMap;

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::path::{Backends, Flavour, is_hardware};
use cipherfleet_core::provider::facts::KernelDriver;
use cipherfleet_core::spec::KeyMode;
use serde::Serialize;

use super::providers;

/// The facts a fallback decision looks at.
#[derive(Clone, Debug, Default)]
pub struct HostCrypto {
    pub host_id: i64,
    /// `x86_64`, `aarch64`, ...: which features the crates look for.
    pub arch: Option<String>,
    /// (vendor, family, model, stepping); `None` parts are unknown.
    pub cpu: (Option<String>, Option<i32>, Option<i32>, Option<i32>),
    pub hypervisor: Option<bool>,
    pub advertised: Vec<String>,
    pub usable: Vec<String>,
    /// The agent's build; `None` when unknown.
    pub build_flavour: Option<Flavour>,
    /// `/proc/cpuinfo` describes another CPU (a user-mode emulator): the
    /// kernel, and its crypto drivers, are the emulator host's, not this CPU's.
    pub cpuinfo_foreign: Option<bool>,
    /// The host's CPU is emulated, by its labels or its facts
    /// ([`super::marks::is_emulated`]): its timings are not performance.
    pub emulated: bool,
    /// The kernel's chosen crypto drivers; empty when not reported.
    pub kernel_drivers: Vec<KernelDriver>,
    /// What an OpenSSL capability variable in the agent's environment or a
    /// watched service's masks (`aes`, `pclmulqdq`…), by
    /// [`providers::openssl_masked`]; empty without one, or when not reported.
    pub openssl_masked: Vec<String>,
    /// The host's OpenSSL's AES points measured on both paths; empty when none were.
    pub openssl_paths: Vec<providers::OpensslPaths>,
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
    /// The kernel's chosen driver for an AES name runs in software although
    /// the CPU has the instructions its hardware driver needs.
    KernelCryptoGeneric,
    /// An `OPENSSL_ia32cap`/`OPENSSL_armcap` in the agent's environment, or in
    /// a service's it watches (`--watch-env`), masks acceleration from OpenSSL.
    OpensslMasked,
    /// The host's OpenSSL measures its accelerated path no faster than its
    /// own masked software path, on a CPU with AES.
    OpensslNoAcceleration,
}

impl Reason {
    /// The spelling stored in `findings.reason` (as serialised).
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::CpuLacks => "cpu-lacks",
            Reason::HypervisorMasks => "hypervisor-masks",
            Reason::OsDisabled => "os-disabled",
            Reason::SoftwareBuild => "software-build",
            Reason::KernelCryptoGeneric => "kernel-crypto-generic",
            Reason::OpensslMasked => "openssl-masked",
            Reason::OpensslNoAcceleration => "openssl-no-acceleration",
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

/// What a CPU feature is the hardware path of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    Aes,
    /// GCM's GHASH multiply.
    Ghash,
    /// ChaCha20 and Poly1305 (AVX2 on x86; ARM has no faster path than NEON).
    ChaCha20,
    /// SHA-256: CBC-HMAC's MAC and HKDF.
    Sha256,
}

impl Primitive {
    /// Whether a point of `algorithm` with `key_mode` runs this primitive.
    pub fn used_by(self, algorithm: Algorithm, key_mode: KeyMode) -> bool {
        match self {
            Primitive::Aes => algorithm.uses_aes(),
            Primitive::Ghash => algorithm.mode == Mode::Gcm,
            Primitive::ChaCha20 => algorithm.cipher == Cipher::ChaCha20,
            Primitive::Sha256 => algorithm.mode == Mode::CbcHmacSha256 || key_mode == KeyMode::HkdfPerUser,
        }
    }

    /// What runs in software without it, as a finding says.
    pub fn what(self) -> &'static str {
        match self {
            Primitive::Aes => "AES",
            Primitive::Ghash => "GCM's GHASH",
            Primitive::ChaCha20 => "ChaCha20 and Poly1305 (baseline vector code)",
            Primitive::Sha256 => "SHA-256 (HMAC, HKDF)",
        }
    }

    /// AES and GHASH decide whether the common AEADs run in hardware; the
    /// others cost one family of algorithms and are missing on many servers,
    /// so a CPU without them is no finding (hidden or disabled, they are).
    pub fn is_major(self) -> bool {
        matches!(self, Primitive::Aes | Primitive::Ghash)
    }

    /// Every primitive, in the order findings list them.
    pub const ALL: [Primitive; 4] = [Primitive::Aes, Primitive::Ghash, Primitive::ChaCha20, Primitive::Sha256];

    /// The spelling an `unexplained-fallback` finding's subject uses.
    pub const fn as_str(self) -> &'static str {
        match self {
            Primitive::Aes => "aes",
            Primitive::Ghash => "ghash",
            Primitive::ChaCha20 => "chacha20",
            Primitive::Sha256 => "sha256",
        }
    }

    /// The primitive spelled `name` ([`Primitive::as_str`]).
    pub fn named(name: &str) -> Option<Primitive> {
        Primitive::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Whether this primitive ran on hardware by a worker's `backends`
    /// ([`is_hardware`]); ChaCha20 counts Poly1305 too when `with_poly1305`
    /// and the worker reported it (agents before measurement/2 did not, and
    /// what is not known to have fallen back is not blamed).
    pub fn ran_on_hardware(self, backends: &Backends, with_poly1305: bool) -> bool {
        match self {
            Primitive::Aes => is_hardware(&backends.aes),
            Primitive::Ghash => is_hardware(&backends.ghash),
            Primitive::ChaCha20 => {
                is_hardware(&backends.chacha20)
                    && (!with_poly1305 || backends.poly1305.as_deref().is_none_or(is_hardware))
            }
            Primitive::Sha256 => is_hardware(&backends.sha256),
        }
    }
}

/// Whether the facts give `primitive` its hardware path on `arch`: every
/// feature it needs ([`hardware_features`]) is usable. `None` when `arch` has
/// no hardware path for it (ChaCha20 on ARM: NEON is the baseline). The one
/// rule behind a host's [`crate::analysis::acceleration`] and what an
/// `unexplained-fallback` expects of it.
pub fn usable_by_facts(arch: Option<&str>, usable: &[String], primitive: Primitive) -> Option<bool> {
    let mut needs = hardware_features(arch)
        .iter()
        .filter(|(_, p)| *p == primitive)
        .peekable();
    needs.peek()?;
    Some(needs.all(|(f, _)| has(usable, f)))
}

/// The CPU features the crates' hardware backends need on `arch`, and the
/// primitive each is for: the ones whose absence sends that primitive to
/// software (x86 GHASH needs AVX beside PCLMULQDQ). An unknown architecture
/// is judged by AES alone.
pub fn hardware_features(arch: Option<&str>) -> &'static [(&'static str, Primitive)] {
    match arch {
        Some("x86_64" | "x86") => &[
            ("aes", Primitive::Aes),
            ("pclmulqdq", Primitive::Ghash),
            ("avx", Primitive::Ghash),
            ("avx2", Primitive::ChaCha20),
            ("sha", Primitive::Sha256),
        ],
        Some("aarch64") => &[
            ("aes", Primitive::Aes),
            ("pmull", Primitive::Ghash),
            ("sha2", Primitive::Sha256),
        ],
        _ => &[("aes", Primitive::Aes)],
    }
}

/// The primitive a feature named in a finding is for, on any architecture.
pub fn primitive_of(feature: &str) -> Option<Primitive> {
    ["x86_64", "aarch64"]
        .iter()
        .flat_map(|arch| hardware_features(Some(arch)))
        .find(|(f, _)| *f == feature)
        .map(|(_, p)| *p)
}

/// Features that need OS-enabled AVX state (XCR0); advertised but unusable = os-disabled.
const STATEFUL_FEATURES: &[&str] = &["avx", "avx2", "vaes", "vpclmulqdq", "avx512f"];
/// Features the crates use only with the AVX-512 (ZMM) state: on a CPU without
/// AVX-512 they are advertised but never usable, and the OS is not to blame.
const ZMM_GATED: &[&str] = &["vaes"];

fn has(list: &[String], f: &str) -> bool {
    list.iter().any(|x| x == f)
}

fn same_cpu(a: &HostCrypto, b: &HostCrypto) -> bool {
    known(&a.cpu) && a.cpu == b.cpu
}

/// Whether every part of a CPU identity is known: only then are hosts peers.
fn known(c: &Cpu) -> bool {
    c.0.is_some() && c.1.is_some() && c.2.is_some() && c.3.is_some()
}

/// A CPU identity: (vendor, family, model, stepping).
type Cpu = (Option<String>, Option<i32>, Option<i32>, Option<i32>);

/// The fleet grouped by CPU identity, with how many hosts of each group
/// advertise each feature. [`findings`] compares a host only with hosts of
/// its own CPU, so [`CpuGroups::findings`] gives the same answer with a
/// lookup per feature instead of a look at every host of the group: linear
/// in the fleet however many hosts share a CPU model.
#[derive(Debug, Default)]
pub struct CpuGroups(HashMap<Cpu, CpuGroup>);

/// The hosts of one CPU identity.
#[derive(Debug, Default)]
struct CpuGroup {
    hosts: Vec<HostCrypto>,
    /// Per feature, how many of `hosts` advertise it.
    advertising: HashMap<String, usize>,
    /// Where each host is in `hosts`.
    at: HashMap<i64, usize>,
}

impl CpuGroups {
    pub fn new(fleet: impl IntoIterator<Item = HostCrypto>) -> Self {
        let mut groups: HashMap<Cpu, CpuGroup> = HashMap::new();
        for h in fleet {
            let group = groups.entry(h.cpu.clone()).or_default();
            for f in &h.advertised {
                *group.advertising.entry(f.clone()).or_default() += 1;
            }
            group.at.insert(h.host_id, group.hosts.len());
            group.hosts.push(h);
        }
        CpuGroups(groups)
    }

    /// The hosts with `cpu` (the host asking among them); every host
    /// [`findings`] could call a peer.
    pub fn same_cpu(&self, cpu: &Cpu) -> &[HostCrypto] {
        self.0.get(cpu).map_or(&[], |g| g.hosts.as_slice())
    }

    /// [`findings`] for `host` (which may be an earlier state of a host in
    /// the fleet) against the fleet.
    pub fn findings(&self, host: &HostCrypto) -> Vec<FactFinding> {
        findings_with(host, |feature| self.others_advertising(host, &[feature]) > 0)
    }

    /// How many peers of `host` — the other hosts of its CPU identity, when
    /// that is fully known — advertise every one of `features`.
    pub fn others_advertising(&self, host: &HostCrypto, features: &[&str]) -> usize {
        let Some(group) = self.0.get(&host.cpu).filter(|_| known(&host.cpu)) else {
            return 0;
        };
        let own = group.at.get(&host.host_id).map(|&i| &group.hosts[i]);
        let own_counts = |f: &str| own.is_some_and(|o| has(&o.advertised, f));
        match features {
            [] => group.hosts.len() - usize::from(own.is_some()),
            [f] => group.advertising.get(*f).copied().unwrap_or(0) - usize::from(own_counts(f)),
            _ => group
                .hosts
                .iter()
                .filter(|p| p.host_id != host.host_id && features.iter().all(|f| has(&p.advertised, f)))
                .count(),
        }
    }
}

/// Findings for `host`, judged against the whole fleet (`fleet` may include
/// `host`; [`CpuGroups::same_cpu`] is all of it that matters).
pub fn findings(host: &HostCrypto, fleet: &[HostCrypto]) -> Vec<FactFinding> {
    findings_with(host, |feature| {
        fleet
            .iter()
            .filter(|p| p.host_id != host.host_id && same_cpu(p, host))
            .any(|p| has(&p.advertised, feature))
    })
}

/// [`findings`], `peers_have` saying whether another host with `host`'s CPU
/// identity advertises a feature.
fn findings_with(host: &HostCrypto, peers_have: impl Fn(&str) -> bool) -> Vec<FactFinding> {
    let mut out = Vec::new();
    let finding = |reason, features: Vec<&str>| FactFinding {
        host_id: host.host_id,
        reason,
        features: features.into_iter().map(str::to_string).collect(),
    };
    if host.build_flavour == Some(Flavour::Software) {
        out.push(finding(Reason::SoftwareBuild, vec![]));
    }
    // One finding per missing feature, so the subject names it.
    for (feature, primitive) in hardware_features(host.arch.as_deref()) {
        if has(&host.advertised, feature) {
            continue;
        }
        if host.hypervisor == Some(true) && peers_have(feature) {
            out.push(finding(Reason::HypervisorMasks, vec![feature]));
        } else if primitive.is_major() {
            out.push(finding(Reason::CpuLacks, vec![feature]));
        }
    }
    let disabled: Vec<&str> = STATEFUL_FEATURES
        .iter()
        .copied()
        .filter(|f| has(&host.advertised, f) && !has(&host.usable, f))
        .filter(|f| !ZMM_GATED.contains(f) || has(&host.advertised, "avx512f"))
        .collect();
    if !disabled.is_empty() {
        out.push(finding(Reason::OsDisabled, disabled));
    }
    // An emulated CPU's kernel is the emulator host's: its drivers say nothing of this CPU.
    let generic = providers::kernel_generic(host.arch.as_deref(), &host.usable, &host.kernel_drivers);
    if host.cpuinfo_foreign != Some(true) && !generic.is_empty() {
        out.push(finding(
            Reason::KernelCryptoGeneric,
            generic.iter().map(|d| d.name.as_str()).collect(),
        ));
    }
    if !host.openssl_masked.is_empty() {
        out.push(finding(
            Reason::OpensslMasked,
            host.openssl_masked.iter().map(String::as_str).collect(),
        ));
    }
    // An emulated CPU's timings are not performance.
    let t = super::slow::Thresholds::default();
    let unaccelerated = providers::openssl_unaccelerated(
        &host.usable,
        &host.openssl_paths,
        t.near_software_ratio,
        t.near_software_min_size_bytes,
    );
    if !host.emulated && host.cpuinfo_foreign != Some(true) && !unaccelerated.is_empty() {
        let points: Vec<String> = unaccelerated.iter().map(|p| p.describe()).collect();
        out.push(FactFinding {
            host_id: host.host_id,
            reason: Reason::OpensslNoAcceleration,
            features: points,
        });
    }
    out
}

/// Whether any machine could run `algorithm` on hardware: DES and 3DES have no
/// hardware path anywhere, so their accelerated requests always run software
/// and say nothing about the host.
pub fn has_hardware_path(algorithm: Algorithm) -> bool {
    !matches!(algorithm.cipher, Cipher::Des | Cipher::TripleDes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: i64, model: i32, hypervisor: bool, advertised: &[&str], usable: &[&str], flavour: &str) -> HostCrypto {
        HostCrypto {
            host_id: id,
            arch: Some("x86_64".into()),
            cpu: (Some("GenuineIntel".into()), Some(6), Some(model), Some(7)),
            hypervisor: Some(hypervisor),
            advertised: advertised.iter().map(|s| s.to_string()).collect(),
            usable: usable.iter().map(|s| s.to_string()).collect(),
            build_flavour: Some(flavour.parse().unwrap()),
            ..HostCrypto::default()
        }
    }

    #[test]
    fn each_reason_from_facts_one_finding_per_missing_feature() {
        use Reason::{CpuLacks as Lacks, HypervisorMasks as Masks, OsDisabled as Off, SoftwareBuild as Soft};
        let full = ["aes", "pclmulqdq", "avx", "avx2", "sha"];
        let no_aes = ["pclmulqdq", "avx", "avx2", "sha"];
        let healthy = host(1, 85, true, &full, &full, "accelerated");
        let masked = host(2, 85, true, &no_aes, &no_aes, "accelerated");
        let bare_metal_lacking = host(3, 85, false, &no_aes, &no_aes, "accelerated");
        let westmere = host(4, 44, true, &["aes", "pclmulqdq"], &["aes", "pclmulqdq"], "accelerated");
        let westmere_no_clmul = host(5, 44, true, &["aes"], &["aes"], "accelerated");
        let old_kernel = host(6, 85, false, &full, &["aes", "pclmulqdq", "sha"], "accelerated");
        let soft = host(7, 85, false, &full, &full, "software");
        let sha_masked = host(13, 85, true, &full[..4], &full[..4], "accelerated");
        let zen3 = host(8, 33, false, &[&full[..], &["vaes"]].concat(), &full, "accelerated");
        let ymm_only_avx512 = host(
            9,
            106,
            false,
            &[&full[..], &["vaes", "avx512f"]].concat(),
            &full,
            "accelerated",
        );
        let graviton = HostCrypto {
            arch: Some("aarch64".into()),
            ..host(
                10,
                0xd0c,
                true,
                &["aes", "pmull", "sha2"],
                &["aes", "pmull", "sha2"],
                "accelerated",
            )
        };
        let pi4 = HostCrypto {
            arch: Some("aarch64".into()),
            ..host(11, 0xd08, false, &[], &[], "accelerated")
        };
        let unknown_arch = HostCrypto {
            arch: None,
            cpu: (None, None, None, None),
            ..host(12, 0, true, &[], &[], "accelerated")
        };
        let fleet = vec![
            healthy.clone(),
            masked.clone(),
            westmere.clone(),
            westmere_no_clmul.clone(),
        ];
        type Case<'a> = (&'a str, &'a HostCrypto, Vec<(Reason, &'a [&'a str])>);
        let cases: Vec<Case> = vec![
            ("healthy", &healthy, vec![]),
            (
                "a VM hiding what its model's peers have",
                &masked,
                vec![(Masks, &["aes"])],
            ),
            ("bare metal without AES", &bare_metal_lacking, vec![(Lacks, &["aes"])]),
            (
                "Westmere: GHASH needs AVX; no SHA-NI or AVX2 is no finding",
                &westmere,
                vec![(Lacks, &["avx"])],
            ),
            (
                "Westmere without PCLMULQDQ, beside a Westmere with it",
                &westmere_no_clmul,
                vec![(Masks, &["pclmulqdq"]), (Lacks, &["avx"])],
            ),
            (
                "SHA-NI hidden where the model's peers have it",
                &sha_masked,
                vec![(Masks, &["sha"])],
            ),
            (
                "an old kernel without the AVX state",
                &old_kernel,
                vec![(Off, &["avx", "avx2"])],
            ),
            ("a software build", &soft, vec![(Soft, &[])]),
            ("Zen 3: VAES without AVX-512 is no OS fault", &zen3, vec![]),
            (
                "AVX-512 with the ZMM state off",
                &ymm_only_avx512,
                vec![(Off, &["vaes", "avx512f"])],
            ),
            ("Graviton", &graviton, vec![]),
            (
                "an ARM core without crypto extensions",
                &pi4,
                vec![(Lacks, &["aes"]), (Lacks, &["pmull"])],
            ),
            (
                "an unknown arch is judged by AES",
                &unknown_arch,
                vec![(Lacks, &["aes"])],
            ),
        ];
        let groups = CpuGroups::new(fleet.clone());
        for (name, h, want) in cases {
            let got: Vec<(Reason, Vec<String>)> = findings(h, &fleet)
                .into_iter()
                .map(|f| (f.reason, f.features))
                .collect();
            let by_group: Vec<(Reason, Vec<String>)> =
                groups.findings(h).into_iter().map(|f| (f.reason, f.features)).collect();
            assert_eq!(by_group, got, "{name}: by CPU group");
            let want: Vec<(Reason, Vec<String>)> = want
                .into_iter()
                .map(|(r, f)| (r, f.iter().map(|s| s.to_string()).collect()))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn the_providers_facts_raise_their_own_reasons() {
        use crate::analysis::providers::tests::driver;
        let full = ["aes", "pclmulqdq", "avx", "avx2", "sha"];
        let generic = vec![
            driver("aes", "aes-generic"),
            driver("gcm(aes)", "gcm_base(ctr(aes-generic),ghash-generic)"),
        ];
        let kernel_generic = HostCrypto {
            kernel_drivers: generic.clone(),
            ..host(1, 85, false, &full, &full, "accelerated")
        };
        let emulated = HostCrypto {
            cpuinfo_foreign: Some(true),
            ..kernel_generic.clone()
        };
        let masked = HostCrypto {
            openssl_masked: vec!["aes".into(), "pclmulqdq".into()],
            ..host(2, 85, false, &full, &full, "accelerated")
        };
        let reasons = |h: &HostCrypto| -> Vec<(Reason, Vec<String>)> {
            findings(h, &[]).into_iter().map(|f| (f.reason, f.features)).collect()
        };
        let strings = |l: &[&str]| -> Vec<String> { l.iter().map(|s| s.to_string()).collect() };
        assert_eq!(
            reasons(&kernel_generic),
            [(Reason::KernelCryptoGeneric, strings(&["aes", "gcm(aes)"]))]
        );
        assert_eq!(
            reasons(&emulated),
            [],
            "an emulated CPU runs on another machine's kernel"
        );
        assert_eq!(
            reasons(&masked),
            [(Reason::OpensslMasked, strings(&["aes", "pclmulqdq"]))]
        );
        let groups = CpuGroups::new([kernel_generic.clone(), masked.clone()]);
        assert_eq!(groups.findings(&kernel_generic), findings(&kernel_generic, &[]));

        // The host's OpenSSL measured as fast masked as unmasked, on a CPU with AES.
        let paths = |a: f64, s: f64| crate::analysis::providers::OpensslPaths {
            algorithm: "aes-256-gcm".into(),
            size_bytes: 16384,
            accelerated_mb_s: a,
            software_mb_s: s,
        };
        let no_asm = HostCrypto {
            openssl_paths: vec![paths(410.0, 400.0)],
            ..host(3, 85, false, &full, &full, "accelerated")
        };
        assert_eq!(
            reasons(&no_asm),
            [(
                Reason::OpensslNoAcceleration,
                strings(&["aes-256-gcm at 16384 B: 1.02×"])
            )]
        );
        let accelerated = HostCrypto {
            openssl_paths: vec![paths(4000.0, 400.0)],
            ..no_asm.clone()
        };
        assert_eq!(reasons(&accelerated), []);
        let foreign = HostCrypto {
            cpuinfo_foreign: Some(true),
            ..no_asm.clone()
        };
        assert_eq!(reasons(&foreign), [], "an emulated CPU's timings are not performance");
        // A VM under TCG has a /proc/cpuinfo of its own; its label says it is emulated.
        let emulated = HostCrypto {
            emulated: true,
            ..no_asm.clone()
        };
        assert_eq!(reasons(&emulated), [], "an emulated VM's timings are not performance");
    }

    #[test]
    fn a_masked_vm_without_same_model_peers_is_not_blamed_on_the_hypervisor() {
        let masked = host(2, 85, true, &["pclmulqdq"], &["pclmulqdq"], "accelerated");
        let other_model = host(1, 106, true, &["aes"], &["aes"], "accelerated");
        let f = findings(&masked, &[masked.clone(), other_model]);
        assert_eq!(f[0].reason, Reason::CpuLacks, "no evidence the silicon has it");
    }

    #[test]
    fn peers_advertising_a_feature_are_counted_without_the_host_itself() {
        let full = ["aes", "pclmulqdq", "avx"];
        let fleet = [
            host(1, 85, true, &full, &full, "accelerated"),
            host(2, 85, true, &["aes"], &["aes"], "accelerated"),
            host(3, 85, true, &["pclmulqdq"], &["pclmulqdq"], "accelerated"),
            host(4, 106, true, &full, &full, "accelerated"),
        ];
        let groups = CpuGroups::new(fleet.clone());
        // Host 3 now, and host 2 as it once was (its current state has AES).
        let earlier = host(2, 85, true, &["pclmulqdq"], &["pclmulqdq"], "accelerated");
        for (who, h) in [("host 3", &fleet[2]), ("host 2 before", &earlier)] {
            let scan = |features: &[&str]| {
                groups
                    .same_cpu(&h.cpu)
                    .iter()
                    .filter(|p| p.host_id != h.host_id && features.iter().all(|f| has(&p.advertised, f)))
                    .count()
            };
            for features in [&[][..], &["aes"], &["avx"], &["aes", "pclmulqdq"], &["sha"]] {
                assert_eq!(
                    groups.others_advertising(h, features),
                    scan(features),
                    "{who}: {features:?}"
                );
            }
        }
        assert_eq!(
            groups.others_advertising(&earlier, &["aes"]),
            1,
            "host 1; host 2 is itself"
        );
        let unknown = HostCrypto {
            cpu: (Some("GenuineIntel".into()), None, None, None),
            ..fleet[1].clone()
        };
        assert_eq!(
            groups.others_advertising(&unknown, &[]),
            0,
            "no peers without a known CPU"
        );
    }

    #[test]
    fn each_feature_concerns_its_primitive() {
        let gcm: Algorithm = "aes-128-gcm".parse().unwrap();
        let hmac: Algorithm = "aes-256-cbc-hmac-sha256".parse().unwrap();
        let chacha: Algorithm = "chacha20-poly1305".parse().unwrap();
        let ghash = primitive_of("pclmulqdq").unwrap();
        assert_eq!(
            (ghash, primitive_of("pmull"), primitive_of("avx")),
            (Primitive::Ghash, Some(ghash), Some(ghash))
        );
        assert!(ghash.used_by(gcm, KeyMode::Static) && !ghash.used_by(hmac, KeyMode::Static));
        let sha = primitive_of("sha").unwrap();
        assert!(sha.used_by(hmac, KeyMode::Static) && !sha.used_by(chacha, KeyMode::Static));
        assert!(sha.used_by(chacha, KeyMode::HkdfPerUser), "HKDF runs SHA-256");
        assert!(primitive_of("avx2").unwrap().used_by(chacha, KeyMode::Static));
        assert_eq!(primitive_of("vaes"), None, "VAES only widens AES-NI");
    }
}
