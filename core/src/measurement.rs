//! The result of one point as `bench --format json` prints it (one object per
//! line) and as the daemon reports it: schema `cipherfleet.measurement/2`,
//! documented field by field in `docs/measurement-schema.md`.

use serde::{Deserialize, Serialize};

use crate::algorithm::Algorithm;
use crate::facts::HostFacts;
use crate::path::{Backends, Flavour, Path, PathUsed};
use crate::spec::{Direction, JobSpec, KeyMode};
use crate::text_enum;

/// Schema identifier; bump the number on any incompatible change.
/// `/2` added `partial` to `path_used` and `poly1305` to `backends`.
pub const SCHEMA: &str = "cipherfleet.measurement/2";

/// Every schema a coordinator still accepts: this one, and `/1` from agents
/// not yet upgraded. A `/1` object parses as a `/2` one (it has no `partial`
/// and no `poly1305`); its `path_used` is stored as that agent claimed it.
pub const ACCEPTED_SCHEMAS: [&str; 2] = [SCHEMA, "cipherfleet.measurement/1"];

text_enum! {
    /// Whether the point was measured.
    pub enum Status ("status") {
        Ok = "ok",
        Failed = "failed",
    }
}

text_enum! {
    /// How the latency percentiles were obtained.
    pub enum LatencyMethod ("latency method") {
        /// Every operation timed on its own.
        PerOp = "per-op",
        /// Each value is the mean of a timed batch of `batch_ops` operations (tiny payloads).
        BatchMean = "batch-mean",
        /// Per object, from submission to completion including queueing (object-storage scenario).
        PerObject = "per-object",
    }
}

/// Latency percentiles in nanoseconds (nearest rank, 3 significant digits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// What one measurement produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Median sample throughput, 10^6 plaintext bytes per second, all threads together.
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    pub latency_ns: Latency,
    pub latency_method: LatencyMethod,
    /// Operations per timed batch.
    pub batch_ops: u64,
    /// Coefficient of variation of the sample throughputs (`None` with one sample).
    pub cv: Option<f64>,
    pub samples: u32,
    pub sample_seconds: f64,
    pub warmup_seconds: f64,
    /// Wall time of the measured phase.
    pub elapsed_seconds: f64,
    pub operations: u64,
    pub bytes_processed: u64,
    pub cpu_user_seconds: f64,
    pub cpu_sys_seconds: f64,
    /// CPU time / (wall time × threads): 1.0 means every worker thread was busy throughout.
    pub cpu_utilization: f64,
    /// Mean nanoseconds of one key setup (key schedule; plus HMAC key for CBC-HMAC).
    pub key_setup_ns: f64,
    /// Every sample's throughput in MB/s, in order.
    pub sample_throughputs_mb_s: Vec<f64>,
}

/// What the worker process reports for a point it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    pub path_used: PathUsed,
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
    pub path_used: Option<PathUsed>,
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
