//! `JobSpec` ↔ `v1::JobSpec`, plus the enum mappings shared with measurements.

use cipherfleet_proto::v1;

use super::{WireError, wire_error};
use crate::algorithm::{self, Algorithm};
use crate::path::Path;
use crate::point::Point;
use crate::provider::Provider;
use crate::spec::{Direction, JobSpec, KeyMode, Nonce};

impl From<&JobSpec> for v1::JobSpec {
    fn from(spec: &JobSpec) -> Self {
        v1::JobSpec {
            algorithm: spec.point.algorithm.name().to_string(),
            direction: direction_to_wire(spec.point.direction) as i32,
            size_bytes: spec.point.size_bytes,
            threads: spec.point.threads,
            concurrency: spec.point.concurrency,
            key_mode: key_mode_to_wire(spec.point.key_mode) as i32,
            path: path_to_wire(spec.point.path) as i32,
            nonce: nonce_to_wire(spec.point.nonce) as i32,
            provider: provider_to_wire(spec.point.provider) as i32,
            seconds: spec.seconds,
        }
    }
}

impl TryFrom<&v1::JobSpec> for JobSpec {
    type Error = WireError;

    /// Converts and validates: the result is a point a worker accepts.
    fn try_from(spec: &v1::JobSpec) -> Result<Self, WireError> {
        let algorithm: Algorithm = spec.algorithm.parse().map_err(|_| {
            wire_error(
                "spec.algorithm",
                format!(
                    "unknown algorithm {:?}; valid names: {}",
                    super::truncate(spec.algorithm.clone(), 64),
                    algorithm::valid_names()
                ),
            )
        })?;
        let direction = direction_from_wire("spec.direction", spec.direction)?;
        let key_mode = key_mode_from_wire("spec.key_mode", spec.key_mode)?;
        let path = path_from_wire("spec.path", spec.path)?;
        let nonce = nonce_from_wire("spec.nonce", spec.nonce)?;
        let provider = provider_from_wire("spec.provider", spec.provider)?;
        let out = JobSpec {
            point: Point {
                algorithm,
                direction,
                size_bytes: spec.size_bytes,
                threads: spec.threads,
                concurrency: spec.concurrency,
                key_mode,
                path,
                nonce,
                provider,
            },
            seconds: spec.seconds,
        };
        out.validate().map_err(|e| {
            // The agent's validation names its command-line flag; on the wire the field counts.
            let field = match e.flag {
                "--size" => "spec.size_bytes",
                "--threads" => "spec.threads",
                "--seconds" => "spec.seconds",
                "--concurrency" => "spec.concurrency",
                "--key-mode" => "spec.key_mode",
                "--algorithm" => "spec.algorithm",
                "--direction" => "spec.direction",
                "--path" => "spec.path",
                "--nonce" => "spec.nonce",
                "--provider" => "spec.provider",
                _ => "spec",
            };
            wire_error(field, e.message)
        })?;
        Ok(out)
    }
}

pub(super) fn direction_to_wire(direction: Direction) -> v1::Direction {
    match direction {
        Direction::Encrypt => v1::Direction::Encrypt,
        Direction::Decrypt => v1::Direction::Decrypt,
    }
}

pub(super) fn key_mode_to_wire(key_mode: KeyMode) -> v1::KeyMode {
    match key_mode {
        KeyMode::Static => v1::KeyMode::Static,
        KeyMode::PerOp => v1::KeyMode::PerOp,
        KeyMode::HkdfPerUser => v1::KeyMode::HkdfPerUser,
    }
}

pub(super) fn path_to_wire(path: Path) -> v1::Path {
    match path {
        Path::Accelerated => v1::Path::Accelerated,
        Path::Software => v1::Path::Software,
    }
}

pub(super) fn path_from_wire(field: &str, value: i32) -> Result<Path, WireError> {
    match v1::Path::try_from(value) {
        Ok(v1::Path::Accelerated) => Ok(Path::Accelerated),
        Ok(v1::Path::Software) => Ok(Path::Software),
        Ok(v1::Path::Unspecified) => Err(wire_error(field, "unspecified")),
        Err(_) => Err(unknown_enum(field, value)),
    }
}

