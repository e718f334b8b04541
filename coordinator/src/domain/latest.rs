//! The latest result of one point on one host (`result_points`), the row
//! the report and the analysis read instead of scanning all results.

use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use cipherfleet_core::path::PathUsed;

use super::memory::StoredMemory;

/// A row of `result_points` (or of `provider_points`): the latest result of one point on one host.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct LatestResult {
    pub host_id: i64,
    /// The point; its path is the one asked for.
    #[sqlx(flatten)]
    pub point: Point,
    /// What the worker really ran: `partial` or `software` when acceleration fell back.
    #[sqlx(try_from = "String")]
    pub path_used: PathUsed,
    pub result_id: i64,
    pub measured_at: DateTime<Utc>,
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    pub latency_p99_ns: i64,
    /// Coefficient of variation of the samples, as a fraction.
    pub cv: Option<f64>,
    pub samples: i32,
    /// Fewer samples than a figure needs to be trusted, even after the run was extended.
    pub low_samples: bool,
    #[sqlx(flatten)]
    pub memory: StoredMemory,
}

/// The columns of [`LatestResult`] from `provider_points` (the providers
/// other than the built-in crates), which keeps no memory figures: those
/// read as unknown.
#[macro_export]
macro_rules! provider_point_columns {
    () => {
        "host_id, provider, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
         path_used, result_id, measured_at, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples, low_samples, \
         NULL::bigint AS cipher_state_bytes, NULL::bigint AS peak_rss_bytes, \
         NULL::double precision AS heap_bytes_per_op, NULL::double precision AS allocs_per_op"
    };
}

/// The columns of [`LatestResult`], as a literal for `concat!`.
#[macro_export]
macro_rules! latest_result_columns {
    () => {
        "host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, path_used, \
         result_id, measured_at, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples, low_samples, \
         cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op"
    };
}
