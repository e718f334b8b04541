//! `field-level`: encryptions per second per core of 11 B and 18 B fields (a
//! phone number, an ID card number), what per-user (HKDF) keys cost against
//! one static key, and what random nonces (from the OS, per message) cost
//! against counters under that static key. Every figure is one thread's, so
//! per core; each cost is a per-host ratio with its spread over the class.

use cipherfleet_core::spec::{Direction, KeyMode, Nonce};

use super::figure::{Figure, figure, lacking, per_host, ratio};
use super::{Answered, Row, Sample, Scenario};
use crate::domain::latest::LatestResult;

pub(super) const COLUMNS: [&str; 6] = [
    "ops/s per core, static key",
    "ops/s per core, key per op",
    "ops/s per core, hkdf per user",
    "× cost of per-user keys",
    "ops/s per core, random nonces",
    "× cost of random nonces",
];

/// One size's costs for one algorithm, for the answer.
struct Costs {
    per_user: Option<Figure>,
    random_nonces: Option<Figure>,
}

pub(super) fn answer(samples: &[&Sample]) -> Answered {
    let mut rows = Vec::new();
    let mut at_11 = Vec::new();
    for a in Scenario::FieldLevel.algorithms() {
        for size in [11u64, 18] {
            let encrypt = |k: KeyMode, n: Nonce| {
                let keep = move |r: &LatestResult| {
                    r.point.algorithm == a
                        && r.point.size_bytes == size
                        && r.point.key_mode == k
                        && r.point.nonce == n
                        && r.point.direction == Direction::Encrypt
                        && r.point.threads == 1
                };
                per_host(samples, &keep, |s| s.result.ops_per_s)
            };
            let (fixed, per_op, per_user, random) = (
                encrypt(KeyMode::Static, Nonce::Counter),
                encrypt(KeyMode::PerOp, Nonce::Counter),
                encrypt(KeyMode::HkdfPerUser, Nonce::Counter),
                encrypt(KeyMode::Static, Nonce::Random),
            );
            let costs = Costs {
                per_user: ratio(&fixed, &per_user),
                random_nonces: ratio(&fixed, &random),
            };
            rows.push(Row {
                subject: format!("{a} at {size} B"),
                cells: vec![
                    figure(&fixed),
                    figure(&per_op),
                    figure(&per_user),
                    costs.per_user,
                    figure(&random),
                    costs.random_nonces,
                ],
            });
            if size == 11 {
                at_11.push((a, costs));
            }
        }
    }
    let listed = |cost: fn(&Costs) -> Option<Figure>| {
        at_11
            .iter()
            .filter_map(|(a, c)| cost(c).map(|f| format!("{a} {:.1}×", f.median)))
            .collect::<Vec<_>>()
    };
    let (per_user, random) = (listed(|c| c.per_user), listed(|c| c.random_nonces));
    let mut answer = Vec::new();
    if !per_user.is_empty() {
        answer.push(format!("per-user (HKDF) keys cost {}", per_user.join(", ")));
    }
    if !random.is_empty() {
        answer.push(format!("random nonces cost {}", random.join(", ")));
    }
    let text = if answer.is_empty() {
        "static keys with counter nonces beside per-user keys or random nonces are not measured on this class yet"
            .to_string()
    } else {
        format!(
            "{} at 11 B, against one static key with counter nonces",
            answer.join("; ")
        )
    };
    Answered {
        lacking: lacking(&rows, None),
        text,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::Point;
    use cipherfleet_core::path::{Path, PathUsed};
    use cipherfleet_core::spec::{Direction, KeyMode, Nonce};

    use super::super::tests::{at, class, sample};
    use super::super::{Scenario, view};

    fn gcm(size: u64, key_mode: KeyMode, nonce: Nonce) -> Point {
        Point {
            nonce,
            ..at("aes-256-gcm", size, key_mode, Direction::Encrypt, 1, Path::Accelerated)
        }
    }

    #[test]
    fn field_level_shows_ops_per_core_and_what_per_user_keys_cost() {
        let c = class("EPYC", "accelerated");
        let field = vec![
            sample(
                &c,
                1,
                gcm(11, KeyMode::Static, Nonce::Counter),
                110.0,
                PathUsed::Accelerated,
            ),
            sample(
                &c,
                1,
                gcm(11, KeyMode::HkdfPerUser, Nonce::Counter),
                11.0,
                PathUsed::Accelerated,
            ),
        ];
        let v = view(Scenario::FieldLevel, &field);
        assert!(
            v.classes[0]
                .answer
                .starts_with("per-user (HKDF) keys cost aes-256-gcm 10.0× at 11 B"),
            "{}",
            v.classes[0].answer
        );
        let row = &v.classes[0]
            .rows
            .iter()
            .find(|r| r.subject == "aes-256-gcm at 11 B")
            .unwrap();
        assert!((row.cells[0].unwrap().median - 10e6).abs() < 1.0, "ops/s at 11 B");
        assert_eq!(row.cells[4], None, "no random nonces measured");
    }

    #[test]
    fn random_nonces_cost_the_counter_rate_over_the_random_rate_per_host_with_its_spread() {
        let c = class("EPYC", "accelerated");
        let mut field = Vec::new();
        // Host 1 loses 2× to random nonces, host 2 4×; a random draw never counts as a counter point.
        for (host, counter, random) in [(1, 100.0, 50.0), (2, 120.0, 30.0)] {
            for size in [11, 18] {
                let s = |p, mb_s| sample(&c, host, p, mb_s, PathUsed::Accelerated);
                field.push(s(gcm(size, KeyMode::Static, Nonce::Random), random));
                field.push(s(gcm(size, KeyMode::Static, Nonce::Counter), counter));
            }
        }
        let v = view(Scenario::FieldLevel, &field);
        let answer = &v.classes[0].answer;
        assert!(
            answer.starts_with("random nonces cost aes-256-gcm 3.0× at 11 B"),
            "{answer}"
        );
        let row = v.classes[0]
            .rows
            .iter()
            .find(|r| r.subject == "aes-256-gcm at 18 B")
            .unwrap();
        let counter = row.cells[0].unwrap();
        assert_eq!((counter.min, counter.max), (100e6 / 18.0, 120e6 / 18.0));
        let random = row.cells[4].unwrap();
        assert_eq!((random.min, random.max, random.hosts), (30e6 / 18.0, 50e6 / 18.0, 2));
        let cost = row.cells[5].unwrap();
        assert_eq!((cost.median, cost.min, cost.max, cost.hosts), (3.0, 2.0, 4.0, 2));
        assert_eq!(v.columns.len(), row.cells.len());
    }
}
