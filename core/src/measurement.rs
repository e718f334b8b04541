//! The result of one point as `bench --format json` prints it (one object per
//! line) and as the daemon reports it: schema `cipherfleet.measurement/2`,
//! documented field by field in `docs/measurement-schema.md`.

use serde::{Deserialize, Serialize};

use crate::algorithm::Algorithm;
use crate::facts::HostFacts;
use crate::path::{Backends, Flavour, Path, PathUsed};
use crate::point::Point;
use crate::provider::{PathBasis, Provider};
use crate::spec::{Direction, JobSpec, KeyMode, Nonce};
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
        /// Operations timed one by one.
        PerOp = "per-op",
        /// Each value is the mean of a timed batch of `batch_ops` operations (tiny payloads).
        BatchMean = "batch-mean",
        /// Per object, from submission (or intended arrival) to completion, queueing included
        /// (object-storage scenario).
        PerObject = "per-object",
    }
}

text_enum! {
    /// What one throughput sample is.
    pub enum SampleKind ("sample kind") {
        /// A global time window of `sample_seconds`: the work of every thread
        /// whose batches ended in it.
        Window = "window",
        /// One timed operation (or object), when one outlasts a window.
        Operation = "operation",
    }
}

/// Latency percentiles need this many timed values before p99.9 is more than the maximum.
pub const P999_MIN_LATENCY_SAMPLES: u64 = 1000;

/// Memory a point used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// One keyed cipher instance: its `size_of` plus the heap it owns.
    pub cipher_state_bytes: u64,
    /// Peak resident set of the process that measured (`ru_maxrss`), buffers included.
    pub peak_rss_bytes: u64,
    /// Heap bytes allocated per operation inside the measured loops (0 expected);
    /// `None` where the process does not count allocations.
    pub heap_bytes_per_op: Option<f64>,
    /// Heap allocations per operation inside the measured loops (0 expected).
    pub allocs_per_op: Option<f64>,
}

/// What ran, for a provider whose implementation the agent does not carry
/// itself or cannot see through its own detection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Implementation {
    /// ring: `ring 0.17.14`; openssl: its version line (`OpenSSL 3.0.19 27 Jan 2026`);
    /// kernel: the driver the kernel picks (`generic-gcm-aesni`).
    pub name: String,
    /// openssl: the libcrypto the binary maps; kernel: the driver's module (`kernel` when built in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// openssl: the binary run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// openssl: the command line, with the capability mask put in its environment
    /// for the software path; kernel: the AF_ALG type and name bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// What the figure is not, where that matters: an old OpenSSL's nearest
    /// fixed size, a `no-asm` build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

text_enum! {
    /// The shape of each measured operation.
    #[derive(Default)]
    pub enum Harness ("harness") {
        /// The engine's rules (DESIGN.md): a fresh nonce or IV per operation,
        /// plaintext in one buffer and ciphertext in another, empty associated data.
        #[default]
        Engine = "engine",
        /// `openssl speed -evp` / `-aead` of OpenSSL 3.0, to compare like for like
        /// (`bench --openssl-compat`): in place under one fixed key. GCM, CCM and OCB
        /// set the key and nonce up again for every message and authenticate 13
        /// bytes of associated data, as `-aead` does; every other mode, ChaCha20-Poly1305
        /// included, is one continuous stream with no per-message nonce, IV or tag.
        OpensslCompat = "openssl-compat",
        /// The host's own `openssl speed -elapsed -evp` (the `openssl` provider): its
        /// operations are shaped as `openssl-compat` describes, and its figures are
        /// what `openssl speed` counts: each sample one run's bytes over its elapsed
        /// time, latency only the mean per operation of each run.
        OpensslSpeed = "openssl-speed",
    }
}

