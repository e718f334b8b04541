//! `field-level`: encryptions per second per core of 11 B and 18 B fields (a
//! phone number, an ID card number), and what per-user (HKDF) keys cost
//! against one static key.

use cipherfleet_core::spec::{Direction, KeyMode};

use super::figure::{figure, per_host, ratio};
use super::{Row, Sample, Scenario};
use crate::db::points::LatestResult;

pub(super) const COLUMNS: [&str; 4] = [
    "ops/s per core, static key",
    "ops/s per core, key per op",
    "ops/s per core, hkdf per user",
    "× cost of per-user keys",
];

pub(super) fn answer(samples: &[&Sample]) -> (String, Vec<Row>) {
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
    use cipherfleet_core::path::{Path, PathUsed};
    use cipherfleet_core::spec::{Direction, KeyMode};

    use super::super::tests::{at, class, sample};
    use super::super::{Scenario, view};

    #[test]
    fn field_level_shows_ops_per_core_and_what_per_user_keys_cost() {
        let c = class("EPYC", "accelerated");
        let gcm = |k| at("aes-256-gcm", 11, k, Direction::Encrypt, 1, Path::Accelerated);
        let field = vec![
            sample(&c, 1, gcm(KeyMode::Static), 110.0, PathUsed::Accelerated),
            sample(&c, 1, gcm(KeyMode::HkdfPerUser), 11.0, PathUsed::Accelerated),
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
}
