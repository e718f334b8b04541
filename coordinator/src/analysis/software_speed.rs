//! The fallback page's judgement, pure so it is table-tested: when an
//! accelerated path counts as running at software speed (it fell back wholly
//! or partly, or it ran on hardware barely faster than the software path),
//! and which open findings explain an algorithm being slow on its host. The
//! page and its API (`web::fallback`) call these; the threshold is
//! the findings deriver's own ([`Thresholds`]).

use cipherfleet_core::algorithm::{Algorithm, Cipher, Mode};
use cipherfleet_core::path::{Backends, PathUsed};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::KeyMode;

use super::fallback::{Primitive, hardware_features, has_hardware_path, primitive_of};
use super::slow::Thresholds;

/// Why an accelerated path counts as running at software speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SoftwareSpeed {
    /// The accelerated path was asked for and the software implementation ran.
    RanSoftware,
    /// The accelerated path was asked for and only some primitives ran on
    /// hardware (`partial`), where this architecture has more.
    RanPartial,
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

/// The most a point can reach on its host, what ran is judged against: the
/// best of the host's `arch` ([`Backends::best_on`]; ChaCha20 on ARM has
/// nothing past NEON, so it is `software` there and never a fallback), except
/// that AVX2 and SHA-256 instructions the CPU does not advertise (`advertised`,
/// when known) are not expected of it: such CPUs are common and no finding
/// names them ([`Primitive::is_major`]). A CPU without AES or GHASH
/// instructions still falls short (reason 1, `cpu-lacks`). An unknown arch is
/// given the benefit of the doubt for algorithms with a hardware path anywhere.
pub fn best_path(
    algorithm: Algorithm,
    key_mode: KeyMode,
    arch: Option<&str>,
    advertised: Option<&[String]>,
) -> PathUsed {
    let Some(arch) = arch else {
        return if has_hardware_path(algorithm) {
            PathUsed::Accelerated
        } else {
            PathUsed::Software
        };
    };
    let mut best = Backends::best_on(arch);
    for (feature, primitive) in hardware_features(Some(arch)) {
        if primitive.is_major() || advertised.is_none_or(|a| a.iter().any(|x| x == feature)) {
            continue;
        }
        let soft = || "soft".to_string();
        match primitive {
            Primitive::ChaCha20 => (best.chacha20, best.poly1305) = (soft(), Some(soft())),
            Primitive::Sha256 => best.sha256 = soft(),
            Primitive::Aes | Primitive::Ghash => {}
        }
    }
    best.path_for(algorithm, key_mode)
}

/// Where a result ran: its host's architecture and advertised CPU features.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostCpu<'a> {
    pub arch: Option<&'a str>,
    /// CPUID / HWCAP flags; `None` when unknown.
    pub advertised: Option<&'a [String]>,
}

/// The rule of the "at software speed" section. What ran is judged against
/// the best the host can reach ([`best_path`]): below it, the path fell back
/// (wholly or partly). The ratio uses the findings deriver's
/// own threshold and smallest payload ([`Thresholds`]): below that size
/// per-call overhead dominates and both paths converge; it is only asked of
/// a fully accelerated path (a partial one sits between by nature). On
/// emulated hosts only what ran counts, since their timings are not performance.
#[allow(clippy::too_many_arguments)]
pub fn judge(
    algorithm: Algorithm,
    key_mode: KeyMode,
    host: HostCpu,
    path_used: Option<PathUsed>,
    ratio: Option<f64>,
    emulated: bool,
    size_bytes: u64,
    t: &Thresholds,
) -> Option<SoftwareSpeed> {
    let near = below_near_software(ratio, t);
    judge_below(algorithm, key_mode, host, path_used?, near, emulated, size_bytes, t)
}

/// Whether a measured ratio is under the near-software threshold: all
/// [`judge`] asks of the ratio (`fallback_pairs` queries compare its stored
/// ratio the same way, `ratio < threshold`, an unmeasured one never under).
pub fn below_near_software(ratio: Option<f64>, t: &Thresholds) -> bool {
    ratio.is_some_and(|r| r < t.near_software_ratio)
}

