//! What changed in a host's facts between two snapshots: the context a finding
//! carries ("AES went missing when the kernel went from 6.1 to 6.6").
//! Only the facts an operator would suspect are compared: kernel, OS, CPU
//! flags (advertised and usable), hypervisor, agent version and build (flavour,
//! compiler settings and compile-time target features), the kernel's chosen
//! crypto drivers and the host's OpenSSL version.

use cipherfleet_core::provider::facts::KernelDriver;
use serde_json::{Map, Value, json};
use sqlx::types::Json;

use crate::domain::facts::FactColumns;

/// The changed facts from `before` to `after` as a JSON object: scalar facts
/// as `{"from": …, "to": …}`, flag lists as `{"gained": […], "lost": […]}`.
/// Empty when nothing an operator would suspect changed.
pub fn diff(before: &FactColumns, after: &FactColumns) -> Map<String, Value> {
    let mut out = Map::new();
    let mut scalar = |name: &str, a: Value, b: Value| {
        if a != b {
            out.insert(name.to_string(), json!({"from": a, "to": b}));
        }
    };
    scalar(
        "kernel_release",
        json!(before.kernel_release),
        json!(after.kernel_release),
    );
    scalar("os_name", json!(before.os_name), json!(after.os_name));
    scalar(
        "cpu_model_name",
        json!(before.cpu_model_name),
        json!(after.cpu_model_name),
    );
    scalar(
        "hypervisor_present",
        json!(before.hypervisor_present),
        json!(after.hypervisor_present),
    );
    scalar("hypervisor", json!(before.hypervisor), json!(after.hypervisor));
    scalar("agent_version", json!(before.agent_version), json!(after.agent_version));
    scalar("build_flavour", json!(before.build_flavour), json!(after.build_flavour));
    scalar("build_codegen", json!(before.build_codegen), json!(after.build_codegen));
    for (name, a, b) in [
        (
            "features_advertised",
            &before.features_advertised,
            &after.features_advertised,
        ),
        ("features_usable", &before.features_usable, &after.features_usable),
        (
            "build_target_features",
            &before.build_target_features,
            &after.build_target_features,
        ),
    ] {
        gained_lost(&mut out, name, a, b);
    }
    // The providers' facts, where both snapshots report them: a first report is no change.
    if let (Some(a), Some(b)) = (&before.kernel_drivers, &after.kernel_drivers) {
        let chosen = |d: &Json<Vec<KernelDriver>>| -> Vec<String> {
            d.0.iter().map(|d| format!("{} → {}", d.name, d.driver)).collect()
        };
        gained_lost(&mut out, "kernel_drivers", &chosen(a), &chosen(b));
    }
    if let (Some(a), Some(b)) = (&before.openssl_build, &after.openssl_build)
        && a.0.version != b.0.version
    {
        out.insert(
            "openssl_version".into(),
            json!({"from": a.0.version, "to": b.0.version}),
        );
    }
    out
}

/// Records list `name`'s items gained and lost from `a` to `b`, if any.
fn gained_lost(out: &mut Map<String, Value>, name: &str, a: &[String], b: &[String]) {
    let gained: Vec<&String> = b.iter().filter(|f| !a.contains(f)).collect();
    let lost: Vec<&String> = a.iter().filter(|f| !b.contains(f)).collect();
    if !gained.is_empty() || !lost.is_empty() {
        out.insert(name.to_string(), json!({"gained": gained, "lost": lost}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(kernel: &str, usable: &[&str], version: &str, flavour: &str) -> FactColumns {
        FactColumns {
            kernel_release: Some(kernel.into()),
            features_advertised: vec!["aes".into(), "avx".into()],
            features_usable: usable.iter().map(|s| s.to_string()).collect(),
            agent_version: Some(version.into()),
            build_flavour: Some(flavour.into()),
            build_codegen: Some("release, opt-level 3, LTO fat, 1 codegen unit".into()),
            build_target_features: vec!["sse2".into()],
            ..FactColumns::default()
        }
    }

    #[test]
    fn only_what_changed_is_reported() {
        let base = facts("6.1.0", &["aes", "avx"], "0.1.0", "accelerated");
        let cases: Vec<(&str, FactColumns, Value)> = vec![
            ("nothing", base.clone(), json!({})),
            (
                "new kernel, avx state lost",
                facts("6.6.0", &["aes"], "0.1.0", "accelerated"),
                json!({"kernel_release": {"from": "6.1.0", "to": "6.6.0"},
                       "features_usable": {"gained": [], "lost": ["avx"]}}),
            ),
            (
                "agent upgraded to a software build",
                facts("6.1.0", &["aes", "avx"], "0.2.0", "software"),
                json!({"agent_version": {"from": "0.1.0", "to": "0.2.0"},
                       "build_flavour": {"from": "accelerated", "to": "software"}}),
            ),
            (
                "agent rebuilt without LTO",
                FactColumns {
                    build_codegen: Some("release, opt-level 3, LTO thin-local, 4 codegen units".into()),
                    ..base.clone()
                },
                json!({"build_codegen": {"from": "release, opt-level 3, LTO fat, 1 codegen unit",
                                         "to": "release, opt-level 3, LTO thin-local, 4 codegen units"}}),
            ),
            (
                "agent rebuilt for a newer CPU",
                FactColumns {
                    build_target_features: vec!["avx2".into(), "sse2".into()],
                    ..base.clone()
                },
                json!({"build_target_features": {"gained": ["avx2"], "lost": []}}),
            ),
            (
                "a flag gained",
                facts("6.1.0", &["aes", "avx", "vaes"], "0.1.0", "accelerated"),
                json!({"features_usable": {"gained": ["vaes"], "lost": []}}),
            ),
        ];
        for (name, after, want) in cases {
            assert_eq!(Value::Object(diff(&base, &after)), want, "{name}");
        }
    }

    #[test]
    fn a_kernel_driver_change_is_a_change_and_a_first_report_is_not() {
        use crate::analysis::providers::tests::driver;
        let base = facts("6.1.0", &["aes"], "0.1.0", "accelerated");
        let generic = FactColumns {
            kernel_drivers: Some(Json(vec![driver("aes", "aes-generic")])),
            ..base.clone()
        };
        let loaded = FactColumns {
            kernel_drivers: Some(Json(vec![driver("aes", "aes-aesni")])),
            ..base.clone()
        };
        assert_eq!(diff(&base, &generic), Map::new(), "first reported");
        assert_eq!(
            Value::Object(diff(&generic, &loaded)),
            json!({"kernel_drivers": {"gained": ["aes → aes-aesni"], "lost": ["aes → aes-generic"]}})
        );
    }
}
