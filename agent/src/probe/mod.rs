//! Host facts for `cipherfleet-agent probe`: CPU identity, crypto features the CPU
//! advertises versus those the OS lets us use, kernel, OS, virtualization, the
//! crypto paths this binary picks, build details and measurement-noise context.
//!
//! Every fact that cannot be read is `None` (JSON `null`, table `unknown`); nothing
//! is guessed. Parsers and decoders are pure functions over strings or raw
//! register values, compiled on every target so they are unit-tested everywhere;
//! only the code that actually executes CPUID / reads HWCAP is architecture-gated.
//!
//! - [`x86`]: CPUID decoding (vendor, family/model/stepping, brand, features, XCR0).
//! - [`arm`]: HWCAP bits, MIDR and `/proc/cpuinfo` identity on aarch64.
//! - [`linux`]: `/proc`, `/sys`, `/etc/os-release`, `uname(2)`, hostname.
//! - [`versions`]: versions of the crypto crates compiled in.
//! - [`table`]: the human-readable `lscpu`-style table.

mod arm;
mod linux;
mod table;
mod versions;
mod x86;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend::{Backends, Flavour};

pub use table::write_table;

/// Version of the JSON layout of [`HostFacts`]; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything `probe` knows about the host. `None` means "could not be read".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Layout version of this structure, currently [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `gethostname(2)`.
    pub hostname: Option<String>,
    /// `std::env::consts::ARCH` of this binary, e.g. `x86_64`, `aarch64`.
    pub arch: String,
    /// Kernel release from `uname(2)` (not `/proc`, so user-mode emulators that
    /// override the release are honoured).
    pub kernel_release: Option<String>,
    pub os: Os,
    /// `MemTotal` from `/proc/meminfo`, in bytes.
    pub memory_total_bytes: Option<u64>,
    pub cpu: Cpu,
    pub virtualization: Virtualization,
    pub features: Features,
    pub crypto: CryptoPaths,
    pub build: Build,
    pub noise: Noise,
}

/// Operating system identity from `/etc/os-release` (or `/usr/lib/os-release`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Os {
    /// `PRETTY_NAME`, e.g. `Debian GNU/Linux 12 (bookworm)`.
    pub pretty_name: Option<String>,
    /// `NAME`, e.g. `Debian GNU/Linux`.
    pub name: Option<String>,
    /// `ID`, e.g. `debian`.
    pub id: Option<String>,
    /// `VERSION_ID`, e.g. `12`.
    pub version_id: Option<String>,
}

/// CPU identity. On x86 it comes from CPUID; on aarch64 from `/proc/cpuinfo` and MIDR_EL1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// x86: CPUID leaf 0 vendor string (`GenuineIntel`, `AuthenticAMD`, ...);
    /// aarch64: the implementer's name when the implementer code is known.
    pub vendor: Option<String>,
    /// x86: CPUID brand string; aarch64: `model name` from `/proc/cpuinfo` when present.
    pub model_name: Option<String>,
    /// x86 display family (base + extended family rules). Not defined on aarch64.
    pub family: Option<u32>,
    /// x86 display model (base + extended model rules); aarch64: the part number.
    pub model: Option<u32>,
    /// x86 stepping; aarch64: the revision (the `pN` of `rNpN`).
    pub stepping: Option<u32>,
    /// aarch64 identification registers; `None` on other architectures.
    pub arm: Option<ArmId>,
    /// Online logical CPUs, `sysconf(_SC_NPROCESSORS_ONLN)`.
    pub logical_cores: Option<u32>,
    /// `std::thread::available_parallelism()`: honours affinity masks and cgroup quotas.
    pub available_parallelism: Option<u32>,
}

