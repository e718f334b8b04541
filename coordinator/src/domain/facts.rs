//! A host's facts as stored: the agent's `probe` JSON normalised for
//! comparison (volatile readings dropped, lists sorted, keys ordered, hashed),
//! and the facts that get typed columns.

use cipherfleet_core::facts::Codegen;
use cipherfleet_core::provider::facts::{KernelDriver, OpensslBuild};
use cipherfleet_core::provider::kernel;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use sqlx::types::Json;

/// JSON pointers of facts that change from one probe to the next without the
/// machine changing.
const VOLATILE: &[&str] = &["/noise/load_average", "/noise/clock_read_ns"];

/// Feature lists whose order carries no meaning.
const UNORDERED: &[&str] = &[
    "/features/checked",
    "/features/advertised",
    "/features/usable",
    "/build/codegen/target_features",
];

/// Facts in comparable form plus their hash.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalisedFacts {
    pub facts: Value,
    pub hash: [u8; 32],
}

impl NormalisedFacts {
    /// Normalises the agent's `probe` JSON.
    pub fn new(facts: &Value) -> Self {
        let mut facts = facts.clone();
        for pointer in VOLATILE {
            remove_pointer(&mut facts, pointer);
        }
        for pointer in UNORDERED {
            if let Some(Value::Array(items)) = facts.pointer_mut(pointer) {
                items.sort_by_key(Value::to_string);
                items.dedup();
            }
        }
        let facts = sort_keys(facts);
        let hash = Sha256::digest(facts.to_string().as_bytes()).into();
        NormalisedFacts { facts, hash }
    }
}

/// The facts that get typed columns, read from the agent's `probe` layout
/// (schema_version 1). A missing or mistyped fact is `None`, never an error:
/// an older or newer agent still gets its snapshot stored.
#[derive(Debug, Clone, Default, PartialEq, sqlx::FromRow)]
pub struct FactColumns {
    pub arch: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_model_name: Option<String>,
    pub cpu_family: Option<i32>,
    pub cpu_model: Option<i32>,
    pub cpu_stepping: Option<i32>,
    pub logical_cores: Option<i32>,
    pub memory_total_bytes: Option<i64>,
    pub os_name: Option<String>,
    pub kernel_release: Option<String>,
    pub hypervisor_present: Option<bool>,
    pub hypervisor: Option<String>,
    pub features_advertised: Vec<String>,
    pub features_usable: Vec<String>,
    pub build_flavour: Option<String>,
    pub agent_version: Option<String>,
    /// `/proc/cpuinfo` describes another CPU than the agent's: emulated (migrations/0004).
    pub cpuinfo_foreign: Option<bool>,
    /// The agent's compiler settings in one line ([`Codegen::summary`]).
    pub build_codegen: Option<String>,
    /// Target features the agent's code was compiled to assume.
    pub build_target_features: Vec<String>,
    /// The kernel's chosen crypto driver per name of [`kernel::NAMES`] it
    /// registers, in that order (migrations/0034); `None` when the agent did
    /// not report them.
    pub kernel_drivers: Option<Json<Vec<KernelDriver>>>,
    /// The host's OpenSSL build; `None` when the agent did not report one.
    pub openssl_build: Option<Json<OpensslBuild>>,
}

