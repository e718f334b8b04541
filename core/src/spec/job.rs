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

/// One measurement point: everything a worker needs to run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub algorithm: Algorithm,
    pub direction: Direction,
    /// Plaintext bytes per operation.
    pub size_bytes: u64,
    /// Worker threads, each with its own cipher instance.
    pub threads: u32,
    /// Object-storage scenario: this many objects in flight on the `threads` pool,
    /// latency measured per object from submission to completion. `None`: every
    /// thread runs operations back to back.
    pub concurrency: Option<u32>,
    pub key_mode: KeyMode,
    /// The path asked for; the result's `path_used` says what really ran.
    pub path: Path,
    /// Where encryption nonces come from. Left out of the JSON when counters,
    /// so a job stored or a worker built before the field still reads it.
    #[serde(default, skip_serializing_if = "Nonce::is_counter")]
    pub nonce: Nonce,
    /// Measured time (after warm-up), in seconds.
    pub seconds: f64,
}

impl JobSpec {
    /// Checks every field against its accepted range.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        validate_size(self.size_bytes)?;
        validate_message_size(self.algorithm, self.size_bytes)?;
        validate_threads(self.threads)?;
        validate_seconds(self.seconds)?;
        validate_nonce(self.nonce, self.algorithm, self.direction)?;
        if let Some(c) = self.concurrency {
            validate_concurrency(c, self.threads)?;
            if self.key_mode != KeyMode::Static {
                return Err(invalid(
                    "--key-mode",
                    format!(
                        "'{}' does not apply to the object-storage scenario (--concurrency), which measures one static key per worker thread; use --key-mode static",
                        self.key_mode.as_str()
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

    /// The point this spec measures (everything but its duration).
    pub fn point(&self) -> Point {
        Point {
            algorithm: self.algorithm,
            direction: self.direction,
            size_bytes: self.size_bytes,
            threads: self.threads,
            concurrency: self.concurrency,
            key_mode: self.key_mode,
            path: self.path,
            nonce: self.nonce,
        }
    }

    /// A compact label for progress lines and errors.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {} {} t={} {} {}",
            self.algorithm,
            self.direction.as_str(),
            format_size(self.size_bytes),
            self.threads,
            self.key_mode.as_str(),
            self.path.as_str()
        );
        if let Some(c) = self.concurrency {
            s.push_str(&format!(" c={c}"));
        }
        if !self.nonce.is_counter() {
            s.push_str(&format!(" nonce={}", self.nonce));
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

    fn point() -> JobSpec {
        JobSpec {
            algorithm: "aes-256-gcm".parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes: 16,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            nonce: Nonce::Counter,
            seconds: 1.0,
        }
    }

    #[test]
    fn validation_names_the_flag() {
        let cases: Vec<(JobSpec, Option<&str>)> = vec![
            (point(), None),
            (JobSpec { threads: 0, ..point() }, Some("--threads")),
            (
                JobSpec {
                    threads: 1025,
                    ..point()
                },
                Some("--threads"),
            ),
            (
                JobSpec {
                    threads: 1024,
                    ..point()
                },
                None,
            ),
            (
                JobSpec {
                    seconds: 0.0,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: -1.0,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: 600.5,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    seconds: f64::NAN,
                    ..point()
                },
                Some("--seconds"),
            ),
            (
                JobSpec {
                    size_bytes: 0,
                    ..point()
                },
                Some("--size"),
            ),
            (
                JobSpec {
                    concurrency: Some(32),
                    threads: 2,
                    ..point()
                },
                None,
            ),
            (
                JobSpec {
                    concurrency: Some(1),
                    threads: 2,
                    ..point()
                },
                Some("--concurrency"),
            ),
            (
                JobSpec {
                    concurrency: Some(0),
                    ..point()
                },
                Some("--concurrency"),
            ),
            (
                JobSpec {
                    concurrency: Some(4),
                    key_mode: KeyMode::PerOp,
                    ..point()
                },
                Some("--key-mode"),
            ),
            (
                JobSpec {
                    key_mode: KeyMode::HkdfPerUser,
                    ..point()
                },
                None,
            ),
            (
                JobSpec {
                    nonce: Nonce::Random,
                    key_mode: KeyMode::HkdfPerUser,
                    ..point()
                },
                None,
            ),
            (
                JobSpec {
                    nonce: Nonce::Random,
                    direction: Direction::Decrypt,
                    ..point()
                },
                Some("--nonce"),
            ),
            (
                JobSpec {
                    nonce: Nonce::Random,
                    algorithm: "aes-256-cbc-hmac-sha256".parse().unwrap(),
                    ..point()
                },
                Some("--nonce"),
            ),
            (
                JobSpec {
                    nonce: Nonce::Random,
                    algorithm: "aes-256-ctr".parse().unwrap(),
                    ..point()
                },
                Some("--nonce"),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(spec.validate().err().map(|e| e.flag), want, "{spec:?}");
        }
    }

    #[test]
    fn ccm_takes_the_matrix_sizes_and_refuses_what_its_length_field_cannot_hold() {
        let ccm = |size_bytes| JobSpec {
            algorithm: "aes-128-ccm".parse().unwrap(),
            size_bytes,
            ..point()
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
        assert_eq!(
            JobSpec {
                size_bytes: 16 << 20,
                ..point()
            }
            .validate(),
            Ok(())
        );
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
        let p = JobSpec {
            concurrency: Some(4),
            threads: 2,
            ..point()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"algorithm\":\"aes-256-gcm\""), "{json}");
        assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), p);
        let extra = json.replace("\"threads\"", "\"bogus\":1,\"threads\"");
        assert!(serde_json::from_str::<JobSpec>(&extra).is_err());
        // Counters are the default and are not spelled out; random ones are.
        assert!(!json.contains("nonce"), "{json}");
        let random = JobSpec {
            nonce: Nonce::Random,
            ..p.clone()
        };
        let json = serde_json::to_string(&random).unwrap();
        assert!(json.contains("\"nonce\":\"random\""), "{json}");
        assert_eq!(serde_json::from_str::<JobSpec>(&json).unwrap(), random);
    }
}
