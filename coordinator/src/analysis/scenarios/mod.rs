//! The scenario views (`/scenarios`): each scenario suite's question answered
//! per machine class from the latest measured points, with every figure's
//! median and min–max over the class's hosts.
//!
//! A view reads points by what they measure (algorithm, size, direction, key
//! mode, path, nonce, concurrency), never by the suite that asked for them, so a
//! campaign with an explicit matrix of the same points answers it too. Thread
//! counts follow each host: "all cores" is the host's largest measured count.
//!
//! One module per scenario, each with its columns and its answer:
//! [`object_storage`], [`legacy_migration`], [`modes`], [`fallback`],
//! [`field_level`]; [`figure`] holds the figure over hosts and the per-host
//! helpers they share.
//!
//! Rules reused rather than copied: classes ([`super::class`]), per-host
//! thread speed-up ([`super::scaling`]), the recommendation and the MB/s per
//! Gbit/s of the planner ([`super::capacity`]), the stored overhead
//! ([`super::overhead`]), accelerated ÷ software ([`super::software_speed`]).

mod fallback;
mod field_level;
mod figure;
mod legacy_migration;
mod modes;
mod object_storage;

use std::collections::BTreeMap;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::{KeyMode, Nonce, Suite};
use serde::Serialize;

use super::class::MachineClass;
use super::fill::Fill;
use super::overhead::{Overhead, overhead};
use crate::domain::latest::LatestResult;

pub use figure::Figure;

/// The scenario suites with a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    ObjectStorage,
    LegacyMigration,
    Modes,
    Fallback,
    FieldLevel,
}

impl Scenario {
    pub const ALL: [Scenario; 5] = [
        Scenario::ObjectStorage,
        Scenario::LegacyMigration,
        Scenario::Modes,
        Scenario::Fallback,
        Scenario::FieldLevel,
    ];

    /// The suite that measures it (its name is the scenario's name in URLs).
    pub fn suite(self) -> Suite {
        match self {
            Scenario::ObjectStorage => Suite::ObjectStorage,
            Scenario::LegacyMigration => Suite::LegacyMigration,
            Scenario::Modes => Suite::Modes,
            Scenario::Fallback => Suite::Fallback,
            Scenario::FieldLevel => Suite::FieldLevel,
        }
    }

    pub fn name(self) -> &'static str {
        self.suite().name()
    }

    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// What measures every point the view reads: its own suite.
    pub fn fill(self) -> Fill {
        Fill::Suite(self.suite())
    }

    /// The question the view answers.
    pub fn question(self) -> &'static str {
        match self {
            Scenario::ObjectStorage => {
                "Which AEAD should encrypt 10 MiB objects, 32 in flight: P99 per object, cores per 10 Gbit/s, stored overhead?"
            }
            Scenario::LegacyMigration => "How much faster is AES than DES and 3DES in CBC, key setup included?",
            Scenario::Modes => {
                "How do the AES-256 modes compare at 16 KiB, which parallelise, and is CBC decrypt faster than encrypt?"
            }
            Scenario::Fallback => "What does losing hardware acceleration cost?",
            Scenario::FieldLevel => {
                "How many field encryptions per second per core, and what do per-user keys and random nonces cost?"
            }
        }
    }

    /// The algorithms the view reads (the database query's filter), each once
    /// in the suite's order, however many of its matrices name it.
    pub fn algorithms(self) -> Vec<Algorithm> {
        let mut algorithms: Vec<Algorithm> = Vec::new();
        for a in self.suite().matrices(1).iter().flat_map(|m| m.algorithms.clone()) {
            if !algorithms.contains(&a) {
                algorithms.push(a);
            }
        }
        algorithms
    }

    /// Whether the view reads this point (thread counts are each host's own).
    fn reads(self, p: &cipherfleet_core::Point) -> bool {
        if self == Scenario::ObjectStorage {
            return p.concurrency.is_some()
                && p.key_mode == KeyMode::Static
                && p.nonce == Nonce::Counter
                && p.path == Path::Accelerated
                && self.algorithms().contains(&p.algorithm);
        }
        self.suite().matrices(1).iter().any(|m| {
            p.concurrency == m.concurrency
                && m.algorithms.contains(&p.algorithm)
                && m.sizes.contains(&p.size_bytes)
                && m.directions.contains(&p.direction)
                && m.key_modes.contains(&p.key_mode)
                && m.paths.contains(&p.path)
                && m.nonces.contains(&p.nonce)
        })
    }
}

/// One latest result with the class and cores of its host.
#[derive(Clone, Debug)]
pub struct Sample {
    pub class: MachineClass,
    pub logical_cores: Option<u32>,
    pub result: LatestResult,
}

/// One row of a class's table: what it is about and a figure per column.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub subject: String,
    pub cells: Vec<Option<Figure>>,
}

/// A scenario's answer for one machine class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClassAnswer {
    pub class_key: String,
    pub class: String,
    pub hosts: usize,
    /// The answer in one sentence, from the figures below; it says what is
    /// not measured rather than guess.
    pub answer: String,
    pub rows: Vec<Row>,
    /// What measures the figures this class lacks (the scenario's suite);
    /// `None` when every figure is there.
    pub fill: Option<Fill>,
}

/// What a scenario module answers for one class, before the view adds who it is about.
pub(super) struct Answered {
    text: String,
    rows: Vec<Row>,
    /// Some figure the answer or its table needs is not measured.
    lacking: bool,
}

/// A scenario's view: its columns, the answer per class, and for
/// object storage the stored overhead at the sizes shown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct View {
    pub scenario: Scenario,
    pub columns: Vec<&'static str>,
    pub classes: Vec<ClassAnswer>,
    pub overhead: Vec<Overhead>,
}

