//! From the threads' records to the point's throughput samples: only what
//! happened while every thread was running counts, so a thread that started
//! late or stopped early never leaves another running alone inside a sample
//! (which would read high on a thread-scaling curve). A sample spans as many
//! windows as it takes to hold a few of the batches as they really ran.

use cipherfleet_core::spec::MIN_SAMPLES;

use super::plan::BATCHES_PER_WINDOW;

/// One thread's record, in nanoseconds from the shared start.
pub struct Track<'a> {
    /// When the thread began its first measured batch, and ended its last.
    pub begin_ns: u64,
    pub end_ns: u64,
    /// Throughput batches (or objects) it ran.
    pub batches: u64,
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
    /// Windows in one sample (1 for operation sampling).
    pub windows_per_sample: u64,
}

/// Windows one sample needs so that a mean batch of `mean_batch_ns` fits
/// [`BATCHES_PER_WINDOW`] times: each batch counts in the window where it
/// ends, so a sample holding fewer would swing with where the ends fall, and
/// one shorter than a batch would often hold none.
pub fn windows_for(mean_batch_ns: u64, window_ns: u64) -> u64 {
    (u64::from(BATCHES_PER_WINDOW) * mean_batch_ns)
        .div_ceil(window_ns.max(1))
        .max(1)
}

/// [`windows_for`] the slowest thread's batches as they really ran. The plan
/// sizes windows from the warm-up's fastest batch; on a loaded machine
/// preemption stretches the batches, and windows of the planned length would
/// come out mostly empty, the median near zero.
pub fn windows_per_sample(tracks: &[Track<'_>], window_ns: u64) -> u64 {
    tracks
        .iter()
        .map(|t| windows_for(t.end_ns.saturating_sub(t.begin_ns) / t.batches.max(1), window_ns))
        .max()
        .unwrap_or(1)
}

/// Of the samples of `k` windows from `first` to `end`: how many have a
/// thread that completed nothing (it had no CPU for a whole sample), and how
/// many there are.
fn starved(tracks: &[Track<'_>], first: usize, end: usize, k: usize) -> (usize, usize) {
    let samples: Vec<usize> = (first..end).step_by(k).take_while(|w| w + k <= end).collect();
    let empty = samples
        .iter()
        .filter(|&&w| tracks.iter().any(|t| t.windows[w..w + k].iter().all(|&n| n == 0)))
        .count();
    (empty, samples.len())
}

/// Window sampling: the windows that lie wholly inside the interval in which
/// every thread was running, [`windows_per_sample`] at a time, and twice as
/// many while some thread ran nothing in a sample (a machine so busy that it
/// leaves a thread without CPU for several batches) — as long as
/// [`MIN_SAMPLES`] samples remain, or regardless while half of them are such
/// (they would put the median near zero). Each sample's figure is every
/// thread's operations in its windows.
pub fn windows(tracks: &[Track<'_>], window_ns: u64, size: u64) -> Sampled {
    let all_start = tracks.iter().map(|t| t.begin_ns).max().unwrap_or(0);
    let all_end = tracks.iter().map(|t| t.end_ns).min().unwrap_or(0);
    let slots = tracks.iter().map(|t| t.windows.len()).min().unwrap_or(0);
    let first = all_start.div_ceil(window_ns) as usize;
    // Windows [w, w + 1) that end by `all_end`, and never the overflow slot.
    let end = ((all_end / window_ns) as usize).min(slots.saturating_sub(1));
    let mut per_sample = windows_per_sample(tracks, window_ns);
    while end >= first + 2 * per_sample as usize {
        let k = per_sample as usize;
        let (empty, samples) = starved(tracks, first, end, k);
        let enough_after = (end - first) / (2 * k) >= MIN_SAMPLES as usize;
        if empty == 0 || !(enough_after || 2 * empty >= samples) {
            break;
        }
        per_sample *= 2;
    }
    let sample_s = (window_ns * per_sample) as f64 / 1e9;
    let mut sampled = Sampled {
        samples: Vec::new(),
        all_running_bytes: 0,
        all_running_seconds: 0.0,
        windows_per_sample: per_sample,
    };
    let k = per_sample as usize;
    let mut w = first;
    while w + k <= end {
        let bytes: u64 = tracks
            .iter()
            .map(|t| t.windows[w..w + k].iter().sum::<u64>() * size)
            .sum();
        sampled.samples.push(bytes as f64 / sample_s);
        sampled.all_running_bytes += bytes;
        w += k;
    }
    sampled.all_running_seconds = sampled.samples.len() as f64 * sample_s;
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
        windows_per_sample: 1,
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

    /// A thread's record with batches of 1 ms.
    fn track<'a>(begin_ms: u64, end_ms: u64, windows: &'a [u64], timed: &'a [(u64, u64)]) -> Track<'a> {
        Track {
            begin_ns: begin_ms * MS,
            end_ns: end_ms * MS,
            batches: end_ms - begin_ms,
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
    fn batches_stretched_past_the_window_merge_windows_into_one_sample() {
        // 5 ms windows planned; preemption stretched the batches to 10 ms each,
        // so most windows hold none (one batch of 100 operations ends in every
        // other window).
        let a = [100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 0];
        let slow = Track {
            batches: 8,
            ..track(0, 80, &a, &[])
        };
        assert_eq!(windows_per_sample(&[slow], 5 * MS), 8, "four 10 ms batches per sample");
        let slow = Track {
            batches: 8,
            ..track(0, 80, &a, &[])
        };
        let s = windows(&[slow], 5 * MS, 1);
        // Windows 0-7 and 8-15: 400 operations in 40 ms each, never an empty sample.
        assert_eq!(s.samples, vec![400.0 / 0.04; 2]);
        assert_eq!((s.windows_per_sample, s.all_running_bytes), (8, 800));
        assert!((s.all_running_seconds - 0.08).abs() < 1e-12);
        // A thread left without CPU for 15 ms in a run of 1 ms batches: samples
        // double while ten remain; one empty sample of ten leaves the median be.
        let mut starved = [10u64; 21];
        starved[5..8].fill(0);
        let s = windows(&[track(0, 105, &starved, &[])], 5 * MS, 1);
        assert_eq!(s.windows_per_sample, 2);
        assert_eq!(s.samples.len(), 10);
        assert_eq!((s.samples[2], s.samples[3], s.samples[4]), (1000.0, 0.0, 2000.0));
        // Every other window empty: half the samples would be 0, so they double
        // even below ten samples.
        let mut bursts = [10u64; 21];
        bursts.iter_mut().skip(1).step_by(2).for_each(|n| *n = 0);
        let s = windows(&[track(0, 105, &bursts, &[])], 5 * MS, 1);
        assert_eq!(s.windows_per_sample, 2);
        assert_eq!(s.samples, vec![1000.0; 10]);
        // Batches as planned (1 ms): one window per sample.
        assert_eq!(windows_for(MS, 5 * MS), 1);
        assert_eq!(windows_for(0, 5 * MS), 1);
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
