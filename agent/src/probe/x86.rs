//! x86 CPUID decoding: vendor, family/model/stepping, brand string, crypto feature
//! bits, and which of them the OS has enabled (OSXSAVE + XCR0).
//!
//! Decoding works on a [`CpuidSnapshot`] of raw register values and is compiled on
//! every target so it is unit-tested everywhere; only [`CpuidSnapshot::read`]
//! executes CPUID/XGETBV and exists on x86 alone.

// On non-x86 targets only the tests use the decoders.
#![cfg_attr(not(any(target_arch = "x86_64", target_arch = "x86")), allow(dead_code))]

use super::{Cpu, Features, Virtualization};
use cipherfleet_core::provider::CpuFlags;

/// Raw CPUID (and XGETBV) output needed by the probe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct CpuidSnapshot {
    /// Leaf 0 EAX: highest standard leaf.
    pub max_leaf: u32,
    /// Leaf 0 EBX, EDX, ECX: the vendor string in byte order.
    pub vendor: [u32; 3],
    /// Leaf 1 EAX, EBX, ECX, EDX.
    pub leaf1: Option<[u32; 4]>,
    /// Leaf 7 sub-leaf 0 EAX, EBX, ECX, EDX (only when `max_leaf >= 7`).
    pub leaf7: Option<[u32; 4]>,
    /// Leaves 0x80000002..=0x80000004, EAX, EBX, ECX, EDX each: the brand string.
    pub brand: Option<[u32; 12]>,
    /// Leaf 0x40000000 EAX, EBX, ECX, EDX (only when the hypervisor bit is set).
    pub hypervisor_leaf: Option<[u32; 4]>,
    /// XCR0, read only when CPUID.1:ECX.OSXSAVE is set.
    pub xcr0: Option<u64>,
}

/// Register state a feature's instructions need the OS to have enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// XMM only: always enabled by x86-64 Linux.
    Sse,
    /// XMM + YMM: XCR0 bits 1 and 2.
    Avx,
    /// XMM + YMM + opmask + ZMM: XCR0 bits 1, 2, 5, 6 and 7.
    Avx512,
}

#[derive(Clone, Copy, Debug)]
enum Reg {
    Leaf1Ecx,
    Leaf7Ebx,
    Leaf7Ecx,
}

struct FeatureBit {
    name: &'static str,
    reg: Reg,
    bit: u32,
    state: State,
}

/// The crypto-relevant features checked on x86, in report order.
const FEATURE_BITS: &[FeatureBit] = &[
    FeatureBit {
        name: "aes",
        reg: Reg::Leaf1Ecx,
        bit: 25,
        state: State::Sse,
    },
    FeatureBit {
        name: "pclmulqdq",
        reg: Reg::Leaf1Ecx,
        bit: 1,
        state: State::Sse,
    },
    FeatureBit {
        name: "ssse3",
        reg: Reg::Leaf1Ecx,
        bit: 9,
        state: State::Sse,
    },
    FeatureBit {
        name: "avx",
        reg: Reg::Leaf1Ecx,
        bit: 28,
        state: State::Avx,
    },
    FeatureBit {
        name: "avx2",
        reg: Reg::Leaf7Ebx,
        bit: 5,
        state: State::Avx,
    },
    // The aes crate runs VAES only with the ZMM state enabled (cpufeatures
    // gates `vaes` on it), even for its 256-bit backend: on a CPU without
    // AVX-512 (Zen 3) it runs AES-NI, and `vaes` counts as usable where it would run.
    FeatureBit {
        name: "vaes",
        reg: Reg::Leaf7Ecx,
        bit: 9,
        state: State::Avx512,
    },
    FeatureBit {
        name: "vpclmulqdq",
        reg: Reg::Leaf7Ecx,
        bit: 10,
        state: State::Avx,
    },
    FeatureBit {
        name: "avx512f",
        reg: Reg::Leaf7Ebx,
        bit: 16,
        state: State::Avx512,
    },
    FeatureBit {
        name: "sha",
        reg: Reg::Leaf7Ebx,
        bit: 29,
        state: State::Sse,
    },
];

