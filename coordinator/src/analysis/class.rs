//! Machine classes: hosts that should measure alike — same architecture, CPU
//! vendor and model name, the same usable crypto features and the same build.
//! The compare page's class rows, the peer comparisons of the detectors and
//! the capacity planner all group by this one definition.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// One class; hosts with unknown facts fall in classes with `None` parts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct MachineClass {
    pub arch: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_model_name: Option<String>,
    /// Usable crypto features (the probe reports only those), sorted.
    pub crypto_features: Vec<String>,
    /// `accelerated` or `software` (a build that forces software backends).
    pub build_flavour: Option<String>,
}

impl MachineClass {
    /// The class of a host with these facts.
    pub fn of(
        arch: Option<&str>,
        cpu_vendor: Option<&str>,
        cpu_model_name: Option<&str>,
        features_usable: &[String],
        build_flavour: Option<&str>,
    ) -> Self {
        let mut crypto_features = features_usable.to_vec();
        crypto_features.sort();
        crypto_features.dedup();
        MachineClass {
            arch: arch.map(str::to_string),
            cpu_vendor: cpu_vendor.map(str::to_string),
            cpu_model_name: cpu_model_name.map(|m| m.split_whitespace().collect::<Vec<_>>().join(" ")),
            crypto_features,
            build_flavour: build_flavour.map(str::to_string),
        }
    }

    /// What the report prints, e.g.
    /// `x86_64 · Intel(R) Xeon(R) Gold 6130 · aes avx pclmulqdq · accelerated build`.
    pub fn label(&self) -> String {
        let unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        let features = if self.crypto_features.is_empty() {
            "no crypto features".to_string()
        } else {
            self.crypto_features.join(" ")
        };
        format!(
            "{} · {} · {} · {} build",
            unknown(&self.arch),
            unknown(&self.cpu_model_name),
            features,
            unknown(&self.build_flavour)
        )
    }

    /// A short stable id for links (`?class=…`): the first 8 bytes of the
    /// SHA-256 of every part, hex. Agent-supplied text never reaches a URL raw.
    pub fn key(&self) -> String {
        let mut hash = Sha256::new();
        for part in [&self.arch, &self.cpu_vendor, &self.cpu_model_name, &self.build_flavour] {
            hash.update(part.as_deref().unwrap_or("\u{0}unknown").as_bytes());
            hash.update([0xff]);
        }
        for f in &self.crypto_features {
            hash.update(f.as_bytes());
            hash.update([0xfe]);
        }
        hash.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(model: &str, features: &[&str], build: &str) -> MachineClass {
        let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
        MachineClass::of(
            Some("x86_64"),
            Some("GenuineIntel"),
            Some(model),
            &features,
            Some(build),
        )
    }

    #[test]
    fn hosts_alike_share_a_class_whatever_the_feature_order_or_spacing() {
        let a = class("Intel(R) Xeon(R)  Gold 6130", &["pclmulqdq", "aes"], "accelerated");
        let b = class(
            "Intel(R) Xeon(R) Gold 6130",
            &["aes", "pclmulqdq", "aes"],
            "accelerated",
        );
        assert_eq!(a, b);
        assert_eq!(a.key(), b.key());
        assert_eq!(
            a.label(),
            "x86_64 · Intel(R) Xeon(R) Gold 6130 · aes pclmulqdq · accelerated build"
        );
    }

    #[test]
    fn a_lost_flag_or_another_build_is_another_class() {
        let base = class("Xeon", &["aes", "pclmulqdq"], "accelerated");
        for other in [
            class("Xeon", &["pclmulqdq"], "accelerated"),
            class("Xeon", &["aes", "pclmulqdq"], "software"),
            class("Xeon v2", &["aes", "pclmulqdq"], "accelerated"),
        ] {
            assert_ne!(base, other);
            assert_ne!(base.key(), other.key());
        }
    }

    #[test]
    fn keys_are_short_hex_and_unknown_parts_are_named() {
        let unknown = MachineClass::of(None, None, None, &[], None);
        assert_eq!(unknown.key().len(), 16);
        assert!(unknown.key().chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            unknown.label(),
            "unknown · unknown · no crypto features · unknown build"
        );
    }
}
