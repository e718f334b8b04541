//! What `/capacity` is asked: the query string, checked into [`Inputs`],
//! and the link back to the same plan.

use serde::{Deserialize, Serialize};

use std::str::FromStr;

use cipherfleet_core::algorithm::{Algorithm, UnknownAlgorithm};
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Direction;
use cipherfleet_core::text::UnknownValue;

use super::super::WebError;
use super::super::params::{given, spelled_size};
use crate::analysis::capacity::{DEFAULT_HEADROOM, RateUnit, Target};

/// The algorithm planned for when none is asked.
const DEFAULT_ALGORITHM: &str = "aes-256-gcm";
/// Beyond this a headroom factor is a typo, not a plan.
const MAX_HEADROOM: f64 = 100.0;

/// The query string as sent; every field optional (an empty field is the default).
#[derive(Debug, Default, Deserialize)]
pub struct CapacityQuery {
    target: Option<String>,
    unit: Option<String>,
    size: Option<String>,
    algorithm: Option<String>,
    headroom: Option<String>,
    direction: Option<String>,
    path: Option<String>,
    provider: Option<String>,
    include: Option<String>,
}

/// Validated inputs, echoed in the JSON answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inputs {
    pub target: f64,
    pub unit: RateUnit,
    pub size_bytes: u64,
    pub algorithm: Algorithm,
    pub headroom: f64,
    pub direction: Direction,
    /// The path asked for.
    pub path: Path,
    /// The implementation the service runs (`provider=`): the plan uses that
    /// provider's figures alone; RustCrypto, the built-in crates, by default.
    pub provider: Provider,
    /// `include=emulated`: emulated and simulated hosts are planned with (in rows of their own).
    pub include_emulated: bool,
    /// The target in MB/s of plaintext, and that × headroom.
    pub target_mb_s: f64,
    pub provision_mb_s: f64,
}

/// A bad request naming the field first, as every refusal of this page does.
pub(super) fn bad(field: &str, message: String) -> WebError {
    WebError::BadRequest(format!("{field}: {message}"))
}

impl CapacityQuery {
    /// The inputs, or a bad request naming the field and what it accepts.
    pub fn inputs(&self) -> Result<Inputs, WebError> {
        let target = match given(&self.target) {
            None => 10.0,
            Some(t) => t
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| bad("target", format!("{t:?} is not a positive number")))?,
        };
        let unit = match given(&self.unit) {
            None => RateUnit::Gbit,
            Some(u) => u.parse().map_err(|e| bad("unit", e))?,
        };
        let size_bytes = match given(&self.size) {
            None => 16384,
            Some(s) => spelled_size(s).map_err(|e| bad("size", e))?,
        };
        let algorithm = match given(&self.algorithm) {
            None => DEFAULT_ALGORITHM.parse().expect("a known algorithm"),
            Some(a) => a
                .parse()
                .map_err(|e: UnknownAlgorithm| bad("algorithm", e.to_string()))?,
        };
        let headroom = match given(&self.headroom) {
            None => DEFAULT_HEADROOM,
            Some(h) => h
                .parse::<f64>()
                .ok()
                .filter(|v| (1.0..=MAX_HEADROOM).contains(v))
                .ok_or_else(|| {
                    bad(
                        "headroom",
                        format!("{h:?} is not a factor from 1 to {MAX_HEADROOM} (1.3 = 30 % spare)"),
                    )
                })?,
        };
        let direction = one_of("direction", given(&self.direction), Direction::Encrypt)?;
        let path = one_of("path", given(&self.path), Path::Accelerated)?;
        let provider = one_of("provider", given(&self.provider), Provider::RustCrypto)?;
        let include_emulated = match given(&self.include) {
            None => false,
            Some("emulated") => true,
            Some(other) => {
                return Err(bad(
                    "include",
                    format!("{other:?} is not known; the only value is emulated"),
                ));
            }
        };
        let target_mb_s = Target { value: target, unit }.mb_s(size_bytes);
        Ok(Inputs {
            target,
            unit,
            size_bytes,
            algorithm,
            headroom,
            direction,
            path,
            provider,
            include_emulated,
            target_mb_s,
            provision_mb_s: target_mb_s * headroom,
        })
    }
}

