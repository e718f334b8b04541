//! The named suites shared by `bench --suite` and the coordinator's campaigns.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::matrix::{counters, rustcrypto};
use super::{Direction, Execution, InvalidSpec, JobSpec, KeyMode, MAX_THREADS, Matrix, Nonce, SIZES, invalid};
use crate::algorithm::{self, Algorithm};
use crate::path::Path;
use crate::provider::Provider;

/// The named matrices shared by `bench --suite` and the coordinator's campaigns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// Six headline algorithms at 16 B, 1 KiB and 16 KiB, encrypt, one thread,
    /// accelerated path, 0.5 s a point: under a minute.
    Quick,
    /// Every AES-128/256 mode, the ChaCha20 family, DES and 3DES-CBC at field- to
    /// MiB-sized payloads, both directions and both paths, 1 s a point.
    Standard,
    /// Every algorithm, size, direction, key mode and path at 1 thread and at all
    /// cores, plus the object-storage scenario (32 × 10 MiB). Takes hours.
    Full,
    /// Object storage: AES-256-GCM, AES-128-CBC+HMAC-SHA256 and ChaCha20-Poly1305
    /// on 10 MiB objects, 32 in flight, threads = the host's logical cores (at most
    /// 32, since 32 objects keep at most 32 threads busy), encrypt and decrypt,
    /// 2 s a point: about 20 s.
    ObjectStorage,
    /// Legacy migration: DES, 3DES, AES-128 and AES-256 in CBC at 16 B and 16 KiB,
    /// with key setup every operation (per-op) and with a static key for the bulk
    /// rate, encrypt, one thread, 1 s a point: about 20 s (3DES on a slow core
    /// extends its points to reach the samples).
    LegacyMigration,
    /// AES-256 in ECB, CBC, CTR, GCM, CCM and OCB at 16 KiB, encrypt and decrypt,
    /// at one thread and at all cores, 1 s a point: about 30 s.
    Modes,
    /// The accelerated and software paths of AES-256-GCM, AES-256-CTR and
    /// ChaCha20-Poly1305 at 16 B and 16 KiB, encrypt, one thread, 1 s a point:
    /// about 15 s.
    Fallback,
    /// Field-level encryption: 11 B and 18 B (a phone number, an ID card number)
    /// with AES-256-GCM, AES-128-GCM and ChaCha20-Poly1305 under static, per-op and
    /// hkdf-per-user keys, encrypt and decrypt, one thread, with counter nonces;
    /// plus each field encrypted under a static key with random nonces (12 or 24
    /// bytes from the OS per message). 0.5 s a point: about 30 s.
    FieldLevel,
    /// What the quickstart runs: enough for every page and every scenario view
    /// to have its answer. On every host, quick's algorithms and sizes and the
    /// scenarios' other algorithms at 16 KiB, on both paths (the software one
    /// where the host has the sibling); on native hosts also the points each
    /// scenario view reads, and no others (encryptions only where a view
    /// compares encryptions; objects of 1 MiB). 0.5 s a point. Emulated hosts
    /// skip the scenario points: the views leave them out, and object storage
    /// under an emulator would take minutes.
    Tour,
    /// Providers: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, AES-128-CBC and
    /// AES-256-CTR at 16 B, 1 KiB, 16 KiB and 10 MiB, encrypt, one thread, on
    /// both paths, on every provider (RustCrypto, ring, the host's OpenSSL, the
    /// kernel): each provider only where it runs the point (ring: its AEADs on
    /// the accelerated path), and a host skips the providers its agent lacks,
    /// with the reason. 1 s a point (OpenSSL's at least 3 s): a few minutes.
    Providers,
}

/// Every named suite, in the order `--list` and errors name them.
pub const SUITES: &[Suite] = &[
    Suite::Quick,
    Suite::Standard,
    Suite::Full,
    Suite::ObjectStorage,
    Suite::LegacyMigration,
    Suite::Modes,
    Suite::Fallback,
    Suite::FieldLevel,
    Suite::Tour,
    Suite::Providers,
];

