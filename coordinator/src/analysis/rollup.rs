//! One period's summary of a point's results (retention's daily summaries,
//! and the raw days of a host's history): count, median, p10, p90, min, max
//! and the path mix. Computed here, with `cipherfleet_core::stats`, not in
//! SQL (`cells::tests::no_statistic_is_computed_in_sql`).

use cipherfleet_core::stats::{median, percentile};

/// A period's results summarised (also a row's columns in `result_rollups`).
#[derive(Debug, Clone, Copy, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct Summary {
    pub results: i64,
    pub median_mb_s: f64,
    /// Nearest-rank percentiles: each a figure that was measured.
    pub p10_mb_s: f64,
    pub p90_mb_s: f64,
    pub min_mb_s: f64,
    pub max_mb_s: f64,
    pub accelerated: i64,
    pub partial: i64,
    pub software: i64,
}

impl Summary {
    /// The summary of `results` (throughput in MB/s and what ran, as stored:
    /// `accelerated`, `partial`, `software`); `None` when there are none.
    pub fn of<'a>(results: impl IntoIterator<Item = (f64, &'a str)>) -> Option<Summary> {
        let (mut values, mut mix) = (Vec::new(), [0i64; 3]);
        for (mb_s, used) in results {
            values.push(mb_s);
            match used {
                "accelerated" => mix[0] += 1,
                "partial" => mix[1] += 1,
                _ => mix[2] += 1,
            }
        }
        Some(Summary {
            results: values.len() as i64,
            median_mb_s: median(&values)?,
            p10_mb_s: percentile(&values, 10.0)?,
            p90_mb_s: percentile(&values, 90.0)?,
            min_mb_s: values.iter().copied().fold(f64::INFINITY, f64::min),
            max_mb_s: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            accelerated: mix[0],
            partial: mix[1],
            software: mix[2],
        })
    }

    /// Two summaries of one period as one (a result folded after its day
    /// was): counts add, min and max stay exact, the quantiles are weighted
    /// by results (the results themselves are gone).
    pub fn merge(self, other: Summary) -> Summary {
        let (a, b) = (self.results as f64, other.results as f64);
        let weigh = |x: f64, y: f64| (x * a + y * b) / (a + b);
        Summary {
            results: self.results + other.results,
            median_mb_s: weigh(self.median_mb_s, other.median_mb_s),
            p10_mb_s: weigh(self.p10_mb_s, other.p10_mb_s),
            p90_mb_s: weigh(self.p90_mb_s, other.p90_mb_s),
            min_mb_s: self.min_mb_s.min(other.min_mb_s),
            max_mb_s: self.max_mb_s.max(other.max_mb_s),
            accelerated: self.accelerated + other.accelerated,
            partial: self.partial + other.partial,
            software: self.software + other.software,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_is_summarised_by_measured_figures_and_its_path_mix() {
        let day: Vec<(f64, &str)> = (1..=10)
            .map(|i| (f64::from(i) * 100.0, if i == 3 { "software" } else { "accelerated" }))
            .collect();
        let s = Summary::of(day).unwrap();
        assert_eq!(
            (s.results, s.median_mb_s, s.p10_mb_s, s.p90_mb_s),
            (10, 550.0, 100.0, 900.0)
        );
        assert_eq!((s.min_mb_s, s.max_mb_s), (100.0, 1000.0));
        assert_eq!((s.accelerated, s.partial, s.software), (9, 0, 1));
        assert_eq!(Summary::of(Vec::<(f64, &str)>::new()), None);
        let one = Summary::of([(200.0, "partial")]).unwrap();
        let both = s.merge(one);
        assert_eq!(
            (both.results, both.min_mb_s, both.max_mb_s, both.partial),
            (11, 100.0, 1000.0, 1)
        );
        assert!((both.median_mb_s - (550.0 * 10.0 + 200.0) / 11.0).abs() < 1e-9);
    }
}
