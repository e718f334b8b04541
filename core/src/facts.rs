//! Host facts as the agent's probe reports them and the coordinator stores them:
//! CPU identity, crypto features advertised versus usable, kernel, OS,
//! virtualization, the crypto paths the binary picks, build details and
//! measurement-noise context. Probing lives in the agent; these are the data.
//!
//! Every fact that could not be read is `None` (JSON `null`); nothing is guessed.
//!
//! - [`arm`]: aarch64 implementer and part names, from the numbers MIDR_EL1 carries.

pub mod arm;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::path::{Backends, Flavour};
use crate::provider::facts::ProviderFacts;

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
    /// The providers the agent can measure on here, with the kernel's crypto
    /// drivers and the host's OpenSSL build. `probe` and a daemon's `Hello` fill it;
    /// a measurement's facts leave it out (absent), as did agents before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<ProviderFacts>,
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
    /// x86: CPUID.1:ECX[31]; aarch64: `Some(true)` only when `/sys/hypervisor/type`,
    /// the device tree or DMI names a hypervisor, otherwise unknown.
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
    /// The device tree's `/hypervisor` node `compatible`, e.g. `xen,xen` (aarch64 guests booted with a device tree).
    #[serde(default)]
    pub device_tree_hypervisor: Option<String>,
    /// `/proc/cpuinfo` describes another CPU than the one this process runs on:
    /// a user-mode emulator (qemu-user) runs it on a foreign or different CPU,
    /// so its timings are not this CPU's. `None` when either side could not be read.
    #[serde(default)]
    pub cpuinfo_foreign: Option<bool>,
}

/// Crypto-relevant CPU features. A name in `checked` but not in `advertised` is
/// known to be absent; a name not in `checked` is unknown. The lists are sets:
/// held in report order, written sorted and without repeats, the form the
/// coordinator stores a host's facts in, so that a measurement's facts are
/// the snapshot's text and need not be stored with every result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// Where the bits came from: `cpuid` or `hwcap`; `None` if this architecture has no probe.
    pub source: Option<String>,
    /// Every feature name that was checked.
    #[serde(serialize_with = "sorted_set")]
    pub checked: Vec<String>,
    /// Features the CPU says it has (CPUID / HWCAP).
    #[serde(serialize_with = "sorted_set")]
    pub advertised: Vec<String>,
    /// Features the OS has enabled, i.e. that code may actually execute.
    #[serde(serialize_with = "sorted_set")]
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

/// A list of names written as a set: sorted, each once.
fn sorted_set<S: serde::Serializer>(names: &[String], s: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    s.collect_seq(sorted)
}

/// Which implementation the crypto crates pick in this process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CryptoPaths {
    /// Per-primitive backends, as the agent detects them.
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
    /// How the compiler built the agent. Two agents of one version measure the
    /// same CPU differently when these differ: without LTO and with several
    /// codegen units the crates' calls do not inline across crates, and
    /// AES-256-GCM runs far slower (docs/performance.md, "The build profile").
    /// `None` from agents that predate it.
    #[serde(default)]
    pub codegen: Option<Codegen>,
}

/// The compiler settings of the agent binary: its Cargo profile and the target
/// features the code may assume without run-time detection.
///
/// The agent's build script fills it in (`agent/build.rs`): `opt_level` and
/// `target_features` come from Cargo itself (`OPT_LEVEL`, `CARGO_CFG_TARGET_FEATURE`);
/// Cargo does not tell build scripts the LTO mode and codegen units, so these are
/// resolved from the workspace manifest's `[profile.*]` tables (with `inherits` and
/// Cargo's defaults), `CARGO_PROFILE_<NAME>_*` variables and `-C` flags in
/// RUSTFLAGS. Settings given only in `.cargo/config.toml` or with `--config` are
/// not seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Codegen {
    /// Cargo profile name: `release`, `dev`, or a custom one.
    pub profile: String,
    /// `-C opt-level`: `0`–`3`, `s` or `z`.
    pub opt_level: String,
    /// Cross-crate optimisation at link time: `fat`, `thin`, `thin-local` (Cargo's
    /// default `lto = false`: only across the crate's own codegen units) or `off`.
    pub lto: String,
    /// `-C codegen-units` of the agent crate (1 lets the optimiser see a whole crate at once).
    pub codegen_units: u32,
    /// Target features enabled at compile time, sorted (x86-64 baseline:
    /// `fxsr sse sse2`; more with `-C target-cpu` or `-C target-feature`).
    pub target_features: Vec<String>,
}

