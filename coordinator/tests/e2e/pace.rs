//! A coordinator past `--max-heartbeat-rate` tells each new session a longer
//! heartbeat interval (its sessions ÷ the rate, in seconds), tells sessions
//! already open the new interval in a second `Welcome` when its fleet grew,
//! and judges a session's silence by the longest interval it was told.

use std::time::Duration;

use cipherfleet_proto::PROTOCOL_VERSION;
use cipherfleet_proto::v1::{self, AgentMessage, agent_message, coordinator_message};
use tokio::task::JoinHandle;

use crate::app::{AGENT_TOKEN, spawn_app_with};
use crate::rejections::{RawAgent, hello, open};

/// The next `Welcome`'s interval; pings are skipped.
async fn welcomed_interval_ms(agent: &mut RawAgent) -> u32 {
    loop {
        match agent.next().await {
            coordinator_message::Body::Welcome(w) => return w.heartbeat_interval_ms,
            coordinator_message::Body::Ping(_) => continue,
            other => panic!("expected Welcome, got {other:?}"),
        }
    }
}

/// Sends a heartbeat every `every` until aborted.
fn heartbeats(agent: &RawAgent, every: Duration) -> JoinHandle<()> {
    let tx = agent.tx.clone();
    tokio::spawn(async move {
        for seq in 1.. {
            tokio::time::sleep(every).await;
            let beat = AgentMessage {
                body: Some(agent_message::Body::Heartbeat(v1::Heartbeat { seq })),
            };
            if tx.send(beat).await.is_err() {
                return;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_heartbeat_rate_are_told_a_longer_interval_and_judged_by_it() {
    let app = spawn_app_with(&[
        "--heartbeat-seconds",
        "0.5",
        "--max-heartbeat-rate",
        "1",
        "--verify-on-change=false",
    ])
    .await;
    let mut first = open(&app, hello("pace-1", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    assert_eq!(
        welcomed_interval_ms(&mut first).await,
        1000,
        "1 session at 1/s: 1 s, not 0.5"
    );
    // Alive by the configured interval until it is told a longer one.
    let alive = heartbeats(&first, Duration::from_millis(300));
    let mut second = open(&app, hello("pace-2", AGENT_TOKEN, PROTOCOL_VERSION))
        .await
        .unwrap();
    assert_eq!(welcomed_interval_ms(&mut second).await, 2000, "2 sessions at 1/s: 2 s");
    let second_alive = heartbeats(&second, Duration::from_millis(300));

    // The coordinator looks at its session count every 5 s; the first session
    // is told the fleet's interval in a second `Welcome` (maybe after one
    // telling 1 s, if it looked before the second session opened).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while welcomed_interval_ms(&mut first).await != 2000 {
        assert!(tokio::time::Instant::now() < deadline, "never re-paced to 2 s");
    }
    alive.abort();
    second_alive.abort();

    // Both now send a heartbeat every 3.5 s: more than three of the configured
    // interval (1.5 s) and of the first's first (3 s), within three of the
    // one both were told (6 s).
    for seq in 1..=3 {
        tokio::time::sleep(Duration::from_millis(3500)).await;
        first.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq })).await;
        second.send(agent_message::Body::Heartbeat(v1::Heartbeat { seq })).await;
    }
    app.wait_host("pace-1", true).await;
    app.wait_host("pace-2", true).await;
    // The second falls silent and is lost after three of its intervals.
    let first_alive = heartbeats(&first, Duration::from_millis(1500));
    app.wait_host("pace-2", false).await;
    app.wait_host("pace-1", true).await;
    first_alive.abort();
    drop(second);
}
