//! Bounds that hold before a client is known, shared by both boundaries
//! (the gRPC services and the report): token buckets ([`bucket`]) and the
//! one failed-authentication limit for every kind of secret ([`auth`]), and
//! the cap and timeouts of connections that have not said anything yet ([`conn`]).
//! Infrastructure: nothing here imports the rest of the crate.

pub mod auth;
pub mod bucket;
pub mod conn;
