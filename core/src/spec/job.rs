//! One measurement point and its validation.

use serde::{Deserialize, Serialize};

use super::size::format_size;
use super::{
    Direction, InvalidSpec, KeyMode, MAX_ARRIVAL_RATE, MAX_CONCURRENCY, MAX_SECONDS, MAX_SIZE, MAX_THREADS, Nonce,
    invalid,
};
use crate::algorithm::{Algorithm, Mode};
use crate::path::Path;
use crate::point::Point;
use crate::provider::Provider;

/// One measurement point and how long to measure it: everything a worker needs to run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// What to measure. Flattened: the JSON (`jobs.spec` in PostgreSQL, a
    /// worker's stdin) is the flat object it was before the point was a type,
    /// so stored jobs read as they are.
    #[serde(flatten, serialize_with = "serialize_point")]
    pub point: Point,
    /// Measured time (after warm-up), in seconds.
    pub seconds: f64,
}

/// Writes the point's fields, leaving `nonce` out when it is counters: a job
/// stored or a worker built before the field still reads the JSON. (`Point`
/// itself always writes it: the report's JSON and CSV have the column.)
fn serialize_point<S: serde::Serializer>(point: &Point, s: S) -> Result<S::Ok, S::Error> {
    let mut fields = match serde_json::to_value(point).map_err(serde::ser::Error::custom)? {
        serde_json::Value::Object(fields) => fields,
        other => return Err(serde::ser::Error::custom(format!("a point serialised as {other}"))),
    };
    if point.nonce.is_counter() {
        fields.remove("nonce");
    }
    fields.serialize(s)
}

