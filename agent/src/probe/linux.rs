//! Linux host facts from `/proc`, `/sys`, `/etc/os-release`, `uname(2)` and
//! `gethostname(2)`. Parsers take `&str` so they are testable without the files.

use std::collections::BTreeMap;
use std::ffi::CStr;

use cipherfleet_core::facts::{Noise, Os};

/// The whole file, or `None` if it cannot be read.
pub(super) fn read_string(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The file's contents trimmed, or `None` if unreadable or empty.
pub(super) fn read_trimmed(path: &str) -> Option<String> {
    let s = read_string(path)?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// `gethostname(2)`.
pub(super) fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf` minus its last byte, which stays 0 so
    // the result is NUL-terminated even if POSIX truncation leaves it unterminated.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        return None;
    }
    let name = CStr::from_bytes_until_nul(&buf)
        .ok()?
        .to_string_lossy()
        .trim()
        .to_string();
    (!name.is_empty()).then_some(name)
}

/// Kernel release from `uname(2)`. Deliberately not `/proc/sys/kernel/osrelease`:
/// user-mode emulators (`qemu-x86_64 -r`) override only what `uname` returns.
pub(super) fn kernel_release() -> Option<String> {
    // SAFETY: `utsname` is plain C data for which all-zero bytes are a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable `utsname`.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return None;
    }
    // `c_char` is `i8` or `u8` depending on the target.
    #[allow(clippy::unnecessary_cast)]
    let bytes: Vec<u8> = uts.release.iter().map(|&c| c as u8).collect();
    let release = CStr::from_bytes_until_nul(&bytes)
        .ok()?
        .to_string_lossy()
        .trim()
        .to_string();
    (!release.is_empty()).then_some(release)
}

/// OS identity from `/etc/os-release`, falling back to `/usr/lib/os-release`.
pub(super) fn os_release() -> Os {
    read_string("/etc/os-release")
        .or_else(|| read_string("/usr/lib/os-release"))
        .map(|s| parse_os_release(&s))
        .unwrap_or_default()
}

/// Parses os-release(5): `KEY=value` lines, values optionally single- or
/// double-quoted with backslash escapes; `#` comments and blank lines ignored.
pub(super) fn parse_os_release(text: &str) -> Os {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, raw)) = line.split_once('=') else {
            continue;
        };
        let value = unquote(raw.trim());
        if !value.is_empty() {
            vars.insert(key.trim().to_string(), value);
        }
    }
    Os {
        pretty_name: vars.remove("PRETTY_NAME"),
        name: vars.remove("NAME"),
        id: vars.remove("ID"),
        version_id: vars.remove("VERSION_ID"),
    }
}

fn unquote(raw: &str) -> String {
    let quote = match raw.chars().next() {
        Some(q @ ('"' | '\'')) if raw.len() >= 2 && raw.ends_with(q) => q,
        _ => return raw.to_string(),
    };
    let inner = &raw[1..raw.len() - 1];
    if quote == '\'' {
        return inner.to_string();
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `MemTotal` from `/proc/meminfo`, converted from kB to bytes.
pub(super) fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let mut parts = line.split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | Some("KB") | Some("kb") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// `key : value` pairs of the first processor block of `/proc/cpuinfo` (keys and
/// values trimmed). The first value wins if a key repeats.
pub(super) fn parse_cpuinfo_first(text: &str) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if fields.is_empty() {
                continue;
            }
            break;
        }
        if let Some((key, value)) = line.split_once(':') {
            fields
                .entry(key.trim().to_string())
                .or_insert_with(|| value.trim().to_string());
        }
    }
    fields
}

/// The first `/proc/cpuinfo` block (empty when unreadable).
pub(super) fn cpuinfo_first() -> BTreeMap<String, String> {
    read_string("/proc/cpuinfo")
        .map(|s| parse_cpuinfo_first(&s))
        .unwrap_or_default()
}

