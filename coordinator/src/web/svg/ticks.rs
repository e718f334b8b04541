//! Where values land on a chart's axes and which of them get a labelled
//! tick: powers of two on the payload-size axis, round numbers (1, 2 or 5 ×
//! 10ⁿ apart) on linear axes, round UTC times on the time axis.

use chrono::{DateTime, Utc};

use super::XAxis;
use crate::web::format;

/// Where x values land: the domain and its labelled ticks.
pub(super) struct XScale {
    log: bool,
    /// Domain ends, in log₂ units on the log axis.
    lo: f64,
    hi: f64,
    /// Tick positions (axis units) and their labels.
    pub ticks: Vec<(f64, String)>,
}

impl XScale {
    /// The scale that fits every x of `points` (at least one, all drawable on `axis`).
    pub fn fit(axis: &XAxis, points: &[(f64, f64)]) -> Self {
        let min = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let max = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        match axis {
            XAxis::Bytes => {
                let (mut lo, mut hi) = (min.log2(), max.log2());
                if hi - lo < 1.0 {
                    // One size: a window of one doubling either side.
                    lo -= 1.0;
                    hi += 1.0;
                }
                XScale {
                    log: true,
                    lo,
                    hi,
                    ticks: log2_ticks(lo, hi)
                        .into_iter()
                        .map(|e| (2f64.powi(e), format::bytes(1u64 << e)))
                        .collect(),
                }
            }
            XAxis::Linear { .. } => {
                let (lo, hi) = if max > min { (min, max) } else { (min - 1.0, max + 1.0) };
                // Counts (threads) get whole ticks only: "1.5 threads" means nothing.
                let whole = points.iter().all(|p| p.0.fract() == 0.0);
                let ticks = linear_ticks(lo, hi, whole).into_iter().map(|t| (t, plain(t))).collect();
                XScale {
                    log: false,
                    lo,
                    hi,
                    ticks,
                }
            }
            XAxis::Time => {
                let (lo, hi) = if max > min {
                    (min, max)
                } else {
                    (min - 3600.0, max + 3600.0)
                };
                XScale {
                    log: false,
                    lo,
                    hi,
                    ticks: time_ticks(lo, hi),
                }
            }
        }
    }

    /// 0 at the left end of the plot, 1 at the right.
    pub fn fraction(&self, x: f64) -> f64 {
        let v = if self.log { x.log2() } else { x };
        (v - self.lo) / (self.hi - self.lo)
    }
}

/// The y axis: from zero to a round top above the largest value.
pub(super) struct YScale {
    /// Tick values, the last one the axis top.
    pub ticks: Vec<f64>,
    top: f64,
}

impl YScale {
    /// The scale that fits every y of `points`.
    pub fn fit(points: &[(f64, f64)]) -> Self {
        // Throughput starts at zero: a y axis from the minimum would make a
        // 5 % difference look like a factor of two.
        let max = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
        let ticks = nice_ticks(max);
        let top = *ticks.last().unwrap_or(&1.0);
        YScale { ticks, top }
    }

    /// 0 at the bottom of the plot, 1 at the top.
    pub fn fraction(&self, y: f64) -> f64 {
        y / self.top
    }
}

/// Powers of two (as exponents) inside `[lo, hi]` (log₂ units): every
/// power when few, otherwise the exponents that are multiples of an n that
/// grows with the range, so that at most ten are labelled (n = 2 keeps
/// 1 KiB, 16 KiB and 1 MiB).
fn log2_ticks(lo: f64, hi: f64) -> Vec<i32> {
    let first = lo.ceil().max(0.0) as i32;
    let last = hi.floor().min(62.0) as i32;
    if last < first {
        return Vec::new();
    }
    let step = ((last - first) / 10 + 1).max(1);
    (first..=last).filter(|e| e % step == 0).collect()
}

/// About five round ticks (1, 2 or 5 × 10ⁿ apart) from 0 to at least `max`; the last is the axis top.
fn nice_ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let step = nice_step(max / 5.0);
    let count = (max / step).ceil().max(1.0) as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// Round ticks inside `[lo, hi]`, at least 1 apart when `whole`.
fn linear_ticks(lo: f64, hi: f64, whole: bool) -> Vec<f64> {
    let step = nice_step((hi - lo) / 6.0);
    let step = if whole { step.max(1.0) } else { step };
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// The 1, 2 or 5 × 10ⁿ nearest to `raw` (rounding, so that a range gets four to eight ticks).
fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    let m = match raw / magnitude {
        r if r < 1.5 => 1.0,
        r if r < 3.0 => 2.0,
        r if r < 7.0 => 5.0,
        _ => 10.0,
    };
    m * magnitude
}

/// Ticks at round UTC times, at most eight; dates alone from a day apart.
fn time_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    const STEPS: [i64; 14] = [
        60,
        300,
        900,
        3600,
        3 * 3600,
        6 * 3600,
        12 * 3600,
        86400,
        2 * 86400,
        7 * 86400,
        14 * 86400,
        30 * 86400,
        91 * 86400,
        365 * 86400,
    ];
    let span = hi - lo;
    let step = STEPS
        .into_iter()
        .find(|s| span / *s as f64 <= 8.0)
        .unwrap_or(365 * 86400);
    let pattern = if step >= 86400 { "%Y-%m-%d" } else { "%m-%d %H:%M" };
    let first = (lo / step as f64).ceil() as i64;
    let last = (hi / step as f64).floor() as i64;
    (first..=last)
        .filter_map(|i| {
            let t = i * step;
            DateTime::<Utc>::from_timestamp(t, 0).map(|d| (t as f64, d.format(pattern).to_string()))
        })
        .collect()
}

