//! The one human sentence a finding says: what was lost, why, on which
//! build or service, and the remedy, read off the host's facts.

use crate::analysis::fallback::{Reason, primitive_of};
use crate::analysis::providers;
use crate::analysis::series::SlowVerdict;
use crate::analysis::slow::SlowKind;

pub(super) const EMULATED_NOTE: &str = " (emulated host: detection is real, timings are not)";

pub(super) fn fact_summary(
    reason: Reason,
    features: &[String],
    facts: &crate::domain::facts::FactColumns,
    peers_with: usize,
    emulated: bool,
) -> String {
    let list = features.join(", ");
    // What runs in software for want of them.
    let mut lost: Vec<&str> = features
        .iter()
        .filter_map(|f| primitive_of(f))
        .map(|p| p.what())
        .collect();
    lost.dedup();
    let lost = if lost.is_empty() {
        "AES".to_string()
    } else {
        lost.join(" and ")
    };
    let text = match reason {
        Reason::CpuLacks => format!("The CPU does not advertise {list}: {lost} runs in software."),
        Reason::HypervisorMasks => format!(
            "The hypervisor hides {list}, which {peers_with} host(s) with the same CPU model advertise: {lost} runs in software."
        ),
        Reason::OsDisabled => format!(
            "CPUID advertises {list} but the OS has not enabled the register state (XCR0) on kernel {}.",
            facts.kernel_release.as_deref().unwrap_or("unknown")
        ),
        Reason::SoftwareBuild => format!(
            "The agent (version {}) runs the build that forces software backends.",
            facts.agent_version.as_deref().unwrap_or("unknown")
        ),
        Reason::KernelCryptoGeneric => kernel_generic_summary(features, facts),
        Reason::OpensslMasked => openssl_masked_summary(features, facts),
        Reason::OpensslNoAcceleration => openssl_unaccelerated_summary(features, facts),
    };
    if emulated {
        format!("{text}{EMULATED_NOTE}")
    } else {
        text
    }
}

/// `kernel-crypto-generic`: which names run what, the module to load and what runs slow meanwhile.
fn kernel_generic_summary(names: &[String], facts: &crate::domain::facts::FactColumns) -> String {
    let arch = facts.arch.as_deref().unwrap_or_default();
    let chosen: Vec<String> = facts
        .kernel_drivers
        .iter()
        .flat_map(|d| d.0.iter())
        .filter(|d| names.contains(&d.name))
        .map(|d| format!("{} → {} ({})", d.name, d.driver, d.module))
        .collect();
    let needs: Vec<&str> = names
        .iter()
        .filter_map(|n| providers::kernel_needs(n, arch))
        .flatten()
        .copied()
        .fold(Vec::new(), |mut all, f| {
            if !all.contains(&f) {
                all.push(f);
            }
            all
        });
    let modules = providers::kernel_remedy(names.iter().map(String::as_str), arch);
    let load: Vec<&str> = modules.iter().filter_map(|m| m.split_whitespace().next()).collect();
    format!(
        "The CPU has {} usable, but the kernel's chosen crypto drivers run AES in software: {}. \
         Load {} (`modprobe {}`; check it is not blacklisted and that kernel {} builds it): until then \
         {} on this host encrypt in software.",
        needs.join(", "),
        chosen.join(", "),
        modules.join(" and "),
        load.join(" "),
        facts.kernel_release.as_deref().unwrap_or("unknown"),
        providers::KERNEL_USERS,
    )
}

/// `openssl-masked`: for each environment that masks (the agent's, each
/// watched service's), the variable, what it masks and how to remove it.
fn openssl_masked_summary(masked: &[String], facts: &crate::domain::facts::FactColumns) -> String {
    let build = facts.openssl_build.as_ref().map(|b| &b.0);
    let openssl = build.map_or_else(
        || "the host's OpenSSL".to_string(),
        |b| format!("{} ({})", b.version, b.binary),
    );
    let sources = build.map(providers::openssl_masking).unwrap_or_default();
    if sources.is_empty() {
        // No build to name the sources from: the features alone.
        return format!(
            "An OpenSSL capability variable masks {} from {openssl}: every program started with it runs them \
             in software.",
            masked.join(", ")
        );
    }
    let said: Vec<String> = sources.iter().map(|m| masking_sentence(m, &openssl)).collect();
    said.join(" ")
}

