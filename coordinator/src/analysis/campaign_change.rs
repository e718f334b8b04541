//! What changed at one host and point between two campaigns: the ratio of
//! the later result to the earlier, and its significance as the robust
//! z-score the findings use ([`robust_z`]) — the later figure against the
//! spread of the earlier result's samples, so a change inside a run's own
//! noise reads as such.

use super::robust::robust_z;
use super::slow::Thresholds;

/// The change of one point from campaign `a` (before) to `b` (after).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// after / before; `None` unless both were measured and before is not zero.
    pub ratio: Option<f64>,
    /// Robust σ of after above (positive) or below (negative) before's samples.
    pub z: Option<f64>,
    /// Which way it moved, if past the findings' `min_z`.
    pub verdict: Verdict,
}

/// Whether a change is significant, and which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Faster,
    Slower,
    /// Within the noise of the earlier run.
    Same,
    /// Measured in one campaign only.
    Unmatched,
}

impl Verdict {
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Unmatched => "unmatched",
        }
    }
}

/// The change from `before` (its figure and its samples' throughputs) to
/// `after`. Without samples the figure alone is the reference (the 2 % floor
/// of [`robust_z`] is then its spread).
pub fn change(before: Option<(f64, &[f64])>, after: Option<f64>, t: &Thresholds) -> Change {
    let (Some((b, samples)), Some(a)) = (before, after) else {
        return Change {
            ratio: None,
            z: None,
            verdict: Verdict::Unmatched,
        };
    };
    let reference: &[f64] = if samples.is_empty() {
        std::slice::from_ref(&b)
    } else {
        samples
    };
    let z = robust_z(a, reference);
    let verdict = match z {
        Some(z) if z >= t.min_z => Verdict::Faster,
        Some(z) if z <= -t.min_z => Verdict::Slower,
        _ => Verdict::Same,
    };
    Change {
        ratio: (b > 0.0).then(|| a / b),
        z,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_significant_past_the_findings_z() {
        let t = Thresholds::default();
        let samples = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
        // name, before (figure, samples), after, verdict.
        type Case<'a> = (&'a str, Option<(f64, &'a [f64])>, Option<f64>, Verdict);
        let cases: [Case; 7] = [
            (
                "58× slower after the CPU model changed",
                Some((1000.0, &samples)),
                Some(17.0),
                Verdict::Slower,
            ),
            (
                "within the run's noise",
                Some((1000.0, &samples)),
                Some(1020.0),
                Verdict::Same,
            ),
            (
                "a kernel that made it 10 % faster",
                Some((1000.0, &samples)),
                Some(1100.0),
                Verdict::Faster,
            ),
            (
                "no samples: the 2 % floor is the spread",
                Some((1000.0, &[])),
                Some(950.0),
                Verdict::Same,
            ),
            (
                "no samples, 30 % down",
                Some((1000.0, &[])),
                Some(700.0),
                Verdict::Slower,
            ),
            ("new in the later campaign", None, Some(1000.0), Verdict::Unmatched),
            (
                "gone from the later campaign",
                Some((1000.0, &samples)),
                None,
                Verdict::Unmatched,
            ),
        ];
        for (name, before, after, want) in cases {
            let c = change(before, after, &t);
            assert_eq!(c.verdict, want, "{name}: {c:?}");
            assert_eq!(c.z.is_some(), before.is_some() && after.is_some(), "{name}");
        }
        let c = change(Some((1000.0, &samples)), Some(500.0), &t);
        assert_eq!(c.ratio, Some(0.5));
        assert!(c.z.unwrap() < -t.min_z);
    }
}
