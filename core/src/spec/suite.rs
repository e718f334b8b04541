//! The named suites shared by `bench --suite` and the coordinator's campaigns.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Direction, InvalidSpec, JobSpec, KeyMode, MAX_THREADS, Matrix, SIZES, invalid};
use crate::algorithm::{self, Algorithm};
use crate::path::Path;

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
}

impl FromStr for Suite {
    type Err = InvalidSpec;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "quick" => Ok(Suite::Quick),
            "standard" => Ok(Suite::Standard),
            "full" => Ok(Suite::Full),
            other => Err(invalid(
                "--suite",
                format!("unknown suite '{other}'; accepted: quick, standard, full"),
            )),
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Suite::Quick => "quick",
            Suite::Standard => "standard",
            Suite::Full => "full",
        })
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

impl Suite {
    /// The suite's matrices; `cores` is the host's logical core count (for thread scaling).
    pub fn matrices(self, cores: u32) -> Vec<Matrix> {
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
                        seconds: 1.0,
                    },
                    Matrix {
                        algorithms: algs(&[
                            "aes-128-gcm",
                            "aes-256-gcm",
                            "chacha20-poly1305",
                            "aes-256-cbc-hmac-sha256",
                        ]),
                        sizes: vec![10 * MIB],
                        directions: both_dirs,
                        threads: vec![cores.clamp(1, 32)],
                        concurrency: Some(32),
                        key_modes: vec![KeyMode::Static],
                        paths: both_paths,
                        seconds: 3.0,
                    },
                ]
            }
        }
    }

    /// Every point of the suite.
    pub fn expand(self, cores: u32) -> Vec<JobSpec> {
        self.matrices(cores).iter().flat_map(Matrix::expand).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_are_valid_and_quick_is_small() {
        for suite in [Suite::Quick, Suite::Standard, Suite::Full] {
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
                .any(|p| p.concurrency == Some(32) && p.size_bytes == 10 << 20)
        );
        assert_eq!("fast".parse::<Suite>().unwrap_err().flag, "--suite");
    }

    #[test]
    fn every_suite_point_is_one_that_can_be_measured() {
        for suite in [Suite::Quick, Suite::Standard, Suite::Full] {
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
            .filter(|p| p.algorithm.mode == algorithm::Mode::Ccm && p.size_bytes > 64 << 10)
            .collect();
        assert!(big_ccm.iter().any(|p| p.size_bytes == 10 * MIB), "{}", big_ccm.len());
    }
}