impl JobSpec {
    /// Checks every field against its accepted range.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        let p = &self.point;
        validate_size(p.size_bytes)?;
        validate_message_size(p.algorithm, p.size_bytes)?;
        validate_threads(p.threads)?;
        validate_seconds(self.seconds)?;
        validate_nonce(p.nonce, p.algorithm, p.direction)?;
        validate_provider(p)?;
        if let Some(c) = p.concurrency {
            validate_concurrency(c, p.threads)?;
            if p.key_mode != KeyMode::Static {
                return Err(invalid(
                    "--key-mode",
                    format!(
                        "'{}' does not apply to the object-storage scenario (--concurrency), which measures one static key per worker thread; use --key-mode static",
                        p.key_mode.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Warm-up before sampling: a quarter of the measured time, between 50 ms and 1 s.
    pub fn warmup_seconds(&self) -> f64 {
        (self.seconds / 4.0).clamp(0.05, 1.0)
    }

    /// A compact label for progress lines and errors.
    pub fn label(&self) -> String {
        let p = &self.point;
        let mut s = format!(
            "{} {} {} t={} {} {}",
            p.algorithm,
            p.direction.as_str(),
            format_size(p.size_bytes),
            p.threads,
            p.key_mode.as_str(),
            p.path.as_str()
        );
        if let Some(c) = p.concurrency {
            s.push_str(&format!(" c={c}"));
        }
        if !p.nonce.is_counter() {
            s.push_str(&format!(" nonce={}", p.nonce));
        }
        if !p.provider.is_rustcrypto() {
            s.push_str(&format!(" on {}", p.provider));
        }
        s
    }
}

pub fn validate_size(size: u64) -> Result<(), InvalidSpec> {
    if size == 0 || size > MAX_SIZE {
        return Err(invalid(
            "--size",
            format!("{size} bytes is out of range; accepted: 1 byte to 1 GiB"),
        ));
    }
    Ok(())
}

/// Refuses payloads the construction cannot carry in one message, rather than
/// measuring a point that can only fail.
pub fn validate_message_size(algorithm: Algorithm, size: u64) -> Result<(), InvalidSpec> {
    match algorithm.max_message_bytes() {
        Some(max) if size > max => Err(invalid(
            "--size",
            format!(
                "{algorithm} carries at most {max} bytes in one message (the limit of its length field), not {size}; use a smaller --size"
            ),
        )),
        _ => Ok(()),
    }
}

/// Checks `--arrival-rate`, the open loop of the object-storage scenario:
/// objects per second, and only with `--concurrency`.
pub fn validate_arrival_rate(rate: Option<f64>, concurrency: Option<u32>) -> Result<(), InvalidSpec> {
    let Some(rate) = rate else {
        return Ok(());
    };
    if concurrency.is_none() {
        return Err(invalid(
            "--arrival-rate",
            "applies to the object-storage scenario only; give --concurrency N as well",
        ));
    }
    if !(rate.is_finite() && rate > 0.0 && rate <= MAX_ARRIVAL_RATE) {
        return Err(invalid(
            "--arrival-rate",
            format!("{rate} is out of range; accepted: more than 0 and at most {MAX_ARRIVAL_RATE} objects per second"),
        ));
    }
    Ok(())
}

/// Refuses random nonces where they measure nothing: they apply to the
/// nonce-based AEADs (not CBC-HMAC, whose IV is its own), and to encryption
/// (decryption reads the nonce stored with the message). The one rule for
/// the agent's `--nonce`, its worker, and the coordinator's jobs.
pub fn validate_nonce(nonce: Nonce, algorithm: Algorithm, direction: Direction) -> Result<(), InvalidSpec> {
    if nonce == Nonce::Counter {
        return Ok(());
    }
    if !algorithm.is_authenticated() || algorithm.mode == Mode::CbcHmacSha256 {
        return Err(invalid(
            "--nonce",
            format!(
                "random applies to the nonce-based AEADs (GCM, CCM, OCB, ChaCha20-Poly1305, XChaCha20-Poly1305), not {algorithm}"
            ),
        ));
    }
    if direction != Direction::Encrypt {
        return Err(invalid(
            "--nonce",
            "random measures encryption (decryption reads the nonce stored with the message); use --direction encrypt",
        ));
    }
    Ok(())
}

/// Refuses a point its provider cannot measure: an algorithm it lacks
/// ([`Provider::runs`]), ring's software path (ring has no software-only
/// build), the kernel's payloads past what AF_ALG takes in one operation
/// ([`crate::provider::kernel::MAX_BYTES`]), and the object-storage scenario
/// outside the agent's own engine.
/// The one rule for the agent's `bench --provider`, its worker, matrices
/// ([`super::Matrix::points`] leaves such points out) and the coordinator's jobs.
pub fn validate_provider(p: &Point) -> Result<(), InvalidSpec> {
    let provider = p.provider;
    if !provider.runs(p.algorithm) {
        let list: Vec<&str> = provider.algorithms().iter().map(|a| a.name()).collect();
        return Err(invalid(
            "--provider",
            format!(
                "the {provider} provider has no {}; it runs {}",
                p.algorithm,
                list.join(", ")
            ),
        ));
    }
    match provider {
        Provider::Ring if p.path == Path::Software => Err(invalid(
            "--provider",
            "ring cannot be built software-only (it has no such switch): its software figures come from hosts \
             without the instructions, such as emulated ones; use --path accelerated",
        )),
        Provider::Kernel if p.size_bytes > crate::provider::kernel::MAX_BYTES => Err(invalid(
            "--size",
            format!(
                "the kernel provider measures payloads up to {} bytes: AF_ALG takes one operation's data in \
                 its socket's send buffer, and its users (dm-crypt sectors, IPsec packets, kTLS records) hand it \
                 no more; {} bytes is larger",
                crate::provider::kernel::MAX_BYTES,
                p.size_bytes
            ),
        )),
        Provider::Kernel | Provider::Openssl if p.concurrency.is_some() => Err(invalid(
            "--provider",
            format!("the {provider} provider has no object-storage scenario; leave out --concurrency"),
        )),
        _ => Ok(()),
    }
}

pub fn validate_threads(threads: u32) -> Result<(), InvalidSpec> {
    if threads == 0 || threads > MAX_THREADS {
        return Err(invalid(
            "--threads",
            format!("{threads} is out of range; accepted: 1 to {MAX_THREADS}"),
        ));
    }
    Ok(())
}

pub fn validate_seconds(seconds: f64) -> Result<(), InvalidSpec> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS) {
        return Err(invalid(
            "--seconds",
            format!("{seconds} is out of range; accepted: more than 0 and at most {MAX_SECONDS}"),
        ));
    }
    Ok(())
}

fn validate_concurrency(c: u32, threads: u32) -> Result<(), InvalidSpec> {
    if c == 0 || c > MAX_CONCURRENCY {
        return Err(invalid(
            "--concurrency",
            format!("{c} is out of range; accepted: 1 to {MAX_CONCURRENCY}"),
        ));
    }
    if c < threads {
        return Err(invalid(
            "--concurrency",
            format!(
                "{c} objects in flight cannot keep {threads} threads busy; use --concurrency of at least --threads"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::Path;

    fn spec() -> JobSpec {
        Point {
            algorithm: "aes-256-gcm".parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes: 16,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            nonce: Nonce::Counter,
            provider: crate::provider::Provider::RustCrypto,
        }
        .spec(1.0)
    }

    /// [`spec`] with its point changed by `edit`.
    fn with(edit: impl FnOnce(&mut Point)) -> JobSpec {
        let mut s = spec();
        edit(&mut s.point);
        s
    }

    #[test]
    fn validation_names_the_flag() {
        let cases: Vec<(JobSpec, Option<&str>)> = vec![
            (spec(), None),
            (with(|p| p.threads = 0), Some("--threads")),
            (with(|p| p.threads = 1025), Some("--threads")),
            (with(|p| p.threads = 1024), None),
            (JobSpec { seconds: 0.0, ..spec() }, Some("--seconds")),
            (
                JobSpec {
                    seconds: -1.0,
                    ..spec()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: 600.5,
                    ..spec()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: f64::NAN,
                    ..spec()
                },
                Some("--seconds"),
            ),
            (with(|p| p.size_bytes = 0), Some("--size")),
            (
                with(|p| {
                    p.concurrency = Some(32);
                    p.threads = 2;
                }),
                None,
            ),
            (
                with(|p| {
                    p.concurrency = Some(1);
                    p.threads = 2;
                }),
                Some("--concurrency"),
            ),
            (with(|p| p.concurrency = Some(0)), Some("--concurrency")),
            (
                with(|p| {
                    p.concurrency = Some(4);
                    p.key_mode = KeyMode::PerOp;
                }),
                Some("--key-mode"),
            ),
            (with(|p| p.key_mode = KeyMode::HkdfPerUser), None),
            (
                with(|p| {
                    p.nonce = Nonce::Random;
                    p.key_mode = KeyMode::HkdfPerUser;
                }),
                None,
            ),
            (
                with(|p| {
                    p.nonce = Nonce::Random;
                    p.direction = Direction::Decrypt;
                }),
                Some("--nonce"),
            ),
            (
                with(|p| {
                    p.nonce = Nonce::Random;
                    p.algorithm = "aes-256-cbc-hmac-sha256".parse().unwrap();
                }),
                Some("--nonce"),
            ),
            (
                with(|p| {
                    p.nonce = Nonce::Random;
                    p.algorithm = "aes-256-ctr".parse().unwrap();
                }),
                Some("--nonce"),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(spec.validate().err().map(|e| e.flag), want, "{spec:?}");
        }
    }

    #[test]
    fn ccm_takes_the_matrix_sizes_and_refuses_what_its_length_field_cannot_hold() {
        let ccm = |size_bytes| {
            with(|p| {
                p.algorithm = "aes-128-ccm".parse().unwrap();
                p.size_bytes = size_bytes;
            })
        };
        // Over 64 KiB: what the 13-byte nonce could not carry, the 12-byte one does.
        for size in [65_535, 65_536, 1 << 20, 10 << 20, crate::algorithm::CCM_MAX_MESSAGE] {
            assert_eq!(ccm(size).validate(), Ok(()), "{size}");
        }
        let err = ccm(16 << 20).validate().unwrap_err();
        assert_eq!(err.flag, "--size");
        assert!(
            err.message.contains("aes-128-ccm") && err.message.contains("16777215"),
            "{err}"
        );
        // Other constructions take anything up to MAX_SIZE.
        assert_eq!(with(|p| p.size_bytes = 16 << 20).validate(), Ok(()));
    }

    #[test]
    fn arrival_rate_needs_the_object_scenario_and_a_positive_rate() {
        let cases = [
            (None, None, true),
            (Some(100.0), Some(8), true),
            (Some(100.0), None, false),
            (Some(0.0), Some(8), false),
            (Some(f64::NAN), Some(8), false),
            (Some(1e12), Some(8), false),
        ];
        for (rate, concurrency, ok) in cases {
            let got = validate_arrival_rate(rate, concurrency);
            assert_eq!(got.is_ok(), ok, "{rate:?} {concurrency:?}: {got:?}");
            if let Err(e) = got {
                assert_eq!(e.flag, "--arrival-rate");
            }
        }
    }

    #[test]
    fn spec_json_round_trips_and_rejects_unknown_fields() {
        let p = with(|p| {
            p.concurrency = Some(4);
            p.threads = 2;
        });
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"algorithm\":\"aes-256-gcm\""), "{json}");
        assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), p);
        let extra = json.replace("\"threads\"", "\"bogus\":1,\"threads\"");
        assert!(serde_json::from_str::<JobSpec>(&extra).is_err());
        // Counters are the default and are not spelled out; random ones are.
        assert!(!json.contains("nonce"), "{json}");
        let mut random = p.clone();
        random.point.nonce = Nonce::Random;
        let json = serde_json::to_string(&random).unwrap();
        assert!(json.contains("\"nonce\":\"random\""), "{json}");
        assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), random);
    }

    /// `jobs.spec` rows and workers' input are the flat object JobSpec was
    /// before it held a `Point`: both ways, so no stored job needs migrating.
    #[test]
    fn the_spec_json_is_the_flat_object_it_always_was() {
        let stored = serde_json::json!({
            "algorithm": "aes-256-gcm", "direction": "encrypt", "size_bytes": 16, "threads": 1,
            "concurrency": null, "key_mode": "static", "path": "accelerated", "seconds": 1.0
        });
        assert_eq!(serde_json::from_value::<JobSpec>(stored.clone()).unwrap(), spec());
        assert_eq!(serde_json::to_value(spec()).unwrap(), stored);
        let mut random = stored.clone();
        random["nonce"] = "random".into();
        let random_spec = with(|p| p.nonce = Nonce::Random);
        assert_eq!(serde_json::from_value::<JobSpec>(random.clone()).unwrap(), random_spec);
        assert_eq!(serde_json::to_value(random_spec).unwrap(), random);
        let mut no_seconds = stored;
        no_seconds.as_object_mut().unwrap().remove("seconds");
        assert!(serde_json::from_value::<JobSpec>(no_seconds).is_err());
    }
}
