//! `legacy-migration`: how much faster AES is than DES and 3DES in CBC, key
//! setup included (16 KiB with a key setup per operation is the headline).

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::spec::KeyMode;

use super::figure::{figure, lacking, mb_s, per_host, ratio, times};
use super::{Answered, Row, Sample, Scenario};
use crate::domain::latest::LatestResult;

pub(super) const COLUMNS: [&str; 5] = [
    "16 KiB MB/s, static key",
    "16 KiB MB/s, key setup per op",
    "16 B ops/s, key setup per op",
    "× 3DES at 16 KiB with key setup",
    "× DES at 16 KiB with key setup",
];

pub(super) fn answer(samples: &[&Sample]) -> Answered {
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
    // Only what was measured is said; what is not is left to the fill.
    let parts: Vec<String> = names[2..]
        .iter()
        .filter_map(|&a| {
            let over = |old| ratio(&bulk_keyed(a), &bulk_keyed(old));
            match (over(tdes), over(des)) {
                (Some(t), Some(d)) => Some(format!(
                    "{a} is {} faster than 3DES and {} than DES",
                    times(t),
                    times(d)
                )),
                (Some(t), None) => Some(format!("{a} is {} faster than 3DES", times(t))),
                (None, Some(d)) => Some(format!("{a} is {} faster than DES", times(d))),
                (None, None) => None,
            }
        })
        .collect();
    let text = if parts.is_empty() {
        "AES against DES and 3DES with a key setup per operation is not measured on this class yet".to_string()
    } else {
        format!("{} (16 KiB, key setup per op)", parts.join("; "))
    };
    Answered {
        lacking: lacking(&rows, None),
        text,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::{Path, PathUsed};
    use cipherfleet_core::spec::{Direction, KeyMode};

    use super::super::tests::{at, class, sample};
    use super::super::{Sample, Scenario, view};

    #[test]
    fn legacy_migration_says_how_many_times_faster_aes_is_than_des_and_3des() {
        let c = class("EPYC", "accelerated");
        let legacy: Vec<Sample> = [
            ("des-cbc", 20.0),
            ("des-ede3-cbc", 10.0),
            ("aes-128-cbc", 500.0),
            ("aes-256-cbc", 400.0),
        ]
        .into_iter()
        .map(|(a, v)| {
            let p = at(a, 16 << 10, KeyMode::PerOp, Direction::Encrypt, 1, Path::Accelerated);
            sample(&c, 1, p, v, PathUsed::Accelerated)
        })
        .collect();
        let v = view(Scenario::LegacyMigration, &legacy);
        assert!(
            v.classes[0]
                .answer
                .starts_with("aes-128-cbc is 50.0× faster than 3DES and 25.0× than DES"),
            "{}",
            v.classes[0].answer
        );
        assert!(
            v.classes[0].fill.is_some(),
            "the static-key and 16 B points are not measured"
        );
    }

    #[test]
    fn legacy_migration_after_quick_says_what_fills_it_not_question_marks() {
        // What the quick suite leaves: AES-128-CBC and 3DES at 16 KiB, static key only.
        let c = class("EPYC", "accelerated");
        let quick: Vec<Sample> = [("aes-128-cbc", 500.0), ("des-ede3-cbc", 10.0)]
            .into_iter()
            .map(|(a, v)| {
                let p = at(a, 16 << 10, KeyMode::Static, Direction::Encrypt, 1, Path::Accelerated);
                sample(&c, 1, p, v, PathUsed::Accelerated)
            })
            .collect();
        let v = view(Scenario::LegacyMigration, &quick);
        let answer = &v.classes[0];
        assert!(!answer.answer.contains('?'), "{}", answer.answer);
        assert!(answer.answer.contains("not measured"), "{}", answer.answer);
        assert_eq!(
            answer.fill.as_ref().map(|f| f.command()).as_deref(),
            Some("cipherfleet-coordinator campaign start --suite legacy-migration")
        );
        // Once measured, partly: what is known is said, nothing is made up.
        let mut keyed = quick.clone();
        for (a, v) in [("aes-128-cbc", 400.0), ("des-ede3-cbc", 8.0)] {
            let p = at(a, 16 << 10, KeyMode::PerOp, Direction::Encrypt, 1, Path::Accelerated);
            keyed.push(sample(&c, 1, p, v, PathUsed::Accelerated));
        }
        let v = view(Scenario::LegacyMigration, &keyed);
        assert_eq!(
            v.classes[0].answer,
            "aes-128-cbc is 50.0× faster than 3DES (16 KiB, key setup per op)"
        );
    }
}
