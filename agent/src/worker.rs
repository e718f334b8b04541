//! Runs each measurement in a child process: this binary for the accelerated
//! path, its `-soft` sibling for the software path.
//!
//! The child (`cipherfleet-agent __worker`) reads a [`WorkerJob`] (a
//! [`JobSpec`], its load and the harness that shapes its operations) as JSON on stdin, runs the relevant known-answer
//! tests, measures, and writes a [`WorkerReport`] as JSON on stdout. It learns
//! the time limit it runs under from its environment ([`TIME_LIMIT_ENV`]) and
//! ends its measurement in time to report. A crash, a failed self-test or a hang
//! past the time limit becomes that point's failure; the parent's threads
//! never share the CPU with the measurement.

use std::io::{Read, Write};
use std::path::{Path as FsPath, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cipherfleet_core::measurement::{Harness, Implementation, WorkerReport};
use cipherfleet_core::path::{Flavour, Path};
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Execution, JobSpec, KeyMode, validate_arrival_rate};
use serde::{Deserialize, Serialize};

use crate::backend;
use crate::engine::{self, RunOptions};
use crate::{kernel, selftest};

/// Name of the accelerated binary.
pub const ACCELERATED_BIN: &str = "cipherfleet-agent";
/// Name of the software-flavoured sibling.
pub const SOFTWARE_BIN: &str = "cipherfleet-agent-soft";
/// Hidden subcommand the parent starts.
pub const WORKER_ARG: &str = "__worker";

/// Exit codes of the worker, so the parent can say what went wrong.
pub mod exit {
    pub const INVALID: i32 = 2;
    pub const SELFTEST: i32 = 3;
    pub const MEASUREMENT: i32 = 4;
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "the {path} path needs {}, which is not there; build it with `deploy/build.sh` (or `deploy/build.sh --release`), which puts it next to {}",
        .binary.display(), .beside.display()
    )]
    MissingBinary {
        path: &'static str,
        binary: PathBuf,
        beside: PathBuf,
    },
    #[error("could not start {}: {source}", .binary.display())]
    Spawn { binary: PathBuf, source: std::io::Error },
    #[error("timed out after {0:.0} s and was killed")]
    TimedOut(f64),
    /// The caller raised the cancel flag; the worker was killed.
    #[error("cancelled, the worker was killed")]
    Cancelled,
    #[error("{0}")]
    Failed(String),
}

/// The binary that measures `path`: this executable when its flavour matches, else the sibling.
pub fn binary_for(path: Path) -> Result<PathBuf, WorkerError> {
    let me = std::env::current_exe().map_err(|e| WorkerError::Failed(format!("cannot locate this executable: {e}")))?;
    let wanted = match (path, backend::FLAVOUR) {
        (Path::Accelerated, Flavour::Accelerated) | (Path::Software, Flavour::Software) => {
            return Ok(me);
        }
        (Path::Software, Flavour::Accelerated) => SOFTWARE_BIN,
        (Path::Accelerated, Flavour::Software) => ACCELERATED_BIN,
    };
    let dir = me.parent().unwrap_or(FsPath::new("."));
    let binary = dir.join(wanted);
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(WorkerError::MissingBinary {
            path: path.as_str(),
            binary,
            beside: me,
        })
    }
}

/// The binary a daemon measures `path` with. A software build measures every
/// job itself: it is deployed to show what the host does without acceleration
/// (the coordinator's `software-build` finding), so an accelerated request
/// reports `path_used = software` rather than borrowing the sibling's hardware
/// backends. The local CLI's `--path` does pick the sibling ([`binary_for`]).
pub fn daemon_binary_for(path: Path) -> Result<PathBuf, WorkerError> {
    match backend::FLAVOUR {
        Flavour::Software => {
            std::env::current_exe().map_err(|e| WorkerError::Failed(format!("cannot locate this executable: {e}")))
        }
        Flavour::Accelerated => binary_for(path),
    }
}

/// Environment variable overriding the worker time limit (seconds). The
/// parent also sets it in each worker's environment to the limit it enforces,
/// so the worker can finish its measurement before then.
pub const TIME_LIMIT_ENV: &str = "CIPHERFLEET_WORKER_TIME_LIMIT";