impl Harness {
    /// Whether this is the engine's own shape (then JSON leaves the field out).
    pub fn is_engine(&self) -> bool {
        *self == Harness::Engine
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
    /// Operations per latency-timed batch: the operations each `batch-mean` value averages.
    pub batch_ops: u64,
    /// Timed latency values behind the percentiles (batches, operations or objects);
    /// p99.9 means more than the maximum only from [`P999_MIN_LATENCY_SAMPLES`].
    #[serde(default)]
    pub latency_samples: u64,
    /// Operations per throughput batch (one clock read per batch, about a millisecond or more).
    #[serde(default)]
    pub throughput_batch_ops: u64,
    /// Coefficient of variation of the sample throughputs (`None` with one sample).
    pub cv: Option<f64>,
    pub samples: u32,
    /// What a sample is: a time window or one operation.
    #[serde(default = "SampleKind::default_for_old_records")]
    pub sample_kind: SampleKind,
    /// Fewer than [`crate::spec::LOW_SAMPLES`] samples even after extending the run.
    #[serde(default)]
    pub low_samples: bool,
    /// Length of a window sample (or of the window an operation outlasted).
    pub sample_seconds: f64,
    pub warmup_seconds: f64,
    /// Wall time of the measured phase.
    pub elapsed_seconds: f64,
    pub operations: u64,
    pub bytes_processed: u64,
    /// Plaintext bytes over the interval in which every thread was running (the
    /// samples' windows or operations), and that interval's length: their
    /// ratio is the mean throughput with no thread idle or alone.
    #[serde(default)]
    pub all_running_bytes: u64,
    #[serde(default)]
    pub all_running_seconds: f64,
    /// Object-storage scenario: objects completed and counted, after the first
    /// `concurrency` were discarded.
    #[serde(default)]
    pub objects: Option<u64>,
    /// Object-storage scenario in an open loop: objects arrive at this rate
    /// whatever the completions, and latency counts from the intended arrival.
    #[serde(default)]
    pub arrival_rate_per_s: Option<f64>,
    pub cpu_user_seconds: f64,
    pub cpu_sys_seconds: f64,
    /// CPU time / (wall time × threads): 1.0 means every worker thread was busy throughout.
    pub cpu_utilization: f64,
    /// Mean nanoseconds of one key setup (key schedule; plus HMAC key for CBC-HMAC).
    pub key_setup_ns: f64,
    /// Every sample's throughput in MB/s, in order.
    pub sample_throughputs_mb_s: Vec<f64>,
    /// Cipher state, peak RSS and heap use of the measured loops.
    #[serde(default)]
    pub memory: Option<Memory>,
}

impl Figures {
    /// Whether enough latency values stand behind p99.9 for it to be shown.
    pub fn p999_supported(&self) -> bool {
        self.latency_samples >= P999_MIN_LATENCY_SAMPLES
    }
}

impl SampleKind {
    /// Records from before the field were always windows (per thread).
    fn default_for_old_records() -> Self {
        SampleKind::Window
    }
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
    /// The shape the worker measured.
    #[serde(default, skip_serializing_if = "Harness::is_engine")]
    pub harness: Harness,
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
    /// Counter or random nonces; `counter` where an agent predates the field.
    #[serde(default)]
    pub nonce: Nonce,
    pub path_requested: Path,
    pub seconds_requested: f64,
    /// `openssl-compat` for `bench --openssl-compat`, `openssl-speed` for the
    /// `openssl` provider; absent for the engine's own shape.
    #[serde(default, skip_serializing_if = "Harness::is_engine")]
    pub harness: Harness,
    /// The implementation measured; absent for `rustcrypto`, the built-in default.
    #[serde(default, skip_serializing_if = "Provider::is_rustcrypto")]
    pub provider: Provider,
    /// What the worker really ran, from its run-time detection (absent on failure).
    pub path_used: Option<PathUsed>,
    /// How `path_used` is known: `inferred` for providers that do not say which code
    /// they ran (ring, openssl, kernel); absent where detected.
    #[serde(default, skip_serializing_if = "PathBasis::is_detected")]
    pub path_basis: PathBasis,
    /// What ran, for the ring, openssl and kernel providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<Implementation>,
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
        let p = &spec.point;
        Measurement {
            schema: SCHEMA.to_string(),
            status: Status::Failed,
            algorithm: p.algorithm,
            direction: p.direction,
            size_bytes: p.size_bytes,
            threads: p.threads,
            concurrency: p.concurrency,
            key_mode: p.key_mode,
            nonce: p.nonce,
            path_requested: p.path,
            seconds_requested: spec.seconds,
            harness: Harness::Engine,
            provider: p.provider,
            path_used: None,
            path_basis: p.provider.path_basis(),
            implementation: None,
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
            harness: report.harness,
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

    /// This measurement, made on `provider`: its path `basis` and what ran.
    pub fn on_provider(self, provider: Provider, implementation: Option<Implementation>) -> Self {
        Measurement {
            provider,
            path_basis: provider.path_basis(),
            implementation,
            ..self
        }
    }

    /// The point this measures.
    pub fn point(&self) -> Point {
        Point {
            algorithm: self.algorithm,
            direction: self.direction,
            size_bytes: self.size_bytes,
            threads: self.threads,
            concurrency: self.concurrency,
            key_mode: self.key_mode,
            path: self.path_requested,
            nonce: self.nonce,
            provider: self.provider,
        }
    }

    /// The job this measures: its point and the seconds asked for.
    pub fn spec(&self) -> JobSpec {
        self.point().spec(self.seconds_requested)
    }
}
