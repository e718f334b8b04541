//! A request for many points: the Cartesian product of its lists.

use serde::{Deserialize, Serialize};

use super::{Direction, InvalidSpec, JobSpec, KeyMode, invalid};
use crate::algorithm::Algorithm;
use crate::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::suite::algs;

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
}
