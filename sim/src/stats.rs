//! What the simulated fleet did: counters every host bumps, the latency from
//! a result sent to its `ResultAck`, the progress line and the summary.
//! The summary's last line is `key=value` pairs, for scripts
//! (deploy/bench-scale.sh reads it).

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Counters shared by every simulated host.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// Hosts asked for.
    pub count: u64,
    /// Sessions open now (welcomed, not yet ended).
    pub connected: AtomicU64,
    /// Sessions welcomed since the start.
    pub welcomed: AtomicU64,
    /// Hosts the coordinator refused for good (they stopped).
    pub refused: AtomicU64,
    /// Failed connection attempts and sessions that broke.
    pub errors: AtomicU64,
    /// Sessions the simulator dropped on purpose (`--disconnect-prob`).
    pub disconnects: AtomicU64,
    /// `RunJob`s accepted.
    pub jobs: AtomicU64,
    /// `RunJob`s refused as busy.
    pub busy: AtomicU64,
    /// Results sent (re-sends included).
    pub results: AtomicU64,
    /// Failures sent (`--fail-prob`, cancellations, invalid specs).
    pub failures: AtomicU64,
    /// Outcomes acknowledged.
    pub acked: AtomicU64,
    /// Acknowledged with a refusal.
    pub rejected: AtomicU64,
    /// Later `Welcome`s that changed a session's heartbeat interval.
    pub repaced: AtomicU64,
    /// Heartbeats sent.
    pub heartbeats: AtomicU64,
    /// Heartbeats sent [`LATE`] or more after they were due: the simulator
    /// itself fell behind (too little CPU for its hosts), and a coordinator
    /// may rightly have judged those hosts silent.
    pub late_heartbeats: AtomicU64,
    /// The latest a heartbeat was sent after it was due, in milliseconds.
    late_heartbeat_max_ms: AtomicU64,
    /// Milliseconds since the start when every host was first connected at once (0: not yet).
    all_connected_ms: AtomicU64,
    /// Result sent → acknowledged, in microseconds.
    ack_latency: Mutex<Histogram<u64>>,
    /// The latest error's text, for the progress line.
    last_error: Mutex<String>,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    pub elapsed: Duration,
    pub count: u64,
    pub connected: u64,
    pub welcomed: u64,
    pub refused: u64,
    pub errors: u64,
    pub disconnects: u64,
    pub jobs: u64,
    pub busy: u64,
    pub results: u64,
    pub failures: u64,
    pub acked: u64,
    pub rejected: u64,
    pub repaced: u64,
    pub heartbeats: u64,
    pub late_heartbeats: u64,
    pub late_heartbeat_max: Duration,
    /// When every host was first connected, if they have been.
    pub all_connected: Option<Duration>,
    /// Result → ack percentiles in milliseconds: p50, p99, max.
    pub ack_ms: Option<(f64, f64, f64)>,
}

