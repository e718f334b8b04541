//! What to measure: a single point ([`JobSpec`]), a request for many points
//! ([`Matrix`]), the named suites, payload-size parsing, and validation.
//!
//! Validation errors name the flag (or JSON field) and the accepted range, so
//! the CLI and, later, the coordinator can reject bad input before any work.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::algorithm::{self, Algorithm};
use crate::backend::Path;

/// Largest payload one operation may process.
pub const MAX_SIZE: u64 = 1 << 30;
/// Most worker threads one point may use.
pub const MAX_THREADS: u32 = 1024;
/// Most objects in flight in the object-storage scenario.
pub const MAX_CONCURRENCY: u32 = 4096;
/// Longest measurement of one point, in seconds.
pub const MAX_SECONDS: f64 = 600.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Encrypt,
    Decrypt,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Encrypt => "encrypt",
            Direction::Decrypt => "decrypt",
        }
    }
}

/// How keys are handled per operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyMode {
    /// One key per worker thread, expanded once.
    Static,
    /// A fresh key schedule for every operation (keys rotate through a small random set).
    PerOp,
    /// Every operation derives its user's key with HKDF-SHA256 from a master key, then expands it.
    HkdfPerUser,
}

impl KeyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyMode::Static => "static",
            KeyMode::PerOp => "per-op",
            KeyMode::HkdfPerUser => "hkdf-per-user",
        }
    }
}

/// One measurement point: everything a worker needs to run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub algorithm: Algorithm,
    pub direction: Direction,
    /// Plaintext bytes per operation.
    pub size_bytes: u64,
    /// Worker threads, each with its own cipher instance.
    pub threads: u32,
    /// Object-storage scenario: this many objects in flight on the `threads` pool,
    /// latency measured per object from submission to completion. `None`: every
    /// thread runs operations back to back.
    pub concurrency: Option<u32>,
    pub key_mode: KeyMode,
    /// The path asked for; the result's `path_used` says what really ran.
    pub path: Path,
    /// Measured time (after warm-up), in seconds.
    pub seconds: f64,
}

/// A validation failure, naming the flag and what it accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct InvalidSpec {
    pub flag: &'static str,
    pub message: String,
}

fn invalid(flag: &'static str, message: impl Into<String>) -> InvalidSpec {
    InvalidSpec {
        flag,
        message: message.into(),
    }
}

impl JobSpec {
    /// Checks every field against its accepted range.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        validate_size(self.size_bytes)?;
        validate_threads(self.threads)?;
        validate_seconds(self.seconds)?;
        if let Some(c) = self.concurrency {
            validate_concurrency(c, self.threads)?;
            if self.key_mode != KeyMode::Static {
                return Err(invalid(
                    "--key-mode",
                    format!(
                        "'{}' does not apply to the object-storage scenario (--concurrency), which measures one static key per worker thread; use --key-mode static",
                        self.key_mode.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Warm-up before sampling: a quarter of the measured time, between 50 ms and 1 s.
    pub fn warmup_seconds(&self) -> f64 {
        (self.seconds / 4.0).clamp(0.05, 1.0)
    }

    /// A compact label for progress lines and errors.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {} {} t={} {} {}",
            self.algorithm,
            self.direction.as_str(),
            format_size(self.size_bytes),
            self.threads,
            self.key_mode.as_str(),
            self.path.as_str()
        );
        if let Some(c) = self.concurrency {
            s.push_str(&format!(" c={c}"));
        }
        s
    }
}

pub fn validate_size(size: u64) -> Result<(), InvalidSpec> {
    if size == 0 || size > MAX_SIZE {
        return Err(invalid(
            "--size",
            format!("{size} bytes is out of range; accepted: 1 byte to 1 GiB"),
        ));
    }
    Ok(())
}

pub fn validate_threads(threads: u32) -> Result<(), InvalidSpec> {
    if threads == 0 || threads > MAX_THREADS {
        return Err(invalid(
            "--threads",
            format!("{threads} is out of range; accepted: 1 to {MAX_THREADS}"),
        ));
    }
    Ok(())
}

pub fn validate_seconds(seconds: f64) -> Result<(), InvalidSpec> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS) {
        return Err(invalid(
            "--seconds",
            format!("{seconds} is out of range; accepted: more than 0 and at most {MAX_SECONDS}"),
        ));
    }
    Ok(())
}

fn validate_concurrency(c: u32, threads: u32) -> Result<(), InvalidSpec> {
    if c == 0 || c > MAX_CONCURRENCY {
        return Err(invalid(
            "--concurrency",
            format!("{c} is out of range; accepted: 1 to {MAX_CONCURRENCY}"),
        ));
    }
    if c < threads {
        return Err(invalid(
            "--concurrency",
            format!(
                "{c} objects in flight cannot keep {threads} threads busy; use --concurrency of at least --threads"
            ),
        ));
    }
    Ok(())
}

/// Parses a payload size: a whole number of bytes with an optional binary suffix
/// (`k`, `K`, `KB`, `KiB` = 1024; `m`, `M`, `MB`, `MiB` = 1024²; `g`, `G`, `GB`, `GiB` = 1024³).
pub fn parse_size(s: &str) -> Result<u64, InvalidSpec> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let unparsable = || {
        invalid(
            "--size",
            format!("cannot parse '{s}'; examples: 11, 16, 1k, 16KiB, 10MiB"),
        )
    };
    let n: u64 = digits.parse().map_err(|_| unparsable())?;
    let mult: u64 = match suffix.trim() {
        "" | "b" | "B" => 1,
        "k" | "K" | "KB" | "kB" | "KiB" => 1 << 10,
        "m" | "M" | "MB" | "MiB" => 1 << 20,
        "g" | "G" | "GB" | "GiB" => 1 << 30,
        _ => return Err(unparsable()),
    };
    let size = n.checked_mul(mult).ok_or_else(unparsable)?;
    validate_size(size)?;
    Ok(size)
}

