//! Byte-for-byte snapshots of representative charts, kept in `golden/`.
//!
//! Pages embed the chart markup as it is, so any change to it is a change
//! users see. These charts cover each axis kind, series beyond the palette
//! (dashes and markers cycle), undrawable points and empty charts; and
//! `/fallback`'s paths chart ([`super::paths`]). After a
//! deliberate change to the output, rewrite the files with
//! `CIPHERFLEET_BLESS=1 cargo test -p cipherfleet-coordinator --lib svg::golden`
//! and review the diff.

use std::path::PathBuf;

use super::{LineChart, XAxis};

const DAY: f64 = 86400.0;
/// 2024-10-04 00:00 UTC.
const T0: f64 = 20000.0 * DAY;

fn threads() -> XAxis {
    XAxis::Linear {
        label: "threads".into(),
    }
}

/// The charts and the file each is kept in.
fn charts() -> Vec<(&'static str, LineChart)> {
    let mut many = LineChart::new("Scaling of 23 algorithms", threads());
    // 23 series: three rounds through the palette and its dashes, and into a fourth.
    for i in 0..23 {
        let y = 100.0 + 37.5 * i as f64;
        many = many.series(
            format!("algorithm-{i:02}-with-a-name-longer-than-the-legend"),
            [(1.0, y), (2.0, 1.9 * y), (4.0, 3.6 * y), (8.0, 6.1 * y)],
        );
    }
    let mut days = LineChart::new("Key algorithms over two weeks", XAxis::Time);
    for (i, name) in ["aes-256-gcm", "aes-128-gcm", "chacha20-poly1305"]
        .into_iter()
        .enumerate()
    {
        let points = (0..15).map(|d| {
            (
                T0 + d as f64 * DAY + 3600.0 * i as f64,
                2000.0 + 13.7 * d as f64 - 400.0 * i as f64,
            )
        });
        days = days.series(name, points);
    }
    vec![
        (
            "bytes",
            LineChart::new("Throughput by payload size", XAxis::Bytes)
                .series(
                    "aes-256-gcm",
                    [
                        (11.0, 40.5),
                        (16384.0, 2391.4),
                        (10.0 * 1048576.0, 2600.0),
                        (1024.0, 1210.25),
                        // Not drawable on a log axis, or not at all.
                        (0.0, 5.0),
                        (-16.0, 5.0),
                        (64.0, f64::NAN),
                        (f64::INFINITY, 1.0),
                    ],
                )
                .series("des-ede3-cbc", [(16384.0, 25.0), (11.0, 9.0), (1024.0, 24.123456)])
                .series("empty", [])
                .series("aes-128-ctr", [(256.0, 1800.0)]),
        ),
        (
            "bytes-one-size",
            LineChart::new("One payload size", XAxis::Bytes)
                .series("aes-256-gcm", [(16384.0, 0.0123)])
                .series("aes-128-gcm", [(16384.0, 0.5)]),
        ),
        ("threads-many-series", many),
        (
            "linear-fractions",
            LineChart::new(
                "Latency against load",
                XAxis::Linear {
                    label: "offered load (fraction of peak)".into(),
                },
            )
            .y_axis("p99 latency (µs)", "µs")
            .series(
                "host-a",
                [(0.1, 12.0), (0.25, 14.5), (0.5, 19.0), (0.75, 40.0), (0.95, 123.456)],
            )
            .series("host-b", [(0.1, 10.0), (0.95, 99.0)]),
        ),
        (
            "linear-one-x",
            LineChart::new("One thread count", threads()).series("aes-128-ctr", [(4.0, 100.0), (4.0, 120.0)]),
        ),
        (
            "time-hours",
            LineChart::new("History", XAxis::Time)
                .series(
                    "host-a",
                    [(T0 + 100.0, 10.0), (T0 + 5.0 * 3600.0, 12.0), (T0 + 2.5 * 3600.0, 11.0)],
                )
                .series("host-b", [(T0 + 1800.0, 9.0)]),
        ),
        ("time-days", days),
        (
            "time-one-point",
            LineChart::new("A single measurement", XAxis::Time).series("host-a", [(T0 + 1234.0, 5000.0)]),
        ),
        ("empty", LineChart::new("Nothing measured yet", XAxis::Bytes)),
        (
            "empty-undrawable",
            LineChart::new("Nothing drawable", XAxis::Bytes)
                .series("x", [(0.0, 5.0), (f64::NAN, 1.0)])
                .series("y", []),
        ),
        (
            "hostile",
            LineChart::new(
                r#"<b>"x"</b> & 'y'"#,
                XAxis::Linear {
                    label: "<i>n</i>".into(),
                },
            )
            .y_axis("a < b", "&amp;")
            .series(r#"<script>alert("x")</script>&'"#, [(1.0, 1.0), (2.0, 3.0)]),
        ),
    ]
}

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/web/svg/golden")
        .join(format!("{name}.svg"))
}

/// Up to 80 bytes of `s` either side of `at`.
fn around(s: &str, at: usize) -> &str {
    &s[s.floor_char_boundary(at.saturating_sub(80))..s.ceil_char_boundary(at + 80)]
}

/// Compares `got` with the file `name` (or rewrites it under `CIPHERFLEET_BLESS`).
fn check(name: &str, got: &str) {
    let file = path(name);
    if std::env::var_os("CIPHERFLEET_BLESS").is_some() {
        std::fs::write(&file, got).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
        return;
    }
    let want = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    if got != want {
        let at = got.bytes().zip(want.bytes()).take_while(|(a, b)| a == b).count();
        panic!(
            "{name}: the chart differs from {} at byte {at}\n got: …{}…\nwant: …{}…",
            file.display(),
            around(got, at),
            around(&want, at)
        );
    }
}

#[test]
fn charts_render_exactly_as_recorded() {
    for (name, chart) in charts() {
        check(name, &chart.render());
    }
}

/// `/fallback`'s chart: a fleet with a host at software speed for each
/// reason, a path not measured, an emulated host and a hostile name; and
/// the chart of a view without hosts.
#[test]
fn paths_charts_render_exactly_as_recorded() {
    check("paths-fleet", &super::paths::tests::fleet().render());
    let empty = super::paths::PathsChart {
        title: "chacha20-poly1305 at 16 B, 1 thread, encrypt, static key".into(),
        rows: Vec::new(),
    };
    check("paths-empty", &empty.render());
}
