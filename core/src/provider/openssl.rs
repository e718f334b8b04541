//! OpenSSL's capability vectors: the masks that make it run its software
//! path, what a mask found in an environment takes away, and the path
//! OpenSSL takes with what is left.
//!
//! OpenSSL picks its code at run time from a capability vector it fills with
//! CPUID (x86) or `AT_HWCAP` (ARM) and which the environment can override
//! (`OPENSSL_ia32cap(3)`, `OPENSSL_armcap`). The bits used here, from that
//! manual page (the same in 1.0.2, 1.1.1 and 3.x for these):
//! - first vector (CPUID.1 EDX:ECX): #33 PCLMULQDQ, #41 SSSE3, #54 MOVBE, #57 AES-NI, #60 AVX;
//! - second vector, after a `:` (CPUID.7 EBX:ECX): #5 AVX2, #16 AVX512F, #29 SHA,
//!   #41 VAES, #42 VPCLMULQDQ (1.0.2 reads only its low 32 bits);
//! - a leading `~` clears the given bits from what was detected; without it the
//!   value replaces the vector.
//! - `OPENSSL_armcap` replaces the ARM vector: bit 0 NEON, 2 AES, 4 SHA-256, 5 PMULL.
//!
//! Which code each capability selects (x86-64: `aesni-x86_64`/`vpaes-x86_64`/`aes-x86_64`,
//! `ghash-x86_64` CLMUL or 4-bit tables, `chacha-x86_64` SSSE3/AVX2/AVX-512,
//! `poly1305-x86_64` AVX/AVX2; aarch64: `aesv8-armx`/`vpaes-armv8`, `ghashv8`/`ghash-neon`,
//! `chacha-armv8`, `poly1305-armv8`) is OpenSSL's perlasm dispatch, which the agent
//! cannot observe: a path from [`backends`] is `inferred`.

use super::CpuFlags;
use crate::path::Backends;

/// `OPENSSL_ia32cap` for the software path: clears AES-NI, PCLMULQDQ and AVX
/// in the first vector and AVX2, AVX-512F, VAES and VPCLMULQDQ in the second,
/// so OpenSSL runs what a CPU without them runs (SSSE3 `vpaes`, table GHASH,
/// SSSE3 ChaCha20, scalar Poly1305): the software path as the rest of the
/// project counts it, where SSSE3 and SSE4.1 are not acceleration. (Clearing
/// only AES-NI and PCLMULQDQ, `~0x200000200000000`, would leave ChaCha20 on AVX2.)
pub const SOFTWARE_IA32CAP: &str = "~0x1200000200000000:~0x60000010020";

/// `OPENSSL_armcap` for the software path: no NEON, no crypto extensions.
pub const SOFTWARE_ARMCAP: &str = "0";

/// The variable and value that make OpenSSL run its software path on `arch`.
pub fn software_env(arch: &str) -> Option<(&'static str, &'static str)> {
    match arch {
        "x86_64" | "x86" => Some(("OPENSSL_ia32cap", SOFTWARE_IA32CAP)),
        "aarch64" | "arm" => Some(("OPENSSL_armcap", SOFTWARE_ARMCAP)),
        _ => None,
    }
}

/// The variable OpenSSL reads its capability override from on `arch`.
pub fn capability_variable(arch: &str) -> Option<&'static str> {
    software_env(arch).map(|(name, _)| name)
}

const LV0: [(u32, &str); 5] = [
    (33, "pclmulqdq"),
    (41, "ssse3"),
    (54, "movbe"),
    (57, "aes"),
    (60, "avx"),
];
const LV1: [(u32, &str); 5] = [
    (5, "avx2"),
    (16, "avx512f"),
    (29, "sha"),
    (41, "vaes"),
    (42, "vpclmulqdq"),
];
const ARM: [(u32, &str); 4] = [(0, "neon"), (2, "aes"), (4, "sha"), (5, "pmull")];

fn number(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None if t.is_empty() => None,
        None => t.parse().ok(),
    }
}

