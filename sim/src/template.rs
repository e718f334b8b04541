//! Machine templates and the simulated host each index becomes.
//!
//! A template is a machine class a real fleet has: x86 with and without
//! AES-NI (and with AES-NI but no AVX, so GCM's GHASH runs in software), an
//! old kernel that leaves AVX disabled (advertised, not in XCR0), ARM64 with
//! and without the crypto extensions, several CPU models. A few per cent of
//! the x86 hosts with AES-NI run under a hypervisor that masks AES and
//! PCLMULQDQ, with peers of the same CPU model that have them: the fallback
//! page's "hypervisor masks" case.
//!
//! Facts are built as the probe would report them, so they pass the
//! coordinator's checks like a real `Hello`; the backends come from the same
//! rule the agent's own detection uses ([`cipherfleet_agent::backend`]).

use cipherfleet_core::facts::{ArmId, HostFacts, Noise, Os};
use cipherfleet_core::path::{Backends, Flavour};

use crate::rng::Rng;
use cipherfleet_agent::backend::{self, CpuSupport};
use cipherfleet_agent::probe;

/// One machine class.
#[derive(Debug)]
pub struct Template {
    /// Short name, the value of the `sim-template` label.
    pub key: &'static str,
    /// Hosts of this template in every [`CYCLE`] hosts.
    pub weight: u32,
    pub arch: &'static str,
    pub vendor: &'static str,
    pub model_name: &'static str,
    /// x86 family, model, stepping; aarch64: (none, part, revision).
    pub family: Option<u32>,
    pub model: u32,
    pub stepping: u32,
    /// aarch64: implementer code and part name.
    pub arm: Option<(u32, &'static str)>,
    pub cores: u32,
    pub memory_gib: u64,
    /// Clock the throughput model divides cycles by.
    pub ghz: f64,
    /// What CPUID / HWCAP advertises.
    pub advertised: &'static [&'static str],
    /// Advertised features the OS does not enable (XCR0 without the AVX state).
    pub os_disabled: &'static [&'static str],
    /// XCR0 as the probe prints it (x86).
    pub xcr0: Option<&'static str>,
    pub kernel: &'static str,
    /// `PRETTY_NAME`, `ID`, `VERSION_ID`.
    pub os: (&'static str, &'static str, &'static str),
    /// (kind, CPUID signature) under a hypervisor that hides nothing.
    pub hypervisor: Option<(&'static str, &'static str)>,
}

/// What a masking hypervisor's CPU model hides.
const MASKED: &[&str] = &["aes", "pclmulqdq", "vaes", "vpclmulqdq"];

const DEBIAN: (&str, &str, &str) = ("Debian GNU/Linux 12 (bookworm)", "debian", "12");
const UBUNTU: (&str, &str, &str) = ("Ubuntu 22.04.4 LTS", "ubuntu", "22.04");

