//! Fact rules over the providers' facts a host reports (migrations/0034):
//! the kernel crypto API running AES in software on a CPU that has the
//! instructions (`kernel-crypto-generic`), and an OpenSSL capability
//! variable in the agent's or a watched service's environment masking
//! acceleration (`openssl-masked`); and one over the host's
//! OpenSSL measured on both paths (`openssl-no-acceleration`: its accelerated
//! path no faster than its own masked software path). Each names its remedy.
//!
//! The kernel's path is judged again here from the driver's name by the one
//! rule in core ([`kernel::path`]), not taken from the agent's word.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::provider::CpuFlags;
use cipherfleet_core::provider::facts::{KernelDriver, OpensslBuild, WatchedService};
use cipherfleet_core::provider::kernel;

/// The subject of every `kernel-crypto-generic` finding: one per host,
/// however many names run generic (so a growing list stays one finding).
pub const KERNEL_SUBJECT: &str = "kernel-aes";
/// The subject of every `openssl-masked` finding.
pub const OPENSSL_SUBJECT: &str = "openssl";
/// The subject of every `openssl-no-acceleration` finding.
pub const OPENSSL_PATHS_SUBJECT: &str = "openssl-aes";

/// One AES point of the host's OpenSSL (the `openssl` provider) measured on
/// both paths: its latest accelerated and software figures (one thread,
/// encryption, a static key), from `provider_points`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpensslPaths {
    pub algorithm: String,
    pub size_bytes: i64,
    pub accelerated_mb_s: f64,
    pub software_mb_s: f64,
}

impl OpensslPaths {
    /// accelerated ÷ software.
    pub fn ratio(&self) -> f64 {
        self.accelerated_mb_s / self.software_mb_s
    }

    /// How a finding lists it: `aes-256-gcm at 16384 B: 1.02×`.
    pub fn describe(&self) -> String {
        format!("{} at {} B: {:.2}×", self.algorithm, self.size_bytes, self.ratio())
    }
}

/// The points where the host's OpenSSL, asked for its accelerated path,
/// measured under `near_software_ratio` × its own software path (its
/// capability vector masked) on a CPU whose usable features hold AES: a
/// `no-asm` build, or a CPU it does not recognise. Only AES algorithms (the
/// ones with a hardware path everywhere) and payloads of at least
/// `min_size_bytes`, below which per-call overhead hides the difference, as
/// `slow-accelerated`'s near-software rule has it ([`super::slow::Thresholds`]).
pub fn openssl_unaccelerated<'a>(
    usable: &[String],
    paths: &'a [OpensslPaths],
    near_software_ratio: f64,
    min_size_bytes: u64,
) -> Vec<&'a OpensslPaths> {
    if !usable.iter().any(|u| u == "aes") {
        return Vec::new();
    }
    paths
        .iter()
        .filter(|p| p.algorithm.parse::<Algorithm>().is_ok_and(|a| a.uses_aes()))
        .filter(|p| u64::try_from(p.size_bytes).is_ok_and(|s| s >= min_size_bytes))
        .filter(|p| p.software_mb_s > 0.0 && p.ratio() < near_software_ratio)
        .collect()
}

/// What uses the kernel crypto API, and so runs slow on its generic drivers.
pub const KERNEL_USERS: &str = "dm-crypt/LUKS, IPsec and kTLS";

/// The CPU features the kernel's hardware driver for the AES name `name`
/// needs on `arch`: AES instructions, and carry-less multiplication for GCM's
/// GHASH (PCLMULQDQ, PMULL). `None` where no hardware driver is known.
pub fn kernel_needs(name: &str, arch: &str) -> Option<&'static [&'static str]> {
    let gcm = name.contains("gcm");
    match arch {
        "x86_64" | "x86" if gcm => Some(&["aes", "pclmulqdq"]),
        "x86_64" | "x86" => Some(&["aes"]),
        "aarch64" if gcm => Some(&["aes", "pmull"]),
        "aarch64" => Some(&["aes"]),
        _ => None,
    }
}

/// The kernel's chosen drivers for AES names (`aes`, `cbc(aes)`, `gcm(aes)`…)
/// that run AES or GHASH in software although `usable` holds every feature
/// their hardware driver needs on `arch`: what `kernel-crypto-generic` names.
pub fn kernel_generic<'a>(arch: Option<&str>, usable: &[String], drivers: &'a [KernelDriver]) -> Vec<&'a KernelDriver> {
    let Some(arch) = arch else {
        return Vec::new();
    };
    let can = |needs: &[&str]| needs.iter().all(|f| usable.iter().any(|u| u == f));
    drivers
        .iter()
        .filter(|d| d.name.contains("aes"))
        .filter(|d| kernel_needs(&d.name, arch).is_some_and(can))
        // AES and GHASH do not depend on the CPU flags the rule reads (ChaCha20's SIMD does).
        .filter(|d| kernel::path(&d.name, &d.driver, arch, &CpuFlags::default()) != PathUsed::Accelerated)
        .collect()
}

