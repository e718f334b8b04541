//! The probe table's provider sections: what each provider can run here and
//! why not, the kernel's chosen crypto drivers, and the host's OpenSSL build.

use cipherfleet_core::provider::facts::{ProviderFacts, WatchedService};
use cipherfleet_core::text::printable;

/// `key  value` rows, as the rest of the table.
type Rows = Vec<(String, String)>;

/// The sections for `p`: Providers, Kernel crypto drivers, OpenSSL.
pub(super) fn sections(p: &ProviderFacts) -> Vec<(&'static str, Rows)> {
    let mut providers = Rows::new();
    for c in &p.capabilities {
        let status = if c.available {
            let names: Vec<&str> = c.algorithms.iter().map(|a| a.name()).collect();
            format!("yes: {}", names.join(" "))
        } else {
            "no".to_string()
        };
        providers.push((c.provider.to_string(), status));
        if let Some(why) = &c.reason {
            providers.push((format!("{} note", c.provider), why.clone()));
        }
        providers.push((format!("{} software path", c.provider), c.software_path.clone()));
    }
    let mut out = vec![("Providers", providers)];

    if let Some(k) = &p.kernel {
        let mut rows: Rows = k
            .drivers
            .iter()
            .map(|d| {
                let kind = if d.generic { "generic" } else { "arch" };
                (
                    d.name.clone(),
                    format!(
                        "{} ({}, priority {}, {kind}, path {}; {} registered)",
                        d.driver, d.module, d.priority, d.path, d.candidates
                    ),
                )
            })
            .collect();
        if !k.missing.is_empty() {
            rows.push(("not registered".into(), k.missing.join(" ")));
        }
        let af_alg = |a: &cipherfleet_core::provider::facts::AfAlg| {
            if a.available {
                "yes".to_string()
            } else {
                format!("no: {}", a.reason.as_deref().unwrap_or("unknown"))
            }
        };
        rows.push(("AF_ALG skcipher".into(), af_alg(&k.af_alg_skcipher)));
        rows.push(("AF_ALG aead".into(), af_alg(&k.af_alg_aead)));
        out.push(("Kernel crypto drivers", rows));
    }

    if let Some(o) = &p.openssl {
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        let mut rows: Rows = vec![
            ("binary".into(), o.binary.clone()),
            ("version".into(), o.version.clone()),
            ("libcrypto".into(), opt(&o.libcrypto)),
            ("platform".into(), opt(&o.platform)),
            ("built on".into(), opt(&o.built_on)),
            ("compiler".into(), opt(&o.compiler)),
            ("no-asm".into(), if o.no_asm { "yes" } else { "no" }.into()),
            ("cpuinfo".into(), opt(&o.cpuinfo)),
        ];
        if let Some(lib) = &o.library_version {
            rows.push(("library version".into(), lib.clone()));
        }
        if let Some(env) = &o.capability_env {
            rows.push((
                "capability override".into(),
                format!("{env} (masks {})", o.masked.join(", ")),
            ));
        }
        for w in &o.watched {
            let who = match &w.name {
                Some(name) => format!("watched {} ({})", w.target, printable(name)),
                None => format!("watched {}", w.target),
            };
            rows.push((who, watched_status(w)));
        }
        out.push(("OpenSSL", rows));
    }
    out
}

/// What one watched service's environment holds, as its row says it. Its
/// name and value are another process's words: printed escaped.
fn watched_status(w: &WatchedService) -> String {
    if let Some(error) = &w.error {
        return format!("not read: {}", printable(error));
    }
    let found = match &w.capability_env {
        Some(env) if w.masked.is_empty() => format!("{} (masks nothing)", printable(env)),
        Some(env) => format!("{} (masks {})", printable(env), w.masked.join(", ")),
        None => "no capability variable".into(),
    };
    format!("{found}, from {}", w.source)
}
