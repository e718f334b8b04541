//! schedules, verifications, outbox, and `campaigns::insert_with_jobs`: the
//! storage behind watching without a person.

use std::time::Duration;

use chrono::Utc;
use cipherfleet_coordinator::store::findings::{NewFinding, Severity};
use cipherfleet_coordinator::store::schedules::{Firing, NewSchedule};
use cipherfleet_coordinator::store::{campaigns, findings, hosts, jobs, outbox, schedules, verifications};
use cipherfleet_coordinator::watch::schedule::{self, IfRunning};
use cipherfleet_coordinator::watch::timing::Timing;
use cipherfleet_coordinator::watch::verify::{self, VerifyOnChange};
use cipherfleet_core::spec::Suite;
use serde_json::json;
use sqlx::PgPool;

use super::fixture::{facts, fresh_db};
use crate::helpers::{host, job};

/// A schedule of `quick` on every host, due now.
async fn due_schedule(pool: &PgPool, every_seconds: i64, if_running: IfRunning) -> i64 {
    let new = schedule::NewSchedule {
        suite: Suite::Quick,
        selector: Default::default(),
        timing: Timing {
            every_seconds,
            at_minute: None,
            jitter_seconds: 0,
        },
        if_running,
        created_by: "tests".into(),
    };
    schedule::add(pool, &new, Utc::now() - chrono::Duration::seconds(1))
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn a_due_schedule_fires_once_however_many_coordinators_race_for_it() {
    let pool = fresh_db().await;
    host(&pool, "bench-01").await;
    let id = due_schedule(&pool, 3600, IfRunning::Skip).await;
    // Eight coordinators' loops at the same moment.
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { schedule::fire_due(&pool).await.unwrap() })
        })
        .collect();
    let mut started = Vec::new();
    for r in racers {
        started.extend(r.await.unwrap());
    }
    assert_eq!(started.len(), 1, "{started:?}");
    let made = schedules::campaigns_of(&pool, id).await.unwrap();
    assert_eq!(made.iter().map(|c| c.0).collect::<Vec<_>>(), started);
    let campaign = campaigns::get(&pool, started[0]).await.unwrap().unwrap();
    assert_eq!(
        (campaign.suite.as_str(), campaign.started_by.as_str()),
        ("quick", &*format!("schedule {id}"))
    );
    assert_eq!(jobs::for_campaign(&pool, started[0]).await.unwrap().len(), 18);

    let listed = schedules::list(&pool).await.unwrap();
    let s = &listed[0];
    assert_eq!((s.runs, s.skips, s.last_campaign_id), (1, 0, Some(started[0])));
    assert!(
        s.last_outcome
            .as_deref()
            .unwrap()
            .starts_with(&format!("started campaign {}", started[0]))
    );
    // The next due time is a period after the last, and nothing is due before it.
    let gap = s.due_at - s.created_at;
    assert!((3598..=3601).contains(&gap.num_seconds()), "{gap}");
    assert_eq!(schedule::fire_due(&pool).await.unwrap(), Vec::<i64>::new());
    assert!(schedules::campaign_running(&pool, started[0]).await.unwrap());
    assert!(!schedules::campaign_running(&pool, i64::MAX).await.unwrap());
}

