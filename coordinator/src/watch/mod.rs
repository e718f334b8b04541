//! Watching without a person: schedules that start campaigns, verification
//! campaigns when a host's facts change, and a webhook for findings that open
//! or resolve. Each runs once across coordinators sharing one database.
//!
//! - [`timing`]: when a schedule is due (`--every`, `--at`, `--jitter`), pure.
//! - [`schedule`]: firing due schedules, and the loop that does it.
//! - [`verify`]: the verification campaign queued at a hello with changed facts.
//! - [`webhook`]: signed delivery of the outbox's finding events, with retries.

pub mod schedule;
pub mod timing;
pub mod verify;
pub mod webhook;