/// The first string of a device-tree property (a list of NUL-terminated strings).
pub(super) fn device_tree_string(path: &str) -> Option<String> {
    let raw = std::fs::read(path).ok()?;
    let first = raw.split(|&b| b == 0).next()?;
    let s = String::from_utf8_lossy(first).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Online logical CPUs, `sysconf(_SC_NPROCESSORS_ONLN)`.
pub(super) fn online_cpus() -> Option<u32> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// 1/5/15-minute load averages: the first three fields of `/proc/loadavg`.
pub(super) fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// A sysfs `0`/`1` flag.
pub(super) fn parse_flag(text: &str) -> Option<bool> {
    match text.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// Boost state: `cpufreq/boost` (1 = on) if present, else `intel_pstate/no_turbo` (1 = off).
pub(super) fn boost_from(cpufreq_boost: Option<&str>, intel_no_turbo: Option<&str>) -> Option<bool> {
    cpufreq_boost
        .and_then(parse_flag)
        .or_else(|| intel_no_turbo.and_then(parse_flag).map(|no_turbo| !no_turbo))
}

/// Measurement-noise context from sysfs and procfs.
pub(super) fn noise() -> Noise {
    const CPU: &str = "/sys/devices/system/cpu";
    let boost = read_string(&format!("{CPU}/cpufreq/boost"));
    let no_turbo = read_string(&format!("{CPU}/intel_pstate/no_turbo"));
    Noise {
        cpufreq_governor: read_trimmed(&format!("{CPU}/cpu0/cpufreq/scaling_governor")),
        cpufreq_driver: read_trimmed(&format!("{CPU}/cpu0/cpufreq/scaling_driver")),
        boost: boost_from(boost.as_deref(), no_turbo.as_deref()),
        smt_active: read_string(&format!("{CPU}/smt/active"))
            .as_deref()
            .and_then(parse_flag),
        load_average: read_string("/proc/loadavg").as_deref().and_then(parse_loadavg),
        clocksource: super::clock::clocksource(),
        clock_read_ns: super::clock::read_cost_ns(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_parsing() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n\
            VERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nID=debian\n";
        let os = parse_os_release(debian);
        assert_eq!(os.pretty_name.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(os.name.as_deref(), Some("Debian GNU/Linux"));
        assert_eq!(os.version_id.as_deref(), Some("12"));
        assert_eq!(os.id.as_deref(), Some("debian"));

        let quirky =
            "# comment\n\n  NAME='Alpine Linux'\nPRETTY_NAME=\"Say \\\"hi\\\" \\$HOME\"\nVERSION_ID=\ngarbage\n";
        let os = parse_os_release(quirky);
        assert_eq!(os.name.as_deref(), Some("Alpine Linux"));
        assert_eq!(os.pretty_name.as_deref(), Some("Say \"hi\" $HOME"));
        assert_eq!(os.version_id, None, "empty value is unknown");
        assert_eq!(os.id, None);

        assert_eq!(parse_os_release(""), Os::default());
    }

    #[test]
    fn meminfo_parsing() {
        let text = "MemFree:         1234 kB\nMemTotal:       16318412 kB\nMemAvailable:   9000000 kB\n";
        assert_eq!(parse_meminfo_total(text), Some(16_318_412 * 1024));
        assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo_total("MemTotal: lots kB\n"), None);
        assert_eq!(
            parse_meminfo_total("MemTotal: 5 MB\n"),
            None,
            "unknown unit is not guessed"
        );
    }

    #[test]
    fn cpuinfo_first_block_only() {
        let text = "\nprocessor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\
            flags\t\t: fpu aes\npower management:\n\nprocessor\t: 1\nmodel name\t: other\n";
        let f = parse_cpuinfo_first(text);
        assert_eq!(f.get("processor").map(String::as_str), Some("0"));
        assert_eq!(
            f.get("model name").map(String::as_str),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(f.get("flags").map(String::as_str), Some("fpu aes"));
        assert_eq!(f.get("power management").map(String::as_str), Some(""));
        assert!(parse_cpuinfo_first("").is_empty());
    }

    #[test]
    fn noise_parsing() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 3/423 12345\n"), Some([0.52, 0.58, 0.59]));
        assert_eq!(parse_loadavg("0.52 0.58"), None);
        assert_eq!(parse_flag("1\n"), Some(true));
        assert_eq!(parse_flag("forceoff"), None);
        assert_eq!(boost_from(Some("1"), None), Some(true));
        assert_eq!(boost_from(None, Some("1\n")), Some(false));
        assert_eq!(boost_from(None, Some("0")), Some(true));
        assert_eq!(boost_from(Some("0"), Some("0")), Some(false), "cpufreq/boost wins");
        assert_eq!(boost_from(None, None), None);
    }

    #[test]
    fn live_reads_do_not_panic() {
        assert!(kernel_release().is_some());
        let _ = (hostname(), online_cpus(), noise(), os_release());
        assert_eq!(read_trimmed("/nonexistent/cipherfleet"), None);
    }
}
