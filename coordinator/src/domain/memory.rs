//! A result's memory figures as stored.

use cipherfleet_core::measurement::Memory;
use serde::Serialize;

/// A result's memory figures as its columns hold them (migrations/0005): each
/// `None` for results of agents that did not report memory (before schema
/// `/2`), the per-operation ones also where the worker did not count
/// allocations. Flattened into every row type that shows them, and into their
/// API rows, so JSON and CSV always carry the four columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, sqlx::FromRow)]
pub struct StoredMemory {
    /// One keyed cipher instance: `size_of` plus the heap it owns.
    pub cipher_state_bytes: Option<i64>,
    /// The worker's peak resident set (`ru_maxrss`), buffers included.
    pub peak_rss_bytes: Option<i64>,
    /// Heap bytes and allocations per operation in the measured loops (0 expected).
    pub heap_bytes_per_op: Option<f64>,
    pub allocs_per_op: Option<f64>,
}

impl From<Option<&Memory>> for StoredMemory {
    fn from(m: Option<&Memory>) -> Self {
        m.map_or_else(StoredMemory::default, |m| StoredMemory {
            cipher_state_bytes: Some(bigint(m.cipher_state_bytes)),
            peak_rss_bytes: Some(bigint(m.peak_rss_bytes)),
            heap_bytes_per_op: m.heap_bytes_per_op,
            allocs_per_op: m.allocs_per_op,
        })
    }
}

/// A count as PostgreSQL's `bigint`. Nanoseconds, bytes and batch sizes past
/// 2^63 are not measurements anyone took; saturating keeps the row rather
/// than refusing it over a figure nobody could act on.
pub fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_past_the_bigint_range_saturate() {
        assert_eq!((bigint(0), bigint(9000)), (0, 9000));
        assert_eq!(bigint(u64::MAX), i64::MAX);
    }
}