/// aarch64 CPU identification (of the first CPU listed; big.LITTLE systems differ per core).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmId {
    /// Implementer code, e.g. `0x41` (Arm Ltd).
    pub implementer: Option<u32>,
    /// Variant (the `rN` of `rNpN`).
    pub variant: Option<u32>,
    /// `CPU architecture` from `/proc/cpuinfo` (the arm64 kernel prints 8).
    pub architecture: Option<u32>,
    /// Primary part number, e.g. `0xd0c`.
    pub part: Option<u32>,
    /// Revision (the `pN` of `rNpN`).
    pub revision: Option<u32>,
    /// Name of the part for known implementer/part pairs, e.g. `Neoverse-N1`.
    pub part_name: Option<String>,
    /// Raw MIDR_EL1 from sysfs, as hex, when readable.
    pub midr: Option<String>,
}

/// Whether and under what we run virtualized. Context only: a clear hypervisor bit
/// does not prove bare metal (hypervisors can hide it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Virtualization {
    /// x86: CPUID.1:ECX[31]; aarch64: `Some(true)` only when `/sys/hypervisor/type`
    /// names one, otherwise unknown.
    pub hypervisor: Option<bool>,
    /// x86: the CPUID leaf 0x40000000 vendor signature, e.g. `KVMKVMKVM`.
    pub vendor_signature: Option<String>,
    /// Short name for a known signature or sysfs type: `kvm`, `xen`, `hyperv`, `vmware`, ...
    pub kind: Option<String>,
    /// `/sys/hypervisor/type`.
    pub sys_hypervisor_type: Option<String>,
    /// `/sys/class/dmi/id/sys_vendor`.
    pub dmi_sys_vendor: Option<String>,
    /// `/sys/class/dmi/id/product_name`.
    pub dmi_product_name: Option<String>,
}

/// Crypto-relevant CPU features. A name in `checked` but not in `advertised` is
/// known to be absent; a name not in `checked` is unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// Where the bits came from: `cpuid` or `hwcap`; `None` if this architecture has no probe.
    pub source: Option<String>,
    /// Every feature name that was checked.
    pub checked: Vec<String>,
    /// Features the CPU says it has (CPUID / HWCAP).
    pub advertised: Vec<String>,
    /// Features the OS has enabled, i.e. that code may actually execute.
    pub usable: Vec<String>,
    /// x86: CPUID.1:ECX.OSXSAVE (the OS enabled XSAVE/XGETBV).
    pub osxsave: Option<bool>,
    /// x86: XCR0 as hex (`0x...`), read with XGETBV when OSXSAVE is set.
    pub xcr0: Option<String>,
    /// aarch64: `getauxval(AT_HWCAP)` as hex.
    pub hwcap: Option<String>,
    /// aarch64: `getauxval(AT_HWCAP2)` as hex.
    pub hwcap2: Option<String>,
}

/// Which implementation the crypto crates pick in this process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CryptoPaths {
    /// Per-primitive backends, see [`crate::backend::backends`].
    pub backends: Backends,
    /// `aes::hardware_accelerated()`.
    pub aes_hardware_accelerated: bool,
}

/// How this binary was built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Build {
    /// `CARGO_PKG_VERSION` of the agent.
    pub agent_version: String,
    /// Accelerated or forced-software build.
    pub flavour: Flavour,
    /// `release` or `debug` (debug builds are far too slow to benchmark).
    pub profile: String,
    /// Target triple pieces: `<arch>-<os>-<env>`, e.g. `x86_64-linux-musl`.
    pub target: String,
    /// Versions of the crypto crates compiled in, by crate name.
    pub crates: BTreeMap<String, String>,
}

/// Measurement-noise context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    /// cpu0 cpufreq governor, e.g. `performance`, `powersave`, `schedutil`.
    pub cpufreq_governor: Option<String>,
    /// cpu0 cpufreq scaling driver, e.g. `intel_pstate`, `acpi-cpufreq`, `cppc_cpufreq`.
    pub cpufreq_driver: Option<String>,
    /// Whether turbo/boost is enabled (`cpufreq/boost`, or the inverse of `intel_pstate/no_turbo`).
    pub boost: Option<bool>,
    /// `/sys/devices/system/cpu/smt/active`.
    pub smt_active: Option<bool>,
    /// 1, 5 and 15 minute load averages from `/proc/loadavg`.
    pub load_average: Option<[f64; 3]>,
}

