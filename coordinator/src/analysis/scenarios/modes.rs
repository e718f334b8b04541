//! `modes`: the AES-256 modes at 16 KiB per class: one thread each way, CBC
//! decrypt against encrypt, and each host's speed-up at its own largest
//! thread count by the scaling rule ([`crate::analysis::scaling`]).

use std::collections::BTreeMap;

use cipherfleet_core::algorithm::{Algorithm, Mode};
use cipherfleet_core::spec::Direction;

use super::figure::{Figure, figure, lacking, mb_s, per_host, ratio};
use super::{Answered, Row, Sample, Scenario};
use crate::analysis::scaling::{HostSeries, ThreadPoint, thread_scaling};
use crate::domain::latest::LatestResult;

pub(super) const COLUMNS: [&str; 4] = [
    "encrypt MB/s, 1 thread",
    "decrypt MB/s, 1 thread",
    "decrypt ÷ encrypt",
    "speed-up at all cores (encrypt)",
];

/// Whether the mode's encryption of one message can run its blocks in parallel.
fn parallel_encrypt(mode: Mode) -> bool {
    !matches!(mode, Mode::Cbc | Mode::Ccm | Mode::CbcHmacSha256)
}

pub(super) fn answer(samples: &[&Sample]) -> Answered {
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
    let cbc = match cbc_ratio {
        Some(f) => format!(
            "CBC decrypt runs at {:.1}× the speed of CBC encrypt on one thread",
            f.median
        ),
        None => "CBC decrypt against encrypt is not measured on this class yet".to_string(),
    };
    Answered {
        text: format!("{cbc}; every mode scales across threads (one message a thread)"),
        // The speed-up needs two thread counts, which a one-core host never has.
        lacking: lacking(&rows, Some(0..3)),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::{Path, PathUsed};
    use cipherfleet_core::spec::{Direction, KeyMode};

    use super::super::tests::{at, class, sample};
    use super::super::{Scenario, view};

    #[test]
    fn modes_shows_cbc_decrypt_against_encrypt_and_each_hosts_speed_up() {
        let c = class("EPYC", "accelerated");
        let s = |p, mb_s| sample(&c, 1, p, mb_s, PathUsed::Accelerated);
        let cbc = |d, threads| at("aes-256-cbc", 16 << 10, KeyMode::Static, d, threads, Path::Accelerated);
        let modes = vec![
            s(cbc(Direction::Encrypt, 1), 1000.0),
            s(cbc(Direction::Decrypt, 1), 4000.0),
            s(cbc(Direction::Encrypt, 4), 3600.0),
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
        assert!(v.classes[0].fill.is_some(), "the other modes are not measured");
    }

    #[test]
    fn modes_without_cbc_decrypt_says_so_and_what_measures_it() {
        let c = class("EPYC", "accelerated");
        let enc = at(
            "aes-256-ctr",
            16 << 10,
            KeyMode::Static,
            Direction::Encrypt,
            1,
            Path::Accelerated,
        );
        let v = view(Scenario::Modes, &[sample(&c, 1, enc, 2000.0, PathUsed::Accelerated)]);
        let answer = &v.classes[0];
        assert!(
            answer
                .answer
                .starts_with("CBC decrypt against encrypt is not measured on this class yet"),
            "{}",
            answer.answer
        );
        assert_eq!(answer.fill, Some(Scenario::Modes.fill()));
    }
}
