//! When each host was last heard from, coalesced: a message only marks its
//! host in memory, and the marks are written to `hosts.last_seen` in one
//! statement every [`FLUSH_INTERVAL`] (and at shutdown). A thousand agents'
//! heartbeats thus cost one query a few seconds, not a thousand.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::PgPool;

use crate::store;

/// How often marks are written; `last_seen` lags by at most this.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(5);

/// Hosts heard from since the last flush.
#[derive(Debug, Default)]
pub struct LastSeen {
    marked: Mutex<HashSet<i64>>,
}

impl LastSeen {
    /// Notes that `host_id` sent something now.
    pub fn mark(&self, host_id: i64) {
        self.lock().insert(host_id);
    }

    /// Hosts marked and not yet written.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// Writes the marks in one statement. On failure they are kept for the next flush.
    pub async fn flush(&self, pool: &PgPool) -> Result<usize, store::Error> {
        let hosts: Vec<i64> = std::mem::take(&mut *self.lock()).into_iter().collect();
        if hosts.is_empty() {
            return Ok(0);
        }
        match store::hosts::touch_all(pool, &hosts).await {
            Ok(()) => Ok(hosts.len()),
            Err(e) => {
                self.lock().extend(hosts);
                Err(e)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        self.marked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

    use super::*;

    #[tokio::test]
    async fn marks_coalesce_per_host_and_survive_a_failed_flush() {
        let seen = LastSeen::default();
        for _ in 0..100 {
            seen.mark(1);
            seen.mark(2);
        }
        assert_eq!(seen.pending(), 2);
        // A closed pool: the database is away; nothing is lost.
        let pool = PgPoolOptions::new().connect_lazy_with(PgConnectOptions::new());
        pool.close().await;
        assert!(seen.flush(&pool).await.is_err());
        assert_eq!(seen.pending(), 2);
    }
}
