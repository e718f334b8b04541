//! Analysis: pure functions over stored rows, so every rule is unit-tested
//! with tables. Nothing here reads the database or knows a CPU by name —
//! findings come from advertised/usable flags and measured numbers only.
//!
//! - [`robust`]: median and MAD, the statistics the detectors use.
//! - [`fallback`]: why a host runs AES in software (DESIGN.md reasons 1–4) from its facts.
//! - [`slow`]: accelerated paths that measure too slow (reason 5): near the
//!   software path, below same-class peers, or dropped against own history.
//!
//! Wiring the findings into storage, `check`, `/metrics` and the report is
//! still to come (issue 5).

pub mod fallback;
pub mod robust;
pub mod slow;
