//! From the threads' records to the point's throughput samples: only what
//! happened while every thread was running counts, so a thread that started
//! late or stopped early never leaves another running alone inside a sample
//! (which would read high on a thread-scaling curve).

/// One thread's record, in nanoseconds from the shared start.
pub struct Track<'a> {
    /// When the thread began its first measured batch, and ended its last.
    pub begin_ns: u64,
    pub end_ns: u64,
    /// Window sampling: operations whose batch ended in each window; the
    /// last entry collects overflow and is never a sample.
    pub windows: &'a [u64],
    /// Operation sampling: (end, duration) of each operation.
    pub timed: &'a [(u64, u64)],
}

/// The samples of a point and its all-threads-running total.
#[derive(Debug, PartialEq)]
pub struct Sampled {
    /// Throughput of each sample, bytes per second (all threads together).
    pub samples: Vec<f64>,
    /// Bytes completed while every thread was running, and for how long.
    pub all_running_bytes: u64,
    pub all_running_seconds: f64,
}

/// Window sampling: the windows that lie wholly inside the interval in which
/// every thread was running; each one's figure is every thread's operations
/// in it.
pub fn windows(tracks: &[Track<'_>], window_ns: u64, size: u64) -> Sampled {
    let all_start = tracks.iter().map(|t| t.begin_ns).max().unwrap_or(0);
    let all_end = tracks.iter().map(|t| t.end_ns).min().unwrap_or(0);
    let slots = tracks.iter().map(|t| t.windows.len()).min().unwrap_or(0);
    let first = all_start.div_ceil(window_ns) as usize;
    // Windows [w, w + 1) that end by `all_end`, and never the overflow slot.
    let end = ((all_end / window_ns) as usize).min(slots.saturating_sub(1));
    let window_s = window_ns as f64 / 1e9;
    let mut sampled = Sampled {
        samples: Vec::new(),
        all_running_bytes: 0,
        all_running_seconds: 0.0,
    };
    for w in first..end.max(first) {
        let bytes: u64 = tracks.iter().map(|t| t.windows[w] * size).sum();
        sampled.samples.push(bytes as f64 / window_s);
        sampled.all_running_bytes += bytes;
    }
    sampled.all_running_seconds = sampled.samples.len() as f64 * window_s;
    sampled
}

/// Operation sampling: every operation that began after the last thread
/// began and ended before the first thread ended; each one is a sample of
/// `threads` operations at its pace.
pub fn operations(tracks: &[Track<'_>], threads: u32, size: u64) -> Sampled {
    let active: Vec<&Track<'_>> = tracks.iter().filter(|t| !t.timed.is_empty()).collect();
    let all_start = active.iter().map(|t| t.timed[0].0 - t.timed[0].1).max().unwrap_or(0);
    let all_end = active.iter().map(|t| t.timed[t.timed.len() - 1].0).min().unwrap_or(0);
    let mut sampled = Sampled {
        samples: Vec::new(),
        all_running_bytes: 0,
        all_running_seconds: all_end.saturating_sub(all_start) as f64 / 1e9,
    };
    for t in &active {
        for &(end, duration) in t.timed {
            if end > all_start && end <= all_end {
                sampled.all_running_bytes += size;
                if end - duration >= all_start && duration > 0 {
                    sampled
                        .samples
                        .push(f64::from(threads) * size as f64 / (duration as f64 / 1e9));
                }
            }
        }
    }
    sampled
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn track<'a>(begin_ms: u64, end_ms: u64, windows: &'a [u64], timed: &'a [(u64, u64)]) -> Track<'a> {
        Track {
            begin_ns: begin_ms * MS,
            end_ns: end_ms * MS,
            windows,
            timed,
        }
    }

    #[test]
    fn only_windows_with_every_thread_running_are_samples() {
        // 10 ms windows, 100-byte operations. Thread b stops at 42 ms; thread a
        // runs on alone to 61 ms: its lone windows 4 and 5 must not count.
        let a = [5, 10, 10, 10, 10, 10, 1, 0];
        let b = [4, 10, 10, 10, 3, 0, 0, 0];
        let s = windows(&[track(0, 61, &a, &[]), track(1, 42, &b, &[])], 10 * MS, 100);
        // Window 0 began before thread b: out. Windows 1-3: both threads throughout.
        assert_eq!(s.samples, vec![2000.0 / 0.01; 3]);
        assert_eq!((s.all_running_bytes, s.all_running_seconds), (6000, 0.03));
    }

    #[test]
    fn one_thread_keeps_every_whole_window_but_the_overflow() {
        let a = [10, 10, 10, 99];
        let s = windows(&[track(0, 90, &a, &[])], 10 * MS, 1);
        assert_eq!(s.samples.len(), 3, "window 3 collects overflow, never a sample");
        // A run shorter than a window has none.
        assert!(windows(&[track(0, 9, &a, &[])], 10 * MS, 1).samples.is_empty());
    }

    #[test]
    fn operations_count_only_while_every_thread_runs() {
        // Thread a: operations of 10 ms from 0 to 50 ms. Thread b begins at 3 ms and
        // stops after its operation ending at 33 ms.
        let a = [(10, 10), (20, 10), (30, 10), (40, 10), (50, 10)].map(|(e, d)| (e * MS, d * MS));
        let b = [(13, 10), (23, 10), (33, 10)].map(|(e, d)| (e * MS, d * MS));
        let s = operations(&[track(0, 50, &[], &a), track(3, 33, &[], &b)], 2, 1000);
        // a's first began before b; a's 40 and 50 ms ones ended after b stopped.
        // Counted: a@20, a@30, b@13, b@23, b@33, each 2 × 1000 B per 10 ms.
        assert_eq!(s.samples, vec![200_000.0; 5]);
        // Bytes over [3, 33] ms: a@10, a@20, a@30 and b's three.
        assert_eq!(s.all_running_bytes, 6000);
        assert!((s.all_running_seconds - 0.030).abs() < 1e-12);
    }
}
