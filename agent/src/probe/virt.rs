//! Virtualization evidence beyond the CPU's own bits: the hypervisor a
//! firmware table (DMI) or the device tree names, for ARM guests that have no
//! CPUID hypervisor bit; and whether `/proc/cpuinfo` describes the CPU this
//! process runs on. Under a user-mode emulator (qemu-user) the kernel's
//! cpuinfo is the real machine's while the process sees the emulated CPU (or
//! another architecture altogether), and its timings are not this CPU's.
//!
//! Pure functions over what `probe` read, so they are tested on any machine.

use std::collections::BTreeMap;

use super::Cpu;

/// The hypervisor that DMI (`sys_vendor`, `product_name`) or the device tree's
/// `/hypervisor` `compatible` names, as a short kind (`kvm`, `xen`, ...).
/// A hint, not proof: a bare-metal cloud instance keeps its vendor's DMI
/// strings, which is why `Amazon EC2` counts only when not `*.metal`.
pub(super) fn hypervisor_hint(
    dmi_vendor: Option<&str>,
    dmi_product: Option<&str>,
    device_tree: Option<&str>,
) -> Option<&'static str> {
    if let Some(dt) = device_tree {
        return Some(match dt.split(',').next().unwrap_or(dt) {
            "xen" => "xen",
            _ if dt.contains("kvm") => "kvm",
            _ => "unknown",
        });
    }
    let vendor = dmi_vendor.unwrap_or("");
    let product = dmi_product.unwrap_or("");
    Some(match (vendor, product) {
        (_, p) if p.contains("KVM") => "kvm",
        ("QEMU", _) => "qemu",
        (v, _) if v.contains("VMware") => "vmware",
        ("Microsoft Corporation", "Virtual Machine") => "hyperv",
        ("Xen", _) => "xen",
        ("innotek GmbH", _) | (_, "VirtualBox") => "virtualbox",
        ("Amazon EC2", p) if !p.ends_with(".metal") && !p.is_empty() => "nitro",
        ("Google", "Google Compute Engine") => "kvm",
        _ => return None,
    })
}

/// x86: whether cpuinfo's first CPU (vendor, family, model) differs from what
/// CPUID told this process, or is no x86 CPU at all. Family and model are the
/// same on every core of a machine (hybrid parts included); a VM's kernel
/// reads the same CPUID as its processes. `None` if either side is unknown.
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "x86")), allow(dead_code))] // and its tests
pub(super) fn cpuinfo_foreign_x86(cpu: &Cpu, cpuinfo: &BTreeMap<String, String>) -> Option<bool> {
    if cpuinfo.is_empty() || cpu.vendor.is_none() {
        return None;
    }
    if cpuinfo.contains_key("CPU implementer") {
        return Some(true);
    }
    let number = |key: &str| cpuinfo.get(key).and_then(|v| v.parse::<u32>().ok());
    let theirs = (cpuinfo.get("vendor_id").cloned(), number("cpu family"), number("model"));
    let ours = (cpu.vendor.clone(), cpu.family, cpu.model);
    if theirs.0.is_none() && theirs.1.is_none() {
        // Neither x86 nor arm64 format: another architecture's kernel.
        return Some(true);
    }
    Some(theirs != ours)
}

/// aarch64: whether cpuinfo is not in the arm64 kernel's format (no `CPU
/// implementer`): the binary runs emulated on another architecture. An arm64
/// cpuinfo naming another part is not taken as foreign: on big.LITTLE systems
/// the first block's core need not be the one this process runs on.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // and its tests
pub(super) fn cpuinfo_foreign_arm(cpuinfo: &BTreeMap<String, String>) -> Option<bool> {
    (!cpuinfo.is_empty()).then(|| !cpuinfo.contains_key("CPU implementer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::linux::parse_cpuinfo_first;

    const EPYC: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n\
        model name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: fpu aes avx2\n";
    const GRAVITON: &str =
        "processor\t: 0\nFeatures\t: fp asimd aes pmull\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";

    fn x86(vendor: &str, family: u32, model: u32) -> Cpu {
        Cpu {
            vendor: Some(vendor.into()),
            family: Some(family),
            model: Some(model),
            ..Cpu::default()
        }
    }

    #[test]
    fn qemu_user_shows_in_cpuinfo() {
        let epyc = parse_cpuinfo_first(EPYC);
        let cases = [
            ("the CPU cpuinfo names", x86("AuthenticAMD", 25, 1), Some(false)),
            ("-cpu Westmere on that host", x86("GenuineIntel", 6, 44), Some(true)),
        ];
        for (name, cpu, want) in cases {
            assert_eq!(cpuinfo_foreign_x86(&cpu, &epyc), want, "{name}");
        }
        let graviton = parse_cpuinfo_first(GRAVITON);
        assert_eq!(
            cpuinfo_foreign_x86(&x86("GenuineIntel", 6, 44), &graviton),
            Some(true),
            "an x86 binary on an ARM host"
        );
        assert_eq!(cpuinfo_foreign_x86(&x86("GenuineIntel", 6, 44), &BTreeMap::new()), None);
        assert_eq!(cpuinfo_foreign_x86(&Cpu::default(), &epyc), None);

        assert_eq!(cpuinfo_foreign_arm(&graviton), Some(false));
        assert_eq!(
            cpuinfo_foreign_arm(&epyc),
            Some(true),
            "an ARM binary under qemu on x86"
        );
        assert_eq!(cpuinfo_foreign_arm(&BTreeMap::new()), None);
    }

    #[test]
    fn firmware_and_device_tree_name_the_hypervisor() {
        let cases = [
            (None, None, Some("xen,xen-4.16"), Some("xen")),
            (None, None, Some("linux,kvm"), Some("kvm")),
            (Some("QEMU"), Some("KVM Virtual Machine"), None, Some("kvm")),
            (Some("QEMU"), Some("QEMU Virtual Machine"), None, Some("qemu")),
            (Some("Amazon EC2"), Some("m6g.large"), None, Some("nitro")),
            (Some("Amazon EC2"), Some("a1.metal"), None, None),
            (
                Some("Microsoft Corporation"),
                Some("Virtual Machine"),
                None,
                Some("hyperv"),
            ),
            (Some("VMware, Inc."), Some("VMware20,1"), None, Some("vmware")),
            (Some("Ampere(TM)"), Some("Mt.Jade"), None, None),
            (None, None, None, None),
        ];
        for (vendor, product, dt, want) in cases {
            assert_eq!(
                hypervisor_hint(vendor, product, dt),
                want,
                "{vendor:?} {product:?} {dt:?}"
            );
        }
    }
}