/// Formats a size the way tables show it: `16`, `1KiB`, `10MiB`.
pub fn format_size(size: u64) -> String {
    for (unit, mult) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if size >= mult && size.is_multiple_of(mult) {
            return format!("{}{unit}", size / mult);
        }
    }
    size.to_string()
}

/// A request for many points: the Cartesian product of its lists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub algorithms: Vec<Algorithm>,
    pub sizes: Vec<u64>,
    pub directions: Vec<Direction>,
    pub threads: Vec<u32>,
    /// Object-storage scenario for every point, or `None`.
    #[serde(default)]
    pub concurrency: Option<u32>,
    pub key_modes: Vec<KeyMode>,
    pub paths: Vec<Path>,
    pub seconds: f64,
}

impl Matrix {
    /// Every point, in table order (algorithm, then direction, path, key mode, threads, size).
    pub fn expand(&self) -> Vec<JobSpec> {
        let mut out = Vec::new();
        for &algorithm in &self.algorithms {
            for &direction in &self.directions {
                for &path in &self.paths {
                    for &key_mode in &self.key_modes {
                        for &threads in &self.threads {
                            for &size_bytes in &self.sizes {
                                out.push(JobSpec {
                                    algorithm,
                                    direction,
                                    size_bytes,
                                    threads,
                                    concurrency: self.concurrency,
                                    key_mode,
                                    path,
                                    seconds: self.seconds,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Validates every list and every point; empty lists are errors.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        let lists: [(&'static str, bool); 6] = [
            ("--algorithm", self.algorithms.is_empty()),
            ("--size", self.sizes.is_empty()),
            ("--direction", self.directions.is_empty()),
            ("--threads", self.threads.is_empty()),
            ("--key-mode", self.key_modes.is_empty()),
            ("--path", self.paths.is_empty()),
        ];
        if let Some((flag, _)) = lists.iter().find(|(_, empty)| *empty) {
            return Err(invalid(flag, "the list is empty"));
        }
        self.expand().iter().try_for_each(JobSpec::validate)
    }
}

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

fn algs(names: &[&str]) -> Vec<Algorithm> {
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
                        sizes: vec![11, 18, 16, 64, 256, KIB, 8 * KIB, 16 * KIB, MIB, 10 * MIB],
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
    fn sizes_parse_with_binary_suffixes() {
        let cases: &[(&str, Result<u64, &str>)] = &[
            ("11", Ok(11)),
            ("18", Ok(18)),
            ("16", Ok(16)),
            ("1k", Ok(1024)),
            ("1K", Ok(1024)),
            ("16KiB", Ok(16384)),
            ("8KB", Ok(8192)),
            ("10MiB", Ok(10 * 1024 * 1024)),
            ("1m", Ok(1 << 20)),
            ("1GiB", Ok(1 << 30)),
            (" 64 ", Ok(64)),
            ("0", Err("--size")),
            ("2GiB", Err("--size")),
            ("abc", Err("--size")),
            ("", Err("--size")),
            ("16QiB", Err("--size")),
            ("-1", Err("--size")),
            ("99999999999999999999k", Err("--size")),
        ];
        for (input, want) in cases {
            match (parse_size(input), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, *w, "{input}"),
                (Err(e), Err(flag)) => assert_eq!(e.flag, *flag, "{input}"),
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn size_errors_name_the_range() {
        let e = parse_size("0").unwrap_err().to_string();
        assert!(e.contains("--size") && e.contains("1 GiB"), "{e}");
    }

    #[test]
    fn sizes_format_back_compactly() {
        for (n, s) in [
            (11, "11"),
            (1024, "1KiB"),
            (16384, "16KiB"),
            (10 << 20, "10MiB"),
            (1536, "1536"),
        ] {
            assert_eq!(format_size(n), s);
        }
    }

    fn point() -> JobSpec {
        JobSpec {
            algorithm: "aes-256-gcm".parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes: 16,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            seconds: 1.0,
        }
    }

    #[test]
    fn validation_names_the_flag() {
        let cases: Vec<(JobSpec, Option<&str>)> = vec![
            (point(), None),
            (JobSpec { threads: 0, ..point() }, Some("--threads")),
            (
                JobSpec {
                    threads: 1025,
                    ..point()
                },
                Some("--threads"),
            ),
            (
                JobSpec {
                    threads: 1024,
                    ..point()
                },
                None,
            ),
            (
                JobSpec {
                    seconds: 0.0,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: -1.0,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: 600.5,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: f64::NAN,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    size_bytes: 0,
                    ..point()
                },
                Some("--size"),
            ),
            (
                JobSpec {
                    concurrency: Some(32),
                    threads: 2,
                    ..point()
                },
                None,
            ),
            (
                JobSpec {
                    concurrency: Some(1),
                    threads: 2,
                    ..point()
                },
                Some("--concurrency"),
            ),
            (
                JobSpec {
                    concurrency: Some(0),
                    ..point()
                },
                Some("--concurrency"),
            ),
            (
                JobSpec {
                    concurrency: Some(4),
                    key_mode: KeyMode::PerOp,
                    ..point()
                },
                Some("--key-mode"),
            ),
            (
                JobSpec {
                    key_mode: KeyMode::HkdfPerUser,
                    ..point()
                },
                None,
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(spec.validate().err().map(|e| e.flag), want, "{spec:?}");
        }
    }

    #[test]
    fn matrix_expands_to_the_cartesian_product() {
        let m = Matrix {
            algorithms: algs(&["aes-128-gcm", "chacha20-poly1305"]),
            sizes: vec![16, 1024, 16384],
            directions: vec![Direction::Encrypt, Direction::Decrypt],
            threads: vec![1, 2],
            concurrency: None,
            key_modes: vec![KeyMode::Static],
            paths: vec![Path::Accelerated],
            seconds: 0.1,
        };
        let points = m.expand();
        assert_eq!(points.len(), 2 * 3 * 2 * 2);
        assert_eq!(points[0].label(), "aes-128-gcm encrypt 16 t=1 static accelerated");
        assert_eq!(
            points.last().unwrap().label(),
            "chacha20-poly1305 decrypt 16KiB t=2 static accelerated"
        );
        let unique: std::collections::HashSet<String> = points.iter().map(JobSpec::label).collect();
        assert_eq!(unique.len(), points.len());
        assert!(m.validate().is_ok());
        assert_eq!(
            Matrix {
                sizes: vec![],
                ..m.clone()
            }
            .validate()
            .unwrap_err()
            .flag,
            "--size"
        );
        assert_eq!(Matrix { seconds: 0.0, ..m }.validate().unwrap_err().flag, "--seconds");
    }

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
    fn spec_json_round_trips_and_rejects_unknown_fields() {
        let p = JobSpec {
            concurrency: Some(4),
            threads: 2,
            ..point()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"algorithm\":\"aes-256-gcm\""), "{json}");
        assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), p);
        let extra = json.replace("\"threads\"", "\"bogus\":1,\"threads\"");
        assert!(serde_json::from_str::<JobSpec>(&extra).is_err());
    }
}
