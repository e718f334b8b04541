//! The rate limit of a session's inbound messages, and the gRPC answer of a
//! caller past the failed-authentication limit ([`crate::guard::auth`]).

use std::time::Duration;

use tonic::Status;

use super::turns::PUSHBACK_KEY;
use crate::guard::auth::Limited;
use crate::guard::bucket::Bucket;

/// Messages an agent may send in a burst: a reconnect re-sends its whole spool
/// (at most [`cipherfleet_core::wire::MAX_SPOOLED_JOB_IDS`] outcomes) at once.
pub const SESSION_BURST: u32 = 2 * cipherfleet_core::wire::MAX_SPOOLED_JOB_IDS as u32;
/// Messages a second an agent may keep sending: heartbeats, outcomes and their
/// acceptances come a few a second at most.
pub const SESSION_PER_SECOND: u32 = 200;

/// The allowance of one agent session.
pub fn session_allowance() -> Bucket {
    Bucket::new(SESSION_BURST, Duration::from_secs(1), SESSION_PER_SECOND)
}

/// `RESOURCE_EXHAUSTED`, saying why and when to come back (also as the retry pushback).
impl From<Limited> for Status {
    fn from(limited: Limited) -> Status {
        let mut status = Status::resource_exhausted(limited.to_string());
        if let Ok(value) = limited.retry_after.as_millis().to_string().parse() {
            status.metadata_mut().insert(PUSHBACK_KEY, value);
        }
        status
    }
}
