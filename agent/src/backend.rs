//! Which implementation the crypto crates pick on this machine, and the build flavour.
//!
//! The RustCrypto crates detect CPU features at run time and can only be forced
//! to software at build time (`--cfg aes_backend="soft"` and friends, listed
//! once in `deploy/build.sh`). The software-flavoured sibling binary is built
//! with those flags plus `--cfg cipherfleet_soft`, so a binary always knows
//! which flavour it is. The detection below mirrors each crate's own dispatch,
//! and each primitive reads its own crate's flag, so that `path_used` reports
//! what actually ran, not what was requested.

use cipherfleet_core::path::{Backends, Flavour};

// A software build that leaves one crate on its run-time detection would
// measure hardware under the software label: refuse to build it.
#[cfg(all(
    cipherfleet_soft,
    not(all(
        aes_backend = "soft",
        polyval_backend = "soft",
        chacha20_backend = "soft",
        poly1305_backend = "soft",
        sha2_backend = "soft"
    ))
))]
compile_error!(
    "--cfg cipherfleet_soft needs every soft backend flag: build the software flavour with deploy/build.sh \
     (or RUSTFLAGS=\"$(deploy/build.sh --soft-rustflags)\")"
);

/// The flavour this binary was built as.
pub const FLAVOUR: Flavour = if cfg!(cipherfleet_soft) {
    Flavour::Software
} else {
    Flavour::Accelerated
};

/// Which crates this build forced to software, from their own flags.
struct Forced {
    aes: bool,
    ghash: bool,
    chacha20: bool,
    poly1305: bool,
    sha256: bool,
}

const FORCED: Forced = Forced {
    aes: cfg!(aes_backend = "soft"),
    ghash: cfg!(polyval_backend = "soft"),
    chacha20: cfg!(chacha20_backend = "soft"),
    poly1305: cfg!(poly1305_backend = "soft"),
    sha256: cfg!(sha2_backend = "soft"),
};

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod detect {
    // The same feature sets the crates' own `cpufeatures::new!` calls name
    // (aes 0.9, polyval 0.7, chacha20 0.10, poly1305 0.9, sha2 0.11).
    cpufeatures::new!(cpuid_aes, "aes");
    // cpufeatures gates `vaes` on ZMM state, as the aes crate sees it.
    cpufeatures::new!(cpuid_vaes, "vaes");
    cpufeatures::new!(cpuid_clmul, "avx", "pclmulqdq");
    cpufeatures::new!(cpuid_avx2, "avx2");
    cpufeatures::new!(cpuid_sse2, "sse2");
    cpufeatures::new!(cpuid_shani, "sha", "sse4.1");
    pub fn aes() -> bool {
        cpuid_aes::get()
    }
    pub fn vaes() -> bool {
        cpuid_vaes::get()
    }
    pub fn clmul() -> bool {
        cpuid_clmul::get()
    }
    pub fn avx2() -> bool {
        cpuid_avx2::get()
    }
    pub fn sse2() -> bool {
        cpuid_sse2::get()
    }
    pub fn shani() -> bool {
        cpuid_shani::get()
    }
}

#[cfg(target_arch = "aarch64")]
mod detect {
    cpufeatures::new!(cpuid_aes, "aes");
    cpufeatures::new!(cpuid_sha2, "sha2");
    pub fn aes() -> bool {
        cpuid_aes::get()
    }
    pub fn sha2() -> bool {
        cpuid_sha2::get()
    }
}

/// What the crates' run-time detection asks of the CPU, one answer per
/// feature set they check (x86: `aes`, `vaes`, `avx`+`pclmulqdq`, `avx2`,
/// `sse2`, `sha`; aarch64: `aes`, `sha2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuSupport {
    pub aes: bool,
    /// VAES with the ZMM state the aes crate requires.
    pub vaes: bool,
    /// PCLMULQDQ and AVX (polyval's x86 backend needs both).
    pub clmul: bool,
    pub avx2: bool,
    pub sse2: bool,
    /// SHA-NI (x86) or the ARMv8 SHA-256 instructions.
    pub sha256: bool,
}

impl CpuSupport {
    /// The answers for a CPU whose usable features are `usable`, spelled as
    /// the probe spells them (`features.usable`): how a simulated host gets
    /// the backends a real one with those facts would run.
    pub fn from_usable(arch: &str, usable: &[String]) -> CpuSupport {
        let has = |f: &str| usable.iter().any(|u| u == f);
        match arch {
            "x86_64" | "x86" => CpuSupport {
                aes: has("aes"),
                vaes: has("vaes") && has("aes"),
                clmul: has("pclmulqdq") && has("avx"),
                avx2: has("avx2"),
                sse2: true,
                sha256: has("sha"),
            },
            "aarch64" => CpuSupport {
                aes: has("aes"),
                sha256: has("sha2"),
                ..CpuSupport::default()
            },
            _ => CpuSupport::default(),
        }
    }

