//! End-to-end tests of the `cipherfleet-agent` binary: real worker processes,
//! real measurements (kept short), and the software sibling built by
//! `deploy/build.sh` (the test command builds it first).

mod bench;
mod emulated;
mod help;
mod helpers;
mod measurement;
mod openssl_compat;
mod probe;
mod providers;
