//! cipherfleet agent: measures symmetric-crypto performance on the host it runs on.
//! The vocabulary it shares with the coordinator (algorithms, job specs, the
//! measurement schema, host facts, wire checks) is `cipherfleet_core`.
//!
//! - [`backend`]: which implementation the crypto crates pick here, and the build flavour.
//! - [`probe`]: host facts (CPU, features advertised vs usable, kernel, virtualization).
//! - [`selftest`]: known-answer tests for every algorithm, run before measuring.
//! - [`kernel`]: one file per cipher family (and per built-in or kernel provider); each turns a spec
//!   into a tight per-operation loop body.
//! - [`provider`]: the providers outside the crates on this host: the host's OpenSSL (`openssl speed`),
//!   the kernel crypto API (`/proc/crypto`, AF_ALG); what each can run here and why not.
//! - [`engine`]: warm-up, timed batches, samples, threads and the object-storage scenario.
//! - [`heap`]: the counting allocator behind the memory figures.
//! - [`worker`]: runs each measurement in a child process with a time limit.
//! - [`report`]: table, JSON and CSV output.
//! - [`session`]: the agent side of the protocol, once: hello, credential, heartbeats, jobs, acks,
//!   spool hand-over, reconnects; generic over the [`session::Host`] that runs jobs and keeps outcomes.
//! - [`daemon`]: `run`, the session's host on this machine: jobs in worker processes, outcomes spooled on disk.
//! - [`runtime`]: logging, the async runtime and signals around `run` (and the simulator, `cipherfleet-sim`).
//! - [`cli`]: the `probe | bench | selftest | run` commands.

pub mod backend;
pub mod cli;
pub mod daemon;
pub mod engine;
pub mod heap;
pub mod kernel;
pub mod probe;
pub mod provider;
pub mod report;
pub mod runtime;
pub mod selftest;
pub mod session;
pub mod worker;

// The binary installs the counting allocator in main.rs; the unit tests need it
// too, to check that no measured loop allocates.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: heap::CountingAllocator = heap::CountingAllocator;
