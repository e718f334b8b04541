//! aarch64 CPU identity (`/proc/cpuinfo` and MIDR_EL1) and crypto features (HWCAP).
//!
//! The decoders are compiled on every target so they are unit-tested everywhere;
//! only [`probe`] reads the live system and exists on aarch64 alone. On arm64 the
//! kernel sets a HWCAP bit only when the feature is usable at EL0, so `usable`
//! equals `advertised` here.

// On non-aarch64 targets only the tests use the decoders.
#![cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]

use std::collections::BTreeMap;

use cipherfleet_core::facts::arm::{implementer_name, part_name};

use super::{ArmId, Cpu};

// AT_HWCAP bits from the Linux arm64 uapi (arch/arm64/include/uapi/asm/hwcap.h),
// defined here so they are available on every target and libc version.
pub(super) const HWCAP_AES: u64 = 1 << 3;
pub(super) const HWCAP_PMULL: u64 = 1 << 4;
/// SHA-1 instructions; not reported (no backend here uses them), kept for reference.
#[allow(dead_code)]
pub(super) const HWCAP_SHA1: u64 = 1 << 5;
pub(super) const HWCAP_SHA2: u64 = 1 << 6;
pub(super) const HWCAP_SHA3: u64 = 1 << 17;
/// SHA-512 instructions; not reported (no backend here uses them), kept for reference.
#[allow(dead_code)]
pub(super) const HWCAP_SHA512: u64 = 1 << 21;

/// The crypto-relevant features checked on aarch64, in report order.
const HWCAP_FEATURES: &[(&str, u64)] = &[
    ("aes", HWCAP_AES),
    ("pmull", HWCAP_PMULL),
    ("sha2", HWCAP_SHA2),
    ("sha3", HWCAP_SHA3),
];

/// Names of all features checked on aarch64.
pub(super) fn checked() -> Vec<&'static str> {
    HWCAP_FEATURES.iter().map(|(name, _)| *name).collect()
}

/// Feature names whose AT_HWCAP bit is set.
pub(super) fn hwcap_features(hwcap: u64) -> Vec<&'static str> {
    HWCAP_FEATURES
        .iter()
        .filter(|(_, bit)| hwcap & bit != 0)
        .map(|(name, _)| *name)
        .collect()
}

