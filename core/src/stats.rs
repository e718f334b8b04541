//! Summary statistics over samples: median, percentiles, coefficient of variation,
//! median absolute deviation. The agent and the coordinator use these, and only these.
//!
//! Percentiles use the nearest-rank method (the smallest value with at least
//! p % of the samples at or below it), so every reported figure is a value
//! that was actually observed.

/// Median of `values` (mean of the two middle values for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = sorted(values)?;
    let n = v.len();
    let mid = n / 2;
    Some(if n % 2 == 1 {
        v[mid]
    } else {
        // Both middle values are needed; `sorted` already ordered them.
        let hi = v.swap_remove(mid);
        (v[mid - 1] + hi) / 2.0
    })
}

/// Nearest-rank percentile `p` in (0, 100]; `None` when empty or `p` is out of range.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let v = sorted(values)?;
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// Arithmetic mean; `None` when empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

/// Coefficient of variation: sample standard deviation / mean. `None` with fewer
/// than two samples or a zero mean.
pub fn cv(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values)?;
    if m == 0.0 {
        return None;
    }
    let var = values.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    Some(var.sqrt() / m.abs())
}

/// Median absolute deviation from the median; `None` when empty.
pub fn mad(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    median(&deviations)
}

fn sorted(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        let cases: &[(&[f64], Option<f64>)] = &[
            (&[], None),
            (&[5.0], Some(5.0)),
            (&[3.0, 1.0, 2.0], Some(2.0)),
            (&[4.0, 1.0, 3.0, 2.0], Some(2.5)),
            (&[1.0, 1.0, 100.0], Some(1.0)),
            (&[f64::NAN, 1.0], None),
        ];
        for (input, want) in cases {
            assert_eq!(median(input), *want, "median({input:?})");
        }
    }

    #[test]
    fn mad_ignores_one_outlier() {
        let cases: &[(&[f64], Option<f64>)] = &[
            (&[], None),
            (&[5.0], Some(0.0)),
            (&[1.0, 2.0, 3.0, 4.0], Some(1.0)),
            (&[10.0, 10.0, 10.0, 10.0, 1000.0], Some(0.0)),
            (&[1.0, f64::NAN], None),
        ];
        for (input, want) in cases {
            assert_eq!(mad(input), *want, "mad {input:?}");
        }
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let cases = [
            (50.0, Some(50.0)),
            (90.0, Some(90.0)),
            (99.0, Some(99.0)),
            (99.9, Some(100.0)),
            (100.0, Some(100.0)),
            (0.0, None),
            (101.0, None),
        ];
        for (p, want) in cases {
            assert_eq!(percentile(&v, p), want, "p{p}");
        }
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0], 50.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn cv_is_sample_stddev_over_mean() {
        // mean 5, sample variance 32/7, sd ~2.138
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let got = cv(&v).unwrap();
        assert!((got - (32.0f64 / 7.0).sqrt() / 5.0).abs() < 1e-12, "{got}");
        assert_eq!(cv(&[3.0, 3.0, 3.0]), Some(0.0));
        assert_eq!(cv(&[3.0]), None);
        assert_eq!(cv(&[-1.0, 1.0]), None);
    }
}
