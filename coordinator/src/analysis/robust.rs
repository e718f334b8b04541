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
    let m = median(reference)?;
    let sigma = (1.4826 * mad(reference)?).max(0.02 * m.abs());
    if sigma == 0.0 {
        return None;
    }
    Some((x - m) / sigma)
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
}