/// Names of all features checked on x86, in report order.
pub(super) fn checked() -> Vec<&'static str> {
    FEATURE_BITS.iter().map(|f| f.name).collect()
}

const ECX1_OSXSAVE: u32 = 1 << 27;
const ECX1_HYPERVISOR: u32 = 1 << 31;
/// XCR0 bits 1 (SSE) and 2 (AVX).
const XCR0_AVX: u64 = 0b0000_0110;
/// XCR0 bits 1, 2, 5 (opmask), 6 (ZMM_Hi256) and 7 (Hi16_ZMM).
const XCR0_AVX512: u64 = 0b1110_0110;

/// Family, model and stepping as `/proc/cpuinfo` and the vendors' manuals show them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Signature {
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
}

impl Signature {
    /// Decodes CPUID leaf 1 EAX. The extended family is added only when the base
    /// family is 0xF; the extended model is prepended when the base family is 0x6
    /// or 0xF (Intel SDM "CPUID—Processor Identification"; AMD uses the same rule
    /// for family 0xF and its extended model is 0 below that).
    pub fn from_eax(eax: u32) -> Self {
        let stepping = eax & 0xF;
        let base_model = (eax >> 4) & 0xF;
        let base_family = (eax >> 8) & 0xF;
        let ext_model = (eax >> 16) & 0xF;
        let ext_family = (eax >> 20) & 0xFF;
        let family = if base_family == 0xF {
            base_family + ext_family
        } else {
            base_family
        };
        let model = if base_family == 0x6 || base_family == 0xF {
            (ext_model << 4) | base_model
        } else {
            base_model
        };
        Signature {
            family,
            model,
            stepping,
        }
    }
}

/// Registers as little-endian ASCII, cut at the first NUL and trimmed; `None` if empty.
pub(super) fn regs_to_string(regs: &[u32]) -> Option<String> {
    let bytes: Vec<u8> = regs
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .take_while(|&b| b != 0)
        .collect();
    let s = String::from_utf8_lossy(&bytes).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Feature names CPUID advertises, from leaf 1 ECX and leaf 7 (absent leaf 7 means
/// none of its features exist).
pub(super) fn advertised(leaf1_ecx: u32, leaf7: Option<[u32; 4]>) -> Vec<&'static str> {
    let [_, ebx7, ecx7, _] = leaf7.unwrap_or_default();
    FEATURE_BITS
        .iter()
        .filter(|f| {
            let reg = match f.reg {
                Reg::Leaf1Ecx => leaf1_ecx,
                Reg::Leaf7Ebx => ebx7,
                Reg::Leaf7Ecx => ecx7,
            };
            reg & (1 << f.bit) != 0
        })
        .map(|f| f.name)
        .collect()
}

/// The subset of `advertised` whose register state the OS has enabled. Features
/// needing YMM/ZMM state require OSXSAVE and the matching XCR0 bits; XMM-only
/// features are always enabled on x86-64 Linux.
pub(super) fn usable(advertised: &[&str], osxsave: bool, xcr0: Option<u64>) -> Vec<&'static str> {
    let xcr0 = if osxsave { xcr0.unwrap_or(0) } else { 0 };
    FEATURE_BITS
        .iter()
        .filter(|f| advertised.contains(&f.name))
        .filter(|f| match f.state {
            State::Sse => true,
            State::Avx => xcr0 & XCR0_AVX == XCR0_AVX,
            State::Avx512 => xcr0 & XCR0_AVX512 == XCR0_AVX512,
        })
        .map(|f| f.name)
        .collect()
}

