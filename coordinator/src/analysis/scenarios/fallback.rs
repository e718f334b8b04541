//! `fallback`: what losing hardware acceleration costs on each class, the
//! accelerated path against the software one at 16 B and 16 KiB. The ratio
//! per host is the `/fallback` page's ([`software_speed::ratio`]).

use std::collections::BTreeMap;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::spec::format_size;

use super::figure::{Figure, figure, lacking, mb_s, per_host};
use super::{Answered, Row, Sample, Scenario};
use crate::analysis::software_speed;
use crate::domain::latest::LatestResult;

pub(super) const COLUMNS: [&str; 3] = ["accelerated MB/s", "software MB/s", "× lost without acceleration"];

/// Each host's accelerated ÷ software, over hosts that measured both.
fn cost(accelerated: &BTreeMap<i64, f64>, software: &BTreeMap<i64, f64>) -> Option<Figure> {
    let ratios: Vec<f64> = accelerated
        .iter()
        .filter_map(|(host, &a)| software_speed::ratio(Some(a), software.get(host).copied()))
        .collect();
    Figure::of(&ratios)
}

pub(super) fn answer(samples: &[&Sample]) -> Answered {
    let mut rows = Vec::new();
    let mut worst: Option<(Algorithm, u64, f64)> = None;
    for a in Scenario::Fallback.algorithms() {
        for size in [16u64, 16 << 10] {
            let on = |p: Path| {
                move |r: &LatestResult| r.point.algorithm == a && r.point.size_bytes == size && r.point.path == p
            };
            let acc = per_host(samples, &on(Path::Accelerated), mb_s);
            let soft = per_host(samples, &on(Path::Software), mb_s);
            let cost = cost(&acc, &soft);
            if let Some(c) = cost
                && worst.is_none_or(|w| c.median > w.2)
            {
                worst = Some((a, size, c.median));
            }
            rows.push(Row {
                subject: format!("{a} at {}", format_size(size)),
                cells: vec![figure(&acc), figure(&soft), cost],
            });
        }
    }
    let text = match worst {
        Some((a, size, x)) if x >= 1.5 => {
            format!("losing acceleration costs up to {x:.1}× ({a} at {})", format_size(size))
        }
        Some((_, _, x)) => format!("both paths run alike (at most {x:.1}×): this class has no acceleration to lose"),
        None => "the accelerated and software paths are not measured side by side on this class yet".to_string(),
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
    use super::super::{Scenario, view};

    #[test]
    fn fallback_names_the_point_that_loses_most_without_acceleration() {
        let c = class("EPYC", "accelerated");
        let gcm = |path| at("aes-256-gcm", 16 << 10, KeyMode::Static, Direction::Encrypt, 1, path);
        let fallback = vec![
            sample(&c, 1, gcm(Path::Accelerated), 3000.0, PathUsed::Accelerated),
            sample(&c, 1, gcm(Path::Software), 60.0, PathUsed::Accelerated),
        ];
        let v = view(Scenario::Fallback, &fallback);
        assert_eq!(
            v.classes[0].answer,
            "losing acceleration costs up to 50.0× (aes-256-gcm at 16KiB)"
        );
        let row = &v.classes[0].rows[1];
        assert_eq!(row.subject, "aes-256-gcm at 16KiB");
        assert_eq!(row.cells[2].unwrap().median, 50.0);
    }

    #[test]
    fn without_the_software_path_the_answer_names_the_suite_that_measures_it() {
        // After the quick suite: the accelerated path alone.
        let c = class("EPYC", "accelerated");
        let gcm = at(
            "aes-256-gcm",
            16 << 10,
            KeyMode::Static,
            Direction::Encrypt,
            1,
            Path::Accelerated,
        );
        let v = view(Scenario::Fallback, &[sample(&c, 1, gcm, 3000.0, PathUsed::Accelerated)]);
        let answer = &v.classes[0];
        assert!(!answer.answer.contains('?'), "{}", answer.answer);
        assert!(answer.answer.contains("not measured"), "{}", answer.answer);
        assert_eq!(
            answer.fill.as_ref().map(|f| f.command()).as_deref(),
            Some("cipherfleet-coordinator campaign start --suite fallback")
        );
    }
}