/// The templates; weights sum to [`CYCLE`], so any [`CYCLE`] consecutive hosts hold every one.
pub const TEMPLATES: &[Template] = &[
    Template {
        key: "xeon-gold-6130",
        weight: 4,
        arch: "x86_64",
        vendor: "GenuineIntel",
        model_name: "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
        family: Some(6),
        model: 85,
        stepping: 4,
        arm: None,
        cores: 32,
        memory_gib: 192,
        ghz: 2.8,
        advertised: &["aes", "pclmulqdq", "ssse3", "avx", "avx2", "avx512f"],
        os_disabled: &[],
        xcr0: Some("0xe7"),
        kernel: "6.1.0-18-amd64",
        os: DEBIAN,
        hypervisor: None,
    },
    Template {
        key: "epyc-7543",
        weight: 3,
        arch: "x86_64",
        vendor: "AuthenticAMD",
        model_name: "AMD EPYC 7543 32-Core Processor",
        family: Some(25),
        model: 1,
        stepping: 1,
        arm: None,
        cores: 16,
        memory_gib: 64,
        ghz: 3.4,
        // VAES without AVX-512: advertised, never usable (the aes crate wants ZMM state).
        advertised: &["aes", "pclmulqdq", "ssse3", "avx", "avx2", "vaes", "vpclmulqdq", "sha"],
        os_disabled: &[],
        xcr0: Some("0x7"),
        kernel: "5.15.0-105-generic",
        os: UBUNTU,
        hypervisor: Some(("kvm", "KVMKVMKVM")),
    },
    Template {
        key: "xeon-e5-2680-v2",
        weight: 2,
        arch: "x86_64",
        vendor: "GenuineIntel",
        model_name: "Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz",
        family: Some(6),
        model: 62,
        stepping: 4,
        arm: None,
        cores: 40,
        memory_gib: 128,
        ghz: 3.1,
        advertised: &["aes", "pclmulqdq", "ssse3", "avx"],
        os_disabled: &[],
        xcr0: Some("0x7"),
        kernel: "5.10.0-28-amd64",
        os: ("Debian GNU/Linux 11 (bullseye)", "debian", "11"),
        hypervisor: None,
    },
    Template {
        // AES-NI and PCLMULQDQ but no AVX: GCM's GHASH runs in software (partial).
        key: "xeon-x5670",
        weight: 2,
        arch: "x86_64",
        vendor: "GenuineIntel",
        model_name: "Intel(R) Xeon(R) CPU X5670 @ 2.93GHz",
        family: Some(6),
        model: 44,
        stepping: 2,
        arm: None,
        cores: 24,
        memory_gib: 48,
        ghz: 2.93,
        advertised: &["aes", "pclmulqdq", "ssse3"],
        os_disabled: &[],
        xcr0: None,
        kernel: "4.19.0-26-amd64",
        os: ("Debian GNU/Linux 10 (buster)", "debian", "10"),
        hypervisor: None,
    },
    Template {
        // No AES-NI at all: everything AES runs in software.
        key: "xeon-x5570",
        weight: 2,
        arch: "x86_64",
        vendor: "GenuineIntel",
        model_name: "Intel(R) Xeon(R) CPU X5570 @ 2.93GHz",
        family: Some(6),
        model: 26,
        stepping: 5,
        arm: None,
        cores: 16,
        memory_gib: 24,
        ghz: 2.93,
        advertised: &["ssse3"],
        os_disabled: &[],
        xcr0: None,
        kernel: "4.19.0-26-amd64",
        os: ("Debian GNU/Linux 10 (buster)", "debian", "10"),
        hypervisor: None,
    },
    Template {
        // A kernel from before XSAVE support: AVX advertised, its state never enabled.
        key: "xeon-e5-2690-v4-old-kernel",
        weight: 2,
        arch: "x86_64",
        vendor: "GenuineIntel",
        model_name: "Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz",
        family: Some(6),
        model: 79,
        stepping: 1,
        arm: None,
        cores: 28,
        memory_gib: 256,
        ghz: 3.2,
        advertised: &["aes", "pclmulqdq", "ssse3", "avx", "avx2"],
        os_disabled: &["avx", "avx2"],
        xcr0: Some("0x3"),
        kernel: "2.6.18-419.el5",
        os: ("CentOS release 5.11 (Final)", "centos", "5.11"),
        hypervisor: None,
    },
    Template {
        key: "neoverse-n1",
        weight: 3,
        arch: "aarch64",
        vendor: "ARM",
        model_name: "Neoverse-N1",
        family: None,
        model: 0xd0c,
        stepping: 1,
        arm: Some((0x41, "Neoverse-N1")),
        cores: 64,
        memory_gib: 128,
        ghz: 2.5,
        advertised: &["aes", "pmull", "sha2"],
        os_disabled: &[],
        xcr0: None,
        kernel: "6.1.0-18-arm64",
        os: DEBIAN,
        hypervisor: Some(("kvm", "")),
    },
    Template {
        key: "neoverse-v1",
        weight: 1,
        arch: "aarch64",
        vendor: "ARM",
        model_name: "Neoverse-V1",
        family: None,
        model: 0xd40,
        stepping: 1,
        arm: Some((0x41, "Neoverse-V1")),
        cores: 32,
        memory_gib: 64,
        ghz: 2.6,
        advertised: &["aes", "pmull", "sha2", "sha3"],
        os_disabled: &[],
        xcr0: None,
        kernel: "6.1.0-18-cloud-arm64",
        os: DEBIAN,
        hypervisor: Some(("kvm", "")),
    },
    Template {
        // No ARMv8 crypto extensions (a Raspberry Pi 4's BCM2711).
        key: "cortex-a72",
        weight: 1,
        arch: "aarch64",
        vendor: "ARM",
        model_name: "Cortex-A72",
        family: None,
        model: 0xd08,
        stepping: 3,
        arm: Some((0x41, "Cortex-A72")),
        cores: 4,
        memory_gib: 8,
        ghz: 1.8,
        advertised: &[],
        os_disabled: &[],
        xcr0: None,
        kernel: "6.1.0-rpi7-rpi-v8",
        os: DEBIAN,
        hypervisor: None,
    },
];

