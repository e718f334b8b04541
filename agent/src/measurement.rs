//! The result of one point as `bench --format json` prints it (one object per
//! line) and as the daemon reports it: schema `cipherfleet.measurement/1`,
//! documented field by field in `docs/measurement-schema.md`.

use serde::{Deserialize, Serialize};

use crate::algorithm::Algorithm;
use crate::backend::{Backends, Flavour, Path};
use crate::engine::Figures;
use crate::probe::HostFacts;
use crate::spec::{Direction, JobSpec, KeyMode};

/// Schema identifier; bump the number on any incompatible change.
pub const SCHEMA: &str = "cipherfleet.measurement/1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Failed,
}

/// What the worker process reports for a point it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    pub path_used: Path,
    pub backends: Backends,
    pub build_flavour: Flavour,
    /// Known-answer tests passed before measuring.
    pub selftest_passed: u32,
    pub figures: Figures,
}

/// One point's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub schema: String,
    pub status: Status,
    pub algorithm: Algorithm,
    pub direction: Direction,
    pub size_bytes: u64,
    pub threads: u32,
    pub concurrency: Option<u32>,
    pub key_mode: KeyMode,
    pub path_requested: Path,
    pub seconds_requested: f64,
    /// What the worker really ran, from its run-time detection (absent on failure).
    pub path_used: Option<Path>,
    pub backends: Option<Backends>,
    pub build_flavour: Option<Flavour>,
    pub selftest_passed: Option<u32>,
    #[serde(flatten)]
    pub figures: Option<Figures>,
    /// Why the point failed.
    pub error: Option<String>,
    pub agent_version: String,
    pub host: Option<HostFacts>,
}

impl Measurement {
    fn from_spec(spec: &JobSpec, host: Option<HostFacts>) -> Self {
        Measurement {
            schema: SCHEMA.to_string(),
            status: Status::Failed,
            algorithm: spec.algorithm,
            direction: spec.direction,
            size_bytes: spec.size_bytes,
            threads: spec.threads,
            concurrency: spec.concurrency,
            key_mode: spec.key_mode,
            path_requested: spec.path,
            seconds_requested: spec.seconds,
            path_used: None,
            backends: None,
            build_flavour: None,
            selftest_passed: None,
            figures: None,
            error: None,
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            host,
        }
    }

    pub fn ok(spec: &JobSpec, report: WorkerReport, host: Option<HostFacts>) -> Self {
        Measurement {
            status: Status::Ok,
            path_used: Some(report.path_used),
            backends: Some(report.backends),
            build_flavour: Some(report.build_flavour),
            selftest_passed: Some(report.selftest_passed),
            figures: Some(report.figures),
            ..Self::from_spec(spec, host)
        }
    }

    pub fn failed(spec: &JobSpec, error: String, host: Option<HostFacts>) -> Self {
        Measurement {
            error: Some(error),
            ..Self::from_spec(spec, host)
        }
    }

    /// The point this measures.
    pub fn spec(&self) -> JobSpec {
        JobSpec {
            algorithm: self.algorithm,
            direction: self.direction,
            size_bytes: self.size_bytes,
            threads: self.threads,
            concurrency: self.concurrency,
            key_mode: self.key_mode,
            path: self.path_requested,
            seconds: self.seconds_requested,
        }
    }
}
