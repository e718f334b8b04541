//! End-to-end tests of `cipherfleet-agent run`: the real agent binary against
//! a scripted coordinator on a real socket; and of the session engine's seam
//! with a fake host in this process (`host`). Every wait is bounded; readiness
//! comes from protocol events, never from sleeping.

mod ceilings;
mod helpers;
mod host;
mod identity;
mod jobs;
mod lifecycle;
mod reconnect;