/// Hosts after which the template sequence repeats: the sum of the weights.
pub const CYCLE: u32 = 20;

/// One host in this many of the x86 templates with AES-NI runs under a masking hypervisor.
const MASKED_ONE_IN: u64 = 32;

/// What a simulated host is: its template, whether a hypervisor masks its AES,
/// its speed against the template's, and the facts it says hello with.
#[derive(Debug, Clone)]
pub struct Profile {
    pub template: &'static Template,
    pub masked: bool,
    /// This host's speed against its template's (host-to-host spread, ±5 %).
    pub speed: f64,
    pub facts: HostFacts,
    /// The backends its accelerated build runs (the software path runs [`Backends::soft`]).
    pub backends: Backends,
}

impl Profile {
    /// The host with this index: always the same template, speed and facts.
    pub fn of(index: u64, name: &str) -> Profile {
        let template = template_of(index);
        let mut rng = Rng::seeded(index ^ 0xc1f3_7ee7);
        let masked = template.arch == "x86_64"
            && template.advertised.contains(&"aes")
            && rng.next_u64().is_multiple_of(MASKED_ONE_IN);
        let speed = rng.range(0.95, 1.05);
        let facts = facts(template, masked, name);
        let cpu = CpuSupport::from_usable(&facts.arch, &facts.features.usable);
        let backends = backend::accelerated_backends(&facts.arch, cpu);
        Profile {
            template,
            masked,
            speed,
            facts,
            backends,
        }
    }
}

