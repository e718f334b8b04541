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
//! - [`virt`]: hypervisor hints from DMI and the device tree; emulation seen in `/proc/cpuinfo`.
//! - [`clock`]: the clock source and the cost of one clock read.
//! - [`linux`]: `/proc`, `/sys`, `/etc/os-release`, `uname(2)`, hostname.
//! - [`versions`]: versions of the crypto crates compiled in.
//! - [`table`]: the human-readable `lscpu`-style table; `providers` its provider sections.

mod arm;
/// The build script's resolution of the Cargo profile, compiled here for its tests.
#[cfg(test)]
#[path = "../../build/codegen.rs"]
mod build_codegen;
mod clock;
mod linux;
mod providers;
mod table;
mod versions;
mod virt;
mod x86;

use cipherfleet_core::facts::{
    ArmId, Build, Codegen, Cpu, CryptoPaths, Features, HostFacts, SCHEMA_VERSION, Virtualization,
};

pub use table::write_table;

/// The version of a crate compiled in (`ring`, `aes`…), from the build's table.
pub fn crate_version(name: &str) -> Option<&'static str> {
    versions::CRATE_VERSIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

/// The CPU features ring's and OpenSSL's dispatchers read, on this CPU.
pub fn cpu_flags() -> cipherfleet_core::provider::CpuFlags {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    {
        let s = x86::CpuidSnapshot::read();
        x86::dispatch_flags(s.leaf1.map_or(0, |l| l[2]), s.leaf7, s.xcr0)
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: getauxval only reads the auxiliary vector; it returns 0 for an absent entry.
        let hwcap = unsafe { libc::getauxval(libc::AT_HWCAP) } as u64;
        let has = |name: &str| arm::hwcap_features(hwcap).contains(&name);
        cipherfleet_core::provider::CpuFlags {
            aes: has("aes"),
            pmull: has("pmull"),
            sha: has("sha2"),
            neon: true,
            ..Default::default()
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64")))]
    {
        cipherfleet_core::provider::CpuFlags::default()
    }
}

/// The crypto features the probe checks on `arch` (`features.checked`), in report order.
pub fn checked_features(arch: &str) -> Vec<&'static str> {
    match arch {
        "x86_64" | "x86" => x86::checked(),
        "aarch64" => arm::checked(),
        _ => Vec::new(),
    }
}

/// [`probe`] with every provider's facts ([`crate::provider::facts`]): what
/// `probe` prints and what a daemon's `Hello` carries. `openssl` is
/// `--openssl PATH`, else the first `openssl` on `PATH`; `watch` the
/// services of `--watch-env`.
pub fn probe_with_providers(
    openssl: Option<&std::path::Path>,
    watch: &[crate::provider::openssl::watch::WatchTarget],
) -> HostFacts {
    HostFacts {
        providers: Some(crate::provider::facts(openssl, watch)),
        ..probe()
    }
}

/// Gathers all host facts but the providers' (`providers` is `None`). Never
/// fails: unreadable facts are `None`.
pub fn probe() -> HostFacts {
    let (mut cpu, features, mut virtualization) = probe_cpu();
    cpu.logical_cores = linux::online_cpus();
    cpu.available_parallelism = std::thread::available_parallelism()
        .ok()
        .and_then(|n| u32::try_from(n.get()).ok());

    virtualization.sys_hypervisor_type = linux::read_trimmed("/sys/hypervisor/type");
    virtualization.dmi_sys_vendor = linux::read_trimmed("/sys/class/dmi/id/sys_vendor");
    virtualization.dmi_product_name = linux::read_trimmed("/sys/class/dmi/id/product_name");
    virtualization.device_tree_hypervisor = linux::device_tree_string("/proc/device-tree/hypervisor/compatible");
    if let Some(t) = &virtualization.sys_hypervisor_type {
        // A hypervisor that registers itself in sysfs (Xen) is a fact on any arch.
        virtualization.hypervisor = Some(true);
        virtualization.kind.get_or_insert_with(|| t.to_ascii_lowercase());
    }
    if virtualization.hypervisor.is_none() {
        // No CPU bit to ask (ARM): the firmware's and device tree's names are the evidence.
        let v = &virtualization;
        if let Some(kind) = virt::hypervisor_hint(
            v.dmi_sys_vendor.as_deref(),
            v.dmi_product_name.as_deref(),
            v.device_tree_hypervisor.as_deref(),
        ) {
            virtualization.hypervisor = Some(true);
            virtualization.kind = Some(kind.to_string());
        }
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
        providers: None,
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
        codegen: Some(codegen()),
    }
}

/// The compiler settings `build.rs` recorded (see `agent/build/codegen.rs`).
fn codegen() -> Codegen {
    Codegen {
        profile: env!("CIPHERFLEET_PROFILE").to_string(),
        opt_level: env!("CIPHERFLEET_OPT_LEVEL").to_string(),
        lto: env!("CIPHERFLEET_LTO").to_string(),
        codegen_units: env!("CIPHERFLEET_CODEGEN_UNITS").parse().unwrap_or(0),
        target_features: env!("CIPHERFLEET_TARGET_FEATURES")
            .split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect(),
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn probe_cpu() -> (Cpu, Features, Virtualization) {
    let (cpu, features, mut virtualization) = x86::decode(&x86::CpuidSnapshot::read());
    virtualization.cpuinfo_foreign = virt::cpuinfo_foreign_x86(&cpu, &linux::cpuinfo_first());
    (cpu, features, virtualization)
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
    use cipherfleet_core::path::Flavour;

    use super::*;

    #[test]
    fn probe_runs_and_round_trips_through_json() {
        let facts = probe();
        assert_eq!(facts.schema_version, 1);
        assert_eq!(facts.arch, std::env::consts::ARCH);
        assert_eq!(facts.build.agent_version, env!("CARGO_PKG_VERSION"));
        let json = serde_json::to_string(&facts).unwrap();
        let back: HostFacts = serde_json::from_str(&json).unwrap();
        // The feature lists come back as the sets they are written as: sorted.
        let mut sorted = facts.clone();
        for list in [
            &mut sorted.features.checked,
            &mut sorted.features.advertised,
            &mut sorted.features.usable,
        ] {
            list.sort();
            list.dedup();
        }
        assert_eq!(back, sorted);
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }

    #[test]
    fn every_usable_feature_was_advertised_and_checked() {
        let facts = probe();
        // Every usable feature was advertised and checked.
        for f in &facts.features.usable {
            assert!(facts.features.advertised.contains(f), "{f} usable but not advertised");
        }
        for f in &facts.features.advertised {
            assert!(facts.features.checked.contains(f), "{f} advertised but not checked");
        }
    }

    /// The accelerated build uses AES hardware exactly when the probe finds it
    /// usable. Only this flavour can check that: the software build's aes crate
    /// says "no" whatever the CPU has.
    #[cfg(all(
        not(cipherfleet_soft),
        not(aes_backend = "soft"),
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    #[test]
    fn accelerated_build_probe_agrees_with_the_aes_crate() {
        let facts = probe();
        assert_eq!(facts.build.flavour, Flavour::Accelerated);
        assert_eq!(facts.aes_usable(), aes::hardware_accelerated());
        assert_eq!(facts.crypto.aes_hardware_accelerated, aes::hardware_accelerated());
    }

    /// The software build reports itself as such, and its aes crate really was
    /// forced to software: `--cfg cipherfleet_soft` without `--cfg aes_backend="soft"`
    /// would measure hardware AES under the software label.
    #[cfg(cipherfleet_soft)]
    #[test]
    fn software_build_probe_reports_the_forced_software_path() {
        let facts = probe();
        assert_eq!(facts.build.flavour, Flavour::Software);
        assert!(
            !facts.crypto.aes_hardware_accelerated,
            "the software build's aes crate uses hardware: was it built without --cfg aes_backend=\"soft\"?"
        );
    }

    /// The build facts say how this very test binary was compiled: tests use
    /// Cargo's `dev` profile (or `release` under `cargo test --release`), and
    /// x86-64 code always has SSE2.
    #[test]
    fn build_facts_carry_the_compiler_settings() {
        let c = probe().build.codegen.expect("this agent records its codegen settings");
        let expected = if cfg!(debug_assertions) { "dev" } else { "release" };
        assert_eq!(c.profile, expected);
        assert!(["0", "1", "2", "3", "s", "z"].contains(&c.opt_level.as_str()), "{c:?}");
        assert!(["fat", "thin", "thin-local", "off"].contains(&c.lto.as_str()), "{c:?}");
        assert!(c.codegen_units >= 1, "{c:?}");
        if cfg!(target_arch = "x86_64") {
            assert!(c.target_features.iter().any(|f| f == "sse2"), "{c:?}");
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