impl HostFacts {
    /// True if `aes` is in usable features (x86 aes / ARM aes).
    pub fn aes_usable(&self) -> bool {
        self.features.usable.iter().any(|f| f == "aes")
    }
}

/// Gathers all host facts. Never fails: unreadable facts are `None`.
pub fn probe() -> HostFacts {
    let (mut cpu, features, mut virtualization) = probe_cpu();
    cpu.logical_cores = linux::online_cpus();
    cpu.available_parallelism = std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok());

    virtualization.sys_hypervisor_type = linux::read_trimmed("/sys/hypervisor/type");
    virtualization.dmi_sys_vendor = linux::read_trimmed("/sys/class/dmi/id/sys_vendor");
    virtualization.dmi_product_name = linux::read_trimmed("/sys/class/dmi/id/product_name");
    if let Some(t) = &virtualization.sys_hypervisor_type {
        // A hypervisor that registers itself in sysfs (Xen) is a fact on any arch.
        virtualization.hypervisor = Some(true);
        virtualization.kind.get_or_insert_with(|| t.to_ascii_lowercase());
    }

    HostFacts {
        schema_version: SCHEMA_VERSION,
        hostname: linux::hostname(),
        arch: std::env::consts::ARCH.to_string(),
        kernel_release: linux::kernel_release(),
        os: linux::os_release(),
        memory_total_bytes: linux::read_string("/proc/meminfo").and_then(|s| linux::parse_meminfo_total(&s)),
        cpu,
        virtualization,
        features,
        crypto: CryptoPaths {
            backends: crate::backend::backends(),
            aes_hardware_accelerated: aes::hardware_accelerated(),
        },
        build: build_info(),
        noise: linux::noise(),
    }
}

fn build_info() -> Build {
    let env = if cfg!(target_env = "musl") {
        "musl"
    } else if cfg!(target_env = "gnu") {
        "gnu"
    } else {
        "unknown"
    };
    Build {
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        flavour: crate::backend::FLAVOUR,
        profile: if cfg!(debug_assertions) { "debug" } else { "release" }.to_string(),
        target: format!("{}-{}-{}", std::env::consts::ARCH, std::env::consts::OS, env),
        crates: versions::crate_versions(),
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn probe_cpu() -> (Cpu, Features, Virtualization) {
    x86::decode(&x86::CpuidSnapshot::read())
}

#[cfg(target_arch = "aarch64")]
fn probe_cpu() -> (Cpu, Features, Virtualization) {
    arm::probe()
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64")))]
fn probe_cpu() -> (Cpu, Features, Virtualization) {
    (Cpu::default(), Features::default(), Virtualization::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_runs_and_round_trips_through_json() {
        let facts = probe();
        assert_eq!(facts.schema_version, 1);
        assert_eq!(facts.arch, std::env::consts::ARCH);
        assert_eq!(facts.build.agent_version, env!("CARGO_PKG_VERSION"));
        let json = serde_json::to_string(&facts).unwrap();
        let back: HostFacts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, facts);
    }

    #[test]
    fn probe_is_consistent_with_the_crates_own_detection() {
        let facts = probe();
        // Every usable feature was advertised and checked.
        for f in &facts.features.usable {
            assert!(facts.features.advertised.contains(f), "{f} usable but not advertised");
        }
        for f in &facts.features.advertised {
            assert!(facts.features.checked.contains(f), "{f} advertised but not checked");
        }
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
            && crate::backend::FLAVOUR == Flavour::Accelerated
            && !cfg!(aes_backend = "soft")
        {
            assert_eq!(facts.aes_usable(), aes::hardware_accelerated());
        }
    }

    #[test]
    fn aes_usable_looks_only_at_usable() {
        let mut facts = table::tests::all_unknown();
        assert!(!facts.aes_usable());
        facts.features.advertised = vec!["aes".into()];
        assert!(!facts.aes_usable());
        facts.features.usable = vec!["aes".into()];
        assert!(facts.aes_usable());
    }
}
