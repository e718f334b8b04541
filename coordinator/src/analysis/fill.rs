//! What fills a view that lacks data: the smallest named suite that
//! measures every point the view needs, or else an explicit matrix of just
//! those points, as the command an operator runs. Every page that has
//! nothing to show for a figure names its [`Fill`] instead of a `?`, a dash
//! or a bare "not measured".
//!
//! The suites are read from their matrices ([`Suite::matrices`]), so a
//! suite added to `core` is offered as soon as it is the smallest to
//! measure a point.

use cipherfleet_core::Point;
use cipherfleet_core::spec::{Matrix, SUITES, Suite};
use serde::Serialize;

/// The operator command that starts a campaign.
const CAMPAIGN_START: &str = "cipherfleet-coordinator campaign start";

/// A suite of more points than this (on a one-core host) takes hours —
/// `full` — and is never the answer to a few missing figures: a matrix of
/// just those points is.
const MAX_SUITE_POINTS: u64 = 1000;

/// How to measure what a view lacks. The API sends it as
/// `{"suite": "fallback", "command": "…"}` or `{"matrix": {…}, "command": "…"}`.
#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    /// A named suite measures it.
    Suite(Suite),
    /// No suite does: a matrix of the points' values.
    Matrix(Box<Matrix>),
}

impl Fill {
    /// What measures every one of `points`: the named suite with the fewest
    /// points among those that measure them all (thread counts as each
    /// host's "all cores" would be) and take minutes, not hours
    /// ([`MAX_SUITE_POINTS`]); else a matrix of their values. `None` for no
    /// points.
    pub fn of(points: &[Point]) -> Option<Fill> {
        let first = points.first()?;
        let suite = SUITES
            .iter()
            .copied()
            .filter(|s| suite_points(*s) <= MAX_SUITE_POINTS)
            .filter(|s| points.iter().all(|p| measures(*s, p)))
            .min_by_key(|s| suite_points(*s));
        Some(match suite {
            Some(s) => Fill::Suite(s),
            None => {
                let mut m = Matrix {
                    algorithms: points.iter().map(|p| p.algorithm).collect(),
                    sizes: points.iter().map(|p| p.size_bytes).collect(),
                    directions: points.iter().map(|p| p.direction).collect(),
                    threads: points.iter().map(|p| p.threads).collect(),
                    concurrency: first.concurrency,
                    key_modes: points.iter().map(|p| p.key_mode).collect(),
                    paths: points.iter().map(|p| p.path).collect(),
                    nonces: points.iter().map(|p| p.nonce).collect(),
                    seconds: 1.0,
                    providers: points.iter().map(|p| p.provider).collect(),
                };
                m.dedup();
                Fill::Matrix(Box::new(m))
            }
        })
    }

    /// The command to run, whole: `cipherfleet-coordinator campaign start --suite fallback`.
    pub fn command(&self) -> String {
        match self {
            Fill::Suite(s) => format!("{CAMPAIGN_START} --suite {s}"),
            Fill::Matrix(m) => format!(
                "{CAMPAIGN_START} --matrix '{}'",
                serde_json::to_string(m).expect("a matrix serialises")
            ),
        }
    }

    /// The command's distinguishing part, for a table cell that points to
    /// the whole command nearby: `--suite fallback`, `--matrix`.
    pub fn flag(&self) -> String {
        match self {
            Fill::Suite(s) => format!("--suite {s}"),
            Fill::Matrix(_) => "--matrix".into(),
        }
    }

    /// What to call it in a sentence: `the fallback suite`, `a matrix`.
    pub fn name(&self) -> String {
        match self {
            Fill::Suite(s) => format!("the {s} suite"),
            Fill::Matrix(_) => "a campaign with this matrix".into(),
        }
    }
}

impl Serialize for Fill {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(2))?;
        match self {
            Fill::Suite(suite) => map.serialize_entry("suite", suite.name())?,
            Fill::Matrix(m) => map.serialize_entry("matrix", m)?,
        }
        map.serialize_entry("command", &self.command())?;
        map.end()
    }
}

/// Whether `suite` measures `p` on a host whose "all cores" is `p.threads`
/// (which is how a suite's thread counts follow each host), on its provider.
fn measures(suite: Suite, p: &Point) -> bool {
    suite.matrices(p.threads.max(1)).iter().any(|m| {
        m.concurrency == p.concurrency
            && m.algorithms.contains(&p.algorithm)
            && m.sizes.contains(&p.size_bytes)
            && m.directions.contains(&p.direction)
            && m.threads.contains(&p.threads)
            && m.key_modes.contains(&p.key_mode)
            && m.paths.contains(&p.path)
            && m.nonces.contains(&p.nonce)
            && m.providers.contains(&p.provider)
    })
}