/// A smooth weighted round robin over [`TEMPLATES`]: every window of
/// [`CYCLE`] consecutive indices has each template `weight` times, spread out.
pub fn template_of(index: u64) -> &'static Template {
    let slot = (index % u64::from(CYCLE)) as usize;
    let mut current = [0i64; 16];
    let total = i64::from(CYCLE);
    let mut chosen = 0;
    for _ in 0..=slot {
        for (i, t) in TEMPLATES.iter().enumerate() {
            current[i] += i64::from(t.weight);
        }
        chosen = (0..TEMPLATES.len())
            .max_by_key(|&i| (current[i], -(i as i64)))
            .unwrap_or(0);
        current[chosen] -= total;
    }
    &TEMPLATES[chosen]
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The facts a probe on such a host reports.
fn facts(t: &Template, masked: bool, name: &str) -> HostFacts {
    let mut facts = HostFacts::unknown(t.arch, Flavour::Accelerated);
    facts.hostname = Some(name.to_string());
    facts.kernel_release = Some(t.kernel.to_string());
    facts.os = Os {
        pretty_name: Some(t.os.0.to_string()),
        name: Some(t.os.0.split(" (").next().unwrap_or(t.os.0).to_string()),
        id: Some(t.os.1.to_string()),
        version_id: Some(t.os.2.to_string()),
    };
    facts.memory_total_bytes = Some(t.memory_gib << 30);
    facts.cpu.vendor = Some(t.vendor.to_string());
    facts.cpu.model_name = Some(t.model_name.to_string());
    facts.cpu.family = t.family;
    facts.cpu.model = Some(t.model);
    facts.cpu.stepping = Some(t.stepping);
    facts.cpu.logical_cores = Some(t.cores);
    facts.cpu.available_parallelism = Some(t.cores);
    facts.cpu.arm = t.arm.map(|(implementer, part_name)| ArmId {
        implementer: Some(implementer),
        variant: Some(3),
        architecture: Some(8),
        part: Some(t.model),
        revision: Some(t.stepping),
        part_name: Some(part_name.to_string()),
        midr: Some(format!("0x{implementer:02x}3f{:03x}{:x}", t.model, t.stepping)),
    });
    let x86 = t.arch == "x86_64";
    let mut advertised: Vec<&str> = t.advertised.to_vec();
    if masked {
        advertised.retain(|f| !MASKED.contains(f));
    }
    let usable: Vec<&str> = advertised
        .iter()
        .copied()
        .filter(|f| !t.os_disabled.contains(f))
        // VAES counts only with the AVX-512 state the aes crate asks for (see probe::x86).
        .filter(|f| *f != "vaes" || advertised.contains(&"avx512f"))
        .collect();
    facts.features.source = Some(if x86 { "cpuid" } else { "hwcap" }.to_string());
    facts.features.checked = strings(&probe::checked_features(t.arch));
    facts.features.advertised = strings(&advertised);
    facts.features.usable = strings(&usable);
    if x86 {
        facts.features.osxsave = Some(t.xcr0.is_some());
        facts.features.xcr0 = t.xcr0.map(str::to_string);
    } else {
        facts.features.hwcap = Some(if t.advertised.is_empty() { "0x887" } else { "0x8ff" }.to_string());
        facts.features.hwcap2 = Some("0x0".to_string());
    }
    let hypervisor = if masked {
        Some(("kvm", "KVMKVMKVM"))
    } else {
        t.hypervisor
    };
    facts.virtualization.hypervisor = Some(hypervisor.is_some());
    if let Some((kind, signature)) = hypervisor {
        facts.virtualization.kind = Some(kind.to_string());
        facts.virtualization.vendor_signature = (!signature.is_empty()).then(|| signature.to_string());
        facts.virtualization.dmi_sys_vendor = Some("QEMU".to_string());
        facts.virtualization.dmi_product_name = Some("Standard PC (Q35 + ICH9, 2009)".to_string());
    }
    facts.virtualization.cpuinfo_foreign = Some(false);
    let cpu = CpuSupport::from_usable(t.arch, &facts.features.usable);
    facts.crypto.backends = backend::accelerated_backends(t.arch, cpu);
    facts.crypto.aes_hardware_accelerated = cpu.aes;
    facts.build.profile = "release".to_string();
    facts.build.target = format!("{}-linux-musl", t.arch);
    facts.noise = Noise {
        cpufreq_governor: Some("performance".to_string()),
        cpufreq_driver: Some(if x86 { "intel_pstate" } else { "cppc_cpufreq" }.to_string()),
        boost: Some(true),
        smt_active: Some(x86),
        load_average: Some([0.1, 0.2, 0.2]),
        clocksource: Some(if x86 { "tsc" } else { "arch_sys_counter" }.to_string()),
        clock_read_ns: Some(20.0),
    };
    facts
}

#[cfg(test)]
pub(crate) mod tests {
    use cipherfleet_core::path::PathUsed;
    use cipherfleet_core::spec::KeyMode;
    use cipherfleet_core::wire;
    use cipherfleet_proto::v1;

    use super::*;

    /// The first unmasked host of template `key`.
    pub(crate) fn profile_of(key: &str) -> Profile {
        (0..u64::from(CYCLE))
            .map(|i| Profile::of(i, "sim-test"))
            .find(|p| p.template.key == key && !p.masked)
            .unwrap()
    }