impl FactColumns {
    pub fn from_facts(facts: &Value) -> Self {
        let codegen = facts
            .pointer("/build/codegen")
            .and_then(|v| serde_json::from_value::<Codegen>(v.clone()).ok())
            .map(|mut c| {
                c.target_features.sort();
                c
            });
        let text = |p: &str| facts.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let int = |p: &str| {
            facts
                .pointer(p)
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
        };
        let list = |p: &str| -> Vec<String> {
            let mut items: Vec<String> = facts
                .pointer(p)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            items.sort();
            items.dedup();
            items
        };
        FactColumns {
            arch: text("/arch"),
            cpu_vendor: text("/cpu/vendor"),
            cpu_model_name: text("/cpu/model_name"),
            cpu_family: int("/cpu/family"),
            cpu_model: int("/cpu/model"),
            cpu_stepping: int("/cpu/stepping"),
            logical_cores: int("/cpu/logical_cores"),
            memory_total_bytes: facts.pointer("/memory_total_bytes").and_then(Value::as_i64),
            os_name: text("/os/pretty_name").or_else(|| text("/os/name")),
            kernel_release: text("/kernel_release"),
            hypervisor_present: facts.pointer("/virtualization/hypervisor").and_then(Value::as_bool),
            hypervisor: text("/virtualization/kind")
                .or_else(|| text("/virtualization/vendor_signature"))
                .or_else(|| text("/virtualization/sys_hypervisor_type")),
            features_advertised: list("/features/advertised"),
            features_usable: list("/features/usable"),
            build_flavour: text("/build/flavour"),
            agent_version: text("/build/agent_version"),
            cpuinfo_foreign: facts
                .pointer("/virtualization/cpuinfo_foreign")
                .and_then(Value::as_bool),
            build_codegen: codegen.as_ref().map(Codegen::summary),
            build_target_features: codegen.map(|c| c.target_features).unwrap_or_default(),
            kernel_drivers: kernel_drivers(facts).map(Json),
            openssl_build: facts
                .pointer("/providers/openssl")
                .and_then(|v| serde_json::from_value::<OpensslBuild>(v.clone()).ok())
                .map(Json),
        }
    }
}

/// The drivers of `providers.kernel.drivers` that read as [`KernelDriver`]s
/// and name one of [`kernel::NAMES`], the first of each name, in that order:
/// an agent lists no more than the names it is asked about, whatever it sends.
fn kernel_drivers(facts: &Value) -> Option<Vec<KernelDriver>> {
    let sent: Vec<KernelDriver> = facts
        .pointer("/providers/kernel/drivers")?
        .as_array()?
        .iter()
        .filter_map(|d| serde_json::from_value(d.clone()).ok())
        .collect();
    Some(
        kernel::NAMES
            .iter()
            .filter_map(|name| sent.iter().find(|d| d.name == *name).cloned())
            .collect(),
    )
}

fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return;
    };
    if let Some(Value::Object(map)) = value.pointer_mut(parent) {
        map.remove(key);
    }
}