/// A suite's size on a one-core host: how long it keeps a fleet busy, roughly.
fn suite_points(suite: Suite) -> u64 {
    suite.matrices(1).iter().filter_map(Matrix::point_count).sum()
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::{Direction, KeyMode, Nonce};

    use super::*;

    fn point(algorithm: &str, size_bytes: u64, threads: u32, key_mode: KeyMode, path: Path) -> Point {
        Point {
            algorithm: algorithm.parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes,
            threads,
            concurrency: None,
            key_mode,
            path,
            nonce: Nonce::Counter,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        }
    }

    #[test]
    fn the_smallest_suite_measuring_every_point_fills_it() {
        use KeyMode::{PerOp, Static};
        use Path::{Accelerated, Software};
        let cases: Vec<(Vec<Point>, &str)> = vec![
            // /fallback's default point: the fallback suite has both paths of AES-256-GCM.
            (vec![point("aes-256-gcm", 16 << 10, 1, Static, Software)], "fallback"),
            // Not of AES-128-GCM at 1 MiB: the smallest suite with that is standard.
            (vec![point("aes-128-gcm", 1 << 20, 1, Static, Software)], "standard"),
            (
                vec![
                    point("aes-128-cbc", 16 << 10, 1, PerOp, Accelerated),
                    point("des-ede3-cbc", 16 << 10, 1, PerOp, Accelerated),
                ],
                "legacy-migration",
            ),
            // All cores of an 8-core host.
            (vec![point("aes-256-ctr", 16 << 10, 8, Static, Accelerated)], "modes"),
            (vec![point("aes-128-gcm", 16, 1, Static, Accelerated)], "quick"),
        ];
        for (points, want) in cases {
            let fill = Fill::of(&points).unwrap();
            assert_eq!(fill, Fill::Suite(want.parse().unwrap()), "{points:?}");
            assert_eq!(
                fill.command(),
                format!("cipherfleet-coordinator campaign start --suite {want}")
            );
        }
        assert_eq!(Fill::of(&[]), None);
        assert_eq!(
            serde_json::to_value(Fill::Suite(Suite::LegacyMigration)).unwrap(),
            serde_json::json!({"suite": "legacy-migration",
                               "command": "cipherfleet-coordinator campaign start --suite legacy-migration"})
        );
    }

    #[test]
    fn another_providers_points_are_filled_by_a_suite_measuring_that_provider() {
        use cipherfleet_core::provider::Provider;
        let on = |provider, size| {
            let mut p = point("aes-256-gcm", size, 1, KeyMode::Static, Path::Accelerated);
            p.provider = provider;
            p
        };
        // modes measures AES-256-GCM at 16 KiB, but only on the built-in crates.
        assert_eq!(
            Fill::of(&[on(Provider::RustCrypto, 16 << 10)]),
            Some(Fill::Suite(Suite::Modes))
        );
        assert_eq!(
            Fill::of(&[on(Provider::Openssl, 16 << 10)]),
            Some(Fill::Suite(Suite::Providers))
        );
        // No suite has ring at 4 KiB: the matrix names ring.
        let Some(Fill::Matrix(m)) = Fill::of(&[on(Provider::Ring, 4096)]) else {
            panic!()
        };
        assert_eq!(m.providers, [Provider::Ring]);
        m.validate().unwrap();
    }

    #[test]
    fn points_no_suite_measures_get_a_matrix_of_just_their_values() {
        // No suite measures 4 KiB payloads.
        let points = [
            point("aes-128-gcm", 4096, 2, KeyMode::Static, Path::Software),
            point("aes-128-gcm", 4096, 2, KeyMode::Static, Path::Accelerated),
        ];
        let fill = Fill::of(&points).unwrap();
        let Fill::Matrix(m) = &fill else { panic!("{fill:?}") };
        assert_eq!(m.expand().len(), 2, "only the points asked for: {m:?}");
        m.validate().unwrap();
        let command = fill.command();
        assert!(
            command.starts_with("cipherfleet-coordinator campaign start --matrix '{\"algorithms\":[\"aes-128-gcm\"]"),
            "{command}"
        );
        // What the CLI's --matrix reads back.
        let json = command.split('\'').nth(1).unwrap();
        assert_eq!(&serde_json::from_str::<Matrix>(json).unwrap(), &**m);

        // All cores of AES-128-GCM: only `full` has it, which takes hours.
        let gcm = [
            point("aes-128-gcm", 16 << 10, 1, KeyMode::Static, Path::Accelerated),
            point("aes-128-gcm", 16 << 10, 8, KeyMode::Static, Path::Accelerated),
        ];
        assert!(measures(Suite::Full, &gcm[1]));
        let Some(Fill::Matrix(m)) = Fill::of(&gcm) else {
            panic!("a matrix, not the full suite")
        };
        assert_eq!((m.threads.as_slice(), m.expand().len()), ([1, 8].as_slice(), 2));
        assert!(
            suite_points(Suite::Standard) <= MAX_SUITE_POINTS,
            "standard takes minutes"
        );
        assert!(suite_points(Suite::Full) > MAX_SUITE_POINTS);
    }
}
