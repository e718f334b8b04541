//! Human-readable `lscpu`-style rendering of [`HostFacts`]: sections of aligned
//! `key  value` lines; every fact that could not be read shows as `unknown`.

use std::fmt::Display;
use std::io::{self, Write};

use super::{Cpu, Features, HostFacts};
use cipherfleet_core::path::Flavour;

const UNKNOWN: &str = "unknown";

type Rows = Vec<(String, String)>;

fn opt<T: Display>(value: &Option<T>) -> String {
    value.as_ref().map_or_else(|| UNKNOWN.to_string(), |v| v.to_string())
}

fn yes_no(value: Option<bool>) -> String {
    match value {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => UNKNOWN.into(),
    }
}

/// `158 (0x9e)`.
fn dec_hex(value: Option<u32>) -> String {
    value.map_or_else(|| UNKNOWN.to_string(), |v| format!("{v} ({v:#x})"))
}

/// `15.6 GiB (16709959680 bytes)`.
fn bytes(value: Option<u64>) -> String {
    value.map_or_else(
        || UNKNOWN.to_string(),
        |b| format!("{:.1} GiB ({b} bytes)", b as f64 / (1u64 << 30) as f64),
    )
}

fn row(rows: &mut Rows, key: &str, value: String) {
    rows.push((key.to_string(), value));
}

fn host_rows(f: &HostFacts) -> Rows {
    let mut r = Rows::new();
    row(&mut r, "hostname", opt(&f.hostname));
    row(&mut r, "arch", f.arch.clone());
    row(&mut r, "kernel release", opt(&f.kernel_release));
    row(&mut r, "os", opt(&f.os.pretty_name));
    row(&mut r, "os name", opt(&f.os.name));
    row(&mut r, "os version", opt(&f.os.version_id));
    row(&mut r, "memory total", bytes(f.memory_total_bytes));
    r
}

fn cpu_rows(c: &Cpu) -> Rows {
    let mut r = Rows::new();
    row(&mut r, "vendor", opt(&c.vendor));
    row(&mut r, "model name", opt(&c.model_name));
    if let Some(arm) = &c.arm {
        let hex = |v: Option<u32>| v.map_or_else(|| UNKNOWN.to_string(), |v| format!("{v:#x}"));
        row(&mut r, "implementer", hex(arm.implementer));
        let part = match &arm.part_name {
            Some(name) => format!("{} ({name})", hex(arm.part)),
            None => hex(arm.part),
        };
        row(&mut r, "part", part);
        let rp = match (arm.variant, arm.revision) {
            (Some(v), Some(p)) => format!("r{v}p{p}"),
            _ => UNKNOWN.into(),
        };
        row(&mut r, "variant/revision", rp);
        row(&mut r, "architecture", opt(&arm.architecture));
        row(&mut r, "midr_el1", opt(&arm.midr));
    } else {
        row(&mut r, "family", dec_hex(c.family));
        row(&mut r, "model", dec_hex(c.model));
        row(&mut r, "stepping", opt(&c.stepping));
    }
    row(&mut r, "logical cores", opt(&c.logical_cores));
    row(&mut r, "available parallelism", opt(&c.available_parallelism));
    r
}

fn feature_rows(f: &Features) -> Rows {
    let mut r = Rows::new();
    row(&mut r, "source", opt(&f.source));
    if f.checked.is_empty() {
        row(&mut r, "features", UNKNOWN.into());
    }
    for name in &f.checked {
        let advertised = f.advertised.contains(name);
        let usable = f.usable.contains(name);
        let value = match (advertised, usable) {
            (true, true) => "yes".to_string(),
            (false, false) => "no".to_string(),
            // The aes crate runs VAES on the ZMM state only, which a CPU without AVX-512 lacks.
            (true, false) if name == "vaes" && !f.advertised.iter().any(|a| a == "avx512f") => {
                "advertised, not used (the aes crate needs AVX-512 state for it; AES-NI runs)".to_string()
            }
            (true, false) => "advertised, NOT usable (OS has not enabled its register state)".to_string(),
            (false, true) => "usable but not advertised".to_string(),
        };
        row(&mut r, name, value);
    }
    match f.source.as_deref() {
        Some("cpuid") => {
            row(&mut r, "osxsave", yes_no(f.osxsave));
            row(&mut r, "xcr0", opt(&f.xcr0));
        }
        Some("hwcap") => {
            row(&mut r, "hwcap", opt(&f.hwcap));
            row(&mut r, "hwcap2", opt(&f.hwcap2));
        }
        _ => {}
    }
    r
}

