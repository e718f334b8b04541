//! Statements that lock several job rows lock them in id order, as the
//! ingest batch does (`SELECT … WHERE id = ANY($1) ORDER BY id FOR UPDATE`):
//! two of them over overlapping rows then wait for each other in turn, never
//! crosswise, and PostgreSQL never ends one as a deadlock victim (40P01).

use std::time::Duration;

use cipherfleet_coordinator::store::jobs;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{campaign, fresh_db, host, job};

/// Waits until `n` other sessions of this database wait on a lock.
async fn wait_for_lock_waits(pool: &PgPool, n: i64) {
    for _ in 0..600 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{n} sessions never waited on a lock at once");
}

/// The starts of a batch's jobs noted on their own ([`jobs::mark_started_many`]),
/// given in descending id order, while a batch locks the same jobs in ascending
/// order. The interleaving that deadlocks an update locking in the order given is
/// forced: a third transaction holds a key-share lock on the higher job, which
/// stops the batch there (its `FOR UPDATE` conflicts) while holding the lower
/// one, but not an update of the higher one (its lock does not conflict).
#[tokio::test]
async fn job_starts_in_any_order_and_a_batch_locking_in_id_order_never_deadlock() {
    let pool = fresh_db().await;
    let (a, b) = (host(&pool, "bench-01").await, host(&pool, "bench-02").await);
    campaign(&pool, &[job(a, 16), job(b, 16)]).await;
    let mut claimed = jobs::claim_next_for_hosts(&pool, &[a, b]).await.unwrap();
    assert_eq!(claimed.len(), 2);
    claimed.sort_by_key(|j| j.id);
    let (low, high) = (&claimed[0], &claimed[1]);
    let start = |j: &jobs::Job| jobs::Start {
        job_id: j.id,
        host_id: j.host_id,
        attempt_id: j.attempt_id.expect("a claimed job names its attempt"),
        at: chrono::Utc::now(),
    };
    let ids: Vec<Uuid> = vec![high.id, low.id];
    // Rewritten higher first, so the table holds it first too: whichever way the
    // planner joins the starts to the jobs (in the starts' order or the table's),
    // an update that locks as it goes reaches the higher job first.
    for id in &ids {
        sqlx::query("UPDATE jobs SET attempts = attempts WHERE id = $1")
            .bind(id)
            .execute(&pool)
            .await
            .unwrap();
    }

    let mut key_share = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM jobs WHERE id = $1 FOR KEY SHARE")
        .bind(high.id)
        .execute(&mut *key_share)
        .await
        .unwrap();
    // The batch's lock statement: it takes the lower job and waits for the higher.
    let batch = tokio::spawn({
        let pool = pool.clone();
        let ids = ids.clone();
        async move {
            let mut tx = pool.begin().await?;
            let locked: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE")
                .bind(&ids)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(locked)
        }
    });
    wait_for_lock_waits(&pool, 1).await;
    let starts = tokio::spawn({
        let pool = pool.clone();
        let starts = [start(high), start(low)];
        async move { jobs::mark_started_many(&pool, &starts).await }
    });
    wait_for_lock_waits(&pool, 2).await;
    key_share.commit().await.unwrap();

    let locked = batch
        .await
        .unwrap()
        .expect("the batch is not chosen as a deadlock victim");
    assert_eq!(locked, vec![low.id, high.id]);
    let noted = starts
        .await
        .unwrap()
        .expect("the starts are not chosen as a deadlock victim");
    assert_eq!(noted, 2, "both starts noted");
}