/// The capabilities of interest that a vector's override takes away: with
/// `~`, the bits it names; without, the bits it leaves out. Empty text leaves
/// the vector as detected.
fn cleared(part: &str, bits: &[(u32, &'static str)]) -> Vec<&'static str> {
    let (inverted, value) = match part.trim().strip_prefix('~') {
        Some(rest) => (true, rest),
        None => (false, part),
    };
    let Some(value) = number(value) else {
        return Vec::new();
    };
    bits.iter()
        .filter(|(bit, _)| {
            let set = value & (1u64 << bit) != 0;
            set == inverted
        })
        .map(|(_, name)| *name)
        .collect()
}

/// The capabilities (`aes`, `pclmulqdq`, `avx2`, `neon`…) that `value` of
/// `variable` clears, on the architecture that variable belongs to. What the
/// `openssl-masked` finding names.
pub fn masked_by(variable: &str, value: &str) -> Vec<&'static str> {
    match variable {
        "OPENSSL_ia32cap" => {
            let mut parts = value.splitn(2, ':');
            let mut names = cleared(parts.next().unwrap_or(""), &LV0);
            names.extend(cleared(parts.next().unwrap_or(""), &LV1));
            names
        }
        "OPENSSL_armcap" => cleared(value, &ARM),
        _ => Vec::new(),
    }
}

/// `cpu` with what `variable=value` clears taken away.
pub fn apply_mask(cpu: CpuFlags, variable: &str, value: &str) -> CpuFlags {
    let mut cpu = cpu;
    for name in masked_by(variable, value) {
        match name {
            "aes" => cpu.aes = false,
            "pclmulqdq" => cpu.pclmulqdq = false,
            "ssse3" => cpu.ssse3 = false,
            "movbe" => cpu.movbe = false,
            "avx" => cpu.avx = false,
            "avx2" => cpu.avx2 = false,
            "avx512f" => cpu.avx512f = false,
            "sha" => cpu.sha = false,
            "vaes" | "vpclmulqdq" => cpu.vaes_vpclmulqdq = false,
            "neon" => cpu.neon = false,
            "pmull" => cpu.pmull = false,
            _ => {}
        }
    }
    cpu
}

/// The backends OpenSSL's dispatch takes on `arch` with `cpu` (after any mask:
/// [`apply_mask`]); a `no-asm` build runs its C everywhere.
pub fn backends(arch: &str, cpu: &CpuFlags, no_asm: bool) -> Backends {
    if no_asm {
        return Backends::soft();
    }
    let s = |name: &str| name.to_string();
    let pick = |options: &[(bool, &str)]| s(options.iter().find(|(on, _)| *on).map_or("soft", |(_, n)| n));
    match arch {
        "x86_64" | "x86" => Backends {
            aes: pick(&[
                (cpu.aes && cpu.vaes_vpclmulqdq && cpu.avx512f, "vaes"),
                (cpu.aes, "aes-ni"),
                (cpu.ssse3, "vpaes"),
            ]),
            ghash: pick(&[
                (cpu.pclmulqdq && cpu.vaes_vpclmulqdq && cpu.avx512f, "vpclmulqdq"),
                (cpu.pclmulqdq && cpu.avx && cpu.movbe, "clmul-avx"),
                (cpu.pclmulqdq, "clmul"),
            ]),
            chacha20: pick(&[(cpu.avx512f, "avx512f"), (cpu.avx2, "avx2"), (cpu.ssse3, "ssse3")]),
            poly1305: Some(pick(&[(cpu.avx512f, "avx512f"), (cpu.avx2, "avx2"), (cpu.avx, "avx")])),
            sha256: pick(&[(cpu.sha, "sha-ni")]),
        },
        "aarch64" => Backends {
            aes: pick(&[(cpu.aes, "armv8-aes"), (cpu.neon, "vpaes")]),
            ghash: pick(&[(cpu.pmull, "pmull"), (cpu.neon, "neon")]),
            chacha20: pick(&[(cpu.neon, "neon")]),
            poly1305: Some(pick(&[(cpu.neon, "neon")])),
            sha256: pick(&[(cpu.sha, "armv8-sha2")]),
        },
        _ => Backends::soft(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathUsed;
    use crate::spec::KeyMode;

    fn epyc() -> CpuFlags {
        CpuFlags {
            aes: true,
            pclmulqdq: true,
            ssse3: true,
            sse41: true,
            avx: true,
            movbe: true,
            avx2: true,
            bmi2: true,
            sha: true,
            ..CpuFlags::default()
        }
    }

    #[test]
    fn the_software_mask_clears_what_the_project_counts_as_acceleration() {
        assert_eq!(
            masked_by("OPENSSL_ia32cap", SOFTWARE_IA32CAP),
            ["pclmulqdq", "aes", "avx", "avx2", "avx512f", "vaes", "vpclmulqdq"]
        );
        // The manual's own example: AES-NI and PCLMULQDQ alone.
        assert_eq!(masked_by("OPENSSL_ia32cap", "~0x200000200000000"), ["pclmulqdq", "aes"]);
        // Only the second vector: AVX2 off.
        assert_eq!(masked_by("OPENSSL_ia32cap", ":~0x20"), ["avx2"]);
        assert_eq!(masked_by("OPENSSL_armcap", "0"), ["neon", "aes", "sha", "pmull"]);
        assert_eq!(masked_by("OPENSSL_armcap", "0x3d"), Vec::<&str>::new());
        assert!(masked_by("OPENSSL_ia32cap", "").is_empty());
        let soft = apply_mask(epyc(), "OPENSSL_ia32cap", SOFTWARE_IA32CAP);
        let alg = |a: &str| a.parse().unwrap();
        for a in ["aes-256-gcm", "chacha20-poly1305", "aes-128-ctr"] {
            assert_eq!(
                backends("x86_64", &soft, false).path_for(alg(a), KeyMode::Static),
                PathUsed::Software,
                "{a}"
            );
            assert_eq!(
                backends("x86_64", &epyc(), false).path_for(alg(a), KeyMode::Static),
                PathUsed::Accelerated,
                "{a}"
            );
        }
        assert_eq!(backends("x86_64", &soft, false).aes, "vpaes");
    }

    #[test]
    fn a_value_without_tilde_replaces_the_vector() {
        // AES-NI set, PCLMULQDQ not: GCM runs AES-NI with table GHASH.
        let cpu = apply_mask(epyc(), "OPENSSL_ia32cap", "0x0200000000000000");
        let b = backends("x86_64", &cpu, false);
        assert_eq!((b.aes.as_str(), b.ghash.as_str()), ("aes-ni", "soft"));
        assert_eq!(
            b.path_for("aes-128-gcm".parse().unwrap(), KeyMode::Static),
            PathUsed::Partial
        );
    }

    #[test]
    fn a_no_asm_build_is_software_whatever_the_cpu() {
        assert_eq!(backends("x86_64", &epyc(), true), Backends::soft());
        let a72 = CpuFlags {
            aes: true,
            pmull: true,
            neon: true,
            ..CpuFlags::default()
        };
        assert_eq!(backends("aarch64", &a72, false).ghash, "pmull");
        let masked = apply_mask(a72, "OPENSSL_armcap", SOFTWARE_ARMCAP);
        assert_eq!(backends("aarch64", &masked, false), Backends::soft());
        assert_eq!(software_env("riscv64"), None);
    }
}