fn sections(f: &HostFacts) -> Vec<(&'static str, Rows)> {
    let v = &f.virtualization;
    let mut virt = Rows::new();
    row(&mut virt, "hypervisor", yes_no(v.hypervisor));
    row(&mut virt, "vendor signature", opt(&v.vendor_signature));
    row(&mut virt, "kind", opt(&v.kind));
    row(&mut virt, "sys/hypervisor/type", opt(&v.sys_hypervisor_type));
    row(&mut virt, "dmi sys_vendor", opt(&v.dmi_sys_vendor));
    row(&mut virt, "dmi product_name", opt(&v.dmi_product_name));
    row(&mut virt, "device-tree hypervisor", opt(&v.device_tree_hypervisor));
    let foreign = v.cpuinfo_foreign.map(|f| {
        if f {
            "yes (emulated: another CPU than cpuinfo's)"
        } else {
            "no"
        }
    });
    row(&mut virt, "cpuinfo describes another CPU", opt(&foreign));

    let b = &f.crypto.backends;
    let mut paths = Rows::new();
    row(&mut paths, "aes", b.aes.clone());
    row(&mut paths, "ghash/polyval", b.ghash.clone());
    row(&mut paths, "chacha20", b.chacha20.clone());
    row(&mut paths, "poly1305", opt(&b.poly1305));
    row(&mut paths, "sha256", b.sha256.clone());
    row(
        &mut paths,
        "aes hw accelerated",
        yes_no(Some(f.crypto.aes_hardware_accelerated)),
    );

    let mut build = Rows::new();
    row(&mut build, "agent version", f.build.agent_version.clone());
    let flavour = match f.build.flavour {
        Flavour::Accelerated => "accelerated",
        Flavour::Software => "software",
    };
    row(&mut build, "flavour", flavour.into());
    row(&mut build, "profile", f.build.profile.clone());
    row(&mut build, "target", f.build.target.clone());
    let codegen = f.build.codegen.as_ref();
    row(&mut build, "codegen", opt(&codegen.map(|c| c.summary())));
    let features = codegen.map(|c| c.target_features.join(" "));
    row(&mut build, "target features", opt(&features));
    let crates: Rows = f.build.crates.iter().map(|(k, v)| (k.clone(), v.clone())).collect();

    let n = &f.noise;
    let mut noise = Rows::new();
    row(&mut noise, "cpufreq governor", opt(&n.cpufreq_governor));
    row(&mut noise, "cpufreq driver", opt(&n.cpufreq_driver));
    row(&mut noise, "boost", yes_no(n.boost));
    row(&mut noise, "smt active", yes_no(n.smt_active));
    let load = n.load_average.map(|[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"));
    row(&mut noise, "load average", opt(&load));
    row(&mut noise, "clock source", opt(&n.clocksource));
    let clock = n.clock_read_ns.map(|ns| format!("{ns:.1} ns"));
    row(&mut noise, "clock read", opt(&clock));

    let mut all = vec![
        ("Host", host_rows(f)),
        ("CPU", cpu_rows(&f.cpu)),
        ("Virtualization", virt),
        ("CPU crypto features", feature_rows(&f.features)),
        ("Crypto paths", paths),
        ("Build", build),
        ("Crypto crates", crates),
        ("Measurement noise", noise),
    ];
    if let Some(p) = &f.providers {
        all.extend(super::providers::sections(p));
    }
    all
}

/// Human-readable table (aligned "key  value" lines grouped in sections), like `lscpu`.
pub fn write_table(facts: &HostFacts, out: &mut dyn Write) -> io::Result<()> {
    let sections = sections(facts);
    let width = sections
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|(k, _)| k.len()))
        .max()
        .unwrap_or(0);
    for (i, (title, rows)) in sections.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "{title}")?;
        for (key, value) in rows {
            writeln!(out, "  {key:<width$}  {value}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Facts with every optional field `None` and nothing checked.
    pub(crate) fn all_unknown() -> HostFacts {
        let mut facts = HostFacts::unknown("x86_64", Flavour::Software);
        facts.build.agent_version = "0.1.0".into();
        facts
    }

    fn render(facts: &HostFacts) -> String {
        let mut out = Vec::new();
        write_table(facts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The value on the first line whose key is `key`.
    fn value_of<'a>(table: &'a str, key: &str) -> &'a str {
        table
            .lines()
            .filter_map(|l| l.strip_prefix("  "))
            .find_map(|l| l.strip_prefix(key).filter(|rest| rest.starts_with("  ")).map(str::trim))
            .unwrap_or_else(|| panic!("no {key:?} line in\n{table}"))
    }

    #[test]
    fn none_prints_unknown() {
        let t = render(&all_unknown());
        for key in [
            "hostname",
            "kernel release",
            "os",
            "os version",
            "memory total",
            "vendor",
            "model name",
            "family",
            "model",
            "stepping",
            "logical cores",
            "hypervisor",
            "vendor signature",
            "features",
            "cpufreq governor",
            "boost",
            "smt active",
            "load average",
        ] {
            assert_eq!(value_of(&t, key), "unknown", "{key}");
        }
        assert_eq!(value_of(&t, "flavour"), "software");
        assert!(!t.contains("xcr0"), "no cpuid source, no xcr0 line");
    }

    #[test]
    fn columns_align_and_sections_present() {
        let t = render(&all_unknown());
        for title in [
            "Host",
            "CPU",
            "Virtualization",
            "CPU crypto features",
            "Crypto paths",
            "Build",
            "Measurement noise",
        ] {
            assert!(t.lines().any(|l| l == title), "missing section {title}");
        }
        let columns: Vec<usize> = t
            .lines()
            .filter(|l| l.starts_with("  "))
            .map(|l| l.len() - l[2..].split_once("  ").unwrap().1.trim_start().len())
            .collect();
        assert!(columns.windows(2).all(|w| w[0] == w[1]), "values not aligned:\n{t}");
    }

    #[test]
    fn known_values_and_feature_states() {
        let mut f = all_unknown();
        f.hostname = Some("node-7".into());
        f.memory_total_bytes = Some(16 << 30);
        f.cpu.model = Some(0x9e);
        f.features = Features {
            source: Some("cpuid".into()),
            checked: vec!["aes".into(), "avx".into(), "vaes".into(), "sha".into()],
            advertised: vec!["aes".into(), "avx".into(), "vaes".into()],
            usable: vec!["aes".into()],
            osxsave: Some(true),
            xcr0: Some("0x3".into()),
            ..Features::default()
        };
        f.noise.load_average = Some([0.5, 0.25, 0.126]);
        f.noise.clock_read_ns = Some(1520.0);
        f.virtualization.cpuinfo_foreign = Some(true);
        let t = render(&f);
        assert_eq!(value_of(&t, "hostname"), "node-7");
        assert_eq!(value_of(&t, "memory total"), "16.0 GiB (17179869184 bytes)");
        assert_eq!(value_of(&t, "model"), "158 (0x9e)");
        assert_eq!(value_of(&t, "aes"), "yes");
        assert!(value_of(&t, "avx").starts_with("advertised, NOT usable"));
        assert!(value_of(&t, "vaes").contains("AES-NI runs"), "a Zen 3 is no fallback");
        assert_eq!(value_of(&t, "sha"), "no");
        assert_eq!(value_of(&t, "clock read"), "1520.0 ns");
        assert!(value_of(&t, "cpuinfo describes another CPU").contains("emulated"));
        assert_eq!(value_of(&t, "xcr0"), "0x3");
        assert_eq!(value_of(&t, "load average"), "0.50 0.25 0.13");
    }

    #[test]
    fn arm_identity_rows() {
        let mut f = all_unknown();
        f.cpu.arm = Some(crate::probe::ArmId {
            implementer: Some(0x41),
            variant: Some(3),
            part: Some(0xd0c),
            revision: Some(1),
            part_name: Some("Neoverse-N1".into()),
            ..Default::default()
        });
        let t = render(&f);
        assert_eq!(value_of(&t, "part"), "0xd0c (Neoverse-N1)");
        assert_eq!(value_of(&t, "variant/revision"), "r3p1");
        assert_eq!(value_of(&t, "midr_el1"), "unknown");
    }
}
