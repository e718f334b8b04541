//! Robust statistics over the median and the median absolute deviation (both
//! from `cipherfleet_core::stats`). One
//! outlier moves neither, which is what keeps a noisy but healthy host from
//! being flagged.

pub use cipherfleet_core::stats::{mad, median};

/// How many robust standard deviations `x` lies below the median of
/// `reference` (1.4826 × MAD estimates σ for normal data). A floor of 2 % of
/// the median stands in for a MAD of zero, so identical references do not
/// make every small difference infinitely significant.
pub fn robust_z_below(x: f64, reference: &[f64]) -> Option<f64> {
    robust_z(x, reference).map(|z| -z)
}

/// [`robust_z_below`] signed the other way: positive above the median.
pub fn robust_z(x: f64, reference: &[f64]) -> Option<f64> {
    Spread::of(reference)?.z(x)
}

/// A reference's median and MAD, worked out once and compared with many
/// values: the robust z-scores above are made of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub mad: f64,
    /// Values in the reference.
    pub len: usize,
}

impl Spread {
    /// The spread of `values`; `None` when empty or one is NaN.
    pub fn of(values: &[f64]) -> Option<Spread> {
        Some(Spread {
            median: median(values)?,
            mad: mad(values)?,
            len: values.len(),
        })
    }

    /// The spread of `sorted` (ascending, no NaN) without its value at
    /// `skip`, equal to [`Spread::of`] over the same values, in time linear
    /// in their number and with no copy: how one host is compared with the
    /// rest of a large class without sorting the class once per host.
    pub fn of_sorted_without(sorted: &[f64], skip: Option<usize>) -> Option<Spread> {
        let skip = skip.filter(|&i| i < sorted.len());
        let len = sorted.len() - usize::from(skip.is_some());
        if len == 0 {
            return None;
        }
        let at = |k: usize| match skip {
            Some(i) if k >= i => sorted[k + 1],
            _ => sorted[k],
        };
        let middle = |get: &dyn Fn(usize) -> f64| {
            let mid = len / 2;
            if len % 2 == 1 {
                get(mid)
            } else {
                (get(mid - 1) + get(mid)) / 2.0
            }
        };
        let m = middle(&at);
        // Deviations rise walking left from the median and walking right:
        // two sorted runs, merged until the middle ones are reached.
        let split = (0..len).position(|k| at(k) >= m).unwrap_or(len);
        let (mut left, mut right) = (split, split);
        let mut deviations = Vec::with_capacity(len / 2 + 1);
        while deviations.len() <= len / 2 {
            let from_left = left.checked_sub(1).map(|k| (m - at(k)).abs());
            let from_right = (right < len).then(|| (at(right) - m).abs());
            match (from_left, from_right) {
                (Some(l), Some(r)) if l < r => {
                    deviations.push(l);
                    left -= 1;
                }
                (_, Some(r)) => {
                    deviations.push(r);
                    right += 1;
                }
                (Some(l), None) => {
                    deviations.push(l);
                    left -= 1;
                }
                (None, None) => break,
            }
        }
        let mad = middle(&|k| deviations[k]);
        Some(Spread { median: m, mad, len })
    }

    /// How many robust standard deviations `x` lies above the median (see [`robust_z_below`]).
    pub fn z(&self, x: f64) -> Option<f64> {
        let sigma = (1.4826 * self.mad).max(0.02 * self.median.abs());
        if sigma == 0.0 {
            return None;
        }
        Some((x - self.median) / sigma)
    }

    /// [`Spread::z`] signed the other way: positive below the median.
    pub fn z_below(&self, x: f64) -> Option<f64> {
        self.z(x).map(|z| -z)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_mad_ignore_one_outlier() {
        let cases: &[(&[f64], Option<f64>, Option<f64>)] = &[
            (&[], None, None),
            (&[5.0], Some(5.0), Some(0.0)),
            (&[1.0, 2.0, 3.0, 4.0], Some(2.5), Some(1.0)),
            (&[10.0, 10.0, 10.0, 10.0, 1000.0], Some(10.0), Some(0.0)),
            (&[1.0, f64::NAN], None, None),
        ];
        for (input, m, d) in cases {
            assert_eq!(median(input), *m, "median {input:?}");
            assert_eq!(mad(input), *d, "mad {input:?}");
        }
    }

    #[test]
    fn robust_z_has_a_floor_for_identical_references() {
        let same = [100.0; 6];
        let z = robust_z_below(99.0, &same).unwrap();
        assert!((z - 0.5).abs() < 1e-9, "{z}");
        assert!(robust_z_below(50.0, &same).unwrap() > 20.0);
        assert_eq!(robust_z(101.0, &same), Some(-robust_z_below(101.0, &same).unwrap()));
        assert_eq!(robust_z_below(1.0, &[]), None);
    }

    #[test]
    fn a_spread_without_one_sorted_value_is_the_spread_of_the_rest() {
        let cases: &[&[f64]] = &[
            &[5.0],
            &[1.0, 2.0],
            &[1.0, 2.0, 3.0, 4.0],
            &[10.0, 10.0, 10.0, 10.0, 1000.0],
            &[1.0, 1.5, 2.0, 7.0, 7.0, 8.0, 30.0],
            &[-3.0, 0.0, 0.0, 2.5, 4.0, 4.0, 4.5, 9.0, 100.0, 101.0],
        ];
        for values in cases {
            for skip in (0..values.len()).map(Some).chain([None]) {
                let rest: Vec<f64> = values
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != skip)
                    .map(|(_, v)| *v)
                    .collect();
                assert_eq!(
                    Spread::of_sorted_without(values, skip),
                    Spread::of(&rest),
                    "{values:?} without {skip:?}"
                );
            }
        }
        assert_eq!(Spread::of_sorted_without(&[], None), None);
    }
}
