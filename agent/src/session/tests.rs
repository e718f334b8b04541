//! How a session's end is classified, the pushback it keeps, and its re-paced heartbeats.

use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use super::connect::{self, MAX_PUSHBACK, PUSHBACK_KEY, SessionEnd, classify};
use super::heartbeat::repaced;

fn busy(ms: &str) -> Status {
    let mut status = Status::unavailable("busy admitting other agents");
    status.metadata_mut().insert(PUSHBACK_KEY, ms.parse().unwrap());
    status
}

#[test]
fn a_busy_coordinator_s_pushback_keeps_the_agent_on_it_until_the_time_named() {
    let SessionEnd::Lost {
        held_elsewhere,
        pushback,
        ..
    } = classify(&busy("4200"), false)
    else {
        panic!("a busy coordinator is retried")
    };
    assert!(held_elsewhere, "the same coordinator: it is up");
    assert_eq!(pushback, Some(Duration::from_millis(4200)));
    // Bounded by the backoff's ceiling; nonsense is no pushback.
    assert_eq!(connect::pushback(&busy("86400000")), Some(MAX_PUSHBACK));
    assert_eq!(connect::pushback(&busy("soon")), None);
    // Without one, UNAVAILABLE is an ordinary loss: the next coordinator, the usual backoff.
    let SessionEnd::Lost {
        held_elsewhere,
        pushback,
        ..
    } = classify(&Status::unavailable("down"), false)
    else {
        panic!("retried")
    };
    assert!(!held_elsewhere && pushback.is_none());
}

#[test]
fn a_host_held_elsewhere_comes_back_when_the_coordinator_says_the_lease_ends() {
    let mut held = Status::already_exists("host has a live session");
    held.metadata_mut().insert(PUSHBACK_KEY, "11500".parse().unwrap());
    let SessionEnd::Lost {
        held_elsewhere,
        pushback,
        ..
    } = classify(&held, false)
    else {
        panic!("a host held elsewhere is retried")
    };
    assert!(held_elsewhere);
    assert_eq!(pushback, Some(Duration::from_millis(11_500)));
    // Without a time named, the held-elsewhere backoff as before.
    let SessionEnd::Lost { pushback, .. } = classify(&Status::already_exists("live"), false) else {
        panic!("retried")
    };
    assert_eq!(pushback, None);
}

#[test]
fn a_re_paced_heartbeat_keeps_its_place_in_the_interval() {
    let now = Instant::now();
    let s = Duration::from_secs;
    assert_eq!(repaced(now, now + s(4), s(5), s(10)), now + s(8));
    assert_eq!(repaced(now, now + s(4), s(10), s(5)), now + s(2));
    assert_eq!(
        repaced(now + s(2), now + s(1), s(5), s(10)),
        now + s(2),
        "an overdue one goes at once"
    );
}