/// The view of `scenario` over `samples` (any points: those it does not read are ignored).
pub fn view(scenario: Scenario, samples: &[Sample]) -> View {
    let mut by_class: BTreeMap<MachineClass, Vec<&Sample>> = BTreeMap::new();
    for s in samples.iter().filter(|s| scenario.reads(&s.result.point)) {
        by_class.entry(s.class.clone()).or_default().push(s);
    }
    let columns = columns(scenario);
    let mut sizes = Vec::new();
    let classes = by_class
        .into_iter()
        .filter_map(|(class, samples)| {
            let mut hosts: Vec<i64> = samples.iter().map(|s| s.result.host_id).collect();
            hosts.sort();
            hosts.dedup();
            let answered = match scenario {
                Scenario::ObjectStorage => {
                    let (answered, size) = object_storage::answer(&samples)?;
                    sizes.push(size);
                    answered
                }
                Scenario::LegacyMigration => legacy_migration::answer(&samples),
                Scenario::Modes => modes::answer(&samples),
                Scenario::Fallback => fallback::answer(&samples),
                Scenario::FieldLevel => field_level::answer(&samples),
            };
            Some(ClassAnswer {
                class_key: class.key(),
                class: class.label(),
                hosts: hosts.len(),
                answer: answered.text,
                rows: answered.rows,
                fill: answered.lacking.then(|| scenario.fill()),
            })
        })
        .collect();
    let overhead = if scenario == Scenario::ObjectStorage {
        sizes.push(cipherfleet_core::spec::OBJECT_STORAGE_SIZE);
        sizes.sort();
        sizes.dedup();
        scenario
            .algorithms()
            .into_iter()
            .flat_map(|a| sizes.iter().map(move |&s| overhead(a, s)))
            .collect()
    } else {
        Vec::new()
    };
    View {
        scenario,
        columns,
        classes,
        overhead,
    }
}

fn columns(scenario: Scenario) -> Vec<&'static str> {
    match scenario {
        Scenario::ObjectStorage => object_storage::COLUMNS.to_vec(),
        Scenario::LegacyMigration => legacy_migration::COLUMNS.to_vec(),
        Scenario::Modes => modes::COLUMNS.to_vec(),
        Scenario::Fallback => fallback::COLUMNS.to_vec(),
        Scenario::FieldLevel => field_level::COLUMNS.to_vec(),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use cipherfleet_core::Point;
    use cipherfleet_core::path::{Path, PathUsed};
    use cipherfleet_core::spec::{Direction, KeyMode, Suite};

    use super::*;
    use crate::analysis::cells::tests::result;

    pub(crate) fn class(model: &str, build: &str) -> MachineClass {
        MachineClass::of(Some("x86_64"), None, Some(model), &[], Some(build))
    }

    /// A host's latest result of `point` at `mb_s`, its ops/s and P99 following from the size.
    pub(crate) fn sample(class: &MachineClass, host: i64, point: Point, mb_s: f64, used: PathUsed) -> Sample {
        let mut r = result(host, point.algorithm.name(), mb_s, used);
        r.ops_per_s = mb_s * 1e6 / point.size_bytes as f64;
        r.latency_p99_ns = (point.size_bytes as f64 / mb_s * 1e3) as i64;
        r.point = point;
        Sample {
            class: class.clone(),
            logical_cores: Some(4),
            result: r,
        }
    }

    pub(crate) fn at(
        algorithm: &str,
        size: u64,
        key_mode: KeyMode,
        direction: Direction,
        threads: u32,
        path: Path,
    ) -> Point {
        Point {
            algorithm: algorithm.parse().unwrap(),
            size_bytes: size,
            key_mode,
            direction,
            threads,
            path,
            concurrency: None,
            nonce: Nonce::Counter,
            provider: cipherfleet_core::provider::Provider::RustCrypto,
        }
    }

    #[test]
    fn the_tour_fills_every_cell_and_answer_of_every_view() {
        let c = class("EPYC", "accelerated");
        let samples: Vec<Sample> = Suite::Tour
            .expand(4)
            .into_iter()
            .map(|spec| {
                let p = spec.point;
                let (mb_s, used) = match p.path {
                    Path::Accelerated => (1000.0, PathUsed::Accelerated),
                    Path::Software => (100.0, PathUsed::Software),
                };
                let slow = match p.algorithm.cipher {
                    cipherfleet_core::algorithm::Cipher::Des => 20.0,
                    cipherfleet_core::algorithm::Cipher::TripleDes => 50.0,
                    _ => 1.0,
                };
                sample(&c, 1, p, mb_s * f64::from(p.threads) / slow, used)
            })
            .collect();
        for scenario in Scenario::ALL {
            let v = view(scenario, &samples);
            assert_eq!(v.classes.len(), 1, "{scenario:?}");
            let answer = &v.classes[0];
            assert!(!answer.answer.contains('?'), "{scenario:?}: {}", answer.answer);
            for row in &answer.rows {
                assert!(row.cells.iter().all(Option::is_some), "{scenario:?}: {row:?}");
            }
        }
    }

    #[test]
    fn a_class_without_points_of_the_scenario_has_no_answer() {
        let c = class("EPYC", "accelerated");
        let quick = sample(&c, 1, Suite::Quick.expand(1)[0].point, 100.0, PathUsed::Accelerated);
        for scenario in Scenario::ALL {
            assert_eq!(
                view(scenario, std::slice::from_ref(&quick)).classes,
                vec![],
                "{scenario:?}"
            );
        }
        assert_eq!(Scenario::from_name("modes"), Some(Scenario::Modes));
        // field-level's random-nonce matrix repeats its algorithms: each is read once.
        assert_eq!(Scenario::FieldLevel.algorithms().len(), 3);
        assert_eq!(Scenario::from_name("full"), None);
    }
}
