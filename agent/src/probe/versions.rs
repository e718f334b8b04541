//! Versions of the crypto crates compiled into this binary.
//!
//! Cargo does not expose dependency versions to the crate without a build script,
//! so this is a hand-kept table; a unit test checks it against the workspace
//! `Cargo.lock` so it cannot silently drift.

use std::collections::BTreeMap;

/// `(crate, version)` for every crypto crate in the build, direct or notable indirect.
pub(super) const CRATE_VERSIONS: &[(&str, &str)] = &[
    ("aead", "0.6.1"),
    ("aes", "0.9.4"),
    ("aes-gcm", "0.11.1"),
    ("cbc", "0.2.1"),
    ("ccm", "0.6.1"),
    ("chacha20", "0.10.2"),
    ("chacha20poly1305", "0.11.0"),
    ("cipher", "0.5.2"),
    ("cpufeatures", "0.3.1"),
    ("ctr", "0.10.1"),
    ("des", "0.9.0"),
    ("ecb", "0.2.1"),
    ("ghash", "0.6.0"),
    ("hkdf", "0.13.0"),
    ("hmac", "0.13.0"),
    ("ocb3", "0.2.0"),
    ("poly1305", "0.9.1"),
    ("polyval", "0.7.3"),
    ("ring", "0.17.14"),
    ("sha2", "0.11.1"),
];

/// [`CRATE_VERSIONS`] as a map.
pub(super) fn crate_versions() -> BTreeMap<String, String> {
    CRATE_VERSIONS
        .iter()
        .map(|(name, version)| (name.to_string(), version.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");

    /// Direct dependencies of the agent that are not crypto crates. Any other direct
    /// dependency must be listed in [`CRATE_VERSIONS`].
    const NOT_CRYPTO: &[&str] = &[
        "anyhow",
        "cipherfleet-core",
        "cipherfleet-proto",
        "clap",
        "getrandom",
        "hdrhistogram",
        "libc",
        "serde",
        "serde_json",
        "thiserror",
        "tokio",
        "tokio-stream",
        "tokio-util",
        "tonic",
        "tracing",
        "tracing-subscriber",
    ];

    struct Package {
        name: String,
        version: String,
        dependencies: Vec<String>,
    }

    /// Minimal Cargo.lock reader: `[[package]]` tables with `name`, `version` and
    /// the `dependencies` array (entries are `"name"` or `"name version"`).
    fn parse_lock(text: &str) -> Vec<Package> {
        let field = |block: &str, key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(key)?
                    .trim()
                    .strip_prefix('=')?
                    .trim()
                    .strip_prefix('"')?
                    .strip_suffix('"')
                    .map(str::to_string)
            })
        };
        text.split("[[package]]")
            .skip(1)
            .filter_map(|block| {
                let dependencies = block
                    .split_once("dependencies = [")
                    .and_then(|(_, rest)| rest.split_once(']'))
                    .map(|(list, _)| {
                        list.split(',')
                            .filter_map(|d| d.trim().trim_matches('"').split_whitespace().next().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                Some(Package {
                    name: field(block, "name")?,
                    version: field(block, "version")?,
                    dependencies,
                })
            })
            .collect()
    }

    #[test]
    fn table_matches_cargo_lock() {
        let packages = parse_lock(CARGO_LOCK);
        assert!(
            packages.len() > 20,
            "Cargo.lock parse found only {} packages",
            packages.len()
        );
        let agent = packages.iter().find(|p| p.name == env!("CARGO_PKG_NAME"));
        for (name, version) in CRATE_VERSIONS {
            let locked: Vec<&str> = packages
                .iter()
                .filter(|p| p.name == *name)
                .map(|p| p.version.as_str())
                .collect();
            // Cargo.lock names the version in a dependency entry when several are locked.
            let pinned = agent.and_then(|a| {
                a.dependencies
                    .iter()
                    .find_map(|d| d.strip_prefix(&format!("{name} ")).map(str::to_string))
            });
            match (pinned, locked.as_slice()) {
                (Some(v), _) => assert_eq!(v, *version, "{name}: the agent uses {v}; update CRATE_VERSIONS"),
                (None, [only]) => assert_eq!(only, version, "{name}: Cargo.lock has {only}; update CRATE_VERSIONS"),
                (None, several) => assert!(
                    several.contains(version),
                    "{name} {version} not in Cargo.lock {several:?}"
                ),
            }
        }
    }

    #[test]
    fn table_covers_every_direct_crypto_dependency() {
        let packages = parse_lock(CARGO_LOCK);
        let agent = packages
            .iter()
            .find(|p| p.name == env!("CARGO_PKG_NAME"))
            .expect("the workspace's Cargo.lock lists the agent");
        for dep in &agent.dependencies {
            let dep = dep.split(' ').next().unwrap_or(dep);
            let known = NOT_CRYPTO.contains(&dep) || CRATE_VERSIONS.iter().any(|(n, _)| *n == dep);
            assert!(
                known,
                "new dependency {dep}: add it to CRATE_VERSIONS (probe/versions.rs) or to NOT_CRYPTO"
            );
        }
    }

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(CRATE_VERSIONS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(crate_versions().len(), CRATE_VERSIONS.len());
    }
}
