//! How much of its crypto a host can run on hardware, from its current facts:
//! the status the hosts list filters on, the overview counts and `/metrics`
//! exports, decided here once.

use cipherfleet_core::path::Flavour;
use cipherfleet_core::text_enum;

text_enum! {
    /// A host's acceleration status, best first (the order lists and groups use).
    pub enum Acceleration ("acceleration") {
        /// AES and carry-less multiply usable, in an accelerated build.
        Accelerated = "accelerated",
        /// AES usable but no usable CLMUL/PMULL: GCM's GHASH runs in software.
        Partial = "partial",
        /// No usable AES, or a build that forces software backends.
        Software = "software",
        /// No facts to judge by.
        Unknown = "unknown",
    }
}

/// The status of a host whose usable features are `features_usable` (`None`:
/// no facts) running an agent of `build_flavour`. x86 needs PCLMULQDQ and the
/// AVX state for the fast GHASH; ARM has PMULL.
pub fn acceleration(features_usable: Option<&[String]>, build_flavour: Option<Flavour>) -> Acceleration {
    let Some(features) = features_usable else {
        return Acceleration::Unknown;
    };
    if build_flavour == Some(Flavour::Software) {
        return Acceleration::Software;
    }
    let has = |f: &str| features.iter().any(|x| x == f);
    match (has("aes"), has("pmull") || (has("pclmulqdq") && has("avx"))) {
        (false, _) => Acceleration::Software,
        (true, false) => Acceleration::Partial,
        (true, true) => Acceleration::Accelerated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_follows_usable_features_and_the_build() {
        use Acceleration::*;
        use Flavour::{Accelerated as Fast, Software as Soft};
        type Case = (
            &'static str,
            Option<&'static [&'static str]>,
            Option<Flavour>,
            Acceleration,
        );
        let cases: [Case; 9] = [
            (
                "x86 with AES-NI, CLMUL and AVX",
                Some(&["aes", "pclmulqdq", "avx"]),
                Some(Fast),
                Accelerated,
            ),
            (
                "ARM with AES and PMULL",
                Some(&["aes", "pmull"]),
                Some(Fast),
                Accelerated,
            ),
            (
                "CLMUL without the AVX state",
                Some(&["aes", "pclmulqdq"]),
                Some(Fast),
                Partial,
            ),
            ("AES alone", Some(&["aes"]), Some(Fast), Partial),
            ("no AES", Some(&["pclmulqdq", "avx"]), Some(Fast), Software),
            ("nothing usable", Some(&[]), Some(Fast), Software),
            (
                "a software build hides the silicon",
                Some(&["aes", "pclmulqdq", "avx"]),
                Some(Soft),
                Software,
            ),
            (
                "an unknown build is judged by its features",
                Some(&["aes", "pmull"]),
                None,
                Accelerated,
            ),
            ("no facts", None, Some(Fast), Unknown),
        ];
        for (name, features, flavour, want) in cases {
            let features: Option<Vec<String>> = features.map(|f| f.iter().map(|s| s.to_string()).collect());
            assert_eq!(acceleration(features.as_deref(), flavour), want, "{name}");
        }
    }

    #[test]
    fn statuses_sort_best_first_and_travel_as_text() {
        assert_eq!(
            Acceleration::ALL.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
            ["accelerated", "partial", "software", "unknown"]
        );
        assert!(Acceleration::Accelerated < Acceleration::Partial && Acceleration::Software < Acceleration::Unknown);
        assert_eq!(serde_json::to_value(Acceleration::Partial).unwrap(), "partial");
    }
}