pub(super) fn direction_from_wire(field: &str, value: i32) -> Result<Direction, WireError> {
    match v1::Direction::try_from(value) {
        Ok(v1::Direction::Encrypt) => Ok(Direction::Encrypt),
        Ok(v1::Direction::Decrypt) => Ok(Direction::Decrypt),
        Ok(v1::Direction::Unspecified) => Err(wire_error(field, "unspecified")),
        Err(_) => Err(unknown_enum(field, value)),
    }
}

pub(super) fn key_mode_from_wire(field: &str, value: i32) -> Result<KeyMode, WireError> {
    match v1::KeyMode::try_from(value) {
        Ok(v1::KeyMode::Static) => Ok(KeyMode::Static),
        Ok(v1::KeyMode::PerOp) => Ok(KeyMode::PerOp),
        Ok(v1::KeyMode::HkdfPerUser) => Ok(KeyMode::HkdfPerUser),
        Ok(v1::KeyMode::Unspecified) => Err(wire_error(field, "unspecified")),
        Err(_) => Err(unknown_enum(field, value)),
    }
}

pub(super) fn nonce_to_wire(nonce: Nonce) -> v1::Nonce {
    match nonce {
        Nonce::Counter => v1::Nonce::Counter,
        Nonce::Random => v1::Nonce::Random,
    }
}

/// Unset (0) reads as counters, what every job meant before the field.
pub(super) fn nonce_from_wire(field: &str, value: i32) -> Result<Nonce, WireError> {
    match v1::Nonce::try_from(value) {
        Ok(v1::Nonce::Counter) => Ok(Nonce::Counter),
        Ok(v1::Nonce::Random) => Ok(Nonce::Random),
        Err(_) => Err(unknown_enum(field, value)),
    }
}

/// A provider as the protocol spells it.
pub fn provider_to_wire(provider: Provider) -> v1::Provider {
    match provider {
        Provider::RustCrypto => v1::Provider::Rustcrypto,
        Provider::Ring => v1::Provider::Ring,
        Provider::Openssl => v1::Provider::Openssl,
        Provider::Kernel => v1::Provider::Kernel,
    }
}

/// Unset (0) reads as RustCrypto, what every job meant before the field.
pub(super) fn provider_from_wire(field: &str, value: i32) -> Result<Provider, WireError> {
    match v1::Provider::try_from(value) {
        Ok(v1::Provider::Rustcrypto) => Ok(Provider::RustCrypto),
        Ok(v1::Provider::Ring) => Ok(Provider::Ring),
        Ok(v1::Provider::Openssl) => Ok(Provider::Openssl),
        Ok(v1::Provider::Kernel) => Ok(Provider::Kernel),
        Err(_) => Err(unknown_enum(field, value)),
    }
}

