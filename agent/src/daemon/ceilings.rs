//! The agent's own ceilings on pushed jobs: whatever the coordinator asks,
//! a job runs with at most `--max-threads` threads (what `Hello` advertises),
//! measures at most `--max-seconds`, needs at most `--max-memory` of buffers,
//! and gets a time limit clamped to a multiple of the agent's own rule. Its
//! worker runs at `--nice` so the host's own service comes first.

use std::time::Duration;

use clap::Args;

use cipherfleet_core::spec::JobSpec;

use crate::engine;
use crate::worker;

/// A coordinator's time limit is cut to this many times the agent's own.
const TIME_LIMIT_FACTOR: u32 = 4;
/// No time limit below this: a worker needs a moment to start.
const MIN_TIME_LIMIT: Duration = Duration::from_secs(1);

/// Flags of `cipherfleet-agent run` that bound what a pushed job may use.
#[derive(Args, Debug, Clone)]
pub struct CeilingArgs {
    /// Most threads a job may use; advertised to the coordinator. Default: the logical CPUs.
    #[arg(long, value_name = "N")]
    pub max_threads: Option<u32>,
    /// Most measured seconds a job may ask for.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    pub max_seconds: f64,
    /// Most memory a job's buffers may take (estimated before it starts), as bytes
    /// (4GiB, 512MiB) or a share of the host's memory (25%). A bigger job is refused.
    #[arg(long, value_name = "SIZE|PERCENT", default_value = "50%")]
    pub max_memory: String,
    /// Niceness of the worker processes (0 to 19): higher yields the CPU to the
    /// host's own services first.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub nice: i32,
}

/// The checked ceilings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ceilings {
    pub max_threads: u32,
    pub max_seconds: f64,
    pub max_memory_bytes: u64,
    pub nice: i32,
}

impl CeilingArgs {
    /// Checks the flags; errors name the flag.
    pub fn into_ceilings(self, memory_total: Option<u64>) -> Result<Ceilings, (&'static str, String)> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let max_threads = match self.max_threads {
            None => cores,
            Some(0) => return Err(("--max-threads", "must be at least 1".into())),
            Some(n) => n,
        };
        if !(self.max_seconds.is_finite() && self.max_seconds > 0.0) {
            return Err((
                "--max-seconds",
                format!("{} is not a positive number", self.max_seconds),
            ));
        }
        if !(0..=19).contains(&self.nice) {
            return Err(("--nice", format!("{} is outside 0..=19", self.nice)));
        }
        let max_memory_bytes = parse_memory(&self.max_memory, memory_total).map_err(|e| ("--max-memory", e))?;
        Ok(Ceilings {
            max_threads,
            max_seconds: self.max_seconds,
            max_memory_bytes,
            nice: self.nice,
        })
    }
}

/// `4GiB`, `512M`, `1048576` (bytes) or `25%` of `memory_total` (no limit when
/// the host's memory is unknown).
fn parse_memory(s: &str, memory_total: Option<u64>) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("{s:?}: give bytes with an optional suffix (512MiB, 4GiB) or a share of memory (25%)");
    if let Some(pct) = t.strip_suffix('%') {
        let pct: u64 = pct.trim().parse().map_err(|_| bad())?;
        if !(1..=100).contains(&pct) {
            return Err(format!("{s:?}: a share between 1% and 100%"));
        }
        return Ok(memory_total.map_or(u64::MAX, |total| (u128::from(total) * u128::from(pct) / 100) as u64));
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let shift = match suffix.trim() {
        "" | "B" => 0,
        "K" | "k" | "KB" | "KiB" => 10,
        "M" | "MB" | "MiB" => 20,
        "G" | "GB" | "GiB" => 30,
        "T" | "TB" | "TiB" => 40,
        _ => return Err(bad()),
    };
    let bytes = n.checked_mul(1 << shift).ok_or_else(bad)?;
    if bytes == 0 {
        return Err(format!("{s:?}: must be more than 0"));
    }
    Ok(bytes)
}

impl Ceilings {
    /// Why this agent refuses `spec`, if it does: the field, the ask and the ceiling.
    pub fn refusal(&self, spec: &JobSpec) -> Option<String> {
        if spec.point.threads > self.max_threads {
            return Some(format!(
                "threads: {} asked, this agent runs at most {} (--max-threads)",
                spec.point.threads, self.max_threads
            ));
        }
        if spec.seconds > self.max_seconds {
            return Some(format!(
                "seconds: {} asked, this agent measures at most {} (--max-seconds)",
                spec.seconds, self.max_seconds
            ));
        }
        let needed = engine::working_set_bytes(spec);
        if needed > self.max_memory_bytes {
            return Some(format!(
                "memory: the job needs about {} MiB of buffers, this agent allows {} MiB (--max-memory)",
                needed.div_ceil(1 << 20),
                self.max_memory_bytes >> 20
            ));
        }
        None
    }

