//! The compiler settings the agent is built with, for the probe's build facts
//! (`cipherfleet_core::facts::Codegen`). Used by `agent/build.rs`; std only, so
//! the library compiles it too, for its tests.
//!
//! Cargo hands build scripts `OPT_LEVEL` and `CARGO_CFG_TARGET_FEATURE`, but not
//! the LTO mode or the codegen units. Those are resolved here the way Cargo does
//! it, from what a build script can see: the workspace manifest's `[profile.*]`
//! tables (with `inherits` and Cargo's defaults, and the agent's
//! `[profile.*.package.<name>]` override for codegen units), the
//! `CARGO_PROFILE_<NAME>_*` and `CARGO_INCREMENTAL` variables, and `-C lto` /
//! `-C codegen-units` in RUSTFLAGS, which rustc applies last. Profile settings
//! given only in `.cargo/config.toml` files or with `--config` are not seen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// LTO mode and codegen units of the crate being built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `fat`, `thin`, `thin-local` (Cargo's `lto = false`) or `off`.
    pub lto: String,
    pub codegen_units: u32,
}

/// The Cargo profile a build script runs for, from its `OUT_DIR`
/// (`<target>/[<triple>/]<profile dir>/build/<package>-<hash>/out`): the
/// `debug` directory holds `dev` (and `test`) builds, `release` holds `release`
/// (and `bench`), a custom profile has a directory of its own name.
pub fn profile_name(out_dir: &Path) -> String {
    let parts: Vec<&str> = out_dir.iter().filter_map(|p| p.to_str()).collect();
    let dir = parts
        .iter()
        .rposition(|p| *p == "build")
        .and_then(|i| i.checked_sub(1))
        .map_or("release", |i| parts[i]);
    match dir {
        "debug" => "dev".to_string(),
        other => other.to_string(),
    }
}

/// The nearest `Cargo.toml` at or above `dir` that declares `[workspace]`:
/// the only manifest whose profiles Cargo reads.
pub fn workspace_manifest(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("Cargo.toml"))
        .find(|m| std::fs::read_to_string(m).is_ok_and(|text| text.lines().any(|l| l.trim() == "[workspace]")))
}

/// Resolves the LTO mode and codegen units of `package` built with `profile`.
/// `env` looks up environment variables (a build script reports each name it
/// asked for, to be re-run when one changes); `rustflags` are the flags rustc
/// gets after the profile's own.
pub fn resolve(
    manifest: &str,
    profile: &str,
    package: &str,
    env: &mut dyn FnMut(&str) -> Option<String>,
    rustflags: &[String],
) -> Settings {
    let keys = flat_keys(manifest);
    // The inheritance chain, leaf first: custom → … → dev or release.
    let mut chain = vec![profile.to_string()];
    while chain.len() < 16 {
        let last = chain.last().expect("never empty");
        let parent = match last.as_str() {
            "dev" | "release" => break,
            "test" => "dev".to_string(),
            "bench" => "release".to_string(),
            name => match keys.get(&format!("profile.{name}.inherits")) {
                Some(parent) => parent.clone(),
                None => break,
            },
        };
        chain.push(parent);
    }
    let root = chain.last().expect("never empty").clone();
    let mut lto = "false".to_string();
    let mut units: Option<String> = None;
    let mut incremental = root == "dev";
    for name in chain.iter().rev() {
        let var = |key: &str| format!("CARGO_PROFILE_{}_{key}", name.to_uppercase().replace('-', "_"));
        let table = |key: &str| keys.get(&format!("profile.{name}.{key}")).cloned();
        let package_table = |key: &str| keys.get(&format!("profile.{name}.package.{package}.{key}")).cloned();
        if let Some(v) = env(&var("LTO")).or_else(|| table("lto")) {
            lto = v;
        }
        if let Some(v) = env(&var("INCREMENTAL")).or_else(|| table("incremental")) {
            incremental = v == "true";
        }
        if let Some(v) = env(&var("CODEGEN_UNITS")).or_else(|| table("codegen-units")) {
            units = Some(v);
        }
        if let Some(v) = package_table("codegen-units") {
            units = Some(v);
        }
    }
    if let Some(v) = env("CARGO_INCREMENTAL") {
        incremental = v == "1";
    }
    let mut codegen_units = units
        .and_then(|u| u.parse().ok())
        .unwrap_or(if incremental { 256 } else { 16 });
    for (key, value) in codegen_flags(rustflags) {
        match key.as_str() {
            "lto" => lto = value,
            "codegen-units" => codegen_units = value.parse().unwrap_or(codegen_units),
            _ => {}
        }
    }
    let lto = match lto.as_str() {
        "true" | "fat" | "yes" | "on" => "fat",
        "thin" => "thin",
        "off" | "no" => "off",
        _ => "thin-local",
    };
    Settings {
        lto: lto.to_string(),
        codegen_units,
    }
}