#[tokio::test]
async fn while_its_campaign_runs_a_schedule_skips_or_waits_as_it_was_told() {
    let pool = fresh_db().await;
    host(&pool, "bench-01").await;
    let skip = due_schedule(&pool, 1, IfRunning::Skip).await;
    let delay = due_schedule(&pool, 1, IfRunning::Delay).await;
    let first = schedule::fire_due(&pool).await.unwrap();
    assert_eq!(first.len(), 2);
    // Both campaigns still run (nobody ran their jobs) when the next second is due.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(schedule::fire_due(&pool).await.unwrap(), Vec::<i64>::new());
    let listed = schedules::list(&pool).await.unwrap();
    let by_id = |id| listed.iter().find(|s| s.id == id).unwrap();
    let (s, d) = (by_id(skip), by_id(delay));
    assert_eq!((s.runs, s.skips), (1, 1));
    assert!(
        s.last_outcome.as_deref().unwrap().starts_with("skipped at"),
        "{:?}",
        s.last_outcome
    );
    assert_eq!((d.runs, d.skips), (1, 0));
    assert!(
        d.last_outcome.as_deref().unwrap().starts_with("delayed since"),
        "{:?}",
        d.last_outcome
    );
    assert!(d.fire_at <= Utc::now(), "a delayed schedule stays due");

    // The delayed schedule's campaign ends: it fires at the next look.
    assert!(
        campaigns::cancel(&pool, d.last_campaign_id.unwrap())
            .await
            .unwrap()
            .is_some()
    );
    let next = schedule::fire_due(&pool).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(schedules::campaigns_of(&pool, delay).await.unwrap().len(), 2);

    // A firing that matches no host says so and starts nothing.
    let mut tx = pool.begin().await.unwrap();
    schedules::record_firing(&mut tx, skip, &Firing::Failed, "failed: none", None)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(schedules::remove(&pool, skip).await.unwrap());
    assert!(!schedules::remove(&pool, skip).await.unwrap());
    assert_eq!(schedules::list(&pool).await.unwrap().len(), 1);
    // Its campaigns stay.
    assert!(campaigns::get(&pool, first[0]).await.unwrap().is_some());
}

#[tokio::test]
async fn schedules_store_what_they_were_given_and_lock_only_due_rows() {
    let pool = fresh_db().await;
    let now = Utc::now();
    let selector = json!({"arch": ["x86_64"]});
    let later = schedules::insert(
        &pool,
        &NewSchedule {
            suite: "standard",
            selector: &selector,
            every_seconds: 86_400,
            at_minute: Some(120),
            jitter_seconds: 3600,
            if_running: "delay",
            created_by: "tests",
            due_at: now + chrono::Duration::hours(2),
            fire_at: now + chrono::Duration::hours(2) + chrono::Duration::minutes(5),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        (
            later.suite.as_str(),
            later.selector.clone(),
            later.at_minute,
            later.if_running.as_str()
        ),
        ("standard", selector, Some(120), "delay")
    );
    let mut tx = pool.begin().await.unwrap();
    let (db_now, due) = schedules::lock_due(&mut tx).await.unwrap();
    assert!(due.is_empty());
    assert!((db_now - now).num_seconds().abs() < 60);
    // Fired in the caller's transaction: a campaign made with `insert_with_jobs`.
    let bench = host(&pool, "bench-02").await;
    let new = campaigns::NewCampaign {
        name: "by hand",
        suite: "quick",
        matrix: &json!(null),
        selector: &json!({}),
        started_by: "tests",
        queued_ttl: campaigns::DEFAULT_QUEUED_TTL,
    };
    let campaign = campaigns::insert_with_jobs(&mut tx, &new, &[job(bench, 16)])
        .await
        .unwrap();
    schedules::record_firing(
        &mut tx,
        later.id,
        &Firing::Fired { campaign_id: campaign },
        "started",
        None,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(schedules::campaigns_of(&pool, later.id).await.unwrap()[0].0, campaign);
}

#[tokio::test]
async fn a_new_host_and_a_new_kernel_get_a_verification_at_most_once_per_interval() {
    let pool = fresh_db().await;
    let up = hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("6.1.0-18-amd64"))
        .await
        .unwrap();
    let config = VerifyOnChange {
        enabled: true,
        min_interval: Duration::from_secs(3600),
    };
    let first = verify::on_hello(&pool, &config, up.host_id, None)
        .await
        .unwrap()
        .expect("a new host");
    let v = verifications::get(&pool, up.host_id).await.unwrap().unwrap();
    assert_eq!(
        (v.campaign_id, v.changes.clone()),
        (Some(first), json!({"new_host": true}))
    );
    assert_eq!(jobs::for_campaign(&pool, first).await.unwrap().len(), 6);
    assert_eq!(campaigns::get(&pool, first).await.unwrap().unwrap().suite, "verify");

    // The first point was measured; the kernel changes within the hour: rate-limited.
    let done = jobs::claim_next_for_host(&pool, up.host_id).await.unwrap().unwrap();
    sqlx::query("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = $1")
        .bind(done.id)
        .execute(&pool)
        .await
        .unwrap();
    let earlier = verifications::previous_points(&pool, up.host_id, 10).await.unwrap();
    assert_eq!(earlier.len(), 1);
    hosts::upsert_host_with_facts(&pool, "bench-01", None, &facts("3.10.0-1160.el7.x86_64"))
        .await
        .unwrap();
    assert_eq!(verify::on_hello(&pool, &config, up.host_id, None).await.unwrap(), None);

    // With no limit it is queued, naming the change.
    let unlimited = VerifyOnChange {
        min_interval: Duration::ZERO,
        ..config
    };
    let second = verify::on_hello(&pool, &unlimited, up.host_id, None)
        .await
        .unwrap()
        .expect("a new kernel");
    let v = verifications::get(&pool, up.host_id).await.unwrap().unwrap();
    assert_eq!(v.changes["kernel_release"]["to"], "3.10.0-1160.el7.x86_64");
    assert!(
        campaigns::get(&pool, second)
            .await
            .unwrap()
            .unwrap()
            .name
            .contains("kernel_release")
    );
    // The same facts again, or verification off: nothing.
    let mut tx = pool.begin().await.unwrap();
    assert!(
        !verifications::claim(&mut tx, up.host_id, 3600.0, &json!({}))
            .await
            .unwrap()
    );
    drop(tx);
    let off = VerifyOnChange {
        enabled: false,
        ..unlimited
    };
    assert_eq!(verify::on_hello(&pool, &off, up.host_id, None).await.unwrap(), None);
    let mut tx = pool.begin().await.unwrap();
    verifications::set_campaign(&mut tx, up.host_id, first).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        verifications::get(&pool, up.host_id)
            .await
            .unwrap()
            .unwrap()
            .campaign_id,
        Some(first)
    );
}