/// An axis number without trailing noise: `4`, `2.5`, `1500`, `0.02`.
pub(super) fn plain(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: f64 = 86400.0;
    /// 2024-10-04 00:00 UTC.
    const T0: f64 = 20000.0 * DAY;

    #[test]
    fn payload_size_ticks_are_powers_of_two_at_most_ten() {
        for (lo, hi, want) in [
            // 11 B … 10 MiB: 16 B to 8 MiB fit, every second power labelled.
            (11.0, 10.0 * 1048576.0, vec![4, 6, 8, 10, 12, 14, 16, 18, 20, 22]),
            // A narrow range labels every power.
            (10.0, 70.0, vec![4, 5, 6]),
            (16.0, 16.0, vec![4]),
            // 1 B … 1 GiB: 31 powers, every fourth labelled.
            (1.0, 1073741824.0, vec![0, 4, 8, 12, 16, 20, 24, 28]),
            // Between two powers: none.
            (5.0, 7.0, vec![]),
            // Below one byte the axis starts at 1 B.
            (0.25, 4.0, vec![0, 1, 2]),
        ] {
            assert_eq!(log2_ticks(f64::log2(lo), f64::log2(hi)), want, "{lo} … {hi}");
        }
    }

    #[test]
    fn a_single_payload_size_gets_a_doubling_either_side() {
        let scale = XScale::fit(&XAxis::Bytes, &[(16384.0, 1.0)]);
        let labels: Vec<&str> = scale.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["8 KiB", "16 KiB", "32 KiB"]);
        assert_eq!(scale.fraction(8192.0), 0.0);
        assert_eq!(scale.fraction(16384.0), 0.5);
        assert_eq!(scale.fraction(32768.0), 1.0);
    }

    #[test]
    fn y_ticks_are_round_and_reach_past_the_largest_value() {
        for (max, want) in [
            (2600.0, vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0]),
            (9.0, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
            (1.0, vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]),
            (0.0, vec![0.0, 1.0]),
            (-3.0, vec![0.0, 1.0]),
            (f64::INFINITY, vec![0.0, 1.0]),
        ] {
            assert_eq!(nice_ticks(max), want, "max {max}");
        }
        // The axis starts at zero even when every value is far from it.
        let scale = YScale::fit(&[(1.0, 2400.0), (2.0, 2600.0)]);
        assert_eq!(scale.ticks.first(), Some(&0.0));
        assert_eq!(scale.fraction(1500.0), 0.5);
    }

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        for (raw, want) in [
            (1.0, 1.0),
            (1.49, 1.0),
            (1.5, 2.0),
            (2.9, 2.0),
            (3.0, 5.0),
            (6.9, 5.0),
            (7.0, 10.0),
            (520.0, 500.0),
            (0.013, 0.01),
            (0.25, 0.2),
        ] {
            assert_eq!(nice_step(raw), want, "raw {raw}");
        }
    }

    #[test]
    fn linear_ticks_are_round_and_whole_for_counts() {
        for (lo, hi, whole, want) in [
            (1.0, 8.0, true, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
            // Threads 1 and 2: no 1.2, 1.4 … between them.
            (1.0, 2.0, true, vec![1.0, 2.0]),
            (1.0, 64.0, true, vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0]),
            (3.0, 5.0, true, vec![3.0, 4.0, 5.0]),
        ] {
            assert_eq!(linear_ticks(lo, hi, whole), want, "{lo} … {hi}");
        }
        assert_eq!(linear_ticks(1.0, 2.0, false).len(), 6, "fifths between 1 and 2");
    }

    #[test]
    fn time_ticks_fall_on_round_utc_times() {
        for (lo, hi, want) in [
            // The range starts just after midnight: the first tick is the next day.
            (
                T0 + 100.0,
                T0 + 6.0 * DAY,
                vec![
                    "2024-10-05",
                    "2024-10-06",
                    "2024-10-07",
                    "2024-10-08",
                    "2024-10-09",
                    "2024-10-10",
                ],
            ),
            (
                T0,
                T0 + 5.0 * 3600.0,
                vec![
                    "10-04 00:00",
                    "10-04 01:00",
                    "10-04 02:00",
                    "10-04 03:00",
                    "10-04 04:00",
                    "10-04 05:00",
                ],
            ),
            // Two weeks: every second day.
            (
                T0,
                T0 + 14.0 * DAY,
                vec![
                    "2024-10-04",
                    "2024-10-06",
                    "2024-10-08",
                    "2024-10-10",
                    "2024-10-12",
                    "2024-10-14",
                    "2024-10-16",
                    "2024-10-18",
                ],
            ),
            (T0 + 30.0, T0 + 200.0, vec!["10-04 00:01", "10-04 00:02", "10-04 00:03"]),
        ] {
            let labels: Vec<String> = time_ticks(lo, hi).into_iter().map(|(_, l)| l).collect();
            assert_eq!(labels, want, "{lo} … {hi}");
        }
        let hours = time_ticks(T0, T0 + 5.0 * 3600.0);
        assert_eq!(hours[1].0, T0 + 3600.0, "label and position agree");
    }

    #[test]
    fn plain_numbers_drop_trailing_noise() {
        for (v, want) in [
            (4.0, "4"),
            (2.5, "2.5"),
            (1500.0, "1500"),
            (0.02, "0.02"),
            (0.6000000000000001, "0.6"),
            (-3.0, "-3"),
            (1e16, "10000000000000000"),
            (0.0000001, "0"),
        ] {
            assert_eq!(plain(v), want, "{v}");
        }
    }
}