    /// This CPU, as the crates detect it.
    fn detected() -> CpuSupport {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        {
            CpuSupport {
                aes: detect::aes(),
                vaes: detect::vaes(),
                clmul: detect::clmul(),
                avx2: detect::avx2(),
                sse2: detect::sse2(),
                sha256: detect::shani(),
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            CpuSupport {
                aes: detect::aes(),
                sha256: detect::sha2(),
                ..CpuSupport::default()
            }
        }
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")))]
        {
            CpuSupport::default()
        }
    }
}

/// Detects the backends as the crates themselves would choose them.
pub fn backends() -> Backends {
    backends_for(std::env::consts::ARCH, CpuSupport::detected(), &FORCED)
}

/// The backends an accelerated build picks on `arch` with `cpu`: the crates'
/// dispatch, written once for this binary and for simulated hosts.
pub fn accelerated_backends(arch: &str, cpu: CpuSupport) -> Backends {
    const NONE: Forced = Forced {
        aes: false,
        ghash: false,
        chacha20: false,
        poly1305: false,
        sha256: false,
    };
    backends_for(arch, cpu, &NONE)
}

fn backends_for(arch: &str, cpu: CpuSupport, forced: &Forced) -> Backends {
    // A crate forced to software runs `soft` whatever the CPU has.
    let pick = |forced: bool, accelerated: Option<&'static str>| -> String {
        match accelerated {
            Some(name) if !forced => name.to_string(),
            _ => "soft".to_string(),
        }
    };
    match arch {
        "x86_64" | "x86" => {
            let aes = if cpu.vaes && cpu.aes {
                Some("vaes")
            } else if cpu.aes {
                Some("aes-ni")
            } else {
                None
            };
            let chacha = if cpu.avx2 {
                Some("avx2")
            } else if cpu.sse2 {
                Some("sse2")
            } else {
                None
            };
            Backends {
                aes: pick(forced.aes, aes),
                ghash: pick(forced.ghash, cpu.clmul.then_some("clmul")),
                chacha20: pick(forced.chacha20, chacha),
                poly1305: Some(pick(forced.poly1305, cpu.avx2.then_some("avx2"))),
                sha256: pick(forced.sha256, cpu.sha256.then_some("sha-ni")),
            }
        }
        "aarch64" => Backends {
            aes: pick(forced.aes, cpu.aes.then_some("armv8-aes")),
            // polyval's PMULL backend is gated on the `aes` HWCAP.
            ghash: pick(forced.ghash, cpu.aes.then_some("pmull")),
            chacha20: pick(forced.chacha20, Some("neon")),
            // poly1305 has no ARM backend.
            poly1305: Some(pick(forced.poly1305, None)),
            sha256: pick(forced.sha256, cpu.sha256.then_some("armv8-sha2")),
        },
        _ => Backends::soft(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the software flavour can check this; in the accelerated build it would pass vacuously.
    #[cfg(cipherfleet_soft)]
    #[test]
    fn software_build_reports_soft_backends() {
        use cipherfleet_core::{algorithm::Algorithm, path::PathUsed, spec::KeyMode};
        assert_eq!(FLAVOUR, Flavour::Software);
        let b = backends();
        assert_eq!(b, Backends::soft(), "Poly1305 included");
        // So its ChaCha20-Poly1305 measures software, whatever this CPU has.
        let chacha: Algorithm = "chacha20-poly1305".parse().unwrap();
        assert_eq!(b.path_for(chacha, KeyMode::Static), PathUsed::Software);
    }

    #[cfg(not(cipherfleet_soft))]
    #[test]
    fn accelerated_build_says_so() {
        assert_eq!(FLAVOUR, Flavour::Accelerated);
    }

    /// `deploy/build.sh` owns the list of soft flags. Every one must be a
    /// declared cfg (Cargo.toml can only list them, not read the script), and
    /// every crate flag must be one this module derives a backend from and
    /// requires of a software build; deploy/test.sh must read the list, not copy it.
    #[test]
    fn the_soft_flags_are_one_list() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::process::Command::new("bash")
            .arg(root.join("deploy/build.sh"))
            .arg("--soft-rustflags")
            .output()
            .expect("running deploy/build.sh --soft-rustflags");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let flags = String::from_utf8(out.stdout).unwrap();
        let cfgs: Vec<&str> = flags.split_whitespace().filter(|w| *w != "--cfg").collect();
        assert_eq!(
            cfgs.len() * 2,
            flags.split_whitespace().count(),
            "--cfg before each: {flags}"
        );
        assert!(cfgs.contains(&"cipherfleet_soft"), "{flags}");

        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        let (manifest, this, test_sh) = (read("Cargo.toml"), read("agent/src/backend.rs"), read("deploy/test.sh"));
        // The condition of the compile_error! above.
        let at = this.find("    cipherfleet_soft,\n    not(all(").unwrap();
        let required = &this[at..at + this[at..].find("compile_error!").unwrap()];
        for cfg in &cfgs {
            let declared = match cfg.split_once('=') {
                Some((name, value)) => format!("'cfg({name}, values({value}))'"),
                None => format!("'cfg({cfg})'"),
            };
            assert!(
                manifest.contains(&declared),
                "Cargo.toml's check-cfg list lacks {declared}"
            );
            let Some((name, value)) = cfg.split_once('=') else {
                continue;
            };
            let spelled = format!("{name} = {value}");
            assert!(
                this.contains(&format!("cfg!({spelled})")),
                "no backend is derived from {cfg}"
            );
            assert!(
                required.contains(&spelled),
                "a software build without {cfg} would compile"
            );
            assert!(
                !test_sh.contains(name),
                "deploy/test.sh copies {name}: read deploy/build.sh's list"
            );
        }
        assert_eq!(
            required.matches(" = \"soft\"").count(),
            cfgs.len() - 1,
            "a software build requires a flag deploy/build.sh does not set"
        );
    }

    /// The probe and the crates read AES the same way, so "hardware AES usable"
    /// and the backend never disagree (VAES included: see `probe::x86`).
    #[cfg(all(not(aes_backend = "soft"), any(target_arch = "x86_64", target_arch = "aarch64")))]
    #[test]
    fn the_aes_backend_is_hardware_exactly_when_the_aes_crate_says_so() {
        assert_eq!(backends().aes != "soft", aes::hardware_accelerated());
    }
}