impl Codegen {
    /// One line for tables and fact changes, e.g.
    /// `release, opt-level 3, LTO fat, 1 codegen unit`.
    pub fn summary(&self) -> String {
        let units = if self.codegen_units == 1 { "unit" } else { "units" };
        format!(
            "{}, opt-level {}, LTO {}, {} codegen {units}",
            self.profile, self.opt_level, self.lto, self.codegen_units
        )
    }
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
    /// `/sys/devices/system/clocksource/clocksource0/current_clocksource`, e.g.
    /// `tsc`, `arch_sys_counter`; `hpet` or `acpi_pm` make every clock read slow.
    #[serde(default)]
    pub clocksource: Option<String>,
    /// Measured cost of one monotonic clock read, in nanoseconds (median of
    /// several batches). Tens of ns is normal; microseconds mean a slow clock
    /// source or emulation, and short timed batches read low.
    #[serde(default)]
    pub clock_read_ns: Option<f64>,
}

impl HostFacts {
    /// Facts with every optional field `None`, nothing checked and every backend
    /// `soft`: the starting point for tests and simulated hosts.
    pub fn unknown(arch: &str, flavour: Flavour) -> HostFacts {
        HostFacts {
            schema_version: SCHEMA_VERSION,
            hostname: None,
            arch: arch.to_string(),
            kernel_release: None,
            os: Os::default(),
            memory_total_bytes: None,
            cpu: Cpu::default(),
            virtualization: Virtualization::default(),
            features: Features::default(),
            crypto: CryptoPaths {
                backends: Backends::soft(),
                aes_hardware_accelerated: false,
            },
            build: Build {
                agent_version: env!("CARGO_PKG_VERSION").to_string(),
                flavour,
                profile: "debug".into(),
                target: format!("{arch}-linux-gnu"),
                crates: BTreeMap::new(),
                codegen: None,
            },
            noise: Noise::default(),
            providers: None,
        }
    }

    /// True if `aes` is in usable features (x86 aes / ARM aes).
    pub fn aes_usable(&self) -> bool {
        self.features.usable.iter().any(|f| f == "aes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codegen_summary_names_every_setting_but_the_features() {
        let mut c = Codegen {
            profile: "release".into(),
            opt_level: "3".into(),
            lto: "fat".into(),
            codegen_units: 1,
            target_features: vec!["sse2".into()],
        };
        assert_eq!(c.summary(), "release, opt-level 3, LTO fat, 1 codegen unit");
        c.codegen_units = 16;
        c.lto = "thin-local".into();
        assert_eq!(c.summary(), "release, opt-level 3, LTO thin-local, 16 codegen units");
    }

    #[test]
    fn feature_lists_are_written_as_sets_and_held_as_probed() {
        let mut facts = HostFacts::unknown("x86_64", Flavour::Accelerated);
        facts.features.checked = ["aes", "pclmulqdq", "avx", "avx2", "vaes", "aes"]
            .map(String::from)
            .to_vec();
        facts.features.usable = ["avx", "aes"].map(String::from).to_vec();
        let v = serde_json::to_value(&facts).unwrap();
        assert_eq!(
            v["features"]["checked"],
            serde_json::json!(["aes", "avx", "avx2", "pclmulqdq", "vaes"])
        );
        assert_eq!(v["features"]["usable"], serde_json::json!(["aes", "avx"]));
        assert_eq!(v["features"]["advertised"], serde_json::json!([]));
        // In memory, the probe's report order stays.
        assert_eq!(facts.features.usable, ["avx", "aes"]);
        let back: HostFacts = serde_json::from_value(v).unwrap();
        assert_eq!(back.features.usable, ["aes", "avx"]);
    }

    #[test]
    fn facts_without_codegen_still_parse() {
        let mut v = serde_json::to_value(HostFacts::unknown("x86_64", Flavour::Accelerated)).unwrap();
        v["build"].as_object_mut().unwrap().remove("codegen");
        let facts: HostFacts = serde_json::from_value(v).unwrap();
        assert_eq!(facts.build.codegen, None);
    }
}