/// Parses `0x41`-style hex or plain decimal, as `/proc/cpuinfo` and sysfs print them.
pub(super) fn parse_int(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Splits MIDR_EL1 into implementer[31:24], variant[23:20], architecture[19:16],
/// part[15:4] and revision[3:0].
pub(super) fn decode_midr(midr: u64) -> ArmId {
    let field = |shift: u32, bits: u32| Some(((midr >> shift) & ((1 << bits) - 1)) as u32);
    ArmId {
        implementer: field(24, 8),
        variant: field(20, 4),
        architecture: field(16, 4),
        part: field(4, 12),
        revision: field(0, 4),
        part_name: None,
        midr: Some(format!("{midr:#018x}")),
    }
}

/// Identity fields from the first processor block of `/proc/cpuinfo` (see
/// [`super::linux::parse_cpuinfo_first`]).
pub(super) fn arm_id_from_cpuinfo(fields: &BTreeMap<String, String>) -> ArmId {
    let get = |key: &str| {
        fields
            .get(key)
            .and_then(|v| parse_int(v))
            .and_then(|v| u32::try_from(v).ok())
    };
    ArmId {
        implementer: get("CPU implementer"),
        variant: get("CPU variant"),
        architecture: get("CPU architecture"),
        part: get("CPU part"),
        revision: get("CPU revision"),
        part_name: None,
        midr: None,
    }
}

/// CPU identity from the first `/proc/cpuinfo` block and, for anything missing
/// there, MIDR_EL1.
///
/// The cpuinfo block is used only if it is in the arm64 format (has `CPU
/// implementer`): under user-mode emulation `/proc/cpuinfo` is the host's, and an
/// x86 host's `model name` must not be reported as this CPU's. The arm64 kernel
/// prints `model name` only for 32-bit tasks, so for this binary it is normally absent.
pub(super) fn identity(cpuinfo: &BTreeMap<String, String>, midr: Option<u64>) -> Cpu {
    let empty = BTreeMap::new();
    let cpuinfo = if cpuinfo.contains_key("CPU implementer") {
        cpuinfo
    } else {
        &empty
    };
    let mut id = arm_id_from_cpuinfo(cpuinfo);
    if let Some(midr) = midr {
        let m = decode_midr(midr);
        id.implementer = id.implementer.or(m.implementer);
        id.variant = id.variant.or(m.variant);
        // `architecture` stays cpuinfo's (the kernel prints 8); MIDR[19:16] is 0xf on
        // every ARMv8 part and is kept in the raw `midr`.
        id.part = id.part.or(m.part);
        id.revision = id.revision.or(m.revision);
        id.midr = m.midr;
    }
    id.part_name = id
        .implementer
        .zip(id.part)
        .and_then(|(i, p)| part_name(i, p))
        .map(str::to_string);
    let has_any = id.implementer.is_some() || id.part.is_some() || id.midr.is_some();
    Cpu {
        vendor: id.implementer.and_then(implementer_name).map(str::to_string),
        model_name: cpuinfo.get("model name").filter(|s| !s.is_empty()).cloned(),
        family: None,
        model: id.part,
        stepping: id.revision,
        arm: has_any.then_some(id),
        ..Cpu::default()
    }
}

/// AT_HWCAP bit: the kernel emulates EL0 reads of the ID registers, MIDR_EL1 included.
const HWCAP_CPUID: u64 = 1 << 11;

/// MIDR_EL1 via `mrs`, which the kernel traps and emulates.
///
/// # Safety
/// `HWCAP_CPUID` must be set in AT_HWCAP; otherwise the read raises SIGILL.
#[cfg(target_arch = "aarch64")]
unsafe fn read_midr_el1() -> u64 {
    let midr: u64;
    // SAFETY: the caller guarantees HWCAP_CPUID, so the kernel emulates this EL0 read
    // (Documentation/arch/arm64/cpu-feature-registers.rst); it touches no memory.
    unsafe {
        core::arch::asm!("mrs {}, MIDR_EL1", out(reg) midr, options(nomem, nostack, preserves_flags));
    }
    midr
}

/// Reads CPU identity and HWCAP features on the running aarch64 Linux system.
#[cfg(target_arch = "aarch64")]
pub(super) fn probe() -> (Cpu, super::Features, super::Virtualization) {
    use super::linux;

    // SAFETY: getauxval only reads the auxiliary vector; it returns 0 for an absent entry.
    let hwcap = unsafe { libc::getauxval(libc::AT_HWCAP) } as u64;
    // SAFETY: as above.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) } as u64;

    let cpuinfo = linux::cpuinfo_first();
    // sysfs gives cpu0's register; otherwise read it ourselves (the CPU we run on).
    let midr = linux::read_trimmed("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")
        .and_then(|s| parse_int(&s))
        .or_else(|| {
            // SAFETY: HWCAP_CPUID is checked first.
            (hwcap & HWCAP_CPUID != 0).then(|| unsafe { read_midr_el1() })
        });
    let cpu = identity(&cpuinfo, midr);

    let mut features = super::Features {
        source: Some("hwcap".into()),
        ..Default::default()
    };
    // arm64 kernels always report at least fp/asimd/cpuid; 0 means AT_HWCAP is missing.
    if hwcap != 0 {
        let present: Vec<String> = hwcap_features(hwcap).into_iter().map(String::from).collect();
        features.checked = checked().into_iter().map(String::from).collect();
        features.usable = present.clone();
        features.advertised = present;
        features.hwcap = Some(format!("{hwcap:#x}"));
        features.hwcap2 = Some(format!("{hwcap2:#x}"));
    }
    let virtualization = super::Virtualization {
        cpuinfo_foreign: super::virt::cpuinfo_foreign_arm(&cpuinfo),
        ..Default::default()
    };
    (cpu, features, virtualization)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::linux::parse_cpuinfo_first;

    const GRAVITON2: &str = "processor\t: 0\nBogoMIPS\t: 243.75\n\
        Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\n\
        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n\
        processor\t: 1\nBogoMIPS\t: 243.75\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";

    #[test]
    fn hwcap_bits() {
        assert_eq!(hwcap_features(0), Vec::<&str>::new());
        // fp|asimd|evtstrm|aes|pmull|sha1|sha2|crc32 = 0xff: Graviton2-like, no SHA3.
        assert_eq!(hwcap_features(0xff), ["aes", "pmull", "sha2"]);
        assert_eq!(hwcap_features(HWCAP_AES | HWCAP_SHA3 | HWCAP_SHA512), ["aes", "sha3"]);
        assert_eq!(hwcap_features(HWCAP_SHA1), Vec::<&str>::new());
        assert_eq!(checked(), ["aes", "pmull", "sha2", "sha3"]);
    }

    #[test]
    fn midr_decoding() {
        let id = decode_midr(0x410f_d0c1);
        assert_eq!(id.implementer, Some(0x41));
        assert_eq!(id.variant, Some(0));
        assert_eq!(id.architecture, Some(0xf));
        assert_eq!(id.part, Some(0xd0c));
        assert_eq!(id.revision, Some(1));
        assert_eq!(id.midr.as_deref(), Some("0x00000000410fd0c1"));
    }

    #[test]
    fn cpuinfo_identity() {
        let cpu = identity(&parse_cpuinfo_first(GRAVITON2), None);
        assert_eq!(cpu.vendor.as_deref(), Some("ARM"));
        assert_eq!(cpu.model_name, None, "arm64 cpuinfo has no model name; never guessed");
        assert_eq!((cpu.family, cpu.model, cpu.stepping), (None, Some(0xd0c), Some(1)));
        let arm = cpu.arm.unwrap();
        assert_eq!(arm.variant, Some(3));
        assert_eq!(arm.architecture, Some(8));
        assert_eq!(arm.part_name.as_deref(), Some("Neoverse-N1"));
        assert_eq!(arm.midr, None);
    }

    #[test]
    fn midr_fills_what_cpuinfo_lacks() {
        // A 32-bit-compat style block: implementer and model name, no part.
        let cpuinfo =
            parse_cpuinfo_first("processor : 0\nmodel name : ARMv8 Processor rev 1 (v8l)\nCPU implementer : 0xc0\n");
        let cpu = identity(&cpuinfo, parse_int("0x00000000c00fac41\n"));
        assert_eq!(cpu.vendor.as_deref(), Some("Ampere"));
        assert_eq!(cpu.model_name.as_deref(), Some("ARMv8 Processor rev 1 (v8l)"));
        assert_eq!(cpu.model, Some(0xac4));
        let arm = cpu.arm.unwrap();
        assert_eq!(arm.part_name.as_deref(), Some("Ampere-1a"));
        assert_eq!(arm.midr.as_deref(), Some("0x00000000c00fac41"));
    }

    #[test]
    fn foreign_cpuinfo_is_ignored() {
        // Under qemu-user on an x86 host, /proc/cpuinfo is the host's.
        let x86 = parse_cpuinfo_first(
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n",
        );
        assert_eq!(identity(&x86, None), Cpu::default());
        let cpu = identity(&x86, Some(0x410f_d083));
        assert_eq!(cpu.model_name, None);
        assert_eq!(cpu.vendor.as_deref(), Some("ARM"));
        assert_eq!(cpu.arm.unwrap().part_name.as_deref(), Some("Cortex-A72"));
    }

    #[test]
    fn nothing_known_stays_unknown() {
        let cpu = identity(&BTreeMap::new(), None);
        assert_eq!(cpu, Cpu::default());
        let odd = identity(&parse_cpuinfo_first("CPU implementer : 0x99\nCPU part : 0x123\n"), None);
        assert_eq!(odd.vendor, None);
        assert_eq!(odd.arm.unwrap().part_name, None);
    }

    #[test]
    fn int_parsing() {
        assert_eq!(parse_int("0x41"), Some(0x41));
        assert_eq!(parse_int(" 8 "), Some(8));
        assert_eq!(parse_int("0xzz"), None);
        assert_eq!(parse_int(""), None);
    }
}