/// The modules that bring the hardware drivers `names` lack on `arch`, each
/// once (`aesni_intel` is left out beside `aesni_intel (and
/// ghash_clmulni_intel before Linux 6.5)`, which says it).
pub fn kernel_remedy<'a>(names: impl IntoIterator<Item = &'a str>, arch: &str) -> Vec<&'static str> {
    let mut modules: Vec<&'static str> = Vec::new();
    for m in names.into_iter().filter_map(|n| kernel::module_for(n, arch)) {
        if !modules.contains(&m) {
            modules.push(m);
        }
    }
    let said_by_another = |m: &str, all: &[&str]| all.iter().any(|o| o.len() > m.len() && o.starts_with(m));
    let all = modules.clone();
    modules.retain(|m| !said_by_another(m, &all));
    modules
}

/// The variable of an OpenSSL capability override as the agent reports it
/// (`OPENSSL_ia32cap=~0x…`): its name.
pub fn variable_name(capability_env: &str) -> &str {
    capability_env.split_once('=').map_or(capability_env, |(name, _)| name)
}

/// One environment whose capability variable masks acceleration from OpenSSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Masking<'a> {
    /// `None`: the agent's own environment; else the watched service's (`--watch-env`).
    pub service: Option<&'a WatchedService>,
    /// `NAME=value`, as the agent reported it (`None` from an agent that left it out).
    pub capability_env: Option<&'a str>,
    /// What it masks (`aes`, `pclmulqdq`…), never empty.
    pub masked: &'a [String],
}

/// The environments that mask acceleration from the host's OpenSSL: the
/// agent's own, then each watched service's in the order the operator gave
/// them. What `openssl-masked` reads; one finding names them all.
pub fn openssl_masking(build: &OpensslBuild) -> Vec<Masking<'_>> {
    let agent = Masking {
        service: None,
        capability_env: build.capability_env.as_deref(),
        masked: &build.masked,
    };
    let services = build.watched.iter().map(|w| Masking {
        service: Some(w),
        capability_env: w.capability_env.as_deref(),
        masked: &w.masked,
    });
    std::iter::once(agent)
        .chain(services)
        .filter(|m| !m.masked.is_empty())
        .collect()
}

