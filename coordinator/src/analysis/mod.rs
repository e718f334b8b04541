//! Analysis: pure functions over stored rows, so every rule is unit-tested
//! with tables. Nothing here reads the database or knows a CPU by name —
//! findings come from advertised/usable flags and measured numbers only.
//!
//! - [`acceleration`]: a host's acceleration status (accelerated, partial, software, unknown) from its facts and what its latest results ran.
//! - [`robust`]: median and MAD, the statistics the detectors use.
//! - [`rollup`]: one period's summary of a point's results (count, median, p10/p90, min/max, path mix): retention's daily summaries and a host's history.
//! - [`fallback`]: why a host runs a primitive in software (DESIGN.md reasons 1–4) from its facts.
//! - [`providers`]: the providers' facts judged: a kernel crypto driver in software on a CPU with the instructions, an OpenSSL capability mask.
//! - [`marks`]: emulated and simulated hosts, by label or (emulation) by facts: one rule for every page.
//! - [`slow`]: accelerated paths that measure too slow (reason 5): near the
//!   software path, below same-class peers, or dropped against own history.
//! - [`software_speed`]: the fallback page's rule — an accelerated path that fell back or runs at software speed, and which findings explain it.
//! - [`unexplained`]: an accelerated request whose worker ran a primitive in software the facts give hardware (`unexplained-fallback`).
//! - [`series`]: reason 5 over stored results, one verdict per algorithm and kind.
//! - [`campaign_change`]: one point's change between two campaigns, with its robust z-score.
//! - [`changes`]: what changed in a host's facts between two snapshots.
//! - [`class`]: machine classes (arch, CPU, usable crypto features, build) — peers, compare rows, capacity.
//! - [`cells`]: what a cell of `/compare` shows over its results, and its colour.
//! - [`scaling`]: thread-scaling efficiency, one rule for `/modes` and `/capacity`.
//! - [`capacity`]: per-core throughput, thread scaling, cores and hosts for a target rate, the recommended algorithm.
//! - [`overhead`]: what a construction stores beside its ciphertext (nonce, IV, tag, MAC, padding).
//! - [`scenarios`]: the scenario suites' questions answered per class (`/scenarios`).
//! - [`fill`]: what fills a view that lacks data — the smallest suite measuring its points, as a command.
//!
//! [`crate::findings`] runs these over the database and stores the findings.

pub mod acceleration;
pub mod campaign_change;
pub mod capacity;
pub mod cells;
pub mod changes;
pub mod class;
pub mod fallback;
pub mod fill;
pub mod marks;
pub mod overhead;
pub mod providers;
pub mod robust;
pub mod rollup;
pub mod scaling;
pub mod scenarios;
pub mod series;
pub mod slow;
pub mod software_speed;
pub mod unexplained;
