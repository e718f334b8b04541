//! cipherfleet's shared vocabulary: what the agent measures and reports and
//! what the coordinator schedules, checks and stores. No crypto here, so the
//! coordinator never compiles a cipher crate and the two programs cannot
//! disagree on a definition.
//!
//! - [`algorithm`]: the benchmarkable algorithms and their OpenSSL-style names.
//! - [`spec`]: one point to measure (`JobSpec`), matrices, suites, sizes, validation, time limits.
//! - [`point`]: the seven fields that say what a result measured, as one type.
//! - [`provider`]: the implementations a point runs on (rustcrypto, ring, openssl, kernel), what each
//!   runs, how each knows its path, and what the agent found about them on its host.
//! - [`path`]: the path asked for and the path that ran (accelerated/partial/software), build flavour, backends → path rule.
//! - [`measurement`]: the versioned result schema (`cipherfleet.measurement/2`).
//! - [`facts`]: the host facts the agent probes.
//! - [`stats`]: median, percentiles, coefficient of variation, MAD.
//! - [`wire`]: conversions to and from the gRPC protocol, and the bounds both ends check.
//! - [`token`]: loading shared-secret tokens, by one rule for both programs.
//! - [`credential`]: the form of a per-host credential.
//! - [`text`]: enums that travel as text (`text_enum!`), and text from elsewhere made safe to print.

pub mod algorithm;
pub mod credential;
pub mod facts;
pub mod measurement;
pub mod path;
pub mod point;
pub mod provider;
pub mod spec;
pub mod stats;
pub mod text;
pub mod token;
pub mod wire;

pub use point::Point;