/// Short name for a CPUID leaf 0x40000000 signature (already trimmed).
/// The features ring's and OpenSSL's dispatchers read ([`CpuFlags`]), from CPUID
/// leaf 1 ECX, leaf 7 and XCR0: AVX, AVX2 and VAES+VPCLMULQDQ only with the YMM
/// state enabled (as ring's and OpenSSL's `cpuid` setup check it), AVX-512F
/// only with the ZMM state too.
pub(super) fn dispatch_flags(leaf1_ecx: u32, leaf7: Option<[u32; 4]>, xcr0: Option<u64>) -> CpuFlags {
    let [_, ebx7, ecx7, _] = leaf7.unwrap_or_default();
    let bit = |reg: u32, n: u32| reg & (1 << n) != 0;
    let ymm = xcr0.is_some_and(|x| x & 0b110 == 0b110);
    let zmm = ymm && xcr0.is_some_and(|x| x & 0xe0 == 0xe0);
    CpuFlags {
        pclmulqdq: bit(leaf1_ecx, 1),
        ssse3: bit(leaf1_ecx, 9),
        sse41: bit(leaf1_ecx, 19),
        movbe: bit(leaf1_ecx, 22),
        aes: bit(leaf1_ecx, 25),
        avx: ymm && bit(leaf1_ecx, 28),
        avx2: ymm && bit(ebx7, 5),
        bmi2: bit(ebx7, 8),
        avx512f: zmm && bit(ebx7, 16),
        sha: bit(ebx7, 29),
        vaes_vpclmulqdq: ymm && bit(ecx7, 9) && bit(ecx7, 10),
        pmull: false,
        neon: false,
    }
}

pub(super) fn hypervisor_kind(signature: &str) -> Option<&'static str> {
    Some(match signature {
        "KVMKVMKVM" | "Linux KVM Hv" => "kvm",
        "TCGTCGTCGTCG" => "qemu-tcg",
        "Microsoft Hv" => "hyperv",
        "VMwareVMware" => "vmware",
        "XenVMMXenVMM" => "xen",
        "VBoxVBoxVBox" => "virtualbox",
        "bhyve bhyve" => "bhyve",
        "lrpepyh  vr" => "parallels",
        "ACRNACRNACRN" => "acrn",
        "QNXQVMBSQG" => "qnx",
        "Jailhouse" => "jailhouse",
        "Apple VZ" => "apple",
        _ => return None,
    })
}

