//! A campaign's `v1::Matrix` → [`Matrix`]: every list bounded before it is
//! read, de-duplicated, and the whole validated without expanding it; and
//! back, for a client that sends one (`campaign start --matrix`).

use cipherfleet_proto::v1;

use super::spec::{
    direction_from_wire, direction_to_wire, key_mode_from_wire, key_mode_to_wire, nonce_from_wire, nonce_to_wire,
    path_from_wire, path_to_wire, provider_from_wire, provider_to_wire,
};
use super::{WireError, truncate, wire_error};
use crate::algorithm::Algorithm;
use crate::provider::Provider;
use crate::spec::{MAX_LIST_LEN, Matrix, Nonce};

/// Most raw entries in one list of a request, repeats included: beyond this
/// a request is refused before its values are even parsed.
pub const MAX_RAW_LIST_LEN: usize = 16 * MAX_LIST_LEN;

impl TryFrom<&v1::Matrix> for Matrix {
    type Error = WireError;

    /// Converts and validates; errors name the field as `matrix.<field>`.
    fn try_from(m: &v1::Matrix) -> Result<Self, WireError> {
        let lists = [
            ("algorithms", m.algorithms.len()),
            ("sizes", m.sizes.len()),
            ("directions", m.directions.len()),
            ("threads", m.threads.len()),
            ("key_modes", m.key_modes.len()),
            ("paths", m.paths.len()),
            ("nonces", m.nonces.len()),
            ("providers", m.providers.len()),
        ];
        for (field, len) in lists {
            if len > MAX_RAW_LIST_LEN {
                return Err(wire_error(
                    format!("matrix.{field}"),
                    format!("{len} values is too many; at most {MAX_LIST_LEN} different ones"),
                ));
            }
        }
        let algorithms = m
            .algorithms
            .iter()
            .map(|a| {
                a.parse::<Algorithm>().map_err(|_| {
                    wire_error(
                        "matrix.algorithms",
                        format!(
                            "unknown algorithm {:?}; valid names: {}",
                            truncate(a.clone(), 64),
                            crate::algorithm::valid_names()
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let directions = m
            .directions
            .iter()
            .map(|d| direction_from_wire("matrix.directions", *d))
            .collect::<Result<Vec<_>, _>>()?;
        let key_modes = m
            .key_modes
            .iter()
            .map(|k| key_mode_from_wire("matrix.key_modes", *k))
            .collect::<Result<Vec<_>, _>>()?;
        let paths = m
            .paths
            .iter()
            .map(|p| path_from_wire("matrix.paths", *p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut nonces = m
            .nonces
            .iter()
            .map(|n| nonce_from_wire("matrix.nonces", *n))
            .collect::<Result<Vec<_>, _>>()?;
        if nonces.is_empty() {
            // A request that names no nonces predates the list: counters, as before.
            nonces.push(Nonce::Counter);
        }
        let mut providers = m
            .providers
            .iter()
            .map(|p| provider_from_wire("matrix.providers", *p))
            .collect::<Result<Vec<_>, _>>()?;
        if providers.is_empty() {
            // A request that names no providers predates the list: the built-in crates, as before.
            providers.push(Provider::RustCrypto);
        }
        let mut matrix = Matrix {
            algorithms,
            sizes: m.sizes.clone(),
            directions,
            threads: m.threads.clone(),
            concurrency: m.concurrency,
            key_modes,
            paths,
            nonces,
            providers,
            seconds: m.seconds,
        };
        matrix.dedup();
        matrix.validate().map_err(|e| {
            // Validation names the agent's flag; on the wire the field counts.
            let field = match e.flag {
                "--algorithm" => "algorithms",
                "--size" => "sizes",
                "--direction" => "directions",
                "--threads" => "threads",
                "--concurrency" => "concurrency",
                "--key-mode" => "key_modes",
                "--path" => "paths",
                "--nonce" => "nonces",
                "--provider" => "providers",
                "--seconds" => "seconds",
                other => other,
            };
            wire_error(format!("matrix.{field}"), e.message)
        })?;
        Ok(matrix)
    }
}

impl From<&Matrix> for v1::Matrix {
    fn from(m: &Matrix) -> Self {
        v1::Matrix {
            algorithms: m.algorithms.iter().map(|a| a.name().to_string()).collect(),
            sizes: m.sizes.clone(),
            directions: m.directions.iter().map(|d| direction_to_wire(*d) as i32).collect(),
            threads: m.threads.clone(),
            concurrency: m.concurrency,
            key_modes: m.key_modes.iter().map(|k| key_mode_to_wire(*k) as i32).collect(),
            paths: m.paths.iter().map(|p| path_to_wire(*p) as i32).collect(),
            nonces: m.nonces.iter().map(|n| nonce_to_wire(*n) as i32).collect(),
            providers: m.providers.iter().map(|p| provider_to_wire(*p) as i32).collect(),
            seconds: m.seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> v1::Matrix {
        v1::Matrix {
            algorithms: vec!["AES-256-GCM".into(), "aes-256-gcm".into(), "chacha20-poly1305".into()],
            sizes: vec![16, 16384, 16],
            directions: vec![v1::Direction::Encrypt as i32],
            threads: vec![1],
            concurrency: None,
            key_modes: vec![v1::KeyMode::Static as i32],
            paths: vec![v1::Path::Accelerated as i32, v1::Path::Software as i32],
            nonces: vec![],
            seconds: 0.5,
            providers: vec![],
        }
    }

    #[test]
    fn a_matrix_survives_the_round_trip_through_the_wire() {
        let m = Matrix::try_from(&request()).unwrap();
        assert_eq!(Matrix::try_from(&v1::Matrix::from(&m)).unwrap(), m);
    }

    #[test]
    fn a_request_converts_once_per_distinct_value() {
        let m = Matrix::try_from(&request()).unwrap();
        assert_eq!(m.algorithms.len(), 2);
        assert_eq!(m.sizes, [16, 16384]);
        assert_eq!(m.point_count(), Some(2 * 2 * 2));
        assert_eq!(m.nonces, [Nonce::Counter], "no nonces named: counters");
    }

    #[test]
    fn bad_and_huge_requests_are_refused_naming_the_field() {
        type Edit = fn(&mut v1::Matrix);
        let cases: Vec<(Edit, &str, &str)> = vec![
            (
                |m| m.algorithms.push("rot13".into()),
                "matrix.algorithms",
                "unknown algorithm",
            ),
            (|m| m.directions.push(7), "matrix.directions", "unknown value 7"),
            (|m| m.key_modes = vec![0], "matrix.key_modes", "unspecified"),
            (|m| m.paths.clear(), "matrix.paths", "empty"),
            (|m| m.nonces = vec![3], "matrix.nonces", "unknown value 3"),
            (
                // Random nonces for the software path of an AEAD are fine; for decryption not.
                |m| {
                    m.nonces = vec![v1::Nonce::Random as i32];
                    m.directions.push(v1::Direction::Decrypt as i32);
                },
                "matrix.nonces",
                "--direction encrypt",
            ),
            (|m| m.sizes = vec![0], "matrix.sizes", "out of range"),
            (|m| m.seconds = f64::NAN, "matrix.seconds", "out of range"),
            (|m| m.sizes = vec![16; MAX_RAW_LIST_LEN + 1], "matrix.sizes", "too many"),
            (|m| m.threads = (1..=65).collect(), "matrix.threads", "at most 64"),
            (
                // 27 algorithms × 64 sizes × 64 thread counts × 2 paths: 221,184 points.
                |m| {
                    m.algorithms = crate::algorithm::ALL.iter().map(|a| a.name().to_string()).collect();
                    m.sizes = (1..=64).collect();
                    m.threads = (1..=64).collect();
                },
                "matrix.algorithms",
                "221184 points",
            ),
        ];
        for (edit, field, words) in cases {
            let mut m = request();
            edit(&mut m);
            let e = Matrix::try_from(&m).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(words), "{e}");
        }
    }
}