/// What one masking environment does and its remedy.
fn masking_sentence(m: &providers::Masking<'_>, openssl: &str) -> String {
    let variable = m.capability_env.unwrap_or("An OpenSSL capability variable");
    let name = providers::variable_name(variable);
    let masked = m.masked.join(", ");
    let Some(service) = m.service else {
        return format!(
            "{variable} in the agent's environment masks {masked} from {openssl}: every program started with it \
             runs them in software. Remove {name} from the services' environment (a unit's Environment=, \
             /etc/environment, a profile script) unless it is there on purpose."
        );
    };
    let who = match &service.name {
        Some(process) => format!("{} ({process})", service.target),
        None => service.target.clone(),
    };
    let remedy = match service.target.strip_prefix("unit ") {
        Some(unit) => format!(
            "Remove {name} from the unit's Environment= or EnvironmentFile= (`systemctl edit {unit}`), then \
             `systemctl restart {unit}`."
        ),
        None => format!(
            "Remove {name} from that service's environment (its unit's Environment=, its start script) and \
             restart it."
        ),
    };
    format!(
        "{variable} in the environment of the watched service {who} masks {masked} from the OpenSSL it \
         links: it runs them in software. {remedy}"
    )
}

/// `openssl-no-acceleration`: which OpenSSL, the points, and the likely cause.
fn openssl_unaccelerated_summary(points: &[String], facts: &crate::domain::facts::FactColumns) -> String {
    let build = facts.openssl_build.as_ref().map(|b| &b.0);
    let openssl = build.map_or_else(
        || "The host's OpenSSL".to_string(),
        |b| format!("The host's {} ({})", b.version, b.binary),
    );
    let cause = if build.is_some_and(|b| b.no_asm) {
        "It is a no-asm build (C code only): install one with its assembly, such as the distribution's package."
    } else {
        "A no-asm build, a capability variable in the services' environment, or a CPU too new for this \
         OpenSSL to recognise: upgrade it, or check `openssl version -a` and the services' environment."
    };
    format!(
        "{openssl} runs AES no faster asked for its accelerated path than with its capability vector masked \
         ({}), on a CPU with AES: nginx, HAProxy, PostgreSQL and every service linking it encrypt at software \
         speed. {cause}",
        points.join("; ")
    )
}

