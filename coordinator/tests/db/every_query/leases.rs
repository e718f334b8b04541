//! `leases`, `coordinators`, `advisory`, `jobs::idle_with_work` and
//! `sessions::close_orphaned`: the storage that lets several coordinators
//! share one database.

use std::time::Duration;

use cipherfleet_coordinator::cluster;
use cipherfleet_coordinator::domain::job::JobStatus;
use cipherfleet_coordinator::store::advisory::{self, Lock};
use cipherfleet_coordinator::store::coordinators::{self, LeaseHolder, Listener, Neighbour, Process};
use cipherfleet_coordinator::store::leases::{self, Held, Holder};
use cipherfleet_coordinator::store::{hosts, jobs, sessions};
use sqlx::Connection;
use uuid::Uuid;

use super::fixture::fresh_db;
use crate::helpers::{campaign, facts, host, job};

const TTL: Duration = Duration::from_secs(60);

fn coordinator(name: &str) -> Holder {
    Holder {
        id: Uuid::new_v4(),
        name: name.into(),
    }
}

#[tokio::test]
async fn a_host_lease_is_held_by_one_coordinator_until_released_or_expired() {
    let pool = fresh_db().await;
    let (a, b) = (coordinator("a/1"), coordinator("b/2"));
    let (h1, h2) = (host(&pool, "lease-1").await, host(&pool, "lease-2").await);

    assert!(leases::acquire(&pool, h1, &a, 1, TTL).await.unwrap());
    assert!(!leases::acquire(&pool, h1, &b, 1, TTL).await.unwrap(), "held live by a");
    assert!(
        leases::acquire(&pool, h1, &a, 2, TTL).await.unwrap(),
        "a's own next session"
    );
    // Online once welcomed, by the session that holds the lease.
    assert!(!leases::is_live(&pool, h1).await.unwrap());
    assert!(leases::live_hosts(&pool).await.unwrap().is_empty());
    assert!(!leases::welcome(&pool, h1, &a, 1).await.unwrap());
    assert!(leases::welcome(&pool, h1, &a, 2).await.unwrap());
    assert!(leases::is_live(&pool, h1).await.unwrap());
    assert!(!leases::is_live(&pool, h2).await.unwrap());
    assert_eq!(leases::live_hosts(&pool).await.unwrap(), [h1]);
    assert_eq!(leases::count_by_holder(&pool).await.unwrap(), [("a/1".to_string(), 1)]);

    // An ended session gives back only its own lease.
    assert!(!leases::release(&pool, h1, &a, 1).await.unwrap());
    assert!(leases::release(&pool, h1, &a, 2).await.unwrap());
    assert!(leases::acquire(&pool, h1, &b, 7, TTL).await.unwrap(), "free again");

    // A lease nobody renews expires, and another coordinator takes it over.
    assert!(
        leases::acquire(&pool, h2, &a, 3, Duration::from_millis(1))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!leases::is_live(&pool, h2).await.unwrap());
    assert!(leases::acquire(&pool, h2, &b, 8, TTL).await.unwrap());
    // a's renewal finds it lost; b's renews both of b's in one statement.
    assert_eq!(leases::renew(&pool, &a, &[(h2, 3)], TTL).await.unwrap(), []);
    let mut held = leases::renew(&pool, &b, &[(h1, 7), (h2, 8)], TTL).await.unwrap();
    held.sort_by_key(|h| h.host_id);
    assert_eq!(
        held,
        [
            Held {
                host_id: h1,
                revoked: None
            },
            Held {
                host_id: h2,
                revoked: None
            }
        ]
    );
    assert!(leases::renew(&pool, &b, &[], TTL).await.unwrap().is_empty());

    // Revoked by an operator elsewhere: the owner's renewal says why, and does not extend it.
    assert!(leases::revoke(&pool, h1, "credential reset").await.unwrap());
    let held = leases::renew(&pool, &b, &[(h1, 7)], TTL).await.unwrap();
    assert_eq!(
        held,
        [Held {
            host_id: h1,
            revoked: Some("credential reset".into())
        }]
    );

    assert_eq!(leases::release_all(&pool, &b).await.unwrap(), 2);
    assert!(!leases::revoke(&pool, h1, "nobody holds it").await.unwrap());
    assert!(leases::acquire(&pool, h1, &a, 9, TTL).await.unwrap());
    assert_eq!(leases::clear(&pool).await.unwrap(), 1);
    assert!(leases::live_hosts(&pool).await.unwrap().is_empty());
}

