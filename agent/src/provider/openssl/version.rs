//! `openssl version -a`: which OpenSSL, built how.
//!
//! The same lines since 1.0.2 (`built on:`, `platform:`, `options:`,
//! `compiler:`); 3.x adds `(Library: …)` to the first line and a `CPUINFO:`
//! line with the capability vector it detected.

use cipherfleet_core::provider::facts::OpensslBuild;

/// An OpenSSL release as its version line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// The release on a version line (`OpenSSL 1.1.1w  11 Sep 2023`), or `None`
/// for another library (LibreSSL) or an unreadable line.
pub fn release(version_line: &str) -> Option<Release> {
    let mut words = version_line.split_whitespace();
    if words.next()? != "OpenSSL" {
        return None;
    }
    let number: String = words
        .next()?
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = number.split('.').map(|p| p.parse::<u32>().ok());
    Some(Release {
        major: parts.next()??,
        minor: parts.next()??,
        patch: parts.next().flatten().unwrap_or(0),
    })
}

/// The build `openssl version -a` describes, for the binary `binary`.
pub fn parse(binary: &str, text: &str) -> OpensslBuild {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim();
    let (version, library_version) = match first.split_once("(Library:") {
        Some((v, lib)) => (v.trim(), Some(lib.trim().trim_end_matches(')').trim().to_string())),
        None => (first, None),
    };
    let field = |name: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        })
    };
    let compiler = field("compiler:");
    let options = field("options:");
    let cpuinfo = field("CPUINFO:");
    let release = release(version);
    let flags_say_no_asm = compiler.as_deref().is_some_and(|c| c.contains("OPENSSL_NO_ASM"))
        || options
            .as_deref()
            .is_some_and(|o| o.split_whitespace().any(|w| w == "no-asm"));
    // 1.x lists its assembly modules among the compiler flags (-DAES_ASM, -DAESNI_ASM…);
    // a build without any has none. (3.x no longer prints them.)
    let no_asm_modules =
        release.is_some_and(|r| r.major == 1) && compiler.as_deref().is_some_and(|c| !c.contains("_ASM"));
    let speed_bytes_seconds = release.is_some_and(|r| (r.major, r.minor, r.patch) >= (1, 1, 1));
    OpensslBuild {
        binary: binary.to_string(),
        version: version.to_string(),
        library_version: library_version.filter(|l| l != version),
        built_on: field("built on:"),
        platform: field("platform:"),
        options,
        compiler,
        no_asm: flags_say_no_asm || no_asm_modules,
        cpuinfo,
        libcrypto: None,
        speed_bytes_seconds,
        speed_aead: release.is_some_and(|r| r.major >= 3),
        capability_env: None,
        masked: Vec::new(),
        watched: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/fixtures/openssl/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn three_x_names_its_library_and_cpu_vector() {
        let b = parse("/usr/bin/openssl", &fixture("version-3.0.txt"));
        assert_eq!(b.version, "OpenSSL 3.0.19 27 Jan 2026");
        assert_eq!(b.library_version, None, "the same as the binary's");
        assert_eq!(b.platform.as_deref(), Some("debian-amd64"));
        assert!(b.cpuinfo.as_deref().unwrap().starts_with("OPENSSL_ia32cap=0x"), "{b:?}");
        assert!(b.compiler.as_deref().unwrap().starts_with("gcc "));
        assert!(!b.no_asm && b.speed_bytes_seconds && b.speed_aead, "{b:?}");
        assert_eq!(b.binary, "/usr/bin/openssl");
    }

    #[test]
    fn one_one_one_has_bytes_and_seconds_but_no_aead() {
        let b = parse("openssl", &fixture("version-1.1.1.txt"));
        assert_eq!(b.version, "OpenSSL 1.1.1w  11 Sep 2023");
        assert_eq!(
            release(&b.version),
            Some(Release {
                major: 1,
                minor: 1,
                patch: 1
            })
        );
        assert!(!b.no_asm && b.speed_bytes_seconds && !b.speed_aead, "{b:?}");
        assert_eq!(b.cpuinfo, None);
        let no_asm = parse("openssl", &fixture("version-1.1.1-no-asm.txt"));
        assert!(no_asm.no_asm, "no -D*_ASM flag: {no_asm:?}");
        assert_eq!(no_asm.platform.as_deref(), Some("linux-x86_64"));
    }

    #[test]
    fn one_zero_two_has_fixed_sizes() {
        let b = parse("openssl", &fixture("version-1.0.2.txt"));
        assert_eq!(
            release(&b.version),
            Some(Release {
                major: 1,
                minor: 0,
                patch: 2
            })
        );
        assert!(!b.no_asm && !b.speed_bytes_seconds && !b.speed_aead, "{b:?}");
        assert_eq!(b.built_on.as_deref(), Some("reproducible build, date unspecified"));
    }

    #[test]
    fn other_libraries_and_explicit_no_asm_are_recognised() {
        assert_eq!(release("LibreSSL 3.3.6"), None);
        let b = parse("openssl", "OpenSSL 3.2.1 30 Jan 2024\noptions:  bn(64,64) no-asm\n");
        assert!(b.no_asm && b.speed_aead);
        let lib = parse(
            "openssl",
            "OpenSSL 3.0.2 15 Mar 2022 (Library: OpenSSL 3.0.13 30 Jan 2024)\n",
        );
        assert_eq!(lib.library_version.as_deref(), Some("OpenSSL 3.0.13 30 Jan 2024"));
    }
}
