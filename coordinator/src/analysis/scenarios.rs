//! The scenario views (`/scenarios`): each scenario suite's question answered
//! per machine class from the latest measured points, with every figure's
//! median and min–max over the class's hosts.
//!
//! A view reads points by what they measure (algorithm, size, direction, key
//! mode, path, concurrency), never by the suite that asked for them, so a
//! campaign with an explicit matrix of the same points answers it too. Thread
//! counts follow each host: "all cores" is the host's largest measured count.
//! The object-storage view reads the object-storage scenario (`concurrency`
//! set) at the largest object size its class measured, and says which.
//!
//! Rules reused rather than copied: classes ([`super::class`]), per-host
//! thread speed-up ([`super::scaling`]), the recommendation and the MB/s per
//! Gbit/s of the planner ([`super::capacity`]), the stored overhead
//! ([`super::overhead`]).

use std::collections::BTreeMap;

use cipherfleet_core::algorithm::{Algorithm, Mode};
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{Direction, KeyMode, Suite};
use serde::Serialize;

use super::capacity::{MB_S_PER_GBIT_S, recommend};
use super::class::MachineClass;
use super::overhead::{Overhead, overhead};
use super::robust::median;
use super::scaling::{HostSeries, ThreadPoint, thread_scaling};
use crate::db::points::LatestResult;

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
            Scenario::FieldLevel => "How many field encryptions per second per core, and what do per-user keys cost?",
        }
    }

    /// The algorithms the view reads (the database query's filter).
    pub fn algorithms(self) -> Vec<Algorithm> {
        let mut algorithms: Vec<Algorithm> = self
            .suite()
            .matrices(1)
            .iter()
            .flat_map(|m| m.algorithms.clone())
            .collect();
        algorithms.dedup();
        algorithms
    }

    /// Whether the view reads this point (thread counts are each host's own).
    fn reads(self, p: &cipherfleet_core::Point) -> bool {
        if self == Scenario::ObjectStorage {
            return p.concurrency.is_some()
                && p.key_mode == KeyMode::Static
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

/// A figure over a class's hosts: the median and the min–max.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Figure {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub hosts: usize,
}

impl Figure {
    /// The figure of `values` (one per host); `None` without a usable value.
    pub fn of(values: &[f64]) -> Option<Figure> {
        let values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
        Some(Figure {
            median: median(&values)?,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            hosts: values.len(),
        })
    }
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
    /// The answer in one sentence, from the figures below.
    pub answer: String,
    pub rows: Vec<Row>,
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
            let (answer, rows) = match scenario {
                Scenario::ObjectStorage => {
                    let (answer, rows, size) = object_storage(&samples)?;
                    sizes.push(size);
                    (answer, rows)
                }
                Scenario::LegacyMigration => legacy_migration(&samples),
                Scenario::Modes => modes(&samples),
                Scenario::Fallback => fallback(&samples),
                Scenario::FieldLevel => field_level(&samples),
            };
            Some(ClassAnswer {
                class_key: class.key(),
                class: class.label(),
                hosts: hosts.len(),
                answer,
                rows,
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
        Scenario::ObjectStorage => vec![
            "MB/s (all threads)",
            "P99 per object (ms)",
            "MB/s per core",
            "cores per 10 Gbit/s",
        ],
        Scenario::LegacyMigration => vec![
            "16 KiB MB/s, static key",
            "16 KiB MB/s, key setup per op",
            "16 B ops/s, key setup per op",
            "× 3DES at 16 KiB with key setup",
            "× DES at 16 KiB with key setup",
        ],
        Scenario::Modes => vec![
            "encrypt MB/s, 1 thread",
            "decrypt MB/s, 1 thread",
            "decrypt ÷ encrypt",
            "speed-up at all cores (encrypt)",
        ],
        Scenario::Fallback => vec!["accelerated MB/s", "software MB/s", "× lost without acceleration"],
        Scenario::FieldLevel => vec![
            "ops/s per core, static key",
            "ops/s per core, key per op",
            "ops/s per core, hkdf per user",
            "× cost of per-user keys",
        ],
    }
}

type Filter<'a> = &'a dyn Fn(&LatestResult) -> bool;

/// Each host's value of `f` over its one result passing `keep` (the first, if several).
fn per_host(samples: &[&Sample], keep: Filter<'_>, f: impl Fn(&Sample) -> f64) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    for s in samples.iter().filter(|s| keep(&s.result)) {
        out.entry(s.result.host_id).or_insert_with(|| f(s));
    }
    out
}

fn figure(values: &BTreeMap<i64, f64>) -> Option<Figure> {
    Figure::of(&values.values().copied().collect::<Vec<_>>())
}

/// The per-host ratio `a / b` over hosts that have both, as a figure.
fn ratio(a: &BTreeMap<i64, f64>, b: &BTreeMap<i64, f64>) -> Option<Figure> {
    let r: Vec<f64> = a.iter().filter_map(|(h, x)| Some(x / b.get(h)?)).collect();
    Figure::of(&r)
}

fn mb_s(s: &Sample) -> f64 {
    s.result.throughput_mb_s
}

fn times(f: Option<Figure>) -> String {
    f.map_or_else(|| "?".to_string(), |f| format!("{:.1}×", f.median))
}

/// Whether an accelerated request of an AES algorithm ran (partly) in software.
fn aes_in_software(samples: &[&Sample]) -> bool {
    samples.iter().any(|s| {
        s.result.point.algorithm.uses_aes()
            && s.result.point.path == Path::Accelerated
            && s.result.path_used != PathUsed::Accelerated
    })
}

fn object_storage(samples: &[&Sample]) -> Option<(String, Vec<Row>, u64)> {
    let encrypt: Vec<&Sample> = samples
        .iter()
        .copied()
        .filter(|s| s.result.point.direction == Direction::Encrypt)
        .collect();
    let size = encrypt.iter().map(|s| s.result.point.size_bytes).max()?;
    let in_flight = encrypt
        .iter()
        .filter_map(|s| s.result.point.concurrency)
        .max()
        .unwrap_or(0);
    let mut rows = Vec::new();
    let mut candidates = Vec::new();
    for algorithm in Scenario::ObjectStorage.algorithms() {
        let keep = |r: &LatestResult| r.point.algorithm == algorithm && r.point.size_bytes == size;
        let total = per_host(&encrypt, &keep, mb_s);
        let p99 = per_host(&encrypt, &keep, |s| s.result.latency_p99_ns as f64 / 1e6);
        let per_core = per_host(&encrypt, &keep, |s| mb_s(s) / f64::from(s.result.point.threads.max(1)));
        let cores_10g: BTreeMap<i64, f64> = per_core.iter().map(|(h, v)| (*h, 10.0 * MB_S_PER_GBIT_S / v)).collect();
        if let Some(f) = figure(&per_core) {
            candidates.push((algorithm, f.median));
        }
        rows.push(Row {
            subject: algorithm.name().to_string(),
            cells: vec![figure(&total), figure(&p99), figure(&per_core), figure(&cores_10g)],
        });
    }
    let mut answer = match recommend(&candidates) {
        Some(r) => match (r.runner_up, r.ratio()) {
            (Some(second), Some(x)) => format!("{} ({x:.1}× {second} per core)", r.algorithm),
            _ => format!("{} (the only one measured)", r.algorithm),
        },
        None => "nothing measured".to_string(),
    };
    answer.push_str(&format!(
        " at {}, {in_flight} in flight",
        cipherfleet_core::spec::format_size(size)
    ));
    if aes_in_software(&encrypt) {
        answer.push_str("; AES ran in software on this class");
    }
    Some((answer, rows, size))
}

fn legacy_migration(samples: &[&Sample]) -> (String, Vec<Row>) {
    let at = |algorithm: Algorithm, size: u64, key: KeyMode| {
        move |r: &LatestResult| r.point.algorithm == algorithm && r.point.size_bytes == size && r.point.key_mode == key
    };
    let names = Scenario::LegacyMigration.algorithms();
    let bulk_keyed = |a: Algorithm| per_host(samples, &at(a, 16 << 10, KeyMode::PerOp), mb_s);
    let (des, tdes) = (names[0], names[1]);
    let mut rows = Vec::new();
    for &a in &names {
        rows.push(Row {
            subject: a.name().to_string(),
            cells: vec![
                figure(&per_host(samples, &at(a, 16 << 10, KeyMode::Static), mb_s)),
                figure(&bulk_keyed(a)),
                figure(&per_host(samples, &at(a, 16, KeyMode::PerOp), |s| s.result.ops_per_s)),
                ratio(&bulk_keyed(a), &bulk_keyed(tdes)),
                ratio(&bulk_keyed(a), &bulk_keyed(des)),
            ],
        });
    }
    let answer = names[2..]
        .iter()
        .map(|&a| {
            format!(
                "{a} is {} faster than 3DES and {} than DES",
                times(ratio(&bulk_keyed(a), &bulk_keyed(tdes))),
                times(ratio(&bulk_keyed(a), &bulk_keyed(des)))
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    (format!("{answer} (16 KiB, key setup per op)"), rows)
}

/// Whether the mode's encryption of one message can run its blocks in parallel.
fn parallel_encrypt(mode: Mode) -> bool {
    !matches!(mode, Mode::Cbc | Mode::Ccm | Mode::CbcHmacSha256)
}

fn modes(samples: &[&Sample]) -> (String, Vec<Row>) {
    let one = |a: Algorithm, d: Direction| {
        move |r: &LatestResult| r.point.algorithm == a && r.point.direction == d && r.point.threads == 1
    };
    let mut rows = Vec::new();
    let mut cbc_ratio = None;
    for a in Scenario::Modes.algorithms() {
        let enc = per_host(samples, &one(a, Direction::Encrypt), mb_s);
        let dec = per_host(samples, &one(a, Direction::Decrypt), mb_s);
        let mut series: BTreeMap<i64, HostSeries> = BTreeMap::new();
        for s in samples
            .iter()
            .filter(|s| s.result.point.algorithm == a && s.result.point.direction == Direction::Encrypt)
        {
            series
                .entry(s.result.host_id)
                .or_insert_with(|| HostSeries {
                    host_id: s.result.host_id,
                    logical_cores: s.logical_cores,
                    points: Vec::new(),
                })
                .points
                .push(ThreadPoint {
                    threads: s.result.point.threads,
                    mb_s: mb_s(s),
                    path_used: s.result.path_used,
                });
        }
        // Each host at its own largest thread count ("all cores"), by the scaling rule.
        let speedups: Vec<f64> = series
            .values()
            .filter_map(|h| thread_scaling(std::slice::from_ref(h)).last().map(|t| t.speedup()))
            .collect();
        let speedup = Figure::of(&speedups);
        let dec_over_enc = ratio(&dec, &enc);
        if a.mode == Mode::Cbc {
            cbc_ratio = dec_over_enc;
        }
        let within = if parallel_encrypt(a.mode) {
            "blocks in parallel"
        } else {
            "encrypt serial, decrypt parallel"
        };
        rows.push(Row {
            subject: format!("{} ({within})", a.name()),
            cells: vec![figure(&enc), figure(&dec), dec_over_enc, speedup],
        });
    }
    let answer = format!(
        "CBC decrypt runs {} CBC encrypt on one thread; every mode scales across threads (one message a thread)",
        cbc_ratio.map_or_else(|| "?".to_string(), |f| format!("at {:.1}× the speed of", f.median))
    );
    (answer, rows)
}

fn fallback(samples: &[&Sample]) -> (String, Vec<Row>) {
    let mut rows = Vec::new();
    let mut worst: Option<(Algorithm, u64, f64)> = None;
    for a in Scenario::Fallback.algorithms() {
        for size in [16u64, 16 << 10] {
            let on = |p: Path| {
                move |r: &LatestResult| r.point.algorithm == a && r.point.size_bytes == size && r.point.path == p
            };
            let acc = per_host(samples, &on(Path::Accelerated), mb_s);
            let soft = per_host(samples, &on(Path::Software), mb_s);
            let cost = ratio(&acc, &soft);
            if let Some(c) = cost
                && worst.is_none_or(|w| c.median > w.2)
            {
                worst = Some((a, size, c.median));
            }
            rows.push(Row {
                subject: format!("{a} at {}", cipherfleet_core::spec::format_size(size)),
                cells: vec![figure(&acc), figure(&soft), cost],
            });
        }
    }
    let answer = match worst {
        Some((a, size, x)) if x >= 1.5 => format!(
            "losing acceleration costs up to {x:.1}× ({a} at {})",
            cipherfleet_core::spec::format_size(size)
        ),
        Some((_, _, x)) => format!("both paths run alike (at most {x:.1}×): this class has no acceleration to lose"),
        None => "no host measured both paths".to_string(),
    };
    (answer, rows)
}

fn field_level(samples: &[&Sample]) -> (String, Vec<Row>) {
    let mut rows = Vec::new();
    let mut answers = Vec::new();
    for a in Scenario::FieldLevel.algorithms() {
        for size in [11u64, 18] {
            let keyed = |k: KeyMode| {
                let keep = move |r: &LatestResult| {
                    r.point.algorithm == a
                        && r.point.size_bytes == size
                        && r.point.key_mode == k
                        && r.point.direction == Direction::Encrypt
                        && r.point.threads == 1
                };
                per_host(samples, &keep, |s| s.result.ops_per_s)
            };
            let (fixed, per_op, per_user) = (
                keyed(KeyMode::Static),
                keyed(KeyMode::PerOp),
                keyed(KeyMode::HkdfPerUser),
            );
            let cost = ratio(&fixed, &per_user);
            if size == 11
                && let Some(c) = cost
            {
                answers.push(format!("{a} {:.1}×", c.median));
            }
            rows.push(Row {
                subject: format!("{a} at {size} B"),
                cells: vec![figure(&fixed), figure(&per_op), figure(&per_user), cost],
            });
        }
    }
    let answer = if answers.is_empty() {
        "no host measured both static and per-user keys".to_string()
    } else {
        format!(
            "per-user (HKDF) keys cost {} at 11 B, against one static key",
            answers.join(", ")
        )
    };
    (answer, rows)
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::Point;

    use super::*;
    use crate::analysis::cells::tests::result;

    fn class(model: &str, build: &str) -> MachineClass {
        MachineClass::of(Some("x86_64"), None, Some(model), &[], Some(build))
    }

    fn sample(class: &MachineClass, host: i64, point: Point, mb_s: f64, used: PathUsed) -> Sample {
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

    fn object(algorithm: &str, threads: u32) -> Point {
        Point {
            algorithm: algorithm.parse().unwrap(),
            size_bytes: 1 << 20,
            threads,
            concurrency: Some(4),
            ..Suite::Quick.expand(1)[0].point()
        }
    }

    #[test]
    fn object_storage_recommends_the_fastest_aead_per_class_and_says_when_aes_ran_in_software() {
        let hw = class("Xeon", "accelerated");
        let soft = class("Xeon", "software");
        let mut samples = Vec::new();
        for (host, c, gcm, chacha, used) in [
            (1, &hw, 4000.0, 1600.0, PathUsed::Accelerated),
            (2, &hw, 3600.0, 1500.0, PathUsed::Accelerated),
            (3, &soft, 200.0, 900.0, PathUsed::Software),
        ] {
            samples.push(sample(c, host, object("aes-256-gcm", 4), gcm, used));
            samples.push(sample(
                c,
                host,
                object("chacha20-poly1305", 4),
                chacha,
                PathUsed::Accelerated,
            ));
            samples.push(sample(c, host, object("aes-128-cbc-hmac-sha256", 4), gcm / 4.0, used));
        }
        // Not read: one static-key back-to-back point of the same algorithm.
        samples.push(sample(
            &soft,
            3,
            Suite::Quick.expand(1)[0].point(),
            9999.0,
            PathUsed::Software,
        ));
        let v = view(Scenario::ObjectStorage, &samples);
        let answer = |c: &MachineClass| v.classes.iter().find(|a| a.class_key == c.key()).unwrap().clone();
        let fast = answer(&hw);
        assert!(
            fast.answer.starts_with("aes-256-gcm (2.5× chacha20-poly1305"),
            "{}",
            fast.answer
        );
        assert!(fast.answer.contains("1MiB, 4 in flight"), "{}", fast.answer);
        assert_eq!(fast.hosts, 2);
        let gcm = &fast.rows[0];
        let per_core = gcm.cells[2].unwrap();
        assert_eq!((per_core.median, per_core.min, per_core.max), (950.0, 900.0, 1000.0));
        let cores = gcm.cells[3].unwrap();
        assert!((cores.median - (1250.0 / 900.0 + 1250.0 / 1000.0) / 2.0).abs() < 1e-9);
        let slow = answer(&soft);
        assert!(
            slow.answer.starts_with("chacha20-poly1305 (4.5× aes-256-gcm"),
            "{}",
            slow.answer
        );
        assert!(slow.answer.contains("AES ran in software"), "{}", slow.answer);
        // The overhead is shown at the measured size and at the scenario's.
        assert_eq!(v.overhead.len(), 3 * 2);
        assert!(v.overhead.iter().any(|o| o.size_bytes == 10 << 20 && o.mac_bytes == 32));
    }

    fn at(algorithm: &str, size: u64, key_mode: KeyMode, direction: Direction, threads: u32, path: Path) -> Point {
        Point {
            algorithm: algorithm.parse().unwrap(),
            size_bytes: size,
            key_mode,
            direction,
            threads,
            path,
            concurrency: None,
        }
    }

    #[test]
    fn each_view_answers_its_question_from_the_hosts_ratios() {
        let c = class("EPYC", "accelerated");
        let s = |host, p, mb_s| sample(&c, host, p, mb_s, PathUsed::Accelerated);
        let (enc, dec, acc, sw) = (
            Direction::Encrypt,
            Direction::Decrypt,
            Path::Accelerated,
            Path::Software,
        );
        let legacy: Vec<Sample> = [
            ("des-cbc", 20.0),
            ("des-ede3-cbc", 10.0),
            ("aes-128-cbc", 500.0),
            ("aes-256-cbc", 400.0),
        ]
        .into_iter()
        .map(|(a, v)| s(1, at(a, 16 << 10, KeyMode::PerOp, enc, 1, acc), v))
        .collect();
        let v = view(Scenario::LegacyMigration, &legacy);
        assert!(
            v.classes[0]
                .answer
                .starts_with("aes-128-cbc is 50.0× faster than 3DES and 25.0× than DES"),
            "{}",
            v.classes[0].answer
        );

        let modes = vec![
            s(1, at("aes-256-cbc", 16 << 10, KeyMode::Static, enc, 1, acc), 1000.0),
            s(1, at("aes-256-cbc", 16 << 10, KeyMode::Static, dec, 1, acc), 4000.0),
            s(1, at("aes-256-cbc", 16 << 10, KeyMode::Static, enc, 4, acc), 3600.0),
        ];
        let v = view(Scenario::Modes, &modes);
        assert!(
            v.classes[0].answer.contains("at 4.0× the speed of"),
            "{}",
            v.classes[0].answer
        );
        let cbc = v.classes[0]
            .rows
            .iter()
            .find(|r| r.subject.starts_with("aes-256-cbc"))
            .unwrap();
        assert!(cbc.subject.contains("encrypt serial"));
        assert!((cbc.cells[3].unwrap().median - 3.6).abs() < 1e-9);

        let fallback = vec![
            s(1, at("aes-256-gcm", 16 << 10, KeyMode::Static, enc, 1, acc), 3000.0),
            s(1, at("aes-256-gcm", 16 << 10, KeyMode::Static, enc, 1, sw), 60.0),
        ];
        let v = view(Scenario::Fallback, &fallback);
        assert_eq!(
            v.classes[0].answer,
            "losing acceleration costs up to 50.0× (aes-256-gcm at 16KiB)"
        );

        let field = vec![
            s(1, at("aes-256-gcm", 11, KeyMode::Static, enc, 1, acc), 110.0),
            s(1, at("aes-256-gcm", 11, KeyMode::HkdfPerUser, enc, 1, acc), 11.0),
        ];
        let v = view(Scenario::FieldLevel, &field);
        assert!(
            v.classes[0].answer.contains("aes-256-gcm 10.0×"),
            "{}",
            v.classes[0].answer
        );
        let row = &v.classes[0]
            .rows
            .iter()
            .find(|r| r.subject == "aes-256-gcm at 11 B")
            .unwrap();
        assert!((row.cells[0].unwrap().median - 10e6).abs() < 1.0, "ops/s at 11 B");
    }

    #[test]
    fn a_class_without_points_of_the_scenario_has_no_answer() {
        let c = class("EPYC", "accelerated");
        let quick = sample(&c, 1, Suite::Quick.expand(1)[0].point(), 100.0, PathUsed::Accelerated);
        for scenario in Scenario::ALL {
            assert_eq!(
                view(scenario, std::slice::from_ref(&quick)).classes,
                vec![],
                "{scenario:?}"
            );
        }
        assert_eq!(Scenario::from_name("modes"), Some(Scenario::Modes));
        assert_eq!(Scenario::from_name("full"), None);
    }
}
