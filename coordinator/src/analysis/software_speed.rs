//! The fallback page's judgement, pure so it is table-tested: when an
//! accelerated path counts as running at software speed (it fell back, or it
//! ran on hardware barely faster than the software path), and which open
//! findings explain an algorithm being slow on its host. The page and its API
//! ([`crate::web::fallback`]) call these; the threshold is the findings
//! deriver's own ([`Thresholds`]).

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::path::Path;

use super::slow::Thresholds;

/// Why an accelerated path counts as running at software speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SoftwareSpeed {
    /// The accelerated path was asked for and the software implementation ran.
    RanSoftware,
    /// It ran on hardware but measured below the near-software ratio.
    NearSoftware,
}

/// accelerated / software, when both were measured and software is not zero.
pub fn ratio(accelerated: Option<f64>, software: Option<f64>) -> Option<f64> {
    match (accelerated, software) {
        (Some(a), Some(s)) if s > 0.0 => Some(a / s),
        _ => None,
    }
}

/// Whether any machine could run `algorithm` on hardware: DES and 3DES have no
/// hardware path anywhere, so their accelerated requests always run software
/// and say nothing about the host.
pub fn has_hardware_path(algorithm: Algorithm) -> bool {
    !matches!(algorithm.cipher, Cipher::Des | Cipher::TripleDes)
}

/// The rule of the "at software speed" section. The ratio uses the findings
/// deriver's own threshold and smallest payload ([`Thresholds`]): below that
/// size per-call overhead dominates and both paths converge. On emulated hosts
/// only what ran counts, since their timings are not performance.
pub fn judge(
    algorithm: Algorithm,
    path_used: Option<Path>,
    ratio: Option<f64>,
    emulated: bool,
    size_bytes: u64,
    t: &Thresholds,
) -> Option<SoftwareSpeed> {
    let path_used = path_used?;
    if !has_hardware_path(algorithm) {
        return None;
    }
    if path_used == Path::Software {
        return Some(SoftwareSpeed::RanSoftware);
    }
    let slow = ratio.is_some_and(|r| r < t.near_software_ratio);
    (slow && !emulated && size_bytes >= t.near_software_min_size_bytes).then_some(SoftwareSpeed::NearSoftware)
}

/// Whether an open finding (`reason`, `subject`) explains `algorithm` running
/// slow on its host: a slow-path finding only its own algorithm; missing AES
/// instructions the AES algorithms; disabled AVX state what uses it (GCM's
/// GHASH, ChaCha20's vector code); a software build everything with a hardware path.
pub fn explains(reason: &str, subject: &str, algorithm: Algorithm) -> bool {
    if reason == "slow-accelerated" {
        return subject == algorithm.name();
    }
    match reason {
        "cpu-lacks" | "hypervisor-masks" => algorithm.uses_aes(),
        "os-disabled" => algorithm.mode == Mode::Gcm || algorithm.cipher == Cipher::ChaCha20,
        _ => has_hardware_path(algorithm),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// name, algorithm, what ran, ratio, emulated, payload bytes → verdict.
    type Case = (
        &'static str,
        &'static str,
        Option<Path>,
        Option<f64>,
        bool,
        u64,
        Option<SoftwareSpeed>,
    );

    #[test]
    fn software_speed_means_a_fallback_or_a_ratio_under_the_deriver_threshold() {
        use SoftwareSpeed::{NearSoftware, RanSoftware};
        let t = Thresholds::default();
        let (near, big) = (t.near_software_ratio, t.near_software_min_size_bytes);
        let (acc, soft) = (Some(Path::Accelerated), Some(Path::Software));
        let gcm = "aes-128-gcm";
        let cases: [Case; 10] = [
            ("healthy", gcm, acc, Some(near * 4.0), false, big, None),
            ("fell back", gcm, soft, Some(1.0), false, big, Some(RanSoftware)),
            (
                "fell back, software unmeasured",
                gcm,
                soft,
                None,
                false,
                big,
                Some(RanSoftware),
            ),
            (
                "slow hardware",
                gcm,
                acc,
                Some(near * 0.9),
                false,
                big,
                Some(NearSoftware),
            ),
            (
                "at the threshold is not under it",
                gcm,
                acc,
                Some(near),
                false,
                big,
                None,
            ),
            ("small payloads converge", gcm, acc, Some(1.0), false, big - 1, None),
            ("emulated timings are not judged", gcm, acc, Some(1.0), true, big, None),
            (
                "but an emulated fallback is real",
                gcm,
                soft,
                Some(1.0),
                true,
                big,
                Some(RanSoftware),
            ),
            (
                "3DES has no hardware path anywhere",
                "des-ede3-cbc",
                soft,
                Some(1.0),
                false,
                big,
                None,
            ),
            ("no accelerated result", gcm, None, None, false, big, None),
        ];
        for (name, alg, used, ratio, emulated, size, want) in cases {
            assert_eq!(
                judge(alg.parse().unwrap(), used, ratio, emulated, size, &t),
                want,
                "{name}"
            );
        }
        assert_eq!(ratio(Some(300.0), Some(100.0)), Some(3.0));
        assert_eq!(ratio(Some(300.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(100.0)), None);
    }

    #[test]
    fn findings_explain_only_the_algorithms_they_concern() {
        let cases = [
            ("software-build", "build", "chacha20-poly1305", true),
            ("software-build", "build", "des-ede3-cbc", false),
            ("cpu-lacks", "aes", "aes-256-gcm", true),
            ("cpu-lacks", "aes", "chacha20-poly1305", false),
            ("hypervisor-masks", "aes", "aes-128-cbc", true),
            ("os-disabled", "avx-state", "aes-128-gcm", true),
            ("os-disabled", "avx-state", "chacha20-poly1305", true),
            ("os-disabled", "avx-state", "aes-128-cbc", false),
            ("slow-accelerated", "aes-128-gcm", "aes-128-gcm", true),
            ("slow-accelerated", "aes-128-gcm", "aes-256-gcm", false),
        ];
        for (reason, subject, alg, want) in cases {
            assert_eq!(
                explains(reason, subject, alg.parse().unwrap()),
                want,
                "{reason} {subject} on {alg}"
            );
        }
    }
}