#[tokio::test]
async fn findings_opening_and_resolving_reach_the_outbox_once_each_in_order() {
    let pool = fresh_db().await;
    let bench = host(&pool, "bench-01").await;
    let new = NewFinding {
        host_id: bench,
        reason: "cpu-lacks".into(),
        kind: None,
        subject: "aes".into(),
        severity: Severity::Warning,
        first_seen: None,
        evidence: json!({"advertised": []}),
        fact_changes: json!({}),
        summary: "the CPU has no AES instructions".into(),
    };
    let mut conn = pool.acquire().await.unwrap();
    let id = findings::upsert_open(&mut conn, &new).await.unwrap();
    // A refresh is no event.
    assert_eq!(findings::upsert_open(&mut conn, &new).await.unwrap(), id);
    assert_eq!(findings::resolve(&mut *conn, &[id]).await.unwrap(), 1);
    drop(conn);
    let rows = outbox::list(&pool).await.unwrap();
    let events: Vec<(&str, i64)> = rows.iter().map(|r| (r.event.as_str(), r.finding_id)).collect();
    assert_eq!(events, [("opened", id), ("resolved", id)]);

    // The open is claimed first; while it is leased, the resolve waits behind it.
    let opened = outbox::claim(&pool, 30.0, 86_400.0).await.unwrap().expect("due");
    assert_eq!(
        (opened.event.as_str(), opened.attempts, opened.host_name.as_str()),
        ("opened", 1, "bench-01")
    );
    assert_eq!(opened.summary, "the CPU has no AES instructions");
    assert_eq!(outbox::claim(&pool, 30.0, 86_400.0).await.unwrap(), None);
    outbox::failed(&pool, opened.id, "the receiver answered HTTP 500", 0.0)
        .await
        .unwrap();
    let again = outbox::claim(&pool, 30.0, 86_400.0).await.unwrap().expect("retried");
    assert_eq!((again.id, again.attempts), (opened.id, 2));
    outbox::delivered(&pool, again.id).await.unwrap();
    let resolved = outbox::claim(&pool, 30.0, 86_400.0)
        .await
        .unwrap()
        .expect("the resolve");
    assert_eq!(resolved.event, "resolved");
    assert!(resolved.resolved_at.is_some());
    outbox::delivered(&pool, resolved.id).await.unwrap();
    assert_eq!(outbox::claim(&pool, 30.0, 86_400.0).await.unwrap(), None);
    let rows = outbox::list(&pool).await.unwrap();
    assert!(rows.iter().all(|r| r.delivered_at.is_some() && r.last_error.is_none()));
    assert_eq!(outbox::prune(&pool, 3600.0).await.unwrap(), 0);
    assert_eq!(outbox::prune(&pool, 0.0).await.unwrap(), 2);
}