/// Rebuilds objects with their keys in order, whatever map `serde_json` was built with.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn facts() -> Value {
        json!({
            "schema_version": 1,
            "arch": "x86_64",
            "kernel_release": "6.1.0-18-amd64",
            "cpu": {"vendor": "GenuineIntel", "model_name": "Xeon", "family": 6, "model": 85,
                    "stepping": 7, "logical_cores": 8},
            "virtualization": {"hypervisor": true, "kind": "kvm"},
            "features": {"advertised": ["avx", "aes", "pclmulqdq"], "usable": ["aes"]},
            "build": {"flavour": "accelerated", "agent_version": "0.1.0",
                      "codegen": {"profile": "release", "opt_level": "3", "lto": "fat",
                                  "codegen_units": 1, "target_features": ["sse2", "fxsr", "sse"]}},
            "noise": {"load_average": [0.5, 0.4, 0.3], "cpufreq_governor": "performance"}
        })
    }

    #[test]
    fn a_new_build_profile_changes_the_hash_but_feature_order_does_not() {
        let base = NormalisedFacts::new(&facts()).hash;
        let mut thin = facts();
        thin["build"]["codegen"]["lto"] = json!("thin");
        let mut reordered = facts();
        reordered["build"]["codegen"]["target_features"] = json!(["fxsr", "sse", "sse2"]);
        assert_ne!(base, NormalisedFacts::new(&thin).hash);
        assert_eq!(base, NormalisedFacts::new(&reordered).hash);
    }

    #[test]
    fn load_average_and_feature_order_do_not_change_the_hash() {
        let mut other = facts();
        other["noise"]["load_average"] = json!([3.0, 2.0, 1.0]);
        other["features"]["advertised"] = json!(["pclmulqdq", "aes", "avx"]);
        assert_eq!(NormalisedFacts::new(&facts()).hash, NormalisedFacts::new(&other).hash);
    }

    #[test]
    fn a_lost_flag_or_new_kernel_changes_the_hash() {
        let base = NormalisedFacts::new(&facts()).hash;
        let mut lost = facts();
        lost["features"]["usable"] = json!([]);
        let mut kernel = facts();
        kernel["kernel_release"] = json!("6.1.0-20-amd64");
        assert_ne!(base, NormalisedFacts::new(&lost).hash);
        assert_ne!(base, NormalisedFacts::new(&kernel).hash);
    }

    #[test]
    fn typed_columns_follow_the_probe_layout() {
        let c = FactColumns::from_facts(&facts());
        assert_eq!(c.arch.as_deref(), Some("x86_64"));
        assert_eq!(
            c.build_codegen.as_deref(),
            Some("release, opt-level 3, LTO fat, 1 codegen unit")
        );
        assert_eq!(c.build_target_features, ["fxsr", "sse", "sse2"]);
        assert_eq!(c.cpu_family, Some(6));
        assert_eq!(c.cpu_model, Some(85));
        assert_eq!(c.logical_cores, Some(8));
        assert_eq!(c.hypervisor_present, Some(true));
        assert_eq!(c.hypervisor.as_deref(), Some("kvm"));
        assert_eq!(c.features_advertised, ["aes", "avx", "pclmulqdq"]);
        assert_eq!(c.build_flavour.as_deref(), Some("accelerated"));
        assert_eq!(FactColumns::from_facts(&json!({})), FactColumns::default());
    }

    #[test]
    fn provider_facts_keep_the_drivers_asked_about_and_the_openssl_build() {
        let driver = |name: &str, driver: &str| {
            json!({"name": name, "driver": driver, "module": "kernel", "priority": 100, "kind": "cipher",
                   "generic": true, "path": "software", "candidates": 1})
        };
        let mut f = facts();
        f["providers"] = json!({
            "kernel": {"drivers": [
                driver("gcm(aes)", "gcm_base(ctr(aes-generic),ghash-generic)"),
                driver("aes", "aes-generic"),
                driver("aes", "aes-second"),
                driver("<script>", "x"),
                {"name": "ctr(aes)", "driver": 7},
            ]},
            "openssl": {"binary": "/usr/bin/openssl", "version": "OpenSSL 3.0.19 27 Jan 2026",
                        "platform": "debian-amd64", "no_asm": false,
                        "capability_env": "OPENSSL_ia32cap=~0x200000200000000", "masked": ["aes", "pclmulqdq"]},
        });
        let c = FactColumns::from_facts(&f);
        let drivers = c.kernel_drivers.unwrap().0;
        let names: Vec<(&str, &str)> = drivers.iter().map(|d| (d.name.as_str(), d.driver.as_str())).collect();
        assert_eq!(
            names,
            [
                ("aes", "aes-generic"),
                ("gcm(aes)", "gcm_base(ctr(aes-generic),ghash-generic)")
            ],
            "in NAMES order, the first of each name, nothing unknown or malformed"
        );
        let openssl = c.openssl_build.unwrap().0;
        assert_eq!(openssl.platform.as_deref(), Some("debian-amd64"));
        assert_eq!(openssl.masked, ["aes", "pclmulqdq"]);
        assert!(!openssl.speed_aead, "a field the agent left out reads as its default");
        assert!(
            openssl.watched.is_empty(),
            "facts from before --watch-env watch nothing"
        );
        let old = FactColumns::from_facts(&facts());
        assert_eq!((old.kernel_drivers, old.openssl_build), (None, None));
    }
}
