//! Conversions between the agent's types and the `cipherfleet.v1` protocol,
//! and the bounds both ends enforce on what crosses the wire.
//!
//! The agent converts with the `From`/`TryFrom` impls; the coordinator checks
//! everything an agent sends with the `validate_*` functions before storing it.
//! Every error names the protocol field it is about (`spec.threads`,
//! `hello.labels[2].key`, `measurement.measurement_json.samples`), so it can go straight into a
//! `Status::invalid_argument` or a `JobFailed`.
//!
//! - [`spec`]: `JobSpec` both ways, with the agent's own validation.
//! - [`measurement`]: `Measurement` to the wire, and its checks on arrival.
//! - [`plausible`]: the bounds physics puts on a measurement's figures.
//! - [`storable`]: text the database can hold (no NUL), refused or made so.
//! - [`hello`]: host facts, labels and the checks on a `Hello`.
//! - `matrix`: a campaign's matrix, bounded, de-duplicated and validated.

mod hello;
mod matrix;
mod measurement;
pub mod plausible;
mod spec;
mod storable;

pub use hello::{parse_label, validate_facts, validate_hello, validate_label};
pub use matrix::MAX_RAW_LIST_LEN;
pub use measurement::{check_measurement_matches, check_spec_matches, checked_measurement, validate_measurement};
pub use spec::provider_to_wire;
pub use storable::{NUL_REPLACED, check_storable, check_storable_json, storable_text};

/// Longest host name (`Hello.name`), in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY_LEN: usize = 128;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE_LEN: usize = 256;
/// Most labels on one host.
pub const MAX_LABELS: usize = 32;
/// Longest job id, in bytes.
pub const MAX_JOB_ID_LEN: usize = 128;
/// Most ids in `Hello.spooled_job_ids`; an agent with more lists the oldest
/// and still re-sends every outcome after `Welcome`.
pub const MAX_SPOOLED_JOB_IDS: usize = 1024;
/// Longest host credential presented, in bytes (credentials are 64 hex digits, [`crate::credential`]).
pub const MAX_CREDENTIAL_LEN: usize = 128;
/// Longest enrollment token, in bytes.
pub use crate::token::MAX_TOKEN_LEN;
/// Longest error text (`JobFailed.error`), in bytes.
pub const MAX_ERROR_LEN: usize = 4096;
/// Longest `HostFacts.facts_json`, in bytes.
pub const MAX_FACTS_JSON_LEN: usize = 64 * 1024;
/// Longest `Measurement.measurement_json`, in bytes.
pub const MAX_MEASUREMENT_JSON_LEN: usize = 256 * 1024;
/// Longest of any other string (versions, CPU model, backend names, ...), in bytes.
pub const MAX_FIELD_LEN: usize = 256;
/// Most entries in a short list (feature names, backends, capability paths).
pub const MAX_LIST_LEN: usize = 64;
/// Most samples in one measurement.
pub const MAX_SAMPLES: usize = 1 << 16;

/// Something on the wire that is missing, out of range or inconsistent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct WireError {
    /// The protocol field, as a path: `spec.direction`, `hello.labels[0].key`.
    pub field: String,
    /// What is wrong and, where useful, what is accepted.
    pub message: String,
}

pub(crate) fn wire_error(field: impl Into<String>, message: impl Into<String>) -> WireError {
    WireError {
        field: field.into(),
        message: message.into(),
    }
}

/// Checks a string's length (in bytes) and that it holds no control characters.
pub fn check_text(field: &str, value: &str, max: usize, allow_empty: bool) -> Result<(), WireError> {
    if value.is_empty() && !allow_empty {
        return Err(wire_error(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(wire_error(
            field,
            format!("{} bytes is too long; at most {max}", value.len()),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(wire_error(field, "must not contain control characters"));
    }
    Ok(())
}

/// Checks a coordinator-assigned job id: 1 to [`MAX_JOB_ID_LEN`] bytes, no control characters.
pub fn validate_job_id(field: &str, id: &str) -> Result<(), WireError> {
    check_text(field, id, MAX_JOB_ID_LEN, false)
}

/// Shortens `s` to at most `max` bytes on a character boundary, so the agent
/// can stay inside the bounds rather than be refused for a long error text.
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_whole_characters() {
        assert_eq!(truncate("abcdef".into(), 4), "abcd");
        assert_eq!(truncate("aé".into(), 2), "a");
        assert_eq!(truncate("short".into(), 100), "short");
    }

    #[test]
    fn job_ids_are_bounded_and_printable() {
        assert!(validate_job_id("job_id", "7f3c2a9e-1b2c-4d5e-8f90-123456789abc").is_ok());
        for bad in ["", "a\nb", &"x".repeat(MAX_JOB_ID_LEN + 1)] {
            assert_eq!(
                validate_job_id("run_job.job_id", bad).unwrap_err().field,
                "run_job.job_id"
            );
        }
    }
}