/// The suites' names, comma separated, for `--help`, `--list` and errors.
pub fn suite_names() -> String {
    SUITES.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

impl FromStr for Suite {
    type Err = InvalidSpec;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SUITES
            .iter()
            .copied()
            .find(|suite| suite.name() == s)
            .ok_or_else(|| invalid("--suite", format!("unknown suite '{s}'; accepted: {}", suite_names())))
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub(crate) fn algs(names: &[&str]) -> Vec<Algorithm> {
    names
        .iter()
        .map(|n| n.parse().expect("suite names are valid"))
        .collect()
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Objects in flight in the object-storage scenario.
pub const OBJECT_STORAGE_IN_FLIGHT: u32 = 32;
/// The object size of the object-storage scenario.
pub const OBJECT_STORAGE_SIZE: u64 = 10 * MIB;
/// Measured seconds of each tour point.
const TOUR_SECONDS: f64 = 0.5;
/// The tour's objects, 32 in flight: a tenth of the scenario's 10 MiB, so that a
/// native host whose AES runs in software (the software build) still answers in
/// seconds. Per-core rates and the recommendation come out as at 10 MiB; P99 per
/// object is for 1 MiB (the view names the size), `object-storage` measures 10 MiB.
const TOUR_OBJECT_SIZE: u64 = MIB;

impl Suite {
    /// The name `--suite` takes.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Quick => "quick",
            Suite::Standard => "standard",
            Suite::Full => "full",
            Suite::ObjectStorage => "object-storage",
            Suite::LegacyMigration => "legacy-migration",
            Suite::Modes => "modes",
            Suite::Fallback => "fallback",
            Suite::FieldLevel => "field-level",
            Suite::Tour => "tour",
            Suite::Providers => "providers",
        }
    }

    /// The suite's matrices on a native host; `cores` is the host's logical
    /// core count (for thread scaling). Matrices of one suite may share points
    /// (the tour's do): [`expand`](Self::expand) keeps each once.
    pub fn matrices(self, cores: u32) -> Vec<Matrix> {
        self.matrices_on(cores, Execution::Native)
    }

    /// The suite's matrices on a host whose workers run `execution`: only the
    /// tour differs under an emulator.
    pub fn matrices_on(self, cores: u32, execution: Execution) -> Vec<Matrix> {
        let both_dirs = vec![Direction::Encrypt, Direction::Decrypt];
        let both_paths = vec![Path::Accelerated, Path::Software];
        match self {
            Suite::Quick => vec![Matrix {
                algorithms: algs(&[
                    "aes-128-gcm",
                    "aes-256-gcm",
                    "chacha20-poly1305",
                    "aes-128-cbc",
                    "aes-256-ctr",
                    "des-ede3-cbc",
                ]),
                sizes: vec![16, KIB, 16 * KIB],
                directions: vec![Direction::Encrypt],
                threads: vec![1],
                concurrency: None,
                key_modes: vec![KeyMode::Static],
                paths: vec![Path::Accelerated],
                nonces: counters(),
                providers: rustcrypto(),
                seconds: 0.5,
            }],
            Suite::Standard => vec![Matrix {
                algorithms: algorithm::ALL
                    .iter()
                    .copied()
                    .filter(|a| !a.name().starts_with("aes-192") && !a.name().ends_with("-ecb"))
                    .collect(),
                sizes: vec![11, 18, 64, KIB, 16 * KIB, MIB],
                directions: both_dirs,
                threads: vec![1],
                concurrency: None,
                key_modes: vec![KeyMode::Static],
                paths: both_paths,
                nonces: counters(),
                providers: rustcrypto(),
                seconds: 1.0,
            }],
            Suite::Full => {
                let mut threads = vec![1, cores.clamp(1, MAX_THREADS)];
                threads.dedup();
                vec![
                    Matrix {
                        algorithms: algorithm::ALL.to_vec(),
                        sizes: SIZES.to_vec(),
                        directions: both_dirs.clone(),
                        threads,
                        concurrency: None,
                        key_modes: vec![KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser],
                        paths: both_paths.clone(),
                        nonces: counters(),
                        providers: rustcrypto(),
                        seconds: 1.0,
                    },
                    Matrix {
                        algorithms: algs(&[
                            "aes-128-gcm",
                            "aes-256-gcm",
                            "chacha20-poly1305",
                            "aes-256-cbc-hmac-sha256",
                        ]),
                        sizes: vec![OBJECT_STORAGE_SIZE],
                        directions: both_dirs,
                        threads: vec![cores.clamp(1, OBJECT_STORAGE_IN_FLIGHT)],
                        concurrency: Some(OBJECT_STORAGE_IN_FLIGHT),
                        key_modes: vec![KeyMode::Static],
                        paths: both_paths,
                        nonces: counters(),
                        providers: rustcrypto(),
                        seconds: 3.0,
                    },
                ]
            }
            Suite::ObjectStorage => vec![Matrix {
                algorithms: algs(&["aes-256-gcm", "aes-128-cbc-hmac-sha256", "chacha20-poly1305"]),
                sizes: vec![OBJECT_STORAGE_SIZE],
                directions: both_dirs,
                threads: vec![cores.clamp(1, OBJECT_STORAGE_IN_FLIGHT)],
                concurrency: Some(OBJECT_STORAGE_IN_FLIGHT),
                key_modes: vec![KeyMode::Static],
                paths: vec![Path::Accelerated],
                nonces: counters(),
                providers: rustcrypto(),
                seconds: 2.0,
            }],
            Suite::LegacyMigration => vec![Matrix {
                algorithms: algs(&["des-cbc", "des-ede3-cbc", "aes-128-cbc", "aes-256-cbc"]),
                sizes: vec![16, 16 * KIB],
                directions: vec![Direction::Encrypt],
                threads: vec![1],
                concurrency: None,
                key_modes: vec![KeyMode::PerOp, KeyMode::Static],
                paths: vec![Path::Accelerated],
                nonces: counters(),
                providers: rustcrypto(),
                seconds: 1.0,
            }],
            Suite::Modes => {
                let mut threads = vec![1, cores.clamp(1, MAX_THREADS)];
                threads.dedup();
                vec![Matrix {
                    algorithms: algs(&[
                        "aes-256-ecb",
                        "aes-256-cbc",
                        "aes-256-ctr",
                        "aes-256-gcm",
                        "aes-256-ccm",
                        "aes-256-ocb",
                    ]),
                    sizes: vec![16 * KIB],
                    directions: both_dirs,
                    threads,
                    concurrency: None,
                    key_modes: vec![KeyMode::Static],
                    paths: vec![Path::Accelerated],
                    nonces: counters(),
                    providers: rustcrypto(),
                    seconds: 1.0,
                }]
            }
            Suite::Fallback => vec![Matrix {
                algorithms: algs(&["aes-256-gcm", "aes-256-ctr", "chacha20-poly1305"]),
                sizes: vec![16, 16 * KIB],
                directions: vec![Direction::Encrypt],
                threads: vec![1],
                concurrency: None,
                key_modes: vec![KeyMode::Static],
                paths: both_paths,
                nonces: counters(),
                providers: rustcrypto(),
                seconds: 1.0,
            }],
            Suite::FieldLevel => {
                let counter = Matrix {
                    algorithms: algs(&["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"]),
                    sizes: vec![11, 18],
                    directions: both_dirs,
                    threads: vec![1],
                    concurrency: None,
                    key_modes: vec![KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser],
                    paths: vec![Path::Accelerated],
                    nonces: counters(),
                    providers: rustcrypto(),
                    seconds: 0.5,
                };
                // The same fields under one static key with a nonce from the OS per message:
                // what random nonces cost, set against the counter points above.
                let random = Matrix {
                    directions: vec![Direction::Encrypt],
                    key_modes: vec![KeyMode::Static],
                    nonces: vec![Nonce::Random],
                    ..counter.clone()
                };
                vec![counter, random]
            }
            Suite::Providers => vec![Matrix {
                algorithms: algs(&[
                    "aes-128-gcm",
                    "aes-256-gcm",
                    "chacha20-poly1305",
                    "aes-128-cbc",
                    "aes-256-ctr",
                ]),
                sizes: vec![16, KIB, 16 * KIB, 10 * MIB],
                directions: vec![Direction::Encrypt],
                threads: vec![1],
                concurrency: None,
                key_modes: vec![KeyMode::Static],
                paths: both_paths,
                nonces: counters(),
                providers: Provider::ALL.to_vec(),
                seconds: 1.0,
            }],
            Suite::Tour => {
                let quick = Matrix {
                    paths: both_paths,
                    seconds: TOUR_SECONDS,
                    ..Suite::Quick.matrices(cores).remove(0)
                };
                let scenarios = scenario_points(cores);
                // The scenarios' other algorithms at 16 KiB on both paths, on every host: the
                // comparison matrix and /fallback then have every cell for every host.
                let mut others: Vec<Algorithm> = Vec::new();
                for a in scenarios.iter().flat_map(|m| m.algorithms.iter().copied()) {
                    if !quick.algorithms.contains(&a) && !others.contains(&a) {
                        others.push(a);
                    }
                }
                let mut matrices = vec![
                    quick.clone(),
                    Matrix {
                        algorithms: others,
                        sizes: vec![16 * KIB],
                        ..quick
                    },
                ];
                if execution == Execution::Native {
                    matrices.extend(scenarios);
                }
                matrices
            }
        }
    }

    /// Every point of the suite on a native host, each once.
    pub fn expand(self, cores: u32) -> Vec<JobSpec> {
        self.expand_on(cores, Execution::Native)
    }

    /// Every point of the suite on a host whose workers run `execution`, each once.
    pub fn expand_on(self, cores: u32, execution: Execution) -> Vec<JobSpec> {
        expand_all(&self.matrices_on(cores, execution))
    }
}

/// Every point of `matrices` in their order, a point that an earlier matrix
/// already has left out.
pub fn expand_all(matrices: &[Matrix]) -> Vec<JobSpec> {
    let mut seen = HashSet::new();
    matrices
        .iter()
        .flat_map(Matrix::points)
        .filter(|p| seen.insert(p.point))
        .collect()
}

/// The tour's share of each scenario suite: the points its view reads, at
/// [`TOUR_SECONDS`] (`fallback`'s are all in the tour's first matrix). Taken
/// from the scenario suites themselves, so the views keep reading them.
fn scenario_points(cores: u32) -> Vec<Matrix> {
    let short = |m: Matrix| Matrix {
        seconds: TOUR_SECONDS,
        ..m
    };
    let encrypt = || vec![Direction::Encrypt];
    let mut matrices = Vec::new();
    // object-storage compares encryptions of its objects, here of 1 MiB.
    for m in Suite::ObjectStorage.matrices(cores) {
        matrices.push(short(Matrix {
            directions: encrypt(),
            sizes: vec![TOUR_OBJECT_SIZE],
            ..m
        }));
    }
    // legacy-migration: 16 KiB under both key handlings, 16 B with a key setup per operation.
    let legacy = Suite::LegacyMigration.matrices(cores).remove(0);
    matrices.push(short(Matrix {
        sizes: vec![16 * KIB],
        ..legacy.clone()
    }));
    matrices.push(short(Matrix {
        sizes: vec![16],
        key_modes: vec![KeyMode::PerOp],
        ..legacy
    }));
    // modes: one thread both ways, and encryption at all cores for the speed-up.
    let modes = Suite::Modes.matrices(cores).remove(0);
    let all_cores = modes.threads.iter().copied().filter(|&t| t > 1).collect::<Vec<_>>();
    matrices.push(short(Matrix {
        threads: vec![1],
        ..modes.clone()
    }));
    if !all_cores.is_empty() {
        matrices.push(short(Matrix {
            threads: all_cores,
            directions: encrypt(),
            ..modes
        }));
    }
    // field-level's costs are of encryptions.
    for m in Suite::FieldLevel.matrices(cores) {
        matrices.push(short(Matrix {
            directions: encrypt(),
            ..m
        }));
    }
    matrices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_are_valid_and_quick_is_small() {
        for &suite in SUITES {
            for m in suite.matrices(2) {
                m.validate().unwrap();
            }
        }
        let quick = Suite::Quick.expand(2);
        assert_eq!(quick.len(), 18);
        let budget: f64 = quick.iter().map(|p| p.seconds + p.warmup_seconds()).sum();
        assert!(budget < 20.0, "quick suite measures for {budget} s");
        assert!(
            Suite::Full
                .expand(8)
                .iter()
                .any(|p| p.point.concurrency == Some(32) && p.point.size_bytes == 10 << 20)
        );
        assert_eq!("fast".parse::<Suite>().unwrap_err().flag, "--suite");
    }

    #[test]
    fn every_suite_reads_back_from_its_name() {
        for &suite in SUITES {
            assert_eq!(suite.name().parse::<Suite>(), Ok(suite));
            assert_eq!(suite.to_string(), suite.name());
        }
        let e = "object_storage".parse::<Suite>().unwrap_err();
        assert!(
            e.message.contains("object-storage") && e.message.contains("field-level"),
            "{e}"
        );
    }

    #[test]
    fn scenario_suites_measure_for_seconds_per_point_and_under_a_minute() {
        for suite in [
            Suite::ObjectStorage,
            Suite::LegacyMigration,
            Suite::Modes,
            Suite::Fallback,
            Suite::FieldLevel,
        ] {
            let points = suite.expand(8);
            let budget: f64 = points.iter().map(|p| p.seconds + p.warmup_seconds()).sum();
            assert!(budget < 60.0, "{suite} measures for {budget} s");
            assert!(points.iter().all(|p| p.seconds <= 2.0), "{suite}");
        }
    }

    #[test]
    fn object_storage_runs_32_objects_of_10_mib_on_as_many_threads_as_cores() {
        for (cores, threads) in [(1, 1), (8, 8), (64, 32)] {
            let points = Suite::ObjectStorage.expand(cores);
            assert_eq!(points.len(), 3 * 2);
            assert!(points.iter().all(|p| p.point.concurrency == Some(32)
                && p.point.size_bytes == 10 << 20
                && p.point.threads == threads));
        }
    }

    #[test]
    fn scenario_suites_ask_for_what_their_questions_need() {
        let modes = Suite::Modes.expand(4);
        assert_eq!(modes.len(), 6 * 2 * 2);
        assert!(modes.iter().any(|p| p.point.threads == 4) && modes.iter().any(|p| p.point.threads == 1));
        assert_eq!(Suite::Modes.expand(1).len(), 6 * 2, "one core: one thread count");
        let legacy = Suite::LegacyMigration.expand(2);
        assert!(
            legacy
                .iter()
                .any(|p| p.point.key_mode == KeyMode::PerOp && p.point.algorithm.name() == "des-ede3-cbc")
        );
        let fallback = Suite::Fallback.expand(2);
        assert_eq!(fallback.iter().filter(|p| p.point.path == Path::Software).count(), 6);
        let field = Suite::FieldLevel.expand(2);
        assert!(
            field
                .iter()
                .all(|p| p.point.size_bytes == 11 || p.point.size_bytes == 18)
        );
        assert_eq!(
            field
                .iter()
                .filter(|p| p.point.key_mode == KeyMode::HkdfPerUser)
                .count(),
            3 * 2 * 2
        );
        // Counter and random nonces at both sizes, random ones encrypting under a static key.
        let random: Vec<&JobSpec> = field.iter().filter(|p| p.point.nonce == Nonce::Random).collect();
        assert_eq!(random.len(), 3 * 2);
        assert!(
            random
                .iter()
                .all(|p| p.point.direction == Direction::Encrypt && p.point.key_mode == KeyMode::Static)
        );
        for size in [11, 18] {
            for nonce in [Nonce::Counter, Nonce::Random] {
                assert!(
                    field
                        .iter()
                        .any(|p| p.point.size_bytes == size && p.point.nonce == nonce)
                );
            }
        }
        // Every other suite uses counters (the tour takes field-level's random nonces too).
        for &suite in SUITES.iter().filter(|s| !matches!(s, Suite::FieldLevel | Suite::Tour)) {
            assert!(suite.expand(2).iter().all(|p| p.point.nonce.is_counter()), "{suite}");
        }
    }

    #[test]
    fn the_tour_measures_each_point_once_and_only_quick_on_emulated_hosts() {
        let native = Suite::Tour.expand(2);
        let distinct: HashSet<_> = native.iter().map(|p| p.point).collect();
        assert_eq!(distinct.len(), native.len(), "a point twice");
        // quick's 18 points on both paths everywhere, and the scenarios' six other algorithms
        // (modes', des-cbc and the object's CBC+HMAC) at 16 KiB.
        let emulated = Suite::Tour.expand_on(2, Execution::Emulated);
        assert_eq!(emulated.len(), (18 + 6) * 2);
        for q in Suite::Quick.expand(2) {
            for path in [Path::Accelerated, Path::Software] {
                let point = crate::Point { path, ..q.point };
                assert!(emulated.iter().any(|p| p.point == point), "{}", q.label());
            }
        }
        // Natively, every other point is one of a scenario suite's (objects of 1 MiB), at 0.5 s.
        let scenarios: HashSet<_> = [
            Suite::ObjectStorage,
            Suite::LegacyMigration,
            Suite::Modes,
            Suite::Fallback,
            Suite::FieldLevel,
        ]
        .iter()
        .flat_map(|s| s.expand(2))
        .map(|p| match p.point.concurrency {
            Some(_) => crate::Point {
                size_bytes: TOUR_OBJECT_SIZE,
                ..p.point
            },
            None => p.point,
        })
        .collect();
        for p in native.iter().filter(|p| !emulated.contains(p)) {
            assert!(scenarios.contains(&p.point), "{}", p.label());
            assert_eq!(p.seconds, TOUR_SECONDS);
        }
        // Object storage at all cores, modes at one thread and all cores, fields at both sizes.
        assert_eq!(native.iter().filter(|p| p.point.concurrency == Some(32)).count(), 3);
        assert!(
            native
                .iter()
                .any(|p| p.point.algorithm.name() == "aes-256-ocb" && p.point.threads == 2)
        );
        assert!(Suite::Tour.expand(1).iter().all(|p| p.point.threads == 1));
        // Measuring time (with warm-ups): the fleet's wall time is in docs/performance.md.
        let budget = |points: &[JobSpec]| points.iter().map(|p| p.seconds + p.warmup_seconds()).sum::<f64>();
        assert!(budget(&native) < 75.0, "{}", budget(&native));
        assert!(budget(&emulated) < 35.0, "{}", budget(&emulated));
    }

    #[test]
    fn every_suite_point_is_one_that_can_be_measured() {
        for &suite in SUITES {
            for cores in [1, 2, 64] {
                for p in suite.expand(cores) {
                    assert_eq!(p.validate(), Ok(()), "{suite}: {}", p.label());
                }
            }
        }
        // CCM over 64 KiB stays in the suites: its nonce leaves room for the length.
        let big_ccm: Vec<JobSpec> = Suite::Full
            .expand(2)
            .into_iter()
            .filter(|p| p.point.algorithm.mode == algorithm::Mode::Ccm && p.point.size_bytes > 64 << 10)
            .collect();
        assert!(
            big_ccm.iter().any(|p| p.point.size_bytes == 10 * MIB),
            "{}",
            big_ccm.len()
        );
    }
}