/// `-C key=value` pairs from rustc flags (`-C lto`, `-Clto=thin`, `-C codegen-units=1`).
fn codegen_flags(flags: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let arg = flags[i].as_str();
        let option = match arg.strip_prefix("-C") {
            Some("") => {
                i += 1;
                flags.get(i).map(String::as_str)
            }
            Some(rest) => Some(rest),
            None => arg.strip_prefix("--codegen="),
        };
        if let Some(option) = option {
            let (key, value) = option.split_once('=').unwrap_or((option, "fat"));
            out.push((key.to_string(), value.to_string()));
        }
        i += 1;
    }
    out
}

/// The manifest's scalar values by dotted key (`profile.release.lto` → `fat`),
/// from `[table]` headers and `key = value` lines. Enough TOML for profile
/// tables: strings, numbers, booleans, dotted keys; arrays and inline tables are skipped.
fn flat_keys(manifest: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut table = String::new();
    for line in manifest.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            // `[[bin]]` and array lines such as `["a", "b"]` are not profile tables.
            if header.starts_with('[') || header.contains(',') {
                table = String::new();
            } else {
                table = header.replace(['"', ' '], "");
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().replace(['"', ' '], "");
        let value = value.trim();
        let value = if let Some(quoted) = value.strip_prefix('"') {
            match quoted.split_once('"') {
                Some((inner, _)) => inner.to_string(),
                None => continue,
            }
        } else {
            let bare = value.split('#').next().unwrap_or("").trim();
            if bare.is_empty() || bare.starts_with(['[', '{']) {
                continue;
            }
            bare.to_string()
        };
        let full = if table.is_empty() {
            key
        } else {
            format!("{table}.{key}")
        };
        out.insert(full, value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
[workspace]
members = ["agent", "core"]

[workspace.lints.rust]
unexpected_cfgs = { level = "warn", check-cfg = ['cfg(x)'] }

# one codegen unit, fat LTO
[profile.release]
lto = "fat"   # comment
codegen-units = 1

[profile.bench]
inherits = "release"

[profile.quick]
inherits = "release"
lto = false
codegen-units = 8

[profile.quick.package."cipherfleet-agent"]
codegen-units = 2

[profile]
dev.lto = "thin"
"#;

    fn settings(profile: &str, env: &[(&str, &str)], rustflags: &[&str]) -> Settings {
        let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let flags: Vec<String> = rustflags.iter().map(|s| s.to_string()).collect();
        resolve(
            MANIFEST,
            profile,
            "cipherfleet-agent",
            &mut |k| env.get(k).cloned(),
            &flags,
        )
    }

    fn s(lto: &str, codegen_units: u32) -> Settings {
        Settings {
            lto: lto.into(),
            codegen_units,
        }
    }

    /// Profile, environment, RUSTFLAGS, and what Cargo builds with them.
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
        Settings,
    );

    #[test]
    fn profiles_resolve_as_cargo_resolves_them() {
        let cases: &[Case] = &[
            ("release", &[], &[], s("fat", 1)),
            ("bench", &[], &[], s("fat", 1)),
            // Inherits release, then its own table, then the agent's package override.
            ("quick", &[], &[], s("thin-local", 2)),
            // Dotted keys under [profile]; dev is incremental, so 256 units by default.
            ("dev", &[], &[], s("thin", 256)),
            ("test", &[("CARGO_INCREMENTAL", "0")], &[], s("thin", 16)),
            ("release", &[("CARGO_PROFILE_RELEASE_LTO", "thin")], &[], s("thin", 1)),
            ("bench", &[("CARGO_PROFILE_BENCH_CODEGEN_UNITS", "4")], &[], s("fat", 4)),
            (
                "release",
                &[],
                &["--cfg", "x", "-C", "codegen-units=16", "-Clto=off"],
                s("off", 16),
            ),
            ("unknown", &[], &[], s("thin-local", 16)),
        ];
        for (profile, env, flags, want) in cases {
            assert_eq!(&settings(profile, env, flags), want, "{profile} {env:?} {flags:?}");
        }
    }

    #[test]
    fn the_profile_comes_from_the_out_dir() {
        for (dir, want) in [
            ("/w/target/release/build/cipherfleet-agent-1a2b/out", "release"),
            (
                "/w/target/x86_64-unknown-linux-musl/release/build/cipherfleet-agent-1a2b/out",
                "release",
            ),
            ("/w/target/debug/build/cipherfleet-agent-1a2b/out", "dev"),
            ("/home/build/target/measure/build/cipherfleet-agent-1a2b/out", "measure"),
        ] {
            assert_eq!(profile_name(Path::new(dir)), want, "{dir}");
        }
    }

    #[test]
    fn the_workspace_manifest_is_found_above_the_agent() {
        let agent = Path::new(env!("CARGO_MANIFEST_DIR"));
        let manifest = workspace_manifest(agent).expect("found");
        assert_eq!(manifest, agent.parent().unwrap().join("Cargo.toml"));
    }
}