/// `value` parsed as a text enum, `default` when not given.
fn one_of<T: FromStr<Err = UnknownValue>>(field: &str, value: Option<&str>, default: T) -> Result<T, WebError> {
    match value {
        None => Ok(default),
        Some(v) => v.parse().map_err(|e: UnknownValue| bad(field, e.to_string())),
    }
}

impl Inputs {
    /// The query string of this view (values are validated tokens and numbers: nothing to encode).
    pub(super) fn query(&self) -> String {
        let mut q = format!(
            "target={}&unit={}&size={}&algorithm={}&headroom={}&direction={}&path={}",
            self.target,
            self.unit.as_str(),
            self.size_bytes,
            self.algorithm,
            self.headroom,
            self.direction,
            self.path
        );
        if !self.provider.is_rustcrypto() {
            q.push_str(&format!("&provider={}", self.provider));
        }
        if self.include_emulated {
            q.push_str("&include=emulated");
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> CapacityQuery {
        crate::web::params::query_from(pairs)
    }

    #[test]
    fn no_parameters_plan_ten_gbit_of_aes_256_gcm_at_16_kib() {
        let i = query(&[]).inputs().unwrap();
        assert_eq!(
            (i.target, i.unit, i.size_bytes, i.algorithm.name(), i.headroom),
            (10.0, RateUnit::Gbit, 16384, "aes-256-gcm", 1.3)
        );
        assert_eq!(
            (i.direction.as_str(), i.path.as_str(), i.include_emulated),
            ("encrypt", "accelerated", false)
        );
        assert_eq!(i.target_mb_s, 1250.0);
        assert_eq!(i.provision_mb_s, 1625.0);
        // Blank form fields are the defaults too.
        assert_eq!(query(&[("target", " "), ("unit", "")]).inputs().unwrap(), i);
    }

    #[test]
    fn parameters_are_read_and_ops_use_the_payload_size() {
        let i = query(&[
            ("target", "2e6"),
            ("unit", "ops"),
            ("size", "18"),
            ("algorithm", "ChaCha20-Poly1305"),
            ("headroom", "1"),
            ("direction", "decrypt"),
            ("path", "software"),
            ("include", "emulated"),
        ])
        .inputs()
        .unwrap();
        assert_eq!(i.algorithm.name(), "chacha20-poly1305");
        assert_eq!(i.target_mb_s, 36.0);
        assert!(i.include_emulated);
        assert_eq!(
            i.query(),
            "target=2000000&unit=ops&size=18&algorithm=chacha20-poly1305&headroom=1&direction=decrypt&path=software&include=emulated"
        );
        assert_eq!(query(&[("size", "16KiB")]).inputs().unwrap().size_bytes, 16384);
        let openssl = query(&[("provider", "openssl")]).inputs().unwrap();
        assert_eq!(openssl.provider, Provider::Openssl);
        assert!(openssl.query().ends_with("&provider=openssl"), "{}", openssl.query());
    }

    #[test]
    fn bad_parameters_are_rejected_naming_the_field() {
        for (field, value) in [
            ("headroom", "0.5"),
            ("headroom", "NaN"),
            ("target", "-1"),
            ("target", "inf"),
            ("target", "lots"),
            ("unit", "furlongs"),
            ("size", "0"),
            ("size", "16 parsecs"),
            ("algorithm", "rot13"),
            ("direction", "sideways"),
            ("path", "fast"),
            ("provider", "libsodium"),
            ("include", "everything"),
        ] {
            match query(&[(field, value)]).inputs() {
                Err(WebError::BadRequest(m)) => assert!(m.starts_with(&format!("{field}: ")), "{field}={value}: {m}"),
                other => panic!("{field}={value}: {other:?}"),
            }
        }
    }
}
