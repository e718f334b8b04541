//! The kernel crypto API's drivers: which primitives a driver runs on
//! hardware instructions, and the module that brings them.
//!
//! The kernel picks, for an algorithm name such as `gcm(aes)`, the registered
//! implementation with the highest priority whose self-test passed;
//! `/proc/crypto` lists them all with their driver names (`generic-gcm-aesni`,
//! `gcm_base(ctr(aes-generic),ghash-generic)`, `gcm-aes-ce`…). The driver name is
//! the only statement of what runs, so a path from it is `inferred`.

use super::CpuFlags;
use crate::path::{Backends, PathUsed, is_hardware};

/// The algorithm names whose chosen driver the agent reports.
pub const NAMES: [&str; 8] = [
    "aes",
    "cbc(aes)",
    "ctr(aes)",
    "xts(aes)",
    "gcm(aes)",
    "rfc4106(gcm(aes))",
    "chacha20",
    "rfc7539(chacha20,poly1305)",
];

/// The largest payload the `kernel` provider measures: 64 KiB. AF_ALG queues
/// one operation's data in its socket's send buffer (about 208 KiB by
/// default, `net.core.wmem_max`) and an AEAD cannot be split across sends, so
/// a larger message blocks in `sendmsg` for ever. The kernel's own users hand
/// it far less: dm-crypt a sector (512 B–4 KiB), IPsec a packet (≤ 64 KiB),
/// kTLS a record (16 KiB).
pub const MAX_BYTES: u64 = 64 * 1024;

/// Markers of AES on hardware instructions in driver names: AES-NI and VAES
/// (x86: `aesni_intel`), the ARMv8 Crypto Extensions (`aes-ce`, `cbc-aes-ce`,
/// `gcm-aes-ce`), s390 CPACF, POWER8+ (`p8_aes`, `p10`), RISC-V Zvkned.
const AES_HW: [&str; 8] = ["aesni", "aes-ni", "vaes", "aes-ce", "aes-s390", "p8_", "p10", "zvkned"];
/// Markers of carry-less multiplication for GHASH: PCLMULQDQ (`ghash-clmulni`,
/// and inside the AES-NI/VAES GCM drivers), PMULL (`ghash-ce`, `gcm-aes-ce`).
const GHASH_HW: [&str; 8] = [
    "clmulni",
    "aesni",
    "vaes",
    "ghash-ce",
    "gcm-aes-ce",
    "pmull",
    "s390",
    "zvkg",
];

/// The backends a driver name runs on `arch` with `cpu`. ChaCha20's and
/// Poly1305's x86 drivers (`chacha20-simd`, `poly1305-simd`) choose among
/// SSSE3, AVX2 and AVX-512 by the CPU, so the CPU decides their name; NEON
/// (`chacha20-neon`) is the architecture's baseline, software by the project's
/// rule ([`is_hardware`]).
pub fn backends(driver: &str, arch: &str, cpu: &CpuFlags) -> Backends {
    // `gcm_base(CTR,GHASH)` names its two parts; other names are one driver.
    let (cipher_part, ghash_part) = match driver.strip_prefix("gcm_base(").and_then(|d| d.rsplit_once(',')) {
        Some((ctr, ghash)) => (ctr, ghash),
        None => (driver, driver),
    };
    let in_part = |part: &str, markers: &[&str]| markers.iter().any(|m| part.contains(m));
    let x86 = matches!(arch, "x86_64" | "x86");
    let simd = |avx2: bool| -> String {
        if x86 && driver.contains("simd") {
            if avx2 { "avx2" } else { "ssse3" }.to_string()
        } else if driver.contains("neon") {
            "neon".to_string()
        } else {
            "soft".to_string()
        }
    };
    let aes_hw = in_part(cipher_part, &AES_HW);
    Backends {
        aes: if aes_hw {
            match arch {
                "aarch64" | "arm" => "armv8-aes",
                _ if driver.contains("vaes") => "vaes",
                _ => "aes-ni",
            }
            .to_string()
        } else {
            "soft".to_string()
        },
        ghash: if in_part(ghash_part, &GHASH_HW) {
            if x86 { "clmul" } else { "pmull" }.to_string()
        } else {
            "soft".to_string()
        },
        chacha20: simd(cpu.avx2),
        poly1305: Some(simd(cpu.avx2)),
        sha256: "soft".to_string(),
    }
}

/// The primitives an algorithm name runs: `gcm(aes)` is AES and GHASH.
fn primitives(name: &str) -> Vec<fn(&Backends) -> &str> {
    let aes: fn(&Backends) -> &str = |b| &b.aes;
    let ghash: fn(&Backends) -> &str = |b| &b.ghash;
    let chacha: fn(&Backends) -> &str = |b| &b.chacha20;
    let poly: fn(&Backends) -> &str = |b| b.poly1305.as_deref().unwrap_or("soft");
    if name.contains("chacha20") && name.contains("poly1305") {
        vec![chacha, poly]
    } else if name.contains("chacha20") {
        vec![chacha]
    } else if name.contains("gcm") {
        vec![aes, ghash]
    } else {
        vec![aes]
    }
}

/// The path the kernel's `driver` for algorithm `name` runs: `accelerated`
/// when every primitive of `name` is on hardware instructions, `software`
/// when none is, `partial` else (`gcm(aes)` with AES-NI but generic GHASH).
pub fn path(name: &str, driver: &str, arch: &str, cpu: &CpuFlags) -> PathUsed {
    let b = backends(driver, arch, cpu);
    let ran: Vec<bool> = primitives(name).iter().map(|p| is_hardware(p(&b))).collect();
    match (ran.iter().all(|h| *h), ran.iter().any(|h| *h)) {
        (true, _) => PathUsed::Accelerated,
        (false, true) => PathUsed::Partial,
        (false, false) => PathUsed::Software,
    }
}

