//! End-to-end tests of `cipherfleet-agent run`: the real agent binary against
//! a scripted coordinator on a real socket. Every wait is bounded; readiness
//! comes from protocol events, never from sleeping.

mod ceilings;
mod helpers;
mod identity;
mod jobs;
mod lifecycle;
mod reconnect;
