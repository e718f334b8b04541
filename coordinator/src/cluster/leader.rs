//! The leader: one coordinator of the cluster, chosen by a session advisory
//! lock ([`Lock::Leader`]) held on a connection of its own for as long as it
//! lives. Work that must happen once across the cluster and is not already
//! claimed row by row (the queued-jobs time to live, closing orphaned session
//! rows, whole-fleet findings passes) runs only on the leader. When the
//! leader dies its connection closes, PostgreSQL drops the lock, and the next
//! coordinator to ask takes it.

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use tokio::sync::Mutex;

use crate::store::advisory::{self, Lock};

/// Whether this coordinator leads; asked before each piece of once-only work.
pub struct Leader {
    options: PgConnectOptions,
    /// The lock's own connection, and whether it holds the lock.
    conn: Mutex<Option<(PgConnection, bool)>>,
}

impl Leader {
    pub fn new(pool: &PgPool) -> Self {
        Leader {
            options: (*pool.connect_options()).clone(),
            conn: Mutex::new(None),
        }
    }

    /// True while this coordinator holds the leader's lock; tries to take it
    /// when it does not. A lost connection (the database restarted) loses the lock.
    pub async fn is_leader(&self) -> bool {
        let mut conn = self.conn.lock().await;
        if conn.is_none() {
            match self.options.connect().await {
                Ok(c) => *conn = Some((c, false)),
                Err(e) => {
                    tracing::debug!(error = %e, "connecting to ask for the leader's lock");
                    return false;
                }
            }
        }
        let (c, leads) = conn.as_mut().expect("connected above");
        let asked = if *leads {
            // Held for the connection's life: it holds while the connection does.
            c.ping().await.map(|()| true).map_err(crate::store::Error::from)
        } else {
            advisory::try_lock_session(c, Lock::Leader).await
        };
        match asked {
            Ok(now) => {
                if now && !*leads {
                    tracing::info!("this coordinator now leads the cluster's sweeps and whole-fleet findings");
                }
                *leads = now;
                now
            }
            Err(e) => {
                if *leads {
                    tracing::warn!(error = %e, "the leader's connection to PostgreSQL broke: no longer the leader");
                }
                *conn = None;
                false
            }
        }
    }
}
