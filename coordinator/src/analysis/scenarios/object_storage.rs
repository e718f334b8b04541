//! `object-storage`: which AEAD to encrypt 10 MiB objects with, 32 in flight:
//! throughput, P99 per object, per-core speed and cores per 10 Gbit/s, and
//! the planner's recommendation ([`crate::analysis::capacity::recommend`]).
//! The view reads the scenario (`concurrency` set) at the largest object size
//! its class measured, and says which.

use std::collections::BTreeMap;

use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{Direction, format_size};

use super::figure::{figure, lacking, mb_s, per_host};
use super::{Answered, Row, Sample, Scenario};
use crate::analysis::capacity::{MB_S_PER_GBIT_S, recommend};
use crate::domain::latest::LatestResult;

pub(super) const COLUMNS: [&str; 4] = [
    "MB/s (all threads)",
    "P99 per object (ms)",
    "MB/s per core",
    "cores per 10 Gbit/s",
];

/// Whether an accelerated request of an AES algorithm ran (partly) in software.
fn aes_in_software(samples: &[&Sample]) -> bool {
    samples.iter().any(|s| {
        s.result.point.algorithm.uses_aes()
            && s.result.point.path == Path::Accelerated
            && s.result.path_used != PathUsed::Accelerated
    })
}

/// The class's answer, and the object size it is at; `None` without an encryption.
pub(super) fn answer(samples: &[&Sample]) -> Option<(Answered, u64)> {
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
        None => "no AEAD's per-core rate is measured on this class yet".to_string(),
    };
    answer.push_str(&format!(" at {}, {in_flight} in flight", format_size(size)));
    if aes_in_software(&encrypt) {
        answer.push_str("; AES ran in software on this class");
    }
    let answered = Answered {
        lacking: lacking(&rows, None),
        text: answer,
        rows,
    };
    Some((answered, size))
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::Point;
    use cipherfleet_core::path::PathUsed;
    use cipherfleet_core::spec::Suite;

    use super::super::tests::{class, sample};
    use super::super::{Scenario, view};
    use crate::analysis::class::MachineClass;

    fn object(algorithm: &str, threads: u32) -> Point {
        Point {
            algorithm: algorithm.parse().unwrap(),
            size_bytes: 1 << 20,
            threads,
            concurrency: Some(4),
            ..Suite::Quick.expand(1)[0].point
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
            Suite::Quick.expand(1)[0].point,
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
}