/// How long a point may take before it is killed: [`JobSpec::time_limit`] for
/// this host's [`execution`], the rule the coordinator also uses, unless
/// [`TIME_LIMIT_ENV`] overrides it on this host.
pub fn time_limit(spec: &JobSpec) -> Duration {
    configured_time_limit().unwrap_or_else(|| spec.time_limit(execution()))
}

/// When a worker started at `started` under `limit` must be done: the parent
/// started counting a little earlier (process start, under an emulator
/// perhaps seconds), so keep 5 % and at least 2 s back.
fn worker_deadline(started: Instant, limit: Duration) -> Instant {
    let margin = (limit / 20).max(Duration::from_secs(2));
    started + limit.saturating_sub(margin)
}

fn configured_time_limit() -> Option<Duration> {
    let secs = std::env::var(TIME_LIMIT_ENV).ok()?.trim().parse::<f64>().ok()?;
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// Whether workers run emulated: when the worker prefix starts an emulator
/// (`qemu-x86_64-static -cpu Nehalem`, `qemu-aarch64 …`). The worker inherits
/// the prefix variable, so it reaches the same answer as its parent.
pub fn execution() -> Execution {
    execution_under(worker_prefix().as_deref().unwrap_or_default())
}

fn execution_under(prefix: &[String]) -> Execution {
    let emulator = |p: &String| {
        FsPath::new(p)
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("qemu-"))
    };
    if prefix.iter().any(emulator) {
        Execution::Emulated
    } else {
        Execution::Native
    }
}

/// Environment variable holding a command prefix for worker processes.
pub const PREFIX_ENV: &str = "CIPHERFLEET_WORKER_PREFIX";

/// The command prefix workers start under, from [`PREFIX_ENV`] (split on white
/// space): e.g. `taskset -c 2,3` to pin measurements, or
/// `qemu-x86_64-static -cpu Nehalem` on an emulated test host, whose children
/// would otherwise run on the real CPU.
pub fn worker_prefix() -> Option<Vec<String>> {
    let v = std::env::var(PREFIX_ENV).ok()?;
    let parts: Vec<String> = v.split_whitespace().map(str::to_string).collect();
    (!parts.is_empty()).then_some(parts)
}

/// What a worker is asked to measure: the point (its nonces included), how
/// its objects arrive in the object-storage scenario (the closed loop unless
/// an arrival rate is given) and the shape of each operation. Local `bench`
/// only sets the last two (`--arrival-rate`, `--openssl-compat`); jobs have neither.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerJob {
    pub spec: JobSpec,
    #[serde(default)]
    pub arrival_rate_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Harness::is_engine")]
    pub harness: Harness,
    /// The `openssl` binary for the `openssl` provider (`bench --openssl PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openssl: Option<PathBuf>,
}

impl WorkerJob {
    /// `spec` as a job of the fleet: closed loop, the engine's own shape, the crates.
    pub fn engine(spec: &JobSpec) -> Self {
        WorkerJob {
            spec: spec.clone(),
            arrival_rate_per_s: None,
            harness: Harness::Engine,
            openssl: None,
        }
    }
}

/// What a worker prints: its report, and on which provider and implementation it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerOutput {
    #[serde(flatten)]
    pub report: WorkerReport,
    #[serde(default, skip_serializing_if = "Provider::is_rustcrypto")]
    pub provider: Provider,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<Implementation>,
}

impl WorkerOutput {
    /// The measurement of `spec` this output makes, with the host's facts.
    pub fn measurement(
        self,
        spec: &JobSpec,
        host: Option<cipherfleet_core::facts::HostFacts>,
    ) -> cipherfleet_core::measurement::Measurement {
        cipherfleet_core::measurement::Measurement::ok(spec, self.report, host)
            .on_provider(self.provider, self.implementation)
    }
}

/// Measures `job` in a worker process and returns its output. The software
/// path of the crates runs in the sibling build; every other provider's
/// software path is this binary's (a capability mask, a generic driver).
pub fn run_point(job: &WorkerJob) -> Result<WorkerOutput, WorkerError> {
    let binary = binary_for(worker_path(&job.spec))?;
    run_in(&binary, job, None, &AtomicBool::new(false), None)
}