/// [`judge`] with the ratio already compared ([`below_near_software`]).
#[allow(clippy::too_many_arguments)]
fn judge_below(
    algorithm: Algorithm,
    key_mode: KeyMode,
    host: HostCpu,
    path_used: PathUsed,
    below_near: bool,
    emulated: bool,
    size_bytes: u64,
    t: &Thresholds,
) -> Option<SoftwareSpeed> {
    let best = best_path(algorithm, key_mode, host.arch, host.advertised);
    if best == PathUsed::Software {
        return None;
    }
    if path_used > best {
        // Best first: greater is worse.
        return Some(match path_used {
            PathUsed::Partial => SoftwareSpeed::RanPartial,
            _ => SoftwareSpeed::RanSoftware,
        });
    }
    if path_used != PathUsed::Accelerated {
        return None;
    }
    (below_near && !emulated && size_bytes >= t.near_software_min_size_bytes).then_some(SoftwareSpeed::NearSoftware)
}

/// One combination of a row's own inputs that [`judge`] finds at software
/// speed on some host: the algorithm, what its accelerated request ran, and
/// whether its ratio is under the threshold ([`below_near_software`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowCase {
    pub algorithm: Algorithm,
    pub path_used: PathUsed,
    pub below_near: bool,
}

/// Every [`SlowCase`] on a host with `host`'s CPU (emulated or not), at
/// `key_mode` and `size_bytes`: [`judge`] tabulated over all it reads of a
/// row (27 algorithms × 3 paths × 2), so that a query can pick a whole
/// view's rows at software speed, grouped by host, without the rule being
/// written a second time in SQL.
pub fn slow_cases(host: HostCpu, emulated: bool, key_mode: KeyMode, size_bytes: u64, t: &Thresholds) -> Vec<SlowCase> {
    let mut cases = Vec::new();
    for &algorithm in cipherfleet_core::algorithm::ALL.iter() {
        for &path_used in PathUsed::ALL {
            for below_near in [false, true] {
                if judge_below(
                    algorithm, key_mode, host, path_used, below_near, emulated, size_bytes, t,
                )
                .is_some()
                {
                    cases.push(SlowCase {
                        algorithm,
                        path_used,
                        below_near,
                    });
                }
            }
        }
    }
    cases
}

/// Whether an open finding (`reason`, `subject`) explains `algorithm` with
/// `key_mode` running slow on its host: a slow-path finding only its own
/// algorithm; a missing or hidden feature (the subject) what uses its
/// primitive (AES, GHASH, ChaCha20/Poly1305, SHA-256); disabled AVX state
/// what uses it (GCM's GHASH, ChaCha20's vector code); a primitive that
/// ran in software against the facts what uses it; a software build
/// everything with a hardware path; the kernel's or OpenSSL's fallback nothing
/// the built-in crates measure.
pub fn explains(reason: &str, subject: &str, algorithm: Algorithm, key_mode: KeyMode) -> bool {
    if reason == "slow-accelerated" {
        return subject == algorithm.name();
    }
    match reason {
        // Findings stored before one per feature list several: any counts.
        // The primitive that ran in software against the facts.
        super::unexplained::REASON => Primitive::named(subject).is_some_and(|p| p.used_by(algorithm, key_mode)),
        "cpu-lacks" | "hypervisor-masks" => subject
            .split(',')
            .filter_map(|f| primitive_of(f.trim()))
            .any(|p| p.used_by(algorithm, key_mode)),
        "os-disabled" => algorithm.mode == Mode::Gcm || algorithm.cipher == Cipher::ChaCha20,
        "software-build" => has_hardware_path(algorithm),
        // Other providers' fallbacks (`kernel-crypto-generic`, `openssl-masked`,
        // `openssl-no-acceleration`): the built-in crates' figures do not run through them.
        _ => false,
    }
}