    /// The time limit a job runs under: the coordinator's (`None`: the agent's
    /// own rule), cut to [`TIME_LIMIT_FACTOR`] times the agent's own rule and
    /// no shorter than [`MIN_TIME_LIMIT`].
    pub fn time_limit(&self, spec: &JobSpec, requested: Option<Duration>) -> Duration {
        let own = worker::time_limit(spec);
        requested
            .unwrap_or(own)
            .min(own * TIME_LIMIT_FACTOR)
            .max(MIN_TIME_LIMIT)
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::Point;
    use cipherfleet_core::path::Path;
    use cipherfleet_core::spec::{Direction, KeyMode};

    use super::*;

    fn spec(threads: u32, size_bytes: u64, seconds: f64) -> JobSpec {
        JobSpec {
            point: Point {
                algorithm: "aes-128-gcm".parse().unwrap(),
                direction: Direction::Encrypt,
                size_bytes,
                threads,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: Path::Accelerated,
                nonce: cipherfleet_core::spec::Nonce::Counter,
                provider: cipherfleet_core::provider::Provider::RustCrypto,
            },
            seconds,
        }
    }

    fn ceilings() -> Ceilings {
        Ceilings {
            max_threads: 4,
            max_seconds: 10.0,
            max_memory_bytes: 64 << 20,
            nice: 10,
        }
    }

    #[test]
    fn a_job_past_a_ceiling_is_refused_naming_the_field_and_the_flag() {
        let c = ceilings();
        assert_eq!(c.refusal(&spec(4, 1024, 10.0)), None);
        for (s, field, flag) in [
            (spec(5, 1024, 1.0), "threads: 5 asked", "--max-threads"),
            (spec(1, 1024, 10.5), "seconds: 10.5 asked", "--max-seconds"),
            (
                spec(4, 10 << 20, 1.0),
                "memory: the job needs about 81 MiB",
                "--max-memory",
            ),
        ] {
            let why = c.refusal(&s).expect("refused");
            assert!(why.starts_with(field) && why.contains(flag), "{why}");
        }
    }

    #[test]
    fn the_coordinators_time_limit_is_clamped_to_the_agents_own_rule() {
        let c = ceilings();
        let s = spec(1, 1024, 1.0);
        let own = worker::time_limit(&s);
        assert_eq!(c.time_limit(&s, None), own);
        assert_eq!(
            c.time_limit(&s, Some(own / 2)),
            own / 2,
            "shorter is the coordinator's call"
        );
        assert_eq!(c.time_limit(&s, Some(Duration::from_secs(u32::MAX.into()))), own * 4);
        assert_eq!(c.time_limit(&s, Some(Duration::from_millis(1))), MIN_TIME_LIMIT);
    }

    #[test]
    fn memory_is_bytes_with_a_suffix_or_a_share_of_the_host() {
        let gib = 1u64 << 30;
        assert_eq!(parse_memory("4GiB", None), Ok(4 * gib));
        assert_eq!(parse_memory("512M", None), Ok(512 << 20));
        assert_eq!(parse_memory("1048576", None), Ok(1 << 20));
        assert_eq!(parse_memory("25%", Some(16 * gib)), Ok(4 * gib));
        assert_eq!(parse_memory("50%", None), Ok(u64::MAX), "unknown memory: no limit");
        for bad in ["", "lots", "0", "4 parsecs", "0%", "150%", "99999999999999999999G"] {
            assert!(parse_memory(bad, Some(gib)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn flags_are_checked_by_name() {
        let args = |threads, seconds, nice| CeilingArgs {
            max_threads: threads,
            max_seconds: seconds,
            max_memory: "50%".into(),
            nice,
        };
        assert!(args(None, 120.0, 10).into_ceilings(Some(1 << 30)).is_ok());
        assert_eq!(
            args(Some(0), 1.0, 10).into_ceilings(None).unwrap_err().0,
            "--max-threads"
        );
        assert_eq!(args(None, -1.0, 10).into_ceilings(None).unwrap_err().0, "--max-seconds");
        assert_eq!(args(None, 1.0, 20).into_ceilings(None).unwrap_err().0, "--nice");
        let bad_memory = CeilingArgs {
            max_memory: "x".into(),
            ..args(None, 1.0, 10)
        };
        assert_eq!(bad_memory.into_ceilings(None).unwrap_err().0, "--max-memory");
    }
}
