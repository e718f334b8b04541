//! A request for many points: the Cartesian product of its lists.

use serde::{Deserialize, Serialize};

use super::{Direction, InvalidSpec, JobSpec, KeyMode, Nonce, invalid};
use crate::algorithm::Algorithm;
use crate::path::Path;
use crate::point::Point;
use crate::provider::Provider;

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
    /// Counter and/or random nonces; counters alone where a request predates the list.
    #[serde(default = "counters")]
    pub nonces: Vec<Nonce>,
    /// The implementations to measure on; RustCrypto alone where a request
    /// predates the list. A provider is asked only for the points it can run
    /// ([`super::job::validate_provider`]): ring for its AEADs on the
    /// accelerated path, and so on.
    #[serde(default = "rustcrypto")]
    pub providers: Vec<Provider>,
    pub seconds: f64,
}

/// The provider list of a matrix that names none.
pub(crate) fn rustcrypto() -> Vec<Provider> {
    vec![Provider::RustCrypto]
}

/// The nonce list of a matrix that names none.
pub(crate) fn counters() -> Vec<Nonce> {
    vec![Nonce::Counter]
}

/// Most values in one list of a matrix (sizes and thread counts; the other
/// lists are bounded by their types once de-duplicated).
pub const MAX_LIST_LEN: usize = 64;
/// Most points one matrix may expand to, per host.
pub const MAX_POINTS: u64 = 100_000;

impl Matrix {
    /// Every point, in table order (provider, algorithm, then direction, path, key mode, nonce, threads,
    /// size), less those a provider cannot run.
    pub fn expand(&self) -> Vec<JobSpec> {
        self.points().collect()
    }