#[tokio::test]
async fn coordinators_of_one_machine_are_found_and_a_dead_ones_leases_end_at_once() {
    let pool = fresh_db().await;
    let here = Process {
        boot_id: Some(Uuid::new_v4()),
        pid_namespace: Some(4026531836),
        uid: Some(1000),
        pid: 41,
        pid_start: Some(1234),
    };
    let (dead, me) = (coordinator("m/41"), coordinator("m/42"));
    let (other_boot, unknown_start) = (coordinator("n/41"), coordinator("m/43"));
    coordinators::register(&pool, &dead, &here).await.unwrap();
    // Again: marked seen, nothing else changes.
    coordinators::register(&pool, &dead, &here).await.unwrap();
    let my_process = Process {
        pid: 42,
        ..here.clone()
    };
    coordinators::register(&pool, &me, &my_process).await.unwrap();
    let elsewhere = Process {
        boot_id: Some(Uuid::new_v4()),
        ..here.clone()
    };
    coordinators::register(&pool, &other_boot, &elsewhere).await.unwrap();
    let unreadable = Process {
        pid: 43,
        pid_start: None,
        ..here.clone()
    };
    coordinators::register(&pool, &unknown_start, &unreadable)
        .await
        .unwrap();

    // Only a neighbour on the same boot, PID namespace and user, with a known start.
    let neighbours = coordinators::on_machine(&pool, &me, &my_process).await.unwrap();
    let dead_one = Neighbour {
        id: dead.id,
        name: "m/41".into(),
        pid: 41,
        pid_start: 1234,
    };
    assert_eq!(neighbours, [dead_one]);
    for process in [
        Process {
            uid: Some(0),
            ..my_process.clone()
        },
        Process {
            pid_namespace: None,
            ..my_process.clone()
        },
    ] {
        assert!(
            coordinators::on_machine(&pool, &me, &process).await.unwrap().is_empty(),
            "{process:?}"
        );
    }

    // Its leases end at once; others' stay.
    let (h1, h2) = (host(&pool, "dead-1").await, host(&pool, "mine-1").await);
    assert!(leases::acquire(&pool, h1, &dead, 1, TTL).await.unwrap());
    assert!(leases::acquire(&pool, h2, &me, 1, TTL).await.unwrap());
    assert_eq!(leases::end_all_of(&pool, &[dead.id]).await.unwrap(), 1);
    assert!(leases::acquire(&pool, h1, &me, 2, TTL).await.unwrap(), "free at once");
    assert!(!leases::acquire(&pool, h2, &dead, 2, TTL).await.unwrap());
    assert_eq!(leases::end_all_of(&pool, &[]).await.unwrap(), 0);

    assert_eq!(coordinators::forget(&pool, &[dead.id]).await.unwrap(), 1);
    assert!(
        coordinators::on_machine(&pool, &me, &my_process)
            .await
            .unwrap()
            .is_empty()
    );
    // One not seen for an hour is forgotten; the others are seen lately.
    assert_eq!(coordinators::forget_unseen(&pool).await.unwrap(), 0);
    sqlx::query("UPDATE coordinators SET seen_at = now() - interval '2 hours' WHERE id = $1")
        .bind(other_boot.id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(coordinators::forget_unseen(&pool).await.unwrap(), 1);
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM coordinators ORDER BY name")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(left, [me.id, unknown_start.id]);
}

#[tokio::test]
async fn sessions_without_a_live_lease_are_closed_and_leased_ones_kept() {
    let pool = fresh_db().await;
    let a = coordinator("a/1");
    let (served, orphan) = (host(&pool, "served").await, host(&pool, "orphan").await);
    let first = sessions::open(&pool, served, None, None, None).await.unwrap();
    // A new session of the host closes its stale one.
    let kept = sessions::open(&pool, served, None, None, None).await.unwrap();
    sessions::open(&pool, orphan, None, None, None).await.unwrap();
    assert!(leases::acquire(&pool, served, &a, 1, TTL).await.unwrap());

    assert_eq!(sessions::close_orphaned(&pool).await.unwrap(), 1);
    let open: Vec<i64> = sessions::for_host(&pool, served, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.disconnected_at.is_none())
        .map(|s| s.id)
        .collect();
    assert_eq!(open, [kept]);
    assert_ne!(first, kept);
    assert!(
        sessions::for_host(&pool, orphan, 10).await.unwrap()[0]
            .disconnected_at
            .is_some()
    );
}

#[tokio::test]
async fn a_session_start_takes_the_lease_records_the_session_and_adopts_or_requeues_in_one_call() {
    let pool = fresh_db().await;
    let (a, b) = (coordinator("a/1"), coordinator("b/2"));
    let bench = host(&pool, "start-1").await;
    campaign(&pool, &[job(bench, 64), job(bench, 256)]).await;
    let running = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    let attempt = running.attempt_id.unwrap();
    let lease = |holder, generation| sessions::LeaseOf {
        holder,
        generation,
        ttl: TTL,
    };
    let snapshot = hosts::get(&pool, bench).await.unwrap().unwrap().current_snapshot_id;

    // The agent comes back running its job, and its hello changes nothing: welcomed at once.
    let opening = sessions::Opening {
        welcomed: true,
        peer_address: Some("192.0.2.7:40000"),
        agent_version: Some("0.1.0"),
        running: Some((running.id, attempt)),
        spooled: &[],
    };
    let first = sessions::start(&pool, bench, lease(&a, 1), opening)
        .await
        .unwrap()
        .unwrap();
    assert!(first.adopted);
    assert_eq!(first.lost, jobs::Requeued::default());
    assert!(first.queued_work, "its second job waits");
    assert!(leases::is_live(&pool, bench).await.unwrap(), "online at once");
    let session = sessions::for_host(&pool, bench, 10).await.unwrap().remove(0);
    assert_eq!(
        (
            session.id,
            session.snapshot_id,
            session.peer_address.as_deref(),
            session.agent_version.as_deref()
        ),
        (first.session_id, snapshot, Some("192.0.2.7:40000"), Some("0.1.0"))
    );

    // Another coordinator while a's lease lives: nothing changes.
    assert_eq!(
        sessions::start(&pool, bench, lease(&b, 1), sessions::Opening::default())
            .await
            .unwrap(),
        None
    );
    assert_eq!(sessions::for_host(&pool, bench, 10).await.unwrap().len(), 1);
    assert_eq!(
        jobs::running_for_host(&pool, bench).await.unwrap().map(|j| j.id),
        Some(running.id)
    );

    // a's next session, the agent running nothing: the job is lost once, the
    // earlier session closed, and the lease not welcomed until the hello is stored.
    let second = sessions::start(&pool, bench, lease(&a, 2), sessions::Opening::default())
        .await
        .unwrap()
        .unwrap();
    assert!(!second.adopted);
    assert_eq!(second.lost.requeued, [running.id]);
    assert!(!leases::is_live(&pool, bench).await.unwrap());
    let job = jobs::get(&pool, running.id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Queued, 1));
    let both = sessions::for_host(&pool, bench, 10).await.unwrap();
    assert_eq!(
        both.iter().map(|s| s.id).collect::<Vec<_>>(),
        [second.session_id, first.session_id]
    );
    assert!(both[0].disconnected_at.is_none() && both[1].disconnected_at.is_some());

    // Its hello stored new facts: the session names their snapshot.
    let newer = hosts::upsert_host_with_facts(&pool, "start-1", None, &facts("6.8.0-1-amd64"))
        .await
        .unwrap();
    sessions::set_snapshot(&pool, second.session_id, newer.snapshot_id)
        .await
        .unwrap();
    let session = sessions::for_host(&pool, bench, 1).await.unwrap().remove(0);
    assert_eq!(session.snapshot_id, Some(newer.snapshot_id));

    // Lost at its last attempt: failed, and the campaign runs on (one job queued).
    let again = jobs::claim_next_for_host(&pool, bench).await.unwrap().unwrap();
    assert_eq!(again.id, running.id);
    let third = sessions::start(&pool, bench, lease(&a, 3), sessions::Opening::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.lost.failed, [running.id]);
    assert!(third.queued_work);
}

