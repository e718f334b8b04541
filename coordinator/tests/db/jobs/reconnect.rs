//! A host whose coordinator died comes back through another one while its
//! job was running: what becomes of the job at its session's start.

use std::time::Duration;

use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::store::jobs::{self, Job};
use cipherfleet_coordinator::store::leases::{self, Holder};
use cipherfleet_coordinator::store::sessions;
use sqlx::PgPool;
use uuid::Uuid;

use super::make_overdue;
use crate::helpers::{campaign, fresh_db, host, job};

/// A host with two jobs whose first was claimed and is now past its deadline,
/// no coordinator holding the host: the pool, the host and that job.
async fn overdue_without_its_coordinator() -> (PgPool, i64, Job) {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    campaign(&pool, &[job(bench, 16), job(bench, 64)]).await;
    let running = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    make_overdue(&pool, running.id).await;
    (pool, bench, running)
}

fn holder(name: &str) -> Holder {
    Holder {
        id: Uuid::new_v4(),
        name: name.into(),
    }
}

/// `holder`'s first session's lease, for a minute.
fn lease(holder: &Holder) -> sessions::LeaseOf<'_> {
    sessions::LeaseOf {
        holder,
        generation: 1,
        ttl: Duration::from_secs(60),
    }
}

#[tokio::test]
async fn an_overdue_job_whose_host_is_reconnecting_is_adopted_not_dispatched_again() {
    // Its coordinator died (no lease any more) while the job ran; the agent
    // still runs it, past its deadline, and is on its way back to another one.
    let (pool, bench, running) = overdue_without_its_coordinator().await;
    let attempt = running.attempt_id.unwrap();
    let survivor = holder("survivor/2");
    assert_eq!(
        jobs::expire_overdue(&pool, survivor.id).await.unwrap(),
        [],
        "within the grace"
    );
    let opening = sessions::Opening {
        running: Some((running.id, attempt)),
        ..Default::default()
    };
    let started = sessions::start(&pool, bench, lease(&survivor), opening)
        .await
        .unwrap()
        .unwrap();
    assert!(started.adopted, "the job its agent still runs is its job again");
    let adopted = jobs::get(&pool, running.id).await.unwrap().unwrap();
    assert_eq!(
        (adopted.status, adopted.attempt_id, adopted.attempts),
        (JobStatus::Running, Some(attempt), 0),
        "the same attempt, none counted: its result counts and it is not run twice"
    );
    assert!(adopted.deadline.unwrap() > chrono::Utc::now(), "a fresh deadline");
    assert_eq!(
        jobs::claim_next_for_host(&pool, bench).await.unwrap(),
        None,
        "the host is busy with it"
    );
    assert_eq!(jobs::expire_overdue(&pool, survivor.id).await.unwrap(), []);

    // A host that does not come back within the grace has its job taken back.
    assert!(leases::release(&pool, bench, &survivor, 1).await.unwrap());
    sqlx::query("UPDATE jobs SET deadline = now() - $2 * interval '1 second' WHERE id = $1")
        .bind(running.id)
        .bind(jobs::RECONNECT_GRACE.as_secs_f64() + 1.0)
        .execute(&pool)
        .await
        .unwrap();
    let expired = jobs::Expired {
        job_id: running.id,
        host_id: bench,
        attempt_id: Some(attempt),
        requeued: true,
    };
    assert_eq!(jobs::expire_overdue(&pool, survivor.id).await.unwrap(), [expired]);
}

#[tokio::test]
async fn a_job_whose_outcome_its_agent_spooled_stays_running_when_it_comes_back_elsewhere() {
    // Its coordinator died while the agent finished the job: the outcome sits in
    // the agent's spool (past the deadline, too), and its hello says so.
    let (pool, bench, finished) = overdue_without_its_coordinator().await;
    let attempt = finished.attempt_id.unwrap();
    let survivor = holder("survivor/2");
    // An id the host has no job of is ignored.
    let spooled = [Uuid::new_v4(), finished.id];
    let opening = sessions::Opening {
        spooled: &spooled,
        ..Default::default()
    };
    let started = sessions::start(&pool, bench, lease(&survivor), opening)
        .await
        .unwrap()
        .unwrap();
    assert!(!started.adopted, "the agent runs nothing");
    assert_eq!(started.lost, jobs::Requeued::default(), "nothing re-queued");
    let kept = jobs::get(&pool, finished.id).await.unwrap().unwrap();
    assert_eq!(
        (kept.status, kept.attempt_id, kept.attempts),
        (JobStatus::Running, Some(attempt), 0),
        "the same attempt, none counted: the spooled outcome counts when it comes"
    );
    assert!(kept.deadline.unwrap() > chrono::Utc::now(), "a fresh deadline");
    // Not dispatched again meanwhile: the host is not idle, for a claim or the wake-up.
    assert_eq!(jobs::claim_next_for_host(&pool, bench).await.unwrap(), None);
    assert_eq!(jobs::idle_with_work(&pool, &[bench]).await.unwrap(), Vec::<i64>::new());
    assert_eq!(jobs::expire_overdue(&pool, survivor.id).await.unwrap(), []);

    // Without the spooled outcome (lost with the agent's state), the job goes back to the queue.
    let second = holder("second/3");
    assert!(leases::release(&pool, bench, &survivor, 1).await.unwrap());
    let started = sessions::start(&pool, bench, lease(&second), sessions::Opening::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(started.lost.requeued, [finished.id]);
    assert_eq!(jobs::idle_with_work(&pool, &[bench]).await.unwrap(), [bench]);
}
