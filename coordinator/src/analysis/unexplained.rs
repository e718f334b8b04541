//! `unexplained-fallback`: an accelerated request whose worker ran a
//! primitive in software although the host's facts give it the hardware path
//! (its features usable, an accelerated build). Reasons 1–4 explain a
//! software run by the facts; this is the run the facts cannot explain — an
//! emulator or a hypervisor changing the CPU under a worker, a library that
//! stopped detecting it — and it needs one result, not a history.
//!
//! Each primitive is judged by the newest of the host's latest accelerated
//! results that use it, so the finding resolves as soon as a worker runs it
//! on hardware again, and a host's acceleration status follows the same rule.

use cipherfleet_core::algorithm::Mode;
use cipherfleet_core::path::{Backends, Flavour, Path, PathUsed};
use sqlx::types::Json;

use super::fallback::{Primitive, has_hardware_path, usable_by_facts};
use super::series::Observation;

/// The reason's spelling in `findings.reason`, `check` and `/metrics`.
pub const REASON: &str = "unexplained-fallback";

/// The latest result of one accelerated-path point, with the backends its
/// worker reported.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Ran {
    pub result_id: i64,
    /// The point, what ran, the figure, when and on which facts.
    #[sqlx(flatten)]
    pub result: Observation,
    /// `None` when the measurement carries none.
    pub backends: Option<Json<Backends>>,
}

impl Ran {
    /// Whether `primitive` ran on hardware here: by the worker's backends,
    /// else by what ran as a whole (`None` for a partial path without them:
    /// which primitive fell short is unknown).
    fn on_hardware(&self, primitive: Primitive) -> Option<bool> {
        let with_poly1305 = matches!(self.result.point.algorithm.mode, Mode::Poly1305 | Mode::XPoly1305);
        match (&self.backends, self.result.path_used) {
            (Some(b), _) => Some(primitive.ran_on_hardware(b, with_poly1305)),
            (None, PathUsed::Accelerated) => Some(true),
            (None, PathUsed::Software) => Some(false),
            (None, PathUsed::Partial) => None,
        }
    }
}

/// What the facts promise: the host's arch, usable features and build.
#[derive(Clone, Copy, Debug)]
pub struct Promise<'a> {
    pub arch: Option<&'a str>,
    pub usable: &'a [String],
    pub build_flavour: Option<Flavour>,
}

/// One primitive the facts give hardware but the latest results ran in software.
#[derive(Clone, Debug, PartialEq)]
pub struct Unexplained<'a> {
    pub primitive: Primitive,
    /// The latest results that ran it in software, newest first.
    pub in_software: Vec<&'a Ran>,
    /// The latest results that use it at all.
    pub checked: usize,
}