    /// The points one at a time, in [`expand`](Self::expand)'s order, without
    /// building them all.
    pub fn points(&self) -> impl Iterator<Item = JobSpec> + '_ {
        self.all_points()
            .filter(|p| super::job::validate_provider(&p.point).is_ok())
    }

    /// The whole product, points no provider runs included.
    fn all_points(&self) -> impl Iterator<Item = JobSpec> + '_ {
        self.providers.iter().flat_map(move |&provider| {
            self.algorithms.iter().flat_map(move |&algorithm| {
                self.directions.iter().flat_map(move |&direction| {
                    self.paths.iter().flat_map(move |&path| {
                        self.key_modes.iter().flat_map(move |&key_mode| {
                            self.nonces.iter().flat_map(move |&nonce| {
                                self.threads.iter().flat_map(move |&threads| {
                                    self.sizes.iter().map(move |&size_bytes| JobSpec {
                                        point: Point {
                                            algorithm,
                                            direction,
                                            size_bytes,
                                            threads,
                                            concurrency: self.concurrency,
                                            key_mode,
                                            path,
                                            nonce,
                                            provider,
                                        },
                                        seconds: self.seconds,
                                    })
                                })
                            })
                        })
                    })
                })
            })
        })
    }

    /// How many points the matrix expands to, computed without expanding;
    /// `None` when the product does not fit in a `u64`.
    pub fn point_count(&self) -> Option<u64> {
        [
            self.providers.len(),
            self.algorithms.len(),
            self.directions.len(),
            self.paths.len(),
            self.key_modes.len(),
            self.nonces.len(),
            self.threads.len(),
            self.sizes.len(),
        ]
        .into_iter()
        .try_fold(1u64, |n, len| n.checked_mul(u64::try_from(len).ok()?))
    }

    /// Drops repeated values from every list, keeping the first of each, so a
    /// list like `--size 16,16` asks for the point once.
    pub fn dedup(&mut self) {
        fn keep_first<T: PartialEq + Copy>(list: &mut Vec<T>) {
            let mut seen: Vec<T> = Vec::with_capacity(list.len());
            list.retain(|v| {
                let new = !seen.contains(v);
                if new {
                    seen.push(*v);
                }
                new
            });
        }
        keep_first(&mut self.algorithms);
        keep_first(&mut self.sizes);
        keep_first(&mut self.directions);
        keep_first(&mut self.threads);
        keep_first(&mut self.key_modes);
        keep_first(&mut self.paths);
        keep_first(&mut self.nonces);
        keep_first(&mut self.providers);
    }

    /// Validates every list and every point; empty or over-long lists are
    /// errors, and so is a matrix of more than [`MAX_POINTS`] points — refused
    /// from the list lengths alone, before any point is built.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        let lists: [(&'static str, usize); 8] = [
            ("--algorithm", self.algorithms.len()),
            ("--size", self.sizes.len()),
            ("--direction", self.directions.len()),
            ("--threads", self.threads.len()),
            ("--key-mode", self.key_modes.len()),
            ("--path", self.paths.len()),
            ("--nonce", self.nonces.len()),
            ("--provider", self.providers.len()),
        ];
        for (flag, len) in lists {
            if len == 0 {
                return Err(invalid(flag, "the list is empty"));
            }
            if len > MAX_LIST_LEN {
                return Err(invalid(
                    flag,
                    format!("{len} values is too many; at most {MAX_LIST_LEN}"),
                ));
            }
        }
        match self.point_count() {
            Some(n) if n <= MAX_POINTS => {}
            n => {
                let n = n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
                return Err(invalid(
                    "--algorithm",
                    format!(
                        "the lists multiply to {n} points; at most {MAX_POINTS} per host: ask for fewer \
                         algorithms, sizes, directions, thread counts, key modes, paths, nonces or providers"
                    ),
                ));
            }
        }
        // A point a provider cannot run is left out, not refused; but a
        // provider with nothing at all to run here was asked for in vain.
        for &provider in &self.providers {
            let mut of_provider = self.all_points().filter(|p| p.point.provider == provider).peekable();
            let first = of_provider.peek().map(|p| p.point);
            if of_provider.all(|p| super::job::validate_provider(&p.point).is_err())
                && let Some(first) = first
            {
                let why = super::job::validate_provider(&first)
                    .err()
                    .map(|e| e.message)
                    .unwrap_or_default();
                return Err(invalid(
                    "--provider",
                    format!("the {provider} provider runs none of the matrix's points: {why}"),
                ));
            }
        }
        self.points().try_for_each(|p| p.validate())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::suite::algs;

    #[test]
    fn a_huge_matrix_is_refused_from_its_list_lengths_alone() {
        let sizes: Vec<u64> = (1..=64).collect();
        let threads: Vec<u32> = (1..=64).collect();
        // 27 × 64 × 2 × 64 × 3 × 2: about 1.3 million points.
        let m = Matrix {
            algorithms: crate::algorithm::ALL.to_vec(),
            sizes,
            directions: vec![Direction::Encrypt, Direction::Decrypt],
            threads,
            concurrency: None,
            key_modes: vec![KeyMode::Static, KeyMode::PerOp, KeyMode::HkdfPerUser],
            paths: vec![Path::Accelerated, Path::Software],
            nonces: counters(),
            seconds: 1.0,
            providers: vec![crate::provider::Provider::RustCrypto],
        };
        assert_eq!(m.point_count(), Some(27 * 64 * 2 * 64 * 3 * 2));
        let e = m.validate().unwrap_err();
        assert!(
            e.message.contains("1327104 points") && e.message.contains("100000"),
            "{e}"
        );

        let long = Matrix {
            sizes: (1..=65).collect(),
            ..m.clone()
        };
        let e = long.validate().unwrap_err();
        assert_eq!(e.flag, "--size");
        assert!(e.message.contains("at most 64"), "{e}");
    }

    #[test]
    fn each_provider_is_asked_only_for_the_points_it_runs() {
        use crate::provider::Provider;
        let m = Matrix {
            algorithms: algs(&["aes-128-gcm", "aes-128-cbc"]),
            sizes: vec![16],
            directions: vec![Direction::Encrypt],
            threads: vec![1],
            concurrency: None,
            key_modes: vec![KeyMode::Static],
            paths: vec![Path::Accelerated, Path::Software],
            nonces: counters(),
            providers: vec![Provider::RustCrypto, Provider::Ring, Provider::Kernel],
            seconds: 0.1,
        };
        m.validate().unwrap();
        let points: Vec<String> = m.expand().iter().map(|p| p.label()).collect();
        // ring: its AEAD on the accelerated path only; RustCrypto and the kernel: all four.
        assert_eq!(points.len(), 4 + 1 + 4, "{points:?}");
        assert_eq!(
            points.iter().filter(|l| l.ends_with(" on ring")).count(),
            1,
            "{points:?}"
        );
        assert!(
            points
                .iter()
                .all(|l| !(l.ends_with(" on ring") && l.contains("software")))
        );
        // A provider with nothing to run in the matrix was asked for in vain.
        let ring_cbc = Matrix {
            algorithms: algs(&["aes-128-cbc"]),
            ..m
        };
        let e = ring_cbc.validate().unwrap_err();
        assert_eq!(e.flag, "--provider");
        assert!(e.message.contains("ring provider runs none"), "{e}");
        // The kernel measures up to 64 KiB: a 10 MiB point is left out, and asked alone refused.
        let sizes = Matrix {
            sizes: vec![64 * 1024, 10 * 1024 * 1024],
            providers: vec![Provider::Kernel],
            paths: vec![Path::Accelerated],
            ..ring_cbc
        };
        let kept: Vec<u64> = sizes.points().map(|p| p.point.size_bytes).collect();
        assert_eq!(kept, [64 * 1024]);
        let e = Matrix {
            sizes: vec![10 * 1024 * 1024],
            ..sizes
        }
        .validate()
        .unwrap_err();
        assert!(e.message.contains("up to 65536 bytes"), "{e}");
    }

    #[test]
    fn repeated_values_are_asked_for_once() {
        let mut m = Matrix {
            algorithms: algs(&["aes-128-gcm", "aes-128-gcm", "des-cbc"]),
            sizes: vec![16, 1024, 16],
            directions: vec![Direction::Encrypt, Direction::Encrypt],
            threads: vec![2, 1, 2],
            concurrency: None,
            key_modes: vec![KeyMode::Static, KeyMode::Static],
            paths: vec![Path::Software, Path::Accelerated, Path::Software],
            nonces: vec![Nonce::Random, Nonce::Random],
            seconds: 0.1,
            providers: vec![crate::provider::Provider::RustCrypto],
        };
        m.dedup();
        assert_eq!(m.algorithms, algs(&["aes-128-gcm", "des-cbc"]));
        assert_eq!(
            (m.sizes.as_slice(), m.threads.as_slice()),
            (&[16, 1024][..], &[2, 1][..])
        );
        assert_eq!((m.directions.len(), m.key_modes.len()), (1, 1));
        assert_eq!(m.paths, [Path::Software, Path::Accelerated]);
        assert_eq!(m.nonces, [Nonce::Random]);
        assert_eq!(m.point_count(), Some(2 * 2 * 2 * 2));
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
            nonces: counters(),
            seconds: 0.1,
            providers: vec![crate::provider::Provider::RustCrypto],
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
        assert_eq!(
            Matrix {
                seconds: 0.0,
                ..m.clone()
            }
            .validate()
            .unwrap_err()
            .flag,
            "--seconds"
        );
        // Random nonces with decryption in the product: the point's own rule refuses it.
        let random = Matrix {
            nonces: vec![Nonce::Counter, Nonce::Random],
            ..m
        };
        assert_eq!(random.point_count(), Some(2 * 3 * 2 * 2 * 2));
        assert_eq!(random.validate().unwrap_err().flag, "--nonce");
        let json = r#"{"algorithms":["aes-128-gcm"],"sizes":[16],"directions":["encrypt"],"threads":[1],"key_modes":["static"],"paths":["accelerated"],"seconds":0.1}"#;
        assert_eq!(serde_json::from_str::<Matrix>(json).unwrap().nonces, counters());
    }
}
