//! How the report prints numbers: units always stated (MB/s = 10^6 bytes/s,
//! sizes in binary units as the benchmark matrix names them), three
//! significant figures, times in UTC.

use chrono::{DateTime, Utc};

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

/// A fraction as a percentage: `0.123` → `12.3 %`.
pub fn percent(fraction: f64) -> String {
    format!("{} %", significant(fraction * 100.0))
}

/// A timestamp to the minute, in UTC.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
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
    fn xml_text_is_escaped() {
        assert_eq!(
            xml_escape("<script>\"a\"&'b'</script>"),
            "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;&lt;/script&gt;"
        );
    }
}
