//! How much of its crypto a host runs on hardware, from its current facts and
//! what its latest results ran: the status the hosts list filters on, the
//! overview counts and `/metrics` exports, decided here once.

use cipherfleet_core::path::Flavour;
use cipherfleet_core::text_enum;

use super::fallback::{Primitive, usable_by_facts};

text_enum! {
    /// A host's acceleration status, best first (the order lists and groups use).
    pub enum Acceleration ("acceleration") {
        /// AES and GHASH usable, in an accelerated build.
        Accelerated = "accelerated",
        /// One of them usable: e.g. AES-NI without CLMUL or without the AVX
        /// state (GCM's GHASH in software), or a VM hiding AES only.
        Partial = "partial",
        /// Neither usable, or a build that forces software backends.
        Software = "software",
        /// No facts to judge by.
        Unknown = "unknown",
    }
}

/// The primitives the status counts: AES and GHASH, which decide whether the
/// common AEADs run in hardware ([`Primitive::is_major`]). AVX2 and SHA-NI
/// are left out: many servers lack them, and the ChaCha20 and CBC-HMAC points
/// say `partial` or `software` themselves.
const COUNTED: [Primitive; 2] = [Primitive::Aes, Primitive::Ghash];

/// The status of a host of `arch` whose usable features are `features_usable`
/// (`None`: no facts) running an agent of `build_flavour`, whose latest
/// results ran `ran_in_software` in software although its facts allow
/// hardware (the subjects of its open `unexplained-fallback` findings):
/// accelerated when every counted primitive has its hardware features
/// ([`usable_by_facts`]: x86 GHASH needs PCLMULQDQ and the AVX state, ARM
/// PMULL) and did not fall back, software when none has, partial else. So
/// the status follows what ran, not only what the facts promise.
pub fn acceleration(
    arch: Option<&str>,
    features_usable: Option<&[String]>,
    build_flavour: Option<Flavour>,
    ran_in_software: &[Primitive],
) -> Acceleration {
    let Some(features) = features_usable else {
        return Acceleration::Unknown;
    };
    if build_flavour == Some(Flavour::Software) {
        return Acceleration::Software;
    }
    let (mut present, mut counted) = (0, 0);
    for primitive in COUNTED {
        // No hardware path for it on this arch: not counted.
        let Some(usable) = usable_by_facts(arch, features, primitive) else {
            continue;
        };
        counted += 1;
        present += usize::from(usable && !ran_in_software.contains(&primitive));
    }
    match present {
        0 => Acceleration::Software,
        n if n == counted => Acceleration::Accelerated,
        _ => Acceleration::Partial,
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
            Option<&'static str>,
            Option<&'static [&'static str]>,
            Option<Flavour>,
            Acceleration,
        );
        let x86 = Some("x86_64");
        let arm = Some("aarch64");
        let cases: [Case; 13] = [
            (
                "x86 with AES-NI, CLMUL, AVX and AVX2",
                x86,
                Some(&["aes", "pclmulqdq", "avx", "avx2"]),
                Some(Fast),
                Accelerated,
            ),
            (
                "ARM with AES and PMULL",
                arm,
                Some(&["aes", "pmull"]),
                Some(Fast),
                Accelerated,
            ),
            (
                "no SHA-NI does not count",
                x86,
                Some(&["aes", "pclmulqdq", "avx", "avx2"]),
                Some(Fast),
                Accelerated,
            ),
            (
                "CLMUL without the AVX state",
                x86,
                Some(&["aes", "pclmulqdq"]),
                Some(Fast),
                Partial,
            ),
            (
                "AVX without AVX2 counts as accelerated",
                x86,
                Some(&["aes", "pclmulqdq", "avx"]),
                Some(Fast),
                Accelerated,
            ),
            ("AES alone", x86, Some(&["aes"]), Some(Fast), Partial),
            (
                "a VM hiding AES only",
                x86,
                Some(&["pclmulqdq", "avx", "avx2"]),
                Some(Fast),
                Partial,
            ),
            (
                "the AVX state off in XCR0",
                x86,
                Some(&["aes", "pclmulqdq", "sha"]),
                Some(Fast),
                Partial,
            ),
            ("nothing usable", x86, Some(&[]), Some(Fast), Software),
            (
                "a software build hides the silicon",
                x86,
                Some(&["aes", "pclmulqdq", "avx", "avx2"]),
                Some(Soft),
                Software,
            ),
            (
                "an unknown build is judged by its features",
                arm,
                Some(&["aes", "pmull"]),
                None,
                Accelerated,
            ),
            ("an unknown arch by AES", None, Some(&["aes"]), Some(Fast), Accelerated),
            ("no facts", x86, None, Some(Fast), Unknown),
        ];
        for (name, arch, features, flavour, want) in cases {
            let features: Option<Vec<String>> = features.map(|f| f.iter().map(|s| s.to_string()).collect());
            assert_eq!(acceleration(arch, features.as_deref(), flavour, &[]), want, "{name}");
        }
    }

    #[test]
    fn a_primitive_that_ran_in_software_costs_the_status_its_facts_promise() {
        use Acceleration::*;
        let full: Vec<String> = ["aes", "pclmulqdq", "avx", "avx2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let westmere: Vec<String> = ["aes"].iter().map(|s| s.to_string()).collect();
        let fast = Some(Flavour::Accelerated);
        let x86 = Some("x86_64");
        let cases: [(&str, &[String], &[Primitive], Acceleration); 6] = [
            ("nothing fell back", &full, &[], Accelerated),
            (
                "AES and GHASH ran in software",
                &full,
                &[Primitive::Aes, Primitive::Ghash],
                Software,
            ),
            ("GHASH only", &full, &[Primitive::Ghash], Partial),
            ("ChaCha20 is not counted", &full, &[Primitive::ChaCha20], Accelerated),
            ("AES lost where GHASH never was", &westmere, &[Primitive::Aes], Software),
            (
                "what the facts lack already counts once",
                &westmere,
                &[Primitive::Ghash],
                Partial,
            ),
        ];
        for (name, features, ran, want) in cases {
            assert_eq!(acceleration(x86, Some(features), fast, ran), want, "{name}");
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