/// Turns raw CPUID values into CPU identity, features and virtualization facts.
pub(super) fn decode(s: &CpuidSnapshot) -> (Cpu, Features, Virtualization) {
    let signature = s.leaf1.map(|l| Signature::from_eax(l[0]));
    let cpu = Cpu {
        vendor: regs_to_string(&s.vendor),
        model_name: s.brand.as_ref().and_then(|b| regs_to_string(b)),
        family: signature.map(|sig| sig.family),
        model: signature.map(|sig| sig.model),
        stepping: signature.map(|sig| sig.stepping),
        ..Cpu::default()
    };

    let mut features = Features {
        source: Some("cpuid".into()),
        ..Features::default()
    };
    let mut virt = Virtualization::default();
    if let Some([_, _, ecx1, _]) = s.leaf1 {
        let osxsave = ecx1 & ECX1_OSXSAVE != 0;
        let adv = advertised(ecx1, s.leaf7);
        let use_ = usable(&adv, osxsave, s.xcr0);
        features.checked = checked().into_iter().map(str::to_string).collect();
        features.advertised = adv.iter().map(|f| f.to_string()).collect();
        features.usable = use_.iter().map(|f| f.to_string()).collect();
        features.osxsave = Some(osxsave);
        features.xcr0 = if osxsave {
            s.xcr0.map(|x| format!("{x:#x}"))
        } else {
            None
        };

        let hv = ecx1 & ECX1_HYPERVISOR != 0;
        virt.hypervisor = Some(hv);
        if hv && let Some([_, ebx, ecx, edx]) = s.hypervisor_leaf {
            virt.vendor_signature = regs_to_string(&[ebx, ecx, edx]);
            virt.kind = virt
                .vendor_signature
                .as_deref()
                .and_then(hypervisor_kind)
                .map(str::to_string);
        }
    }
    (cpu, features, virt)
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
mod read {
    #[cfg(target_arch = "x86")]
    use core::arch::x86 as arch;
    #[cfg(target_arch = "x86_64")]
    use core::arch::x86_64 as arch;

    use super::{CpuidSnapshot, ECX1_HYPERVISOR, ECX1_OSXSAVE};

    fn cpuid(leaf: u32, sub_leaf: u32) -> [u32; 4] {
        // SAFETY: CPUID exists on every x86-64 CPU and on every 32-bit x86 CPU Rust's
        // Linux targets support; it only reads identification registers. (Newer
        // toolchains declare the intrinsic safe, hence the allow.)
        #[allow(unused_unsafe)]
        let r = unsafe { arch::__cpuid_count(leaf, sub_leaf) };
        [r.eax, r.ebx, r.ecx, r.edx]
    }

    /// Reads XCR0.
    ///
    /// # Safety
    /// CPUID.1:ECX.OSXSAVE must be set; otherwise XGETBV raises #UD.
    #[target_feature(enable = "xsave")]
    unsafe fn xgetbv0() -> u64 {
        // SAFETY: the caller guarantees OSXSAVE, so XGETBV is enabled and XCR0 (index 0)
        // always exists when it is.
        #[allow(unused_unsafe)]
        unsafe {
            arch::_xgetbv(0)
        }
    }

    impl CpuidSnapshot {
        /// Executes CPUID (and XGETBV when the OS enabled it) on the current CPU.
        pub(in super::super) fn read() -> Self {
            let [max_leaf, ebx, ecx, edx] = cpuid(0, 0);
            let leaf1 = (max_leaf >= 1).then(|| cpuid(1, 0));
            let leaf7 = (max_leaf >= 7).then(|| cpuid(7, 0));
            let max_ext = cpuid(0x8000_0000, 0)[0];
            let brand = (max_ext >= 0x8000_0004).then(|| {
                let mut b = [0u32; 12];
                for (i, leaf) in (0x8000_0002..=0x8000_0004).enumerate() {
                    b[i * 4..i * 4 + 4].copy_from_slice(&cpuid(leaf, 0));
                }
                b
            });
            let ecx1 = leaf1.map_or(0, |l| l[2]);
            let hypervisor_leaf = (ecx1 & ECX1_HYPERVISOR != 0).then(|| cpuid(0x4000_0000, 0));
            let xcr0 = if ecx1 & ECX1_OSXSAVE != 0 {
                // SAFETY: OSXSAVE is set, so the OS enabled XGETBV (and the CPU has XSAVE).
                Some(unsafe { xgetbv0() })
            } else {
                None
            };
            CpuidSnapshot {
                max_leaf,
                vendor: [ebx, edx, ecx],
                leaf1,
                leaf7,
                brand,
                hypervisor_leaf,
                xcr0,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_flags_need_the_os_state_for_avx_class_features() {
        // AES-NI, PCLMULQDQ, SSSE3, SSE4.1, MOVBE, AVX; AVX2, BMI2; VAES, VPCLMULQDQ.
        let ecx1 = (1 << 1) | (1 << 9) | (1 << 19) | (1 << 22) | (1 << 25) | (1 << 28);
        let leaf7 = Some([0, (1 << 5) | (1 << 8), (1 << 9) | (1 << 10), 0]);
        let full = dispatch_flags(ecx1, leaf7, Some(0b111));
        assert!(full.aes && full.pclmulqdq && full.movbe && full.avx && full.avx2 && full.vaes_vpclmulqdq);
        assert!(!full.avx512f, "no ZMM state");
        // An old kernel that does not enable the YMM state: AVX, AVX2 and VAES go, AES-NI stays.
        let old = dispatch_flags(ecx1, leaf7, Some(0b011));
        assert!(old.aes && old.pclmulqdq && old.bmi2 && !old.avx && !old.avx2 && !old.vaes_vpclmulqdq);
        assert_eq!(dispatch_flags(ecx1, leaf7, None), old);
    }

    fn ascii_regs<const N: usize>(s: &[u8]) -> [u32; N] {
        let mut bytes = vec![0u8; N * 4];
        bytes[..s.len()].copy_from_slice(s);
        std::array::from_fn(|i| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap()))
    }

    #[test]
    fn signature_decoding() {
        // (leaf-1 EAX, family, model, stepping)
        let cases = [
            (0x0009_06EA, 6, 0x9E, 10),   // Coffee Lake
            (0x00A2_0F10, 0x19, 0x21, 0), // Zen 3 (Vermeer)
            (0x0000_0F41, 15, 4, 1),      // NetBurst: family 0xF, ext model 0
            (0x0002_06C2, 6, 0x2C, 2),    // Westmere-EP
            (0x0006_06A6, 6, 0x6A, 6),    // Ice Lake-SP
            (0x0080_0F12, 0x17, 0x01, 2), // Zen (Naples)
            (0x0000_0633, 6, 3, 3),       // Pentium II: no extended model
            (0x0001_0543, 5, 4, 3),       // family 5 ignores the extended model nibble
        ];
        for (eax, family, model, stepping) in cases {
            assert_eq!(
                Signature::from_eax(eax),
                Signature {
                    family,
                    model,
                    stepping
                },
                "eax={eax:#010x}"
            );
        }
    }

    #[test]
    fn vendor_and_brand_strings() {
        // Leaf 0 gives EBX="Genu", EDX="ineI", ECX="ntel".
        assert_eq!(
            regs_to_string(&[0x756e_6547, 0x4965_6e69, 0x6c65_746e]).as_deref(),
            Some("GenuineIntel")
        );
        let brand: [u32; 12] = ascii_regs(b"       Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz");
        assert_eq!(
            regs_to_string(&brand).as_deref(),
            Some("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz")
        );
        assert_eq!(regs_to_string(&[0u32; 12]), None);
        assert_eq!(
            regs_to_string(&ascii_regs::<3>(b"KVMKVMKVM")).as_deref(),
            Some("KVMKVMKVM")
        );
    }

    #[test]
    fn feature_bits() {
        let ecx1 = (1 << 25) | (1 << 1) | (1 << 9) | (1 << 28);
        assert_eq!(advertised(ecx1, None), ["aes", "pclmulqdq", "ssse3", "avx"]);
        let leaf7 = [0, (1 << 5) | (1 << 16) | (1 << 29), (1 << 9) | (1 << 10), 0];
        assert_eq!(
            advertised(0, Some(leaf7)),
            ["avx2", "vaes", "vpclmulqdq", "avx512f", "sha"]
        );
        assert!(advertised(0, Some([0; 4])).is_empty());
    }

    #[test]
    fn xcr0_gates_avx_and_avx512() {
        let all = [
            "aes",
            "pclmulqdq",
            "ssse3",
            "avx",
            "avx2",
            "vaes",
            "vpclmulqdq",
            "avx512f",
            "sha",
        ];
        let sse_only = ["aes", "pclmulqdq", "ssse3", "sha"];
        let no_512 = ["aes", "pclmulqdq", "ssse3", "avx", "avx2", "vpclmulqdq", "sha"];
        // (advertised, osxsave, xcr0, expected usable)
        type Case<'a> = (&'a [&'a str], bool, Option<u64>, &'a [&'a str]);
        let cases: [Case; 7] = [
            (&["aes", "avx"], true, Some(0x3), &["aes"]),
            (&["aes", "avx"], true, Some(0x7), &["aes", "avx"]),
            (&["aes", "avx"], false, None, &["aes"]),
            // XCR0 is meaningless when OSXSAVE is clear.
            (&["aes", "avx"], false, Some(0x7), &["aes"]),
            (&all, true, Some(0x7), &no_512),
            (&all, true, Some(0xE7), &all),
            (&all, true, Some(0x3), &sse_only),
        ];
        for (adv, osxsave, xcr0, want) in cases {
            assert_eq!(
                usable(adv, osxsave, xcr0),
                want,
                "{adv:?} osxsave={osxsave} xcr0={xcr0:?}"
            );
        }
    }

    #[test]
    fn decode_westmere_under_kvm() {
        // Westmere: AES-NI, PCLMULQDQ, SSSE3; no AVX, no XSAVE, leaf 7 absent.
        let snapshot = CpuidSnapshot {
            max_leaf: 0xB,
            vendor: ascii_regs(b"GenuineIntel"),
            leaf1: Some([0x0002_06C2, 0, (1 << 25) | (1 << 1) | (1 << 9) | (1 << 31), 0]),
            leaf7: None,
            brand: None,
            hypervisor_leaf: Some([0x4000_0001, 0x4b4d_564b, 0x564b_4d56, 0x0000_004d]),
            xcr0: None,
        };
        let (cpu, features, virt) = decode(&snapshot);
        assert_eq!(cpu.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(cpu.model_name, None);
        assert_eq!((cpu.family, cpu.model, cpu.stepping), (Some(6), Some(0x2C), Some(2)));
        assert_eq!(features.checked.len(), FEATURE_BITS.len());
        assert_eq!(features.advertised, ["aes", "pclmulqdq", "ssse3"]);
        assert_eq!(features.usable, ["aes", "pclmulqdq", "ssse3"]);
        assert_eq!(features.osxsave, Some(false));
        assert_eq!(features.xcr0, None);
        assert_eq!(virt.hypervisor, Some(true));
        assert_eq!(virt.vendor_signature.as_deref(), Some("KVMKVMKVM"));
        assert_eq!(virt.kind.as_deref(), Some("kvm"));
    }

    #[test]
    fn decode_avx512_host_with_ymm_only_os() {
        let snapshot = CpuidSnapshot {
            max_leaf: 0x1B,
            vendor: ascii_regs(b"GenuineIntel"),
            leaf1: Some([0x0006_06A6, 0, (1 << 25) | (1 << 27) | (1 << 28), 0]),
            leaf7: Some([0, (1 << 5) | (1 << 16), 1 << 9, 0]),
            brand: None,
            hypervisor_leaf: None,
            xcr0: Some(0x7),
        };
        let (_, features, virt) = decode(&snapshot);
        assert_eq!(features.advertised, ["aes", "avx", "avx2", "vaes", "avx512f"]);
        assert_eq!(features.usable, ["aes", "avx", "avx2"], "VAES needs the ZMM state here");
        assert_eq!(features.xcr0.as_deref(), Some("0x7"));
        assert_eq!(virt.hypervisor, Some(false));
        assert_eq!(virt.vendor_signature, None);
    }

    #[test]
    fn zen3_vaes_is_not_usable_as_the_aes_crate_sees_it() {
        // VAES and AVX2 but no AVX-512: the OS enables YMM only, and the aes
        // crate runs AES-NI; "vaes usable, backend aes-ni" would read as a fallback.
        let snapshot = CpuidSnapshot {
            max_leaf: 0x10,
            vendor: ascii_regs(b"AuthenticAMD"),
            leaf1: Some([0x00A2_0F10, 0, (1 << 25) | (1 << 1) | (1 << 27) | (1 << 28), 0]),
            leaf7: Some([0, (1 << 5) | (1 << 29), (1 << 9) | (1 << 10), 0]),
            brand: None,
            hypervisor_leaf: None,
            xcr0: Some(0x7),
        };
        let (_, features, _) = decode(&snapshot);
        assert!(features.advertised.contains(&"vaes".to_string()));
        assert_eq!(
            features.usable,
            ["aes", "pclmulqdq", "avx", "avx2", "vpclmulqdq", "sha"]
        );
    }

    #[test]
    fn no_leaf1_means_nothing_checked() {
        let (cpu, features, virt) = decode(&CpuidSnapshot::default());
        assert_eq!(cpu.family, None);
        assert!(features.checked.is_empty());
        assert_eq!(virt.hypervisor, None);
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    #[test]
    fn live_cpuid_agrees_with_std_detection() {
        let (cpu, features, _) = decode(&CpuidSnapshot::read());
        assert!(cpu.vendor.is_some());
        let has = |f: &str| features.usable.iter().any(|u| u == f);
        assert_eq!(has("aes"), std::arch::is_x86_feature_detected!("aes"));
        assert_eq!(has("avx"), std::arch::is_x86_feature_detected!("avx"));
        assert_eq!(has("avx2"), std::arch::is_x86_feature_detected!("avx2"));
        assert_eq!(has("avx512f"), std::arch::is_x86_feature_detected!("avx512f"));
        assert_eq!(has("sha"), std::arch::is_x86_feature_detected!("sha"));
        // Usable VAES is what the aes crate runs: the probe and the backend agree.
        #[cfg(not(aes_backend = "soft"))]
        if has("aes") {
            assert_eq!(has("vaes"), crate::backend::backends().aes == "vaes");
        }
    }
}
