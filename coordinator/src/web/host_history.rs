//! A host's whole history of its key points, past the raw window too: the
//! daily (and, past `--keep-daily`, monthly) summaries retention folds raw
//! results into ([`crate::retention`]), joined with the raw results of the
//! window summarised per UTC day: the chart on `/hosts/{id}` (its table is
//! `/api/v1/hosts/{id}/history`, served with the host's other tables).

use super::format;
use super::svg::{LineChart, XAxis, time_x};
use crate::store::rollups::HistoryRow;

/// The whole-history chart: one dot per UTC day (the median of its
/// results), per month before the daily window, and the sentence that says
/// so beside it; `None` when no algorithm has two periods (the chart of each
/// result says it all then).
pub fn chart(rows: &[HistoryRow], algorithms: &[&str], size_bytes: u64) -> Option<(String, String)> {
    let periods = |alg: &str| rows.iter().filter(|r| r.algorithm == alg).count();
    if algorithms.iter().all(|a| periods(a) < 2) {
        return None;
    }
    let monthly_until = rows
        .iter()
        .filter(|r| r.resolution == "month")
        .map(|r| r.period_start)
        .max();
    let resolution = match monthly_until {
        Some(last) => format!(
            "The whole history: one dot per month to {}, per UTC day after, each the median of its results.",
            last.format("%Y-%m")
        ),
        None => "The whole history: one dot per UTC day, the median of its results.".to_string(),
    };
    // The title stays short: the chart's width is fixed, the resolution is said beside it.
    let mut chart = LineChart::new(
        format!(
            "Whole history: {} encrypt, 1 thread, accelerated path",
            format::bytes(size_bytes)
        ),
        XAxis::Time,
    );
    for alg in algorithms {
        let line: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.algorithm == *alg)
            .map(|r| (time_x(r.period_start), r.summary.median_mb_s))
            .collect();
        if !line.is_empty() {
            chart = chart.series(*alg, line);
        }
    }
    Some((chart.render(), resolution))
}
