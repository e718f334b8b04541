//! What to measure: a single point ([`JobSpec`]), a request for many points
//! ([`Matrix`]), the named suites ([`Suite`]), payload-size parsing, and validation.
//!
//! Validation errors name the flag (or JSON field) and the accepted range, so
//! the agent's CLI and the coordinator reject bad input before any work.
//!
//! - [`job`]: one point, its validation (random nonces included) and warm-up.
//! - [`budget`]: what a point may cost: its measurement cap and time limit.
//! - [`matrix`]: the Cartesian product of lists.
//! - [`suite`]: the named matrices (`quick`, `standard`, `full`, the scenario
//!   suites `object-storage`, `legacy-migration`, `modes`, `fallback`, `field-level`,
//!   and the quickstart's `tour`).
//! - [`size`]: payload sizes as flags spell them (`16KiB`).

mod budget;
mod job;
mod matrix;
mod size;
mod suite;

pub use budget::{
    Budget, DECRYPT_POOL_MIN_MESSAGES, EMULATION_SLOWDOWN, Execution, LOW_SAMPLES, MIN_OBJECTS_PER_SLOT, MIN_SAMPLES,
};
pub use job::{
    JobSpec, validate_arrival_rate, validate_message_size, validate_nonce, validate_provider, validate_seconds,
    validate_size, validate_threads,
};
pub use matrix::{MAX_LIST_LEN, MAX_POINTS, Matrix};
pub use size::{format_size, parse_size};
pub use suite::{OBJECT_STORAGE_IN_FLIGHT, OBJECT_STORAGE_SIZE, SUITES, Suite, expand_all, suite_names};

use crate::text_enum;

/// The payload sizes of the benchmark matrix, ascending: field-level (11, 18),
/// one block (16), small messages, 8 and 16 KiB records, 1 and 10 MiB objects.
pub const SIZES: &[u64] = &[11, 16, 18, 64, 256, 1 << 10, 8 << 10, 16 << 10, 1 << 20, 10 << 20];

/// Largest payload one operation may process.
pub const MAX_SIZE: u64 = 1 << 30;
/// Most worker threads one point may use.
pub const MAX_THREADS: u32 = 1024;
/// Most objects in flight in the object-storage scenario.
pub const MAX_CONCURRENCY: u32 = 4096;
/// Highest open-loop arrival rate, objects per second.
pub const MAX_ARRIVAL_RATE: f64 = 1e7;
/// Longest measurement of one point, in seconds.
pub const MAX_SECONDS: f64 = 600.0;

text_enum! {
    /// Encrypt or decrypt (AEAD decrypt verifies the tag).
    pub enum Direction ("direction") {
        Encrypt = "encrypt",
        Decrypt = "decrypt",
    }
}

text_enum! {
    /// How keys are handled per operation.
    pub enum KeyMode ("key mode") {
        /// One key per worker thread, expanded once.
        Static = "static",
        /// A fresh key schedule for every operation (keys rotate through a small random set).
        PerOp = "per-op",
        /// Every operation derives its user's key with HKDF-SHA256 from a master key, then expands it.
        HkdfPerUser = "hkdf-per-user",
    }
}

text_enum! {
    /// Where each encryption's nonce comes from.
    #[derive(Default)]
    pub enum Nonce ("nonce") {
        /// Thread and operation number: unique under one key and free to make.
        #[default]
        Counter = "counter",
        /// The AEAD's 12 or 24 bytes drawn from the OS for every message, inside
        /// the measured loop, since that draw is what random nonces cost. Only
        /// for the nonce-based AEADs' encryption ([`JobSpec::validate`]).
        Random = "random",
    }
}

impl Nonce {
    /// Whether these are counters, the default (JSON then leaves the field out).
    pub fn is_counter(&self) -> bool {
        *self == Nonce::Counter
    }
}

/// A validation failure, naming the flag and what it accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct InvalidSpec {
    pub flag: &'static str,
    pub message: String,
}

pub(crate) fn invalid(flag: &'static str, message: impl Into<String>) -> InvalidSpec {
    InvalidSpec {
        flag,
        message: message.into(),
    }
}
