//! A figure over a class's hosts (median and min–max), and the per-host
//! helpers every scenario reads its points with.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Sample;
use crate::analysis::robust::median;
use crate::domain::latest::LatestResult;

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

pub(super) type Filter<'a> = &'a dyn Fn(&LatestResult) -> bool;

/// Each host's value of `f` over its one result passing `keep` (the first, if several).
pub(super) fn per_host(samples: &[&Sample], keep: Filter<'_>, f: impl Fn(&Sample) -> f64) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    for s in samples.iter().filter(|s| keep(&s.result)) {
        out.entry(s.result.host_id).or_insert_with(|| f(s));
    }
    out
}

pub(super) fn figure(values: &BTreeMap<i64, f64>) -> Option<Figure> {
    Figure::of(&values.values().copied().collect::<Vec<_>>())
}

/// The per-host ratio `a / b` over hosts that have both, as a figure.
pub(super) fn ratio(a: &BTreeMap<i64, f64>, b: &BTreeMap<i64, f64>) -> Option<Figure> {
    let r: Vec<f64> = a.iter().filter_map(|(h, x)| Some(x / b.get(h)?)).collect();
    Figure::of(&r)
}

pub(super) fn mb_s(s: &Sample) -> f64 {
    s.result.throughput_mb_s
}

/// A ratio's median as the answers print it: `2.5×`.
pub(super) fn times(f: Figure) -> String {
    format!("{:.1}×", f.median)
}

/// Whether some figure of `rows` (in `columns`, all when `None`) is not measured.
pub(super) fn lacking(rows: &[super::Row], columns: Option<std::ops::Range<usize>>) -> bool {
    rows.iter().any(|r| {
        let cells = match &columns {
            Some(c) => &r.cells[c.clone()],
            None => &r.cells[..],
        };
        cells.iter().any(Option::is_none)
    })
}