/// Like [`run_point`], with the time limit given by the caller (`None`: [`time_limit`])
/// and a flag that, once raised, kills the worker within a few tens of milliseconds
/// and returns [`WorkerError::Cancelled`]. The daemon uses it for `CancelJob` and shutdown;
/// the binary is [`daemon_binary_for`] the job's path. With `nice`, the worker runs at
/// that niceness (or its parent's, if higher), so the host's own services come first.
pub fn run_point_with(
    spec: &JobSpec,
    limit: Option<Duration>,
    cancel: &AtomicBool,
    nice: Option<i32>,
) -> Result<WorkerOutput, WorkerError> {
    run_in(
        &daemon_binary_for(worker_path(spec))?,
        &WorkerJob::engine(spec),
        limit,
        cancel,
        nice,
    )
}

/// The build whose worker measures `spec`: the crates' software path runs in
/// the sibling build; every other provider's software path is this binary's
/// (a capability mask, a generic driver).
fn worker_path(spec: &JobSpec) -> Path {
    match spec.point.provider {
        Provider::RustCrypto => spec.point.path,
        _ => Path::Accelerated,
    }
}

fn run_in(
    binary: &FsPath,
    job: &WorkerJob,
    limit: Option<Duration>,
    cancel: &AtomicBool,
    nice: Option<i32>,
) -> Result<WorkerOutput, WorkerError> {
    let spec = &job.spec;
    let mut command = match worker_prefix() {
        Some(prefix) => {
            let mut c = Command::new(&prefix[0]);
            c.args(&prefix[1..]).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    die_with_parent(&mut command);
    if let Some(nice) = nice {
        lower_priority(&mut command, nice);
    }
    let limit = limit.unwrap_or_else(|| time_limit(spec));
    let mut child = command
        .env(TIME_LIMIT_ENV, format!("{:.3}", limit.as_secs_f64()))
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| WorkerError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
    let input = serde_json::to_vec(job).expect("a job serialises");
    let mut stdin = child.stdin.take().expect("piped");
    // A worker that dies at once closes stdin; its exit status says why.
    let _ = stdin.write_all(&input);
    drop(stdin);
    let stdout = drain(child.stdout.take().expect("piped"));
    let stderr = drain(child.stderr.take().expect("piped"));

    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if cancel.load(Ordering::Relaxed) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(WorkerError::Cancelled);
            }
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(WorkerError::TimedOut(limit.as_secs_f64()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(WorkerError::Failed(format!("waiting for the worker: {e}"))),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr_text(&stderr.join().unwrap_or_default());
    if !status.success() {
        return Err(WorkerError::Failed(describe_exit(status, &stderr)));
    }
    serde_json::from_slice(&stdout)
        .map_err(|e| WorkerError::Failed(format!("worker printed an unreadable report: {e}")))
}

/// Makes the kernel kill the worker when the thread that started it dies, so a
/// crashed or killed daemon leaves no measurement running behind it (a restarted
/// agent's next job would overlap it). The starting thread waits for the worker
/// throughout, so the signal never fires early.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls prctl(2),
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// Starts the worker at niceness `nice`, unless its parent already runs nicer
/// (an unprivileged process could not go back). Raising one's own niceness
/// needs no privilege, so a failure is a real error and the job says so.
fn lower_priority(command: &mut Command, nice: i32) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls
    // getpriority(2), setpriority(2) and reads errno, all async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            // getpriority may return -1 legitimately: tell it from an error by errno.
            *libc::__errno_location() = 0;
            let current = libc::getpriority(libc::PRIO_PROCESS, 0);
            if current == -1 && *libc::__errno_location() != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if current < nice && libc::setpriority(libc::PRIO_PROCESS, 0, nice) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn drain<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// What a worker wrote to stderr, as text: bytes that are not UTF-8 are
/// replaced with U+FFFD, and the text says so, since it is all a failed job's
/// reader gets. (A NUL is valid UTF-8 and kept: the coordinator replaces what
/// its database cannot store.)
fn stderr_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let replaced = matches!(text, std::borrow::Cow::Owned(_));
    let mut text = text.trim().to_string();
    if replaced {
        text.push_str(" [bytes that are not UTF-8 replaced with U+FFFD]");
    }
    text
}

fn describe_exit(status: ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let what = match (status.code(), status.signal()) {
        (Some(exit::SELFTEST), _) => "self-test failed, no numbers reported".to_string(),
        (Some(exit::INVALID), _) => "invalid point".to_string(),
        (Some(exit::MEASUREMENT), _) => "measurement failed".to_string(),
        (Some(code), _) => format!("worker exited with status {code}"),
        (None, Some(sig)) => format!("worker killed by signal {sig}"),
        (None, None) => "worker ended abnormally".to_string(),
    };
    if stderr.is_empty() {
        what
    } else {
        format!("{what}: {}", last_lines(stderr, 3))
    }
}

fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// The worker side: read a job on stdin, self-test, measure the way its
/// harness says, print the report. Returns the process exit code.
pub fn worker_main() -> i32 {
    let started = Instant::now();
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("reading the job from stdin: {e}");
        return exit::INVALID;
    }
    let WorkerJob {
        spec,
        arrival_rate_per_s,
        harness,
        openssl,
    } = match serde_json::from_str(&input) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("invalid job: {e}");
            return exit::INVALID;
        }
    };
    if let Err(e) = spec
        .validate()
        .and_then(|()| validate_arrival_rate(arrival_rate_per_s, spec.point.concurrency))
    {
        eprintln!("invalid job: {e}");
        return exit::INVALID;
    }
    let provider = spec.point.provider;
    if let Some(why) = crate::provider::refuses(&spec, harness) {
        eprintln!("invalid job: {why}");
        return exit::INVALID;
    }
    if harness == Harness::OpensslCompat
        && let Some(why) = kernel::compat::unsupported(
            spec.point.algorithm,
            spec.point.size_bytes,
            spec.point.key_mode,
            spec.point.concurrency,
        )
    {
        eprintln!("invalid job: {why}");
        return exit::INVALID;
    }
    #[cfg(debug_assertions)]
    fault::inject(&spec);
    let deadline = configured_time_limit().map(|limit| worker_deadline(started, limit));
    // The openssl provider's binary, found (and described) before its KATs.
    let openssl_build = match provider {
        Provider::Openssl => {
            match crate::provider::openssl::find(openssl.as_deref())
                .and_then(|b| crate::provider::openssl::inspect(&b).map(|build| (b, build)))
            {
                Ok(found) => Some(found),
                Err(e) => {
                    eprintln!("no usable openssl: {e}");
                    return exit::MEASUREMENT;
                }
            }
        }
        _ => None,
    };
    let mut outcomes = selftest::run_for_provider(
        provider,
        spec.point.algorithm,
        spec.point.path,
        openssl_build.as_ref().map(|(b, _)| b.as_path()),
    );
    if spec.point.key_mode == KeyMode::HkdfPerUser && provider != Provider::Ring {
        outcomes.extend(selftest::run_hkdf());
    }
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| format!("{} ({})", o.name, o.detail.as_deref().unwrap_or("mismatch")))
        .collect();
    // OpenSSL's DES has no `openssl enc` check here: no KAT is not a failure for it.
    let none_needed = provider == Provider::Openssl;
    if !failed.is_empty() || (outcomes.is_empty() && !none_needed) {
        let why = if failed.is_empty() {
            match provider {
                Provider::Kernel => crate::provider::linux::bind_for(spec.point.algorithm, spec.point.path)
                    .err()
                    .unwrap_or_else(|| "no known-answer test covers it".into()),
                _ => "no known-answer test covers it".into(),
            }
        } else {
            format!("known-answer tests failed: {}", failed.join("; "))
        };
        eprintln!("{} on {provider}: {why}", spec.point.algorithm);
        return exit::SELFTEST;
    }
    let output = match (provider, openssl_build) {
        (Provider::Openssl, Some((binary, build))) => {
            match crate::provider::openssl::measure::measure(&spec, &binary, &build, deadline) {
                Ok(m) => WorkerOutput {
                    report: WorkerReport {
                        path_used: m.backends.path_for(spec.point.algorithm, spec.point.key_mode),
                        backends: m.backends,
                        build_flavour: backend::FLAVOUR,
                        selftest_passed: outcomes.len() as u32,
                        figures: m.figures,
                        harness: Harness::OpensslSpeed,
                    },
                    provider,
                    implementation: Some(m.implementation),
                },
                Err(e) => {
                    eprintln!("{e}");
                    return exit::MEASUREMENT;
                }
            }
        }
        _ => {
            let options = RunOptions {
                deadline,
                arrival_rate: arrival_rate_per_s,
                harness,
                provider,
                ..RunOptions::for_spec(&spec, execution())
            };
            let figures = match engine::measure_with(&spec, &options) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("{e}");
                    return exit::MEASUREMENT;
                }
            };
            let (backends, implementation) = crate::provider::what_ran(provider, &spec);
            WorkerOutput {
                report: WorkerReport {
                    path_used: backends.path_for(spec.point.algorithm, spec.point.key_mode),
                    backends,
                    build_flavour: backend::FLAVOUR,
                    selftest_passed: outcomes.len() as u32,
                    figures,
                    harness,
                },
                provider,
                implementation,
            }
        }
    };
    println!("{}", serde_json::to_string(&output).expect("a report serialises"));
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::Point;
    use cipherfleet_core::spec::Nonce;

    #[test]
    fn stderr_that_is_not_utf8_is_kept_as_text_that_says_so() {
        assert_eq!(stderr_text(b"  panicked: out of memory\n"), "panicked: out of memory");
        let text = stderr_text(b"bad \xff byte\0 and a NUL\n");
        assert_eq!(
            text,
            "bad \u{FFFD} byte\0 and a NUL [bytes that are not UTF-8 replaced with U+FFFD]"
        );
    }

    #[test]
    fn the_worker_stops_ahead_of_its_parent() {
        let t = Instant::now();
        assert_eq!(worker_deadline(t, Duration::from_secs(10)), t + Duration::from_secs(8));
        assert_eq!(
            worker_deadline(t, Duration::from_secs(1000)),
            t + Duration::from_secs(950)
        );
        assert_eq!(worker_deadline(t, Duration::from_secs(1)), t);
    }

    #[test]
    fn a_job_without_a_rate_reads_as_the_closed_loop() {
        let spec = JobSpec {
            point: Point {
                algorithm: "aes-128-gcm".parse().unwrap(),
                direction: cipherfleet_core::spec::Direction::Encrypt,
                size_bytes: 16,
                threads: 1,
                concurrency: Some(4),
                key_mode: KeyMode::Static,
                path: Path::Accelerated,
                nonce: Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds: 0.1,
        };
        let json = format!("{{\"spec\":{}}}", serde_json::to_string(&spec).unwrap());
        let job: WorkerJob = serde_json::from_str(&json).unwrap();
        assert_eq!(job.arrival_rate_per_s, None);
        assert_eq!(
            job.spec.point.nonce,
            Nonce::Counter,
            "a job without a nonce uses counters"
        );
        assert_eq!(job.harness, Harness::Engine);
        let sent = serde_json::to_string(&WorkerJob::engine(&spec)).unwrap();
        assert!(!sent.contains("nonce"), "counters are not spelled out: {sent}");
        assert!(!sent.contains("harness"), "the engine's shape is left out: {sent}");
        assert_eq!(job.spec, spec);
    }

    #[test]
    fn a_qemu_prefix_means_emulated_workers() {
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        for (prefix, want) in [
            ("", Execution::Native),
            ("taskset -c 2,3", Execution::Native),
            ("qemu-x86_64-static -cpu Nehalem", Execution::Emulated),
            ("/usr/bin/qemu-aarch64 -cpu cortex-a72", Execution::Emulated),
            ("taskset -c 1 qemu-x86_64 -cpu Westmere", Execution::Emulated),
        ] {
            assert_eq!(execution_under(&words(prefix)), want, "{prefix:?}");
        }
    }
}

/// Test-only fault injection (debug builds): `CIPHERFLEET_WORKER_FAULT=abort:ALG` or
/// `hang:ALG` makes the worker for algorithm ALG crash or hang, so tests can show
/// that one broken point fails alone.
#[cfg(debug_assertions)]
mod fault {
    use cipherfleet_core::spec::JobSpec;

    pub fn inject(spec: &JobSpec) {
        let Ok(v) = std::env::var("CIPHERFLEET_WORKER_FAULT") else {
            return;
        };
        let Some((kind, alg)) = v.split_once(':') else {
            return;
        };
        if alg != spec.point.algorithm.name() {
            return;
        }
        match kind {
            "abort" => std::process::abort(),
            "hang" => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            _ => {}
        }
    }
}