pub(super) fn slow_summary(v: &SlowVerdict, emulated: bool) -> String {
    let h = &v.headline;
    let s = &h.series;
    // Another provider than the built-in crates is named: its figures are
    // that library's (or the kernel's), not the agent's.
    let point = match s.provider {
        p if p.is_rustcrypto() => format!("{} {} B {}", s.algorithm, s.size_bytes, s.direction),
        p => format!("{} {} B {} on the {p} provider", s.algorithm, s.size_bytes, s.direction),
    };
    let (value, reference, ratio) = (h.finding.value_mb_s, h.finding.reference_mb_s, h.finding.ratio);
    // A drop too large to be noise fires from one result: say so.
    let one = if h.finding.results == 1 {
        " in its latest result"
    } else {
        ""
    };
    let comparison = match v.kind {
        SlowKind::NearSoftware => {
            format!("the accelerated path runs at {ratio:.2}× the software path ({value:.0} vs {reference:.0} MB/s)")
        }
        SlowKind::BelowPeers => {
            format!("{value:.0} MB/s{one} is {ratio:.2}× the median of same-class hosts ({reference:.0} MB/s)")
        }
        SlowKind::DroppedVsHistory if h.finding.results == 1 => {
            format!("{value:.0} MB/s in its latest result, {ratio:.2}× its own earlier {reference:.0} MB/s")
        }
        SlowKind::DroppedVsHistory => {
            format!("{value:.0} MB/s recently, {ratio:.2}× its own earlier {reference:.0} MB/s")
        }
    };
    let more = match v.flagged.len() {
        1 => String::new(),
        n => format!(" ({n} of {} series)", v.series_checked),
    };
    let text = format!("{point}: {comparison}{more}.");
    if emulated {
        format!("{text}{EMULATED_NOTE}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::describe::fact_subject;
    use crate::findings::describe::tests::features;

    #[test]
    fn the_providers_findings_name_their_remedy() {
        use cipherfleet_core::provider::facts::OpensslBuild;
        use sqlx::types::Json;
        let facts = crate::domain::facts::FactColumns {
            arch: Some("x86_64".into()),
            kernel_release: Some("6.12.48".into()),
            kernel_drivers: Some(Json(vec![crate::analysis::providers::tests::driver(
                "aes",
                "aes-fixed-time",
            )])),
            openssl_build: Some(Json(OpensslBuild {
                binary: "/usr/bin/openssl".into(),
                version: "OpenSSL 3.0.19 27 Jan 2026".into(),
                capability_env: Some("OPENSSL_ia32cap=~0x200000200000000".into()),
                masked: features(&["aes", "pclmulqdq"]),
                ..OpensslBuild::default()
            })),
            ..Default::default()
        };
        let kernel = fact_summary(Reason::KernelCryptoGeneric, &features(&["aes"]), &facts, 0, false);
        assert_eq!(
            kernel,
            "The CPU has aes usable, but the kernel's chosen crypto drivers run AES in software: \
             aes → aes-fixed-time (kernel). Load aesni_intel (`modprobe aesni_intel`; check it is not \
             blacklisted and that kernel 6.12.48 builds it): until then dm-crypt/LUKS, IPsec and kTLS on \
             this host encrypt in software."
        );
        let openssl = fact_summary(
            Reason::OpensslMasked,
            &features(&["aes", "pclmulqdq"]),
            &facts,
            0,
            false,
        );
        assert!(
            openssl.starts_with(
                "OPENSSL_ia32cap=~0x200000200000000 in the agent's environment masks aes, pclmulqdq from \
                 OpenSSL 3.0.19 27 Jan 2026 (/usr/bin/openssl)"
            ) && openssl.contains("Remove OPENSSL_ia32cap from"),
            "{openssl}"
        );
        assert_eq!(
            (
                fact_subject(Reason::KernelCryptoGeneric, &[]),
                fact_subject(Reason::OpensslMasked, &[])
            ),
            ("kernel-aes".to_string(), "openssl".to_string())
        );
    }

    #[test]
    fn openssl_masked_names_each_environment_that_masks_and_its_remedy() {
        use cipherfleet_core::provider::facts::{OpensslBuild, WatchedService};
        use sqlx::types::Json;
        let service = |target: &str, name: Option<&str>, masked: &[&str]| WatchedService {
            target: target.into(),
            name: name.map(str::to_string),
            source: "/proc/4242/environ".into(),
            capability_env: (!masked.is_empty()).then(|| "OPENSSL_ia32cap=~0x200000200000000".to_string()),
            masked: features(masked),
            error: None,
        };
        let build = OpensslBuild {
            binary: "/usr/bin/openssl".into(),
            version: "OpenSSL 3.0.19 27 Jan 2026".into(),
            watched: vec![
                service("pid 4242", Some("nginx"), &["pclmulqdq", "aes"]),
                service("pid 4243", Some("haproxy"), &[]),
                service("unit postgresql.service", None, &["pclmulqdq", "aes"]),
            ],
            ..OpensslBuild::default()
        };
        let facts = |build: &OpensslBuild| crate::domain::facts::FactColumns {
            arch: Some("x86_64".into()),
            openssl_build: Some(Json(build.clone())),
            ..Default::default()
        };
        let summary = |build: &OpensslBuild| {
            let features = providers::openssl_masked(build);
            fact_summary(Reason::OpensslMasked, &features, &facts(build), 0, false)
        };
        assert_eq!(
            summary(&build),
            "OPENSSL_ia32cap=~0x200000200000000 in the environment of the watched service pid 4242 (nginx) \
             masks pclmulqdq, aes from the OpenSSL it links: it runs them in software. Remove OPENSSL_ia32cap \
             from that service's environment (its unit's Environment=, its start script) and restart it. \
             OPENSSL_ia32cap=~0x200000200000000 in the environment of the watched service unit \
             postgresql.service masks pclmulqdq, aes from the OpenSSL it links: it runs them in software. \
             Remove OPENSSL_ia32cap from the unit's Environment= or EnvironmentFile= (`systemctl edit \
             postgresql.service`), then `systemctl restart postgresql.service`."
        );
        // The agent's own environment too: named first, as before, then the services.
        let both = OpensslBuild {
            capability_env: Some("OPENSSL_ia32cap=:~0x20".into()),
            masked: features(&["avx2"]),
            ..build.clone()
        };
        let text = summary(&both);
        assert!(
            text.starts_with(
                "OPENSSL_ia32cap=:~0x20 in the agent's environment masks avx2 from OpenSSL 3.0.19 27 Jan 2026 \
                 (/usr/bin/openssl)"
            ) && text.contains("pid 4242 (nginx) masks pclmulqdq, aes")
                && text.contains("unit postgresql.service masks")
                && !text.contains("haproxy"),
            "{text}"
        );
        assert_eq!(providers::openssl_masked(&both), ["avx2", "pclmulqdq", "aes"]);
    }
}