/// A heartbeat sent this long after it was due counts as late.
pub const LATE: Duration = Duration::from_secs(1);

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Stats {
    pub fn new(count: u64) -> Stats {
        Stats {
            started: Instant::now(),
            count,
            connected: AtomicU64::new(0),
            welcomed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            jobs: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            results: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            repaced: AtomicU64::new(0),
            heartbeats: AtomicU64::new(0),
            late_heartbeats: AtomicU64::new(0),
            late_heartbeat_max_ms: AtomicU64::new(0),
            all_connected_ms: AtomicU64::new(0),
            // 1 µs to an hour, three significant digits: a few tens of kilobytes, fixed.
            ack_latency: Mutex::new(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")),
            last_error: Mutex::new(String::new()),
        }
    }

    /// Counts one event.
    pub fn bump(&self, counter: impl Fn(&Stats) -> &AtomicU64) {
        add(counter(self));
    }

    /// A session was welcomed.
    pub fn connected(&self) {
        add(&self.welcomed);
        let now = self.connected.fetch_add(1, Ordering::Relaxed) + 1;
        if now == self.count {
            let ms = (self.started.elapsed().as_millis() as u64).max(1);
            let _ = self
                .all_connected_ms
                .compare_exchange(0, ms, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// A connection failed or a session broke.
    pub fn error(&self, reason: &str) {
        add(&self.errors);
        let mut last = self
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        last.clear();
        last.push_str(reason);
    }

    /// The latest error's text (empty when there was none).
    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A heartbeat was sent `late` after it was due.
    pub fn heartbeat_sent(&self, late: Duration) {
        add(&self.heartbeats);
        if late >= LATE {
            add(&self.late_heartbeats);
        }
        self.late_heartbeat_max_ms
            .fetch_max(late.as_millis() as u64, Ordering::Relaxed);
    }

    /// A welcomed session ended.
    pub fn disconnected(&self) {
        self.connected.fetch_sub(1, Ordering::Relaxed);
    }

    /// An outcome sent `sent` ago was acknowledged.
    pub fn acked(&self, sent: Duration, rejected: bool) {
        add(&self.acked);
        if rejected {
            add(&self.rejected);
        }
        let us = (sent.as_micros() as u64).clamp(1, 3_600_000_000);
        let mut h = self
            .ack_latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = h.record(us);
    }

    pub fn snapshot(&self) -> Snapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let ack_ms = {
            let h = self
                .ack_latency
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (!h.is_empty()).then(|| {
                let ms = |us: u64| us as f64 / 1000.0;
                (ms(h.value_at_quantile(0.5)), ms(h.value_at_quantile(0.99)), ms(h.max()))
            })
        };
        let all = get(&self.all_connected_ms);
        Snapshot {
            elapsed: self.started.elapsed(),
            count: self.count,
            connected: get(&self.connected),
            welcomed: get(&self.welcomed),
            refused: get(&self.refused),
            errors: get(&self.errors),
            disconnects: get(&self.disconnects),
            jobs: get(&self.jobs),
            busy: get(&self.busy),
            results: get(&self.results),
            failures: get(&self.failures),
            acked: get(&self.acked),
            rejected: get(&self.rejected),
            repaced: get(&self.repaced),
            heartbeats: get(&self.heartbeats),
            late_heartbeats: get(&self.late_heartbeats),
            late_heartbeat_max: Duration::from_millis(get(&self.late_heartbeat_max_ms)),
            all_connected: (all > 0).then(|| Duration::from_millis(all)),
            ack_ms,
        }
    }
}

impl Snapshot {
    /// One progress line for people.
    pub fn progress_line(&self) -> String {
        let mut line = format!(
            "simulate {:>6.1} s: connected {}/{} (sessions {}, refused {}), jobs {}, results {}, failures {}, acked {}",
            self.elapsed.as_secs_f64(),
            self.connected,
            self.count,
            self.welcomed,
            self.refused,
            self.jobs,
            self.results,
            self.failures,
            self.acked
        );
        if self.rejected > 0 {
            let _ = write!(line, " ({} refused)", self.rejected);
        }
        let _ = write!(line, ", errors {}", self.errors);
        if self.late_heartbeats > 0 {
            let _ = write!(
                line,
                ", {} heartbeats late (the simulator is behind, by up to {:.1} s)",
                self.late_heartbeats,
                self.late_heartbeat_max.as_secs_f64()
            );
        }
        if let Some((p50, p99, _)) = self.ack_ms {
            let _ = write!(line, ", result→ack p50 {p50:.1} ms p99 {p99:.1} ms");
        }
        line
    }

    /// The closing `key=value` line: every counter, times in seconds and milliseconds.
    pub fn summary_line(&self, peak_connects_per_s: u64) -> String {
        let (p50, p99, max) = self.ack_ms.unwrap_or_default();
        let all = self
            .all_connected
            .map(|d| format!("{:.3}", d.as_secs_f64()))
            .unwrap_or_else(|| "-".into());
        format!(
            "simulate-summary count={} elapsed_s={:.1} connected={} connect_all_s={all} peak_connects_per_s={peak_connects_per_s} \
             sessions={} refused={} errors={} disconnects={} jobs={} busy={} results={} failures={} acked={} rejected={} \
             ack_p50_ms={p50:.1} ack_p99_ms={p99:.1} ack_max_ms={max:.1} repaced={} heartbeats={} late_heartbeats={} late_heartbeat_max_ms={}",
            self.count,
            self.elapsed.as_secs_f64(),
            self.connected,
            self.welcomed,
            self.refused,
            self.errors,
            self.disconnects,
            self.jobs,
            self.busy,
            self.results,
            self.failures,
            self.acked,
            self.rejected,
            self.repaced,
            self.heartbeats,
            self.late_heartbeats,
            self.late_heartbeat_max.as_millis(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_connected_is_the_first_moment_every_host_was_in_and_acks_fill_the_percentiles() {
        let stats = Stats::new(2);
        stats.connected();
        assert_eq!(stats.snapshot().all_connected, None);
        stats.connected();
        let first = stats.snapshot().all_connected.unwrap();
        stats.disconnected();
        stats.connected();
        assert_eq!(stats.snapshot().all_connected, Some(first), "kept from the first time");
        assert_eq!(stats.snapshot().ack_ms, None);
        for ms in 1..=100 {
            stats.acked(Duration::from_millis(ms), ms == 100);
        }
        let s = stats.snapshot();
        let (p50, p99, max) = s.ack_ms.unwrap();
        assert!(
            (49.0..51.0).contains(&p50) && (98.0..100.5).contains(&p99) && max >= p99,
            "{p50} {p99} {max}"
        );
        assert_eq!((s.acked, s.rejected, s.welcomed, s.connected), (100, 1, 3, 2));
        let line = s.summary_line(7);
        for key in [
            "count=2 ",
            "connected=2 ",
            "peak_connects_per_s=7 ",
            "acked=100 ",
            "rejected=1 ",
            "ack_p99_ms=",
        ] {
            assert!(line.contains(key), "{key}: {line}");
        }
    }

    #[test]
    fn heartbeats_a_second_late_or_more_count_and_the_latest_is_kept() {
        let stats = Stats::new(1);
        assert!(!stats.snapshot().progress_line().contains("heartbeats late"));
        stats.heartbeat_sent(Duration::from_millis(3));
        stats.heartbeat_sent(LATE - Duration::from_millis(1));
        assert_eq!(stats.snapshot().late_heartbeats, 0);
        stats.heartbeat_sent(Duration::from_millis(6_900));
        stats.heartbeat_sent(LATE);
        let s = stats.snapshot();
        assert_eq!(
            (s.heartbeats, s.late_heartbeats, s.late_heartbeat_max),
            (4, 2, Duration::from_millis(6_900))
        );
        assert!(
            s.progress_line()
                .contains("2 heartbeats late (the simulator is behind, by up to 6.9 s)")
        );
        let line = s.summary_line(0);
        assert!(
            line.ends_with(" heartbeats=4 late_heartbeats=2 late_heartbeat_max_ms=6900"),
            "{line}"
        );
    }
}