/// Everything [`openssl_masking`]'s environments mask, each once, in the
/// order they name it: the `openssl-masked` finding's features.
pub fn openssl_masked(build: &OpensslBuild) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for name in openssl_masking(build).iter().flat_map(|m| m.masked) {
        if !all.contains(name) {
            all.push(name.clone());
        }
    }
    all
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn openssl_unaccelerated_only_on_a_cpu_with_aes_for_aes_at_a_size_that_shows_it() {
        let p = |algorithm: &str, size_bytes: i64, a: f64, s: f64| OpensslPaths {
            algorithm: algorithm.into(),
            size_bytes,
            accelerated_mb_s: a,
            software_mb_s: s,
        };
        let aes = vec!["aes".to_string()];
        let points = [
            p("aes-256-gcm", 16384, 500.0, 400.0),       // 1.25×: below 1.5
            p("aes-128-cbc", 16384, 4000.0, 400.0),      // accelerated
            p("aes-256-gcm", 16, 50.0, 49.0),            // too small to tell
            p("chacha20-poly1305", 16384, 900.0, 890.0), // no hardware path to lose
            p("aes-128-ctr", 1024, 100.0, 0.0),          // software not measured
            p("rot13", 16384, 1.0, 1.0),                 // unknown to this coordinator
        ];
        let found: Vec<String> = openssl_unaccelerated(&aes, &points, 1.5, 1024)
            .iter()
            .map(|p| p.describe())
            .collect();
        assert_eq!(found, ["aes-256-gcm at 16384 B: 1.25×"]);
        assert!(
            openssl_unaccelerated(&[], &points, 1.5, 1024).is_empty(),
            "no AES: cpu-lacks says it"
        );
    }

    #[test]
    fn every_environment_that_masks_is_a_source_and_their_features_are_named_once() {
        let watched = |target: &str, env: Option<&str>, masked: &[&str], error: Option<&str>| WatchedService {
            target: target.into(),
            name: Some("nginx".into()),
            source: "/proc/1/environ".into(),
            capability_env: env.map(str::to_string),
            masked: masked.iter().map(|m| m.to_string()).collect(),
            error: error.map(str::to_string),
        };
        let mut build = OpensslBuild {
            capability_env: Some("OPENSSL_ia32cap=:~0x20".into()),
            masked: vec!["avx2".into()],
            watched: vec![
                watched(
                    "pid 1",
                    Some("OPENSSL_ia32cap=~0x200000200000000"),
                    &["pclmulqdq", "aes"],
                    None,
                ),
                watched("pid 2", None, &[], None),
                watched("pid 3", None, &[], Some("no process 3")),
                watched("unit b", Some("OPENSSL_ia32cap=~0x200000000000000"), &["aes"], None),
                watched("unit c", Some("OPENSSL_ia32cap=0x0:0x0"), &[], None),
            ],
            ..OpensslBuild::default()
        };
        let sources: Vec<Option<&str>> = openssl_masking(&build)
            .iter()
            .map(|m| m.service.map(|w| w.target.as_str()))
            .collect();
        assert_eq!(sources, [None, Some("pid 1"), Some("unit b")]);
        assert_eq!(openssl_masked(&build), ["avx2", "pclmulqdq", "aes"]);
        build.masked.clear();
        build.watched.truncate(3);
        assert_eq!(openssl_masked(&build), ["pclmulqdq", "aes"]);
        build.watched.remove(0);
        assert!(
            openssl_masked(&build).is_empty(),
            "a clean or unread service masks nothing"
        );
        assert!(openssl_masked(&OpensslBuild::default()).is_empty());
    }

    /// The kernel's chosen `driver` for `name`, as an agent reports it (module `kernel`).
    pub(crate) fn driver(name: &str, driver: &str) -> KernelDriver {
        KernelDriver {
            name: name.into(),
            driver: driver.into(),
            module: "kernel".into(),
            priority: 100,
            kind: "cipher".into(),
            generic: kernel::is_generic(driver),
            path: kernel::path(name, driver, "x86_64", &CpuFlags::default()),
            candidates: 1,
        }
    }

    fn names(arch: &str, usable: &[&str], drivers: &[KernelDriver]) -> Vec<String> {
        let usable: Vec<String> = usable.iter().map(|s| s.to_string()).collect();
        kernel_generic(Some(arch), &usable, drivers)
            .iter()
            .map(|d| d.name.clone())
            .collect()
    }

    #[test]
    fn a_generic_kernel_driver_on_a_cpu_with_the_instructions_is_named() {
        // This development machine: AES-NI in the CPU, no aesni_intel in the kernel.
        let here = [
            driver("aes", "aes-fixed-time"),
            driver("cbc(aes)", "cbc(ecb(aes-fixed-time))"),
        ];
        let aesni = [
            driver("aes", "aes-aesni"),
            driver("gcm(aes)", "generic-gcm-aesni"),
            driver(
                "rfc7539(chacha20,poly1305)",
                "rfc7539(chacha20-generic,poly1305-generic)",
            ),
        ];
        let ghash_generic = [driver("gcm(aes)", "gcm_base(ctr-aes-aesni,ghash-generic)")];
        let arm_scalar = [driver("aes", "aes-arm64"), driver("gcm(aes)", "gcm-aes-ce")];
        let x86 = ["aes", "pclmulqdq", "avx"];
        type Case<'a> = (&'a str, &'a str, &'a [&'a str], &'a [KernelDriver], &'a [&'a str]);
        let cases: [Case; 7] = [
            (
                "generic drivers, AES-NI usable",
                "x86_64",
                &x86,
                &here,
                &["aes", "cbc(aes)"],
            ),
            (
                "the CPU lacks AES: generic is all it can do",
                "x86_64",
                &["pclmulqdq"],
                &here,
                &[],
            ),
            (
                "aesni_intel loaded; ChaCha20 is no AES name",
                "x86_64",
                &x86,
                &aesni,
                &[],
            ),
            (
                "GCM with AES-NI but generic GHASH",
                "x86_64",
                &x86,
                &ghash_generic,
                &["gcm(aes)"],
            ),
            (
                "GCM needs PCLMULQDQ for its driver",
                "x86_64",
                &["aes"],
                &ghash_generic,
                &[],
            ),
            (
                "arm64's scalar AES on a CPU with the crypto extensions",
                "aarch64",
                &["aes", "pmull"],
                &arm_scalar,
                &["aes"],
            ),
            (
                "no hardware driver known on the architecture",
                "riscv64",
                &["aes"],
                &here,
                &[],
            ),
        ];
        for (what, arch, usable, drivers, want) in cases {
            assert_eq!(names(arch, usable, drivers), want, "{what}");
        }
        assert!(kernel_generic(None, &[], &here).is_empty(), "an unknown arch");
    }

    #[test]
    fn the_remedy_names_each_module_once() {
        assert_eq!(kernel_remedy(["aes", "cbc(aes)"], "x86_64"), ["aesni_intel"]);
        assert_eq!(
            kernel_remedy(["aes", "gcm(aes)"], "x86_64"),
            ["aesni_intel (and ghash_clmulni_intel before Linux 6.5)"]
        );
        assert_eq!(
            kernel_remedy(["aes", "cbc(aes)", "gcm(aes)"], "aarch64"),
            ["aes_ce_cipher", "aes_ce_blk", "ghash_ce"]
        );
        assert!(kernel_remedy(["aes"], "riscv64").is_empty());
        assert_eq!(variable_name("OPENSSL_ia32cap=~0x200000200000000"), "OPENSSL_ia32cap");
        assert_eq!(variable_name("OPENSSL_armcap"), "OPENSSL_armcap");
    }
}
