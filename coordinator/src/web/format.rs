//! How the report prints numbers: units always stated (MB/s = 10^6 bytes/s,
//! sizes in binary units as the benchmark matrix names them), three
//! significant figures, times in UTC.

use chrono::{DateTime, Utc};
use cipherfleet_core::provider::Provider;

use crate::domain::memory::StoredMemory;

/// Throughput in MB/s (10^6 bytes per second), three significant figures.
pub fn mb_s(v: f64) -> String {
    format!("{} MB/s", significant(v))
}

/// A number with three significant figures and no exponent (`1234` → `1230`, `0.01234` → `0.0123`).
pub fn significant(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let digits = v.abs().log10().floor() as i32;
    let decimals = (2 - digits).max(0) as usize;
    let scale = 10f64.powi(digits - 2);
    let rounded = if digits >= 2 { (v / scale).round() * scale } else { v };
    format!("{rounded:.decimals$}")
}

/// Whose figures a page shows, after "Measured on": the provider and what
/// runs it, so a figure is never read as another library's.
pub fn measured_on(provider: Provider) -> &'static str {
    match provider {
        Provider::RustCrypto => "the crates built into the agent (RustCrypto)",
        Provider::Ring => {
            "ring, built into the agent (what rustls services run; ring has no software build, so its \
             software-path figures come from hosts without the instructions)"
        }
        Provider::Openssl => {
            "the host's OpenSSL, through its openssl speed (what nginx, HAProxy and most daemons link)"
        }
        Provider::Kernel => "the kernel crypto API, through AF_ALG (what dm-crypt, IPsec and kTLS use)",
    }
}

/// A payload size as the matrix names it: `16 B`, `16 KiB`, `10 MiB`, `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{} {}", significant(value), UNITS[unit])
    }
}

/// A duration in nanoseconds as ns / µs / ms / s.
pub fn nanos(ns: f64) -> String {
    match ns {
        n if n < 1e3 => format!("{} ns", significant(n)),
        n if n < 1e6 => format!("{} µs", significant(n / 1e3)),
        n if n < 1e9 => format!("{} ms", significant(n / 1e6)),
        n => format!("{} s", significant(n / 1e9)),
    }
}

/// A result's memory figures in one table cell: the keyed cipher state, and
/// below it the worker's peak RSS and heap use per operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryText {
    /// `496 B`: what one keyed instance takes.
    pub state: String,
    /// `peak RSS 3.05 MiB · 0 allocs/op`.
    pub detail: String,
}

/// [`MemoryText`] of `m`; `None` for a result without memory figures (an agent
/// from before they were reported), which a page shows as unknown, not zero.
pub fn memory(m: &StoredMemory) -> Option<MemoryText> {
    let unsigned = |v: Option<i64>| v.map(|b| bytes(b.max(0) as u64));
    let state = unsigned(m.cipher_state_bytes)?;
    let rss = unsigned(m.peak_rss_bytes).map_or_else(|| "peak RSS –".into(), |r| format!("peak RSS {r}"));
    Some(MemoryText {
        state,
        detail: format!("{rss} · {}", heap_per_op(m)),
    })
}

/// Heap use per operation in the measured loops: `0 allocs/op` (what every
/// loop should show), the allocations and bytes when one allocates.
pub fn heap_per_op(m: &StoredMemory) -> String {
    match (m.allocs_per_op, m.heap_bytes_per_op) {
        (None, _) => "allocations not counted".to_string(),
        (Some(0.0), _) => "0 allocs/op".to_string(),
        (Some(a), b) => format!(
            "{} allocs/op ({} B/op)",
            significant(a),
            b.map_or_else(|| "–".into(), significant)
        ),
    }
}

/// A fraction as a percentage: `0.123` → `12.3 %`.
pub fn percent(fraction: f64) -> String {
    format!("{} %", significant(fraction * 100.0))
}

/// A timestamp to the minute, in UTC.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// When stored figures were computed, to the second and how long ago:
/// "2026-12-02 08:03:04 UTC, 42 s ago" (what a page says of figures that
/// miss newer results while they are refreshed).
pub fn as_of(t: DateTime<Utc>) -> String {
    as_of_at(t, Utc::now())
}

fn as_of_at(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - t).num_seconds().max(0);
    let ago = match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    };
    format!("{}, {ago} ago", t.format("%Y-%m-%d %H:%M:%S UTC"))
}

/// Text for XML/SVG built outside templates: `& < > " '` escaped.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_three_significant_figures() {
        for (v, want) in [
            (0.0, "0"),
            (1.0, "1.00"),
            (12.345, "12.3"),
            (123.45, "123"),
            (2391.4, "2390"),
            (0.012345, "0.0123"),
            (-42.0, "-42.0"),
            (f64::NAN, "–"),
        ] {
            assert_eq!(significant(v), want, "{v}");
        }
        assert_eq!(mb_s(85.04), "85.0 MB/s");
    }

    #[test]
    fn memory_shows_the_state_then_rss_and_heap_use_and_nothing_when_unreported() {
        let m = StoredMemory {
            cipher_state_bytes: Some(496),
            peak_rss_bytes: Some(3_200_000),
            heap_bytes_per_op: Some(0.0),
            allocs_per_op: Some(0.0),
        };
        assert_eq!(
            memory(&m),
            Some(MemoryText {
                state: "496 B".into(),
                detail: "peak RSS 3.05 MiB · 0 allocs/op".into()
            })
        );
        let allocating = StoredMemory {
            heap_bytes_per_op: Some(48.0),
            allocs_per_op: Some(1.0),
            ..m
        };
        assert_eq!(
            memory(&allocating).unwrap().detail,
            "peak RSS 3.05 MiB · 1.00 allocs/op (48.0 B/op)"
        );
        let uncounted = StoredMemory {
            heap_bytes_per_op: None,
            allocs_per_op: None,
            ..m
        };
        assert_eq!(
            memory(&uncounted).unwrap().detail,
            "peak RSS 3.05 MiB · allocations not counted"
        );
        assert_eq!(memory(&StoredMemory::default()), None);
    }

    #[test]
    fn sizes_use_the_matrix_units() {
        for (n, want) in [
            (11, "11 B"),
            (16, "16 B"),
            (1024, "1 KiB"),
            (1536, "1.50 KiB"),
            (16384, "16 KiB"),
            (10 * 1024 * 1024, "10 MiB"),
        ] {
            assert_eq!(bytes(n), want);
        }
    }

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(nanos(850.0), "850 ns");
        assert_eq!(nanos(1600.0), "1.60 µs");
        assert_eq!(nanos(2.5e7), "25.0 ms");
        assert_eq!(percent(0.1234), "12.3 %");
    }

    #[test]
    fn as_of_says_when_and_how_long_ago() {
        let t = DateTime::parse_from_rfc3339("2026-12-02T08:03:04Z").unwrap().to_utc();
        let later = |s: i64| t + chrono::Duration::seconds(s);
        assert_eq!(as_of_at(t, later(42)), "2026-12-02 08:03:04 UTC, 42 s ago");
        assert_eq!(as_of_at(t, later(600)), "2026-12-02 08:03:04 UTC, 10 min ago");
        assert_eq!(as_of_at(t, later(3 * 3600)), "2026-12-02 08:03:04 UTC, 3 h ago");
        assert_eq!(
            as_of_at(t, later(-5)),
            "2026-12-02 08:03:04 UTC, 0 s ago",
            "clocks apart"
        );
    }

    #[test]
    fn xml_text_is_escaped() {
        assert_eq!(
            xml_escape("<script>\"a\"&'b'</script>"),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;&lt;/script&gt;"
        );
    }
}