fn unknown_enum(field: &str, value: i32) -> WireError {
    wire_error(field, format!("unknown value {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Suite;

    fn wire_point() -> v1::JobSpec {
        v1::JobSpec {
            algorithm: "aes-128-gcm".into(),
            direction: v1::Direction::Encrypt as i32,
            size_bytes: 1024,
            threads: 1,
            concurrency: None,
            key_mode: v1::KeyMode::Static as i32,
            path: v1::Path::Accelerated as i32,
            nonce: v1::Nonce::Counter as i32,
            provider: v1::Provider::Rustcrypto as i32,
            seconds: 0.5,
        }
    }

    #[test]
    fn a_job_without_a_provider_means_rustcrypto_and_others_travel() {
        assert_eq!(
            JobSpec::try_from(&wire_point()).unwrap().point.provider,
            Provider::RustCrypto
        );
        let ring = v1::JobSpec {
            provider: v1::Provider::Ring as i32,
            ..wire_point()
        };
        let spec = JobSpec::try_from(&ring).unwrap();
        assert_eq!(spec.point.provider, Provider::Ring);
        assert_eq!(v1::JobSpec::from(&spec), ring);
        // A point the provider cannot run is refused naming the field.
        let cbc = v1::JobSpec {
            algorithm: "aes-128-cbc".into(),
            ..ring
        };
        let e = JobSpec::try_from(&cbc).unwrap_err();
        assert_eq!(e.field, "spec.provider", "{e}");
        assert!(e.message.contains("ring provider has no aes-128-cbc"), "{e}");
        let unknown = v1::JobSpec {
            provider: 9,
            ..wire_point()
        };
        assert!(
            JobSpec::try_from(&unknown)
                .unwrap_err()
                .message
                .contains("unknown value 9")
        );
    }

    #[test]
    fn every_suite_point_round_trips() {
        for suite in [Suite::Quick, Suite::Standard, Suite::Full, Suite::FieldLevel] {
            for point in suite.expand(4) {
                let wire = v1::JobSpec::from(&point);
                assert_eq!(JobSpec::try_from(&wire).unwrap(), point);
            }
        }
    }

    #[test]
    fn rejections_name_the_field() {
        let cases: Vec<(v1::JobSpec, &str, &str)> = vec![
            (
                v1::JobSpec {
                    algorithm: "aes-512-gcm".into(),
                    ..wire_point()
                },
                "spec.algorithm",
                "chacha20-poly1305",
            ),
            (
                v1::JobSpec {
                    direction: 0,
                    ..wire_point()
                },
                "spec.direction",
                "unspecified",
            ),
            (
                v1::JobSpec {
                    direction: 9,
                    ..wire_point()
                },
                "spec.direction",
                "unknown value 9",
            ),
            (
                v1::JobSpec {
                    key_mode: 0,
                    ..wire_point()
                },
                "spec.key_mode",
                "unspecified",
            ),
            (
                v1::JobSpec {
                    path: 0,
                    ..wire_point()
                },
                "spec.path",
                "unspecified",
            ),
            (
                v1::JobSpec {
                    path: -1,
                    ..wire_point()
                },
                "spec.path",
                "unknown value",
            ),
            (
                v1::JobSpec {
                    threads: 0,
                    ..wire_point()
                },
                "spec.threads",
                "1 to 1024",
            ),
            (
                v1::JobSpec {
                    size_bytes: 0,
                    ..wire_point()
                },
                "spec.size_bytes",
                "1 GiB",
            ),
            (
                v1::JobSpec {
                    seconds: f64::NAN,
                    ..wire_point()
                },
                "spec.seconds",
                "out of range",
            ),
            (
                v1::JobSpec {
                    concurrency: Some(0),
                    ..wire_point()
                },
                "spec.concurrency",
                "",
            ),
            (
                v1::JobSpec {
                    concurrency: Some(4),
                    key_mode: v1::KeyMode::PerOp as i32,
                    ..wire_point()
                },
                "spec.key_mode",
                "static",
            ),
            (
                v1::JobSpec {
                    nonce: 7,
                    ..wire_point()
                },
                "spec.nonce",
                "unknown value 7",
            ),
            (
                v1::JobSpec {
                    nonce: v1::Nonce::Random as i32,
                    algorithm: "aes-256-ctr".into(),
                    ..wire_point()
                },
                "spec.nonce",
                "nonce-based AEADs",
            ),
        ];
        for (spec, field, words) in cases {
            let err = JobSpec::try_from(&spec).unwrap_err();
            assert_eq!(err.field, field, "{spec:?}: {err}");
            assert!(err.to_string().contains(words), "{spec:?}: {err}");
        }
    }

    #[test]
    fn a_job_without_a_nonce_means_counters_and_random_ones_travel() {
        assert_eq!(v1::JobSpec::default().nonce, v1::Nonce::Counter as i32);
        assert_eq!(JobSpec::try_from(&wire_point()).unwrap().point.nonce, Nonce::Counter);
        let random = v1::JobSpec {
            nonce: v1::Nonce::Random as i32,
            ..wire_point()
        };
        let spec = JobSpec::try_from(&random).unwrap();
        assert_eq!(spec.point.nonce, Nonce::Random);
        assert_eq!(v1::JobSpec::from(&spec), random);
    }

    #[test]
    fn unknown_algorithm_names_are_quoted_and_shortened() {
        let spec = v1::JobSpec {
            algorithm: format!("evil\n{}", "x".repeat(1000)),
            ..wire_point()
        };
        let err = JobSpec::try_from(&spec).unwrap_err().to_string();
        assert!(!err.contains('\n') && err.len() < 1000, "{err}");
    }
}