/// Whether `driver` is the kernel's portable C (`aes-generic`, `aes-fixed-time`,
/// `cbc(ecb(aes-fixed-time))`, `chacha20-generic`…) rather than an
/// architecture's own code (`cbc-aes-aesni`, `chacha20-simd`, `aes-arm64`…).
pub fn is_generic(driver: &str) -> bool {
    let generic = |part: &str| {
        part.is_empty()
            || part.ends_with("-generic")
            || part.ends_with("-fixed-time")
            || part.ends_with("-lib")
            || matches!(
                part,
                "cbc" | "ctr" | "xts" | "ecb" | "gcm" | "gcm_base" | "rfc4106" | "rfc7539"
            )
    };
    driver.split(['(', ')', ',']).all(generic)
}

/// The module that brings the hardware driver for algorithm `name` on
/// `arch`, where the kernel builds it as a module: the remedy when the
/// chosen driver is generic although the CPU has the instructions.
pub fn module_for(name: &str, arch: &str) -> Option<&'static str> {
    let gcm = name.contains("gcm");
    let chacha = name.contains("chacha20");
    match arch {
        "x86_64" | "x86" if chacha => Some(if name.contains("poly1305") {
            "chacha20_x86_64 and poly1305_x86_64"
        } else {
            "chacha20_x86_64"
        }),
        // Kernels before 6.5 registered GHASH apart, in ghash_clmulni_intel.
        "x86_64" | "x86" => Some(if gcm {
            "aesni_intel (and ghash_clmulni_intel before Linux 6.5)"
        } else {
            "aesni_intel"
        }),
        "aarch64" if chacha => Some("chacha_neon"),
        "aarch64" if gcm => Some("ghash_ce"),
        "aarch64" if name == "aes" => Some("aes_ce_cipher"),
        "aarch64" => Some("aes_ce_blk"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epyc() -> CpuFlags {
        CpuFlags {
            aes: true,
            pclmulqdq: true,
            avx: true,
            avx2: true,
            ..CpuFlags::default()
        }
    }

    #[test]
    fn driver_names_say_which_primitives_run_on_hardware() {
        use PathUsed::{Accelerated, Partial, Software};
        let x = |name: &str, driver: &str| path(name, driver, "x86_64", &epyc());
        let a = |name: &str, driver: &str| path(name, driver, "aarch64", &CpuFlags::default());
        let cases = [
            (x("aes", "aes-aesni"), Accelerated),
            (x("cbc(aes)", "cbc-aes-aesni"), Accelerated),
            (x("cbc(aes)", "cbc(ecb(aes-fixed-time))"), Software),
            (x("gcm(aes)", "generic-gcm-aesni"), Accelerated),
            (x("gcm(aes)", "generic-gcm-vaes-avx10_512"), Accelerated),
            (x("gcm(aes)", "gcm_base(ctr(aes-generic),ghash-generic)"), Software),
            (x("gcm(aes)", "gcm_base(ctr-aes-aesni,ghash-generic)"), Partial),
            (
                x("rfc7539(chacha20,poly1305)", "rfc7539(chacha20-simd,poly1305-simd)"),
                Accelerated,
            ),
            (
                x(
                    "rfc7539(chacha20,poly1305)",
                    "rfc7539(chacha20-generic,poly1305-generic)",
                ),
                Software,
            ),
            (a("gcm(aes)", "gcm-aes-ce"), Accelerated),
            (a("ctr(aes)", "ctr-aes-ce"), Accelerated),
            (a("ctr(aes)", "ctr-aes-neonbs"), Software),
            (a("gcm(aes)", "gcm_base(ctr-aes-ce,ghash-ce)"), Accelerated),
            (
                a("rfc7539(chacha20,poly1305)", "rfc7539(chacha20-neon,poly1305-neon)"),
                Software,
            ),
        ];
        for (i, (got, want)) in cases.into_iter().enumerate() {
            assert_eq!(got, want, "case {i}");
        }
        // Without AVX2, the x86 SIMD ChaCha20 is SSSE3: software by the rule.
        let nehalem = CpuFlags::default();
        assert_eq!(
            path(
                "rfc7539(chacha20,poly1305)",
                "rfc7539(chacha20-simd,poly1305-simd)",
                "x86_64",
                &nehalem
            ),
            Software
        );
    }

    #[test]
    fn generic_means_the_kernels_portable_c() {
        for generic in [
            "aes-generic",
            "aes-fixed-time",
            "cbc(ecb(aes-fixed-time))",
            "gcm_base(ctr(aes-generic),ghash-generic)",
            "rfc7539(chacha20-generic,poly1305-generic)",
            "chacha20-lib",
        ] {
            assert!(is_generic(generic), "{generic}");
        }
        for own in [
            "aes-aesni",
            "cbc-aes-aesni",
            "chacha20-simd",
            "aes-arm64",
            "ctr-aes-neonbs",
            "gcm-aes-ce",
        ] {
            assert!(!is_generic(own), "{own}");
        }
        assert_eq!(module_for("aes", "x86_64"), Some("aesni_intel"));
        assert_eq!(module_for("gcm(aes)", "aarch64"), Some("ghash_ce"));
        assert_eq!(module_for("aes", "riscv64"), None);
    }
}