    #[test]
    fn every_window_of_a_cycle_holds_each_template_by_its_weight() {
        assert_eq!(TEMPLATES.iter().map(|t| t.weight).sum::<u32>(), CYCLE);
        for start in [0, 7, 1000] {
            for t in TEMPLATES {
                let n = (start..start + u64::from(CYCLE))
                    .filter(|i| template_of(*i).key == t.key)
                    .count();
                assert_eq!(n as u32, t.weight, "{} from {start}", t.key);
            }
        }
        assert_eq!(
            Profile::of(42, "a").speed,
            Profile::of(42, "a").speed,
            "stable per index"
        );
    }

    #[test]
    fn every_template_says_a_hello_the_coordinator_accepts() {
        for i in 0..u64::from(CYCLE) * 4 {
            let p = Profile::of(i, "sim-00001");
            let hello = v1::Hello {
                protocol_version: cipherfleet_proto::PROTOCOL_VERSION,
                enrollment_token: "t".repeat(24),
                facts: Some(v1::HostFacts::from(&p.facts)),
                capabilities: Some(v1::Capabilities {
                    paths: vec!["accelerated".into(), "software".into()],
                    max_threads: p.template.cores,
                    agent_version: "0.1.0".into(),
                }),
                name: "sim-00001".into(),
                ..Default::default()
            };
            wire::validate_hello(&hello).unwrap_or_else(|e| panic!("{}: {e}", p.template.key));
        }
    }

    #[test]
    fn the_backends_follow_the_features_as_the_crates_pick_them() {
        let gcm = "aes-256-gcm".parse().unwrap();
        let path = |key: &str| profile_of(key).backends.path_for(gcm, KeyMode::Static);
        assert_eq!(path("xeon-gold-6130"), PathUsed::Accelerated);
        assert_eq!(profile_of("xeon-gold-6130").backends.aes, "aes-ni");
        assert_eq!(path("xeon-x5570"), PathUsed::Software, "no AES-NI");
        assert_eq!(path("xeon-x5670"), PathUsed::Partial, "AES-NI, GHASH without AVX");
        assert_eq!(path("neoverse-n1"), PathUsed::Accelerated);
        assert_eq!(path("cortex-a72"), PathUsed::Software, "no ARMv8 crypto");
        let old = profile_of("xeon-e5-2690-v4-old-kernel");
        assert_eq!(old.backends.path_for(gcm, KeyMode::Static), PathUsed::Partial);
        assert!(old.facts.features.advertised.contains(&"avx".to_string()));
        assert!(
            !old.facts.features.usable.contains(&"avx".to_string()),
            "XCR0 lacks the AVX state"
        );
        let epyc = profile_of("epyc-7543");
        assert_eq!(epyc.backends.aes, "aes-ni", "VAES needs AVX-512 state");
        assert_eq!(epyc.backends.sha256, "sha-ni");
    }

    #[test]
    fn a_few_per_cent_of_aes_hosts_are_masked_by_a_hypervisor_with_their_peers_unmasked() {
        let profiles: Vec<Profile> = (0..4000).map(|i| Profile::of(i, "h")).collect();
        let masked: Vec<&Profile> = profiles.iter().filter(|p| p.masked).collect();
        let share = masked.len() as f64 / profiles.len() as f64;
        assert!((0.01..0.05).contains(&share), "{share}");
        for p in &masked {
            assert_eq!(p.facts.virtualization.hypervisor, Some(true));
            assert!(!p.facts.features.advertised.contains(&"aes".to_string()));
            assert_eq!(p.backends.aes, "soft");
            let peer = profiles
                .iter()
                .find(|q| !q.masked && q.template.key == p.template.key)
                .unwrap();
            assert_eq!(peer.facts.cpu, p.facts.cpu, "same CPU identity");
            assert!(peer.facts.features.advertised.contains(&"aes".to_string()));
        }
    }
}