#[tokio::test]
async fn idle_hosts_with_queued_work_are_found_and_busy_or_idle_ones_not() {
    let pool = fresh_db().await;
    let (busy, waiting, idle) = (
        host(&pool, "busy").await,
        host(&pool, "waiting").await,
        host(&pool, "idle").await,
    );
    campaign(&pool, &[job(busy, 64), job(busy, 256), job(waiting, 64)]).await;
    jobs::claim_next_for_host(&pool, busy).await.unwrap().expect("a job");
    assert_eq!(
        jobs::idle_with_work(&pool, &[busy, waiting, idle]).await.unwrap(),
        [waiting]
    );
    assert!(jobs::idle_with_work(&pool, &[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_advisory_lock_is_held_by_one_session_at_a_time() {
    let pool = fresh_db().await;
    let options = (*pool.connect_options()).clone();
    let mut first = sqlx::PgConnection::connect_with(&options).await.unwrap();
    let mut second = sqlx::PgConnection::connect_with(&options).await.unwrap();
    assert!(advisory::try_lock_session(&mut first, Lock::Leader).await.unwrap());
    assert!(!advisory::try_lock_session(&mut second, Lock::Leader).await.unwrap());
    // The leader's connection closing (its coordinator died) frees the lock,
    // once the server has ended that backend.
    first.close().await.unwrap();
    let mut taken = false;
    for _ in 0..100 {
        if advisory::try_lock_session(&mut second, Lock::Leader).await.unwrap() {
            taken = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(taken, "the lock outlived its session");

    // The transaction lock is released at commit.
    let mut tx = pool.begin().await.unwrap();
    advisory::lock_transaction(&mut *tx, Lock::Findings).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    advisory::lock_transaction(&mut *tx, Lock::Findings).await.unwrap();
    tx.rollback().await.unwrap();

    // Hosts' claim locks: one per distinct host, held until the transaction ends.
    let held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 \
                AND pid = pg_backend_pid()";
    let mut tx = pool.begin().await.unwrap();
    advisory::lock_hosts_transaction(&mut tx, &[7, 3, 7, 1 << 40])
        .await
        .unwrap();
    let n: i64 = sqlx::query_scalar(held).fetch_one(&mut *tx).await.unwrap();
    assert_eq!(n, 3);
    tx.commit().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let n: i64 = sqlx::query_scalar(held).fetch_one(&mut *conn).await.unwrap();
    assert_eq!(n, 0, "released at commit");
}

#[tokio::test]
async fn a_coordinator_that_listened_where_a_new_one_listens_is_dead_and_its_leases_end_at_start() {
    let pool = fresh_db().await;
    // The predecessor ran in another PID namespace (a container since restarted in its pod):
    // its process cannot be checked from here, but it listened on this boot, network
    // namespace and address, which it would still hold if it lived.
    let me_here = cluster::process::this();
    let listener = Listener {
        net_namespace: cluster::process::net_namespace(),
        grpc: "127.0.0.1:7443".into(),
    };
    let before = Process {
        pid_namespace: Some(1),
        pid: 7,
        pid_start: Some(99),
        ..me_here.clone()
    };
    let (old, other, me) = (coordinator("pod/7"), coordinator("pod/8"), coordinator("pod/9"));
    coordinators::register(&pool, &old, &before).await.unwrap();
    assert!(coordinators::set_listener(&pool, &old, &listener).await.unwrap());
    // A live neighbour on another port is left alone.
    coordinators::register(&pool, &other, &before).await.unwrap();
    let elsewhere = Listener {
        grpc: "127.0.0.1:7444".into(),
        ..listener.clone()
    };
    assert!(coordinators::set_listener(&pool, &other, &elsewhere).await.unwrap());
    let (h1, h2) = (host(&pool, "pod-host-1").await, host(&pool, "pod-host-2").await);
    assert!(leases::acquire(&pool, h1, &old, 1, TTL).await.unwrap());
    assert!(leases::acquire(&pool, h2, &other, 1, TTL).await.unwrap());
    assert_eq!(
        coordinators::same_listener(&pool, &me, me_here.boot_id, &listener)
            .await
            .unwrap(),
        [old.id]
    );
    assert!(
        coordinators::same_listener(&pool, &me, None, &listener)
            .await
            .unwrap()
            .is_empty()
    );
    // Seen from another coordinator: who holds the lease, and how lately it renewed.
    let seen = coordinators::lease_holder(&pool, h1, &me).await.unwrap().expect("held");
    assert_eq!(
        (seen.id, seen.name.as_str(), seen.process.as_ref()),
        (old.id, "pod/7", Some(&before))
    );
    assert!(seen.silent_for.is_some_and(|s| s < Duration::from_secs(60)), "{seen:?}");
    assert_eq!(
        coordinators::lease_holder(&pool, h1, &old).await.unwrap(),
        None,
        "its own lease"
    );

    assert_eq!(cluster::take_over(&pool, &me, Some(&listener)).await.unwrap(), 1);
    assert!(leases::acquire(&pool, h1, &me, 1, TTL).await.unwrap(), "free at once");
    assert!(
        !leases::acquire(&pool, h2, &me, 1, TTL).await.unwrap(),
        "the live neighbour's stays"
    );
    let unregistered: Option<LeaseHolder> = coordinators::lease_holder(&pool, h2, &me).await.unwrap();
    assert_eq!(unregistered.map(|h| h.id), Some(other.id));
    assert!(
        coordinators::same_listener(&pool, &me, me_here.boot_id, &listener)
            .await
            .unwrap()
            .is_empty(),
        "the dead one is forgotten; this one is registered there now"
    );
}

#[tokio::test]
async fn a_lease_holder_that_missed_a_renewal_is_judged_silent_and_a_renewing_one_live() {
    let pool = fresh_db().await;
    let (other, me) = (coordinator("far/1"), coordinator("near/2"));
    // On another machine: its process cannot be checked from here.
    let far = Process {
        boot_id: Some(Uuid::new_v4()),
        pid_namespace: Some(1),
        uid: Some(1000),
        pid: 1,
        pid_start: Some(1),
    };
    coordinators::register(&pool, &other, &far).await.unwrap();
    let h = host(&pool, "judged").await;
    let renewal = Duration::from_secs(5);
    assert_eq!(
        cluster::judge_holder(&pool, &me, h, renewal).await.unwrap(),
        cluster::Holding::Free
    );
    assert!(leases::acquire(&pool, h, &other, 1, TTL).await.unwrap());
    assert_eq!(
        cluster::judge_holder(&pool, &me, h, renewal).await.unwrap(),
        cluster::Holding::Live
    );
    sqlx::query("UPDATE coordinators SET seen_at = now() - interval '8 seconds' WHERE id = $1")
        .bind(other.id)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        cluster::judge_holder(&pool, &me, h, renewal).await.unwrap(),
        cluster::Holding::Silent
    );
    coordinators::forget(&pool, &[other.id]).await.unwrap();
    assert_eq!(
        cluster::judge_holder(&pool, &me, h, renewal).await.unwrap(),
        cluster::Holding::Silent,
        "not registered: gone"
    );
    assert!(
        !leases::acquire(&pool, h, &me, 1, TTL).await.unwrap(),
        "a silent holder's lease is left alone"
    );
}