/// [`explains`] for `algorithm` measured on `provider`. The built-in crates'
/// is [`explains`]. On another provider the CPU's findings explain what they
/// explain on the crates (its instructions are missing or hidden from every
/// library alike); a slow path only when it names the provider
/// (`openssl/aes-256-gcm`); the kernel's AES driver the kernel's AES, a
/// masked OpenSSL what has a hardware path there and OpenSSL running AES at
/// its software speed its AES; and nothing else (the agent's software build
/// and the crates' own fallback are the crates').
pub fn explains_on(provider: Provider, reason: &str, subject: &str, algorithm: Algorithm, key_mode: KeyMode) -> bool {
    if provider.is_rustcrypto() {
        return explains(reason, subject, algorithm, key_mode);
    }
    match reason {
        "slow-accelerated" => subject
            .split_once('/')
            .is_some_and(|(p, a)| p == provider.as_str() && a == algorithm.name()),
        "cpu-lacks" | "hypervisor-masks" | "os-disabled" => explains(reason, subject, algorithm, key_mode),
        "kernel-crypto-generic" => provider == Provider::Kernel && algorithm.uses_aes(),
        "openssl-masked" => provider == Provider::Openssl && has_hardware_path(algorithm),
        "openssl-no-acceleration" => provider == Provider::Openssl && algorithm.uses_aes(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// name, algorithm, arch, what ran, ratio, emulated, payload bytes → verdict.
    type Case = (
        &'static str,
        &'static str,
        Option<&'static str>,
        Option<PathUsed>,
        Option<f64>,
        bool,
        u64,
        Option<SoftwareSpeed>,
    );

    #[test]
    fn software_speed_means_a_fallback_or_a_ratio_under_the_deriver_threshold() {
        use SoftwareSpeed::{NearSoftware, RanPartial, RanSoftware};
        let t = Thresholds::default();
        let (near, big) = (t.near_software_ratio, t.near_software_min_size_bytes);
        let (acc, part, soft) = (
            Some(PathUsed::Accelerated),
            Some(PathUsed::Partial),
            Some(PathUsed::Software),
        );
        let (x86, arm) = (Some("x86_64"), Some("aarch64"));
        let gcm = "aes-128-gcm";
        let cases: [Case; 15] = [
            ("healthy", gcm, x86, acc, Some(near * 4.0), false, big, None),
            ("fell back", gcm, x86, soft, Some(1.0), false, big, Some(RanSoftware)),
            (
                "fell back, software unmeasured",
                gcm,
                x86,
                soft,
                None,
                false,
                big,
                Some(RanSoftware),
            ),
            (
                "GHASH in software",
                gcm,
                x86,
                part,
                Some(2.0),
                false,
                big,
                Some(RanPartial),
            ),
            (
                "a partial path is not asked to beat software by the ratio",
                "aes-128-cbc-hmac-sha256",
                None,
                part,
                Some(1.1),
                false,
                big,
                Some(RanPartial),
            ),
            (
                "slow hardware",
                gcm,
                x86,
                acc,
                Some(near * 0.9),
                false,
                big,
                Some(NearSoftware),
            ),
            (
                "at the threshold is not under it",
                gcm,
                x86,
                acc,
                Some(near),
                false,
                big,
                None,
            ),
            (
                "small payloads converge",
                gcm,
                x86,
                acc,
                Some(1.0),
                false,
                big - 1,
                None,
            ),
            (
                "emulated timings are not judged",
                gcm,
                x86,
                acc,
                Some(1.0),
                true,
                big,
                None,
            ),
            (
                "but an emulated fallback is real",
                gcm,
                x86,
                soft,
                Some(1.0),
                true,
                big,
                Some(RanSoftware),
            ),
            (
                "3DES has no hardware path anywhere",
                "des-ede3-cbc",
                x86,
                soft,
                Some(1.0),
                false,
                big,
                None,
            ),
            (
                "ChaCha20 on SSE2 fell back on x86",
                "chacha20-poly1305",
                x86,
                soft,
                Some(1.5),
                false,
                big,
                Some(RanSoftware),
            ),
            (
                "ChaCha20 on NEON is the best ARM has",
                "chacha20-poly1305",
                arm,
                soft,
                Some(1.5),
                false,
                big,
                None,
            ),
            (
                "ARM GCM falls back like any",
                gcm,
                arm,
                soft,
                None,
                false,
                big,
                Some(RanSoftware),
            ),
            ("no accelerated result", gcm, x86, None, None, false, big, None),
        ];
        for (name, alg, arch, used, ratio, emulated, size, want) in cases {
            let host = HostCpu { arch, advertised: None };
            assert_eq!(
                judge(
                    alg.parse().unwrap(),
                    KeyMode::Static,
                    host,
                    used,
                    ratio,
                    emulated,
                    size,
                    &t
                ),
                want,
                "{name}"
            );
        }
        assert_eq!(ratio(Some(300.0), Some(100.0)), Some(3.0));
        assert_eq!(ratio(Some(300.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(100.0)), None);
    }

    #[test]
    fn slow_cases_are_exactly_the_inputs_judge_finds_slow() {
        let t = Thresholds::default();
        let features = ["aes".to_string(), "avx".to_string()];
        let hosts = [
            HostCpu::default(),
            HostCpu {
                arch: Some("x86_64"),
                advertised: Some(&features),
            },
            HostCpu {
                arch: Some("aarch64"),
                advertised: None,
            },
        ];
        let ratios = [None, Some(0.5), Some(t.near_software_ratio), Some(8.0)];
        for host in hosts {
            for emulated in [false, true] {
                for size in [16, t.near_software_min_size_bytes] {
                    let cases = slow_cases(host, emulated, KeyMode::Static, size, &t);
                    assert!(!cases.is_empty());
                    for &a in cipherfleet_core::algorithm::ALL.iter() {
                        for &used in PathUsed::ALL {
                            for r in ratios {
                                let slow = judge(a, KeyMode::Static, host, Some(used), r, emulated, size, &t).is_some();
                                let case = SlowCase {
                                    algorithm: a,
                                    path_used: used,
                                    below_near: below_near_software(r, &t),
                                };
                                assert_eq!(cases.contains(&case), slow, "{host:?} {emulated} {size} {case:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn what_a_cpu_never_had_is_no_fallback_unless_it_is_aes_or_ghash() {
        use SoftwareSpeed::{RanPartial, RanSoftware};
        let t = Thresholds::default();
        let list = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cascade_lake = list(&["aes", "pclmulqdq", "avx", "avx2"]);
        let with_sha = list(&["aes", "pclmulqdq", "avx", "avx2", "sha"]);
        let ivy_bridge = list(&["aes", "pclmulqdq", "avx"]);
        let westmere_no_clmul = list(&["aes"]);
        let hmac = "aes-128-cbc-hmac-sha256";
        let cases = [
            ("CBC-HMAC without SHA-NI", hmac, &cascade_lake, PathUsed::Partial, None),
            (
                "CBC-HMAC, SHA-NI unused",
                hmac,
                &with_sha,
                PathUsed::Partial,
                Some(RanPartial),
            ),
            (
                "ChaCha20 without AVX2",
                "chacha20-poly1305",
                &ivy_bridge,
                PathUsed::Software,
                None,
            ),
            (
                "ChaCha20, AVX2 off in XCR0",
                "chacha20-poly1305",
                &cascade_lake,
                PathUsed::Software,
                Some(RanSoftware),
            ),
            (
                "GCM without PCLMULQDQ",
                "aes-256-gcm",
                &westmere_no_clmul,
                PathUsed::Partial,
                Some(RanPartial),
            ),
        ];
        for (name, alg, advertised, used, want) in cases {
            let host = HostCpu {
                arch: Some("x86_64"),
                advertised: Some(advertised),
            };
            let got = judge(
                alg.parse().unwrap(),
                KeyMode::Static,
                host,
                Some(used),
                None,
                false,
                16384,
                &t,
            );
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn findings_explain_only_the_algorithms_they_concern() {
        let s = KeyMode::Static;
        let cases = [
            ("software-build", "build", "chacha20-poly1305", s, true),
            ("software-build", "build", "des-ede3-cbc", s, false),
            ("cpu-lacks", "aes", "aes-256-gcm", s, true),
            ("cpu-lacks", "aes", "chacha20-poly1305", s, false),
            ("cpu-lacks", "pclmulqdq", "aes-128-gcm", s, true),
            ("cpu-lacks", "pclmulqdq", "aes-128-cbc", s, false),
            ("cpu-lacks", "avx", "aes-128-gcm", s, true),
            ("cpu-lacks", "avx2", "chacha20-poly1305", s, true),
            ("cpu-lacks", "sha", "aes-128-cbc-hmac-sha256", s, true),
            ("cpu-lacks", "sha", "aes-128-ctr", s, false),
            ("cpu-lacks", "sha", "aes-128-ctr", KeyMode::HkdfPerUser, true),
            ("cpu-lacks", "aes,pclmulqdq", "aes-128-cbc", s, true),
            ("hypervisor-masks", "aes", "aes-128-cbc", s, true),
            ("hypervisor-masks", "pmull", "aes-128-gcm", s, true),
            ("os-disabled", "avx-state", "aes-128-gcm", s, true),
            ("os-disabled", "avx-state", "chacha20-poly1305", s, true),
            ("os-disabled", "avx-state", "aes-128-cbc", s, false),
            ("slow-accelerated", "aes-128-gcm", "aes-128-gcm", s, true),
            ("slow-accelerated", "aes-128-gcm", "aes-256-gcm", s, false),
            ("unexplained-fallback", "aes", "aes-128-cbc", s, true),
            ("unexplained-fallback", "ghash", "aes-128-cbc", s, false),
            ("unexplained-fallback", "ghash", "aes-256-gcm", s, true),
            ("kernel-crypto-generic", "kernel-aes", "aes-256-gcm", s, false),
            ("openssl-masked", "openssl", "aes-128-cbc", s, false),
            ("openssl-no-acceleration", "openssl-aes", "aes-256-gcm", s, false),
            ("unexplained-fallback", "chacha20", "chacha20-poly1305", s, true),
        ];
        for (reason, subject, alg, key_mode, want) in cases {
            assert_eq!(
                explains(reason, subject, alg.parse().unwrap(), key_mode),
                want,
                "{reason} {subject} on {alg} ({key_mode})"
            );
            assert_eq!(
                explains_on(Provider::RustCrypto, reason, subject, alg.parse().unwrap(), key_mode),
                want,
                "the built-in crates: {reason} {subject} on {alg} ({key_mode})"
            );
        }
    }

    #[test]
    fn another_providers_rows_are_explained_by_the_cpu_and_its_own_findings() {
        use Provider::{Kernel, Openssl, Ring};
        let s = KeyMode::Static;
        let cases: [(Provider, &str, &str, &str, bool); 13] = [
            (Openssl, "cpu-lacks", "aes", "aes-256-gcm", true),
            (Ring, "hypervisor-masks", "aes", "aes-128-gcm", true),
            (Kernel, "os-disabled", "avx-state", "aes-128-gcm", true),
            (Openssl, "slow-accelerated", "openssl/aes-256-gcm", "aes-256-gcm", true),
            (Openssl, "slow-accelerated", "aes-256-gcm", "aes-256-gcm", false),
            (Ring, "slow-accelerated", "openssl/aes-256-gcm", "aes-256-gcm", false),
            (Kernel, "kernel-crypto-generic", "kernel-aes", "aes-256-gcm", true),
            (
                Kernel,
                "kernel-crypto-generic",
                "kernel-aes",
                "chacha20-poly1305",
                false,
            ),
            (Openssl, "kernel-crypto-generic", "kernel-aes", "aes-256-gcm", false),
            (Openssl, "openssl-masked", "openssl", "chacha20-poly1305", true),
            (Openssl, "openssl-no-acceleration", "openssl-aes", "aes-128-gcm", true),
            (Kernel, "openssl-no-acceleration", "openssl-aes", "aes-128-gcm", false),
            // The agent's software build is the built-in crates'.
            (Openssl, "software-build", "build", "aes-256-gcm", false),
        ];
        for (provider, reason, subject, alg, want) in cases {
            assert_eq!(
                explains_on(provider, reason, subject, alg.parse().unwrap(), s),
                want,
                "{reason} {subject} on {provider}'s {alg}"
            );
        }
    }
}