/// The primitives of `promise` that `latest` (one host's latest accelerated
/// results, any order) ran in software while its newest result using them did.
pub fn unexplained<'a>(promise: Promise<'_>, latest: &'a [Ran]) -> Vec<Unexplained<'a>> {
    if promise.build_flavour != Some(Flavour::Accelerated) {
        return Vec::new();
    }
    let mut newest_first: Vec<&Ran> = latest
        .iter()
        .filter(|r| r.result.point.path == Path::Accelerated && has_hardware_path(r.result.point.algorithm))
        .collect();
    newest_first.sort_by_key(|r| std::cmp::Reverse((r.result.created_at, r.result_id)));
    let mut out = Vec::new();
    for primitive in Primitive::ALL {
        if usable_by_facts(promise.arch, promise.usable, primitive) != Some(true) {
            continue;
        }
        let using: Vec<(&Ran, bool)> = newest_first
            .iter()
            .filter(|r| primitive.used_by(r.result.point.algorithm, r.result.point.key_mode))
            .filter_map(|r| r.on_hardware(primitive).map(|hw| (*r, hw)))
            .collect();
        if using.first().is_some_and(|(_, hw)| !hw) {
            out.push(Unexplained {
                primitive,
                in_software: using.iter().filter(|(_, hw)| !hw).map(|(r, _)| *r).collect(),
                checked: using.len(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use cipherfleet_core::Point;
    use cipherfleet_core::spec::{Direction, KeyMode};

    use super::*;

    fn ran(id: i64, algorithm: &str, minute: i64, backends: Option<Backends>, used: PathUsed) -> Ran {
        Ran {
            result_id: id,
            result: Observation {
                host_id: 1,
                point: Point {
                    algorithm: algorithm.parse().unwrap(),
                    direction: Direction::Encrypt,
                    size_bytes: 16384,
                    threads: 1,
                    concurrency: None,
                    key_mode: KeyMode::Static,
                    path: Path::Accelerated,
                    nonce: cipherfleet_core::spec::Nonce::Counter,
                    provider: cipherfleet_core::provider::Provider::RustCrypto,
                },
                path_used: used,
                throughput_mb_s: 100.0,
                created_at: Utc.timestamp_opt(1_700_000_000 + 60 * minute, 0).unwrap(),
                snapshot_id: Some(1),
            },
            backends: backends.map(Json),
        }
    }

    fn list(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_primitive_the_facts_allow_but_the_worker_ran_in_software_is_unexplained() {
        use PathUsed::{Accelerated as Acc, Partial, Software as Soft};
        use Primitive::{Aes, ChaCha20, Ghash, Sha256};
        let full = list(&["aes", "pclmulqdq", "avx", "avx2", "sha"]);
        let westmere = list(&["aes"]);
        let hw = Backends {
            aes: "aes-ni".into(),
            ..Backends::best_on("x86_64")
        };
        let no_ghash = Backends {
            ghash: "soft".into(),
            ..hw.clone()
        };
        let nehalem = Backends {
            chacha20: "sse2".into(),
            ..Backends::soft()
        };
        let soft = Some(Backends::soft());
        type Case<'a> = (
            &'a str,
            &'a [String],
            Option<Flavour>,
            Vec<Ran>,
            Vec<(Primitive, usize)>,
        );
        let fast = Some(Flavour::Accelerated);
        let cases: Vec<Case> = vec![
            (
                "healthy",
                &full,
                fast,
                vec![ran(1, "aes-256-gcm", 0, Some(hw.clone()), Acc)],
                vec![],
            ),
            (
                "workers under an emulated Nehalem on a host with AES-NI",
                &full,
                fast,
                vec![
                    ran(1, "aes-256-gcm", 0, Some(nehalem.clone()), Soft),
                    ran(2, "aes-128-cbc", 1, Some(nehalem.clone()), Soft),
                    ran(3, "chacha20-poly1305", 2, Some(nehalem.clone()), Soft),
                    ran(4, "aes-128-cbc-hmac-sha256", 3, Some(nehalem.clone()), Soft),
                ],
                vec![(Aes, 3), (Ghash, 1), (ChaCha20, 1), (Sha256, 1)],
            ),
            (
                "partial: GHASH in software while CLMUL and AVX are usable",
                &full,
                fast,
                vec![ran(1, "aes-128-gcm", 0, Some(no_ghash.clone()), Partial)],
                vec![(Ghash, 1)],
            ),
            (
                "partial where the facts lack GHASH: explained (cpu-lacks)",
                &westmere,
                fast,
                vec![ran(1, "aes-128-gcm", 0, Some(no_ghash.clone()), Partial)],
                vec![],
            ),
            (
                "a software build explains everything",
                &full,
                Some(Flavour::Software),
                vec![ran(1, "aes-128-gcm", 0, soft.clone(), Soft)],
                vec![],
            ),
            (
                "an unknown build promises nothing",
                &full,
                None,
                vec![ran(1, "aes-128-gcm", 0, soft.clone(), Soft)],
                vec![],
            ),
            (
                "the newest result ran on hardware again: resolved",
                &full,
                fast,
                vec![
                    ran(1, "aes-128-cbc", 0, soft.clone(), Soft),
                    ran(2, "aes-128-ctr", 5, Some(hw.clone()), Acc),
                ],
                vec![],
            ),
            (
                "3DES has no hardware path",
                &full,
                fast,
                vec![ran(1, "des-ede3-cbc", 0, soft.clone(), Soft)],
                vec![],
            ),
            (
                "no backends: a software run counts, a partial one is unknown",
                &full,
                fast,
                vec![
                    ran(1, "aes-128-cbc", 0, None, Soft),
                    ran(2, "aes-128-gcm", 1, None, Partial),
                ],
                vec![(Aes, 1)],
            ),
        ];
        for (name, usable, flavour, latest, want) in cases {
            let promise = Promise {
                arch: Some("x86_64"),
                usable,
                build_flavour: flavour,
            };
            let got: Vec<(Primitive, usize)> = unexplained(promise, &latest)
                .iter()
                .map(|u| (u.primitive, u.in_software.len()))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn chacha20_on_arm_has_nothing_to_fall_back_from() {
        let neon = Backends::best_on("aarch64");
        let usable = list(&["aes", "pmull", "sha2"]);
        let promise = Promise {
            arch: Some("aarch64"),
            usable: &usable,
            build_flavour: Some(Flavour::Accelerated),
        };
        let latest = [ran(1, "chacha20-poly1305", 0, Some(neon), PathUsed::Software)];
        assert!(unexplained(promise, &latest).is_empty());
    }

    #[test]
    fn an_old_agent_without_a_poly1305_backend_is_not_blamed_for_it() {
        let usable = list(&["aes", "pclmulqdq", "avx", "avx2"]);
        let old = Backends {
            poly1305: None,
            ..Backends::best_on("x86_64")
        };
        let promise = Promise {
            arch: Some("x86_64"),
            usable: &usable,
            build_flavour: Some(Flavour::Accelerated),
        };
        let latest = [ran(1, "chacha20-poly1305", 0, Some(old), PathUsed::Partial)];
        assert!(unexplained(promise, &latest).is_empty());
    }
}
