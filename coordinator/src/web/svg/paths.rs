//! The `/fallback` chart: per host, the accelerated path's throughput against
//! the software path's on one log axis, the ratio beside them, the hosts at
//! software speed highlighted, and each explaining finding as a badge with
//! its subject — the page's question answered at a glance, before its tables.
//!
//! Built as a string like [`super::LineChart`], under the same rules: every
//! text placed in it (host names are agent text, untrusted) goes through
//! [`format::xml_escape`], and no `style=` attribute (the CSP forbids them).
//! The rows are drawn in the order given: the page puts the hosts at
//! software speed first, then the others by name — an order of detection,
//! never a ranking by speed.

use std::fmt::Write as _;

use super::ticks::plain;
use crate::web::format;

/// One host's row.
#[derive(Clone, Debug, PartialEq)]
pub struct PathsRow {
    /// The host's name (agent text).
    pub host: String,
    pub accelerated_mb_s: Option<f64>,
    pub software_mb_s: Option<f64>,
    /// accelerated ÷ software, when both are measured.
    pub ratio: Option<f64>,
    /// What the accelerated request ran when not the accelerated path (`software`, `partial`).
    pub ran: Option<String>,
    /// Listed under "at software speed": the row is highlighted.
    pub at_software_speed: bool,
    /// `emulated` or `simulated`: drawn greyed and badged, its figures not performance.
    pub mark: Option<&'static str>,
    /// The open findings that explain the row, as badges.
    pub reasons: Vec<Badge>,
    /// For a path not measured: what measures it (`--suite fallback`).
    pub accelerated_fill: Option<String>,
    pub software_fill: Option<String>,
}

/// A finding as a badge: `cpu-lacks: aes`, outlined in its severity's colour.
#[derive(Clone, Debug, PartialEq)]
pub struct Badge {
    pub label: String,
    /// `critical`, `warning` or `info`.
    pub severity: &'static str,
}

/// The chart: a title and its rows, turned into markup by [`PathsChart::render`].
#[derive(Clone, Debug, PartialEq)]
pub struct PathsChart {
    pub title: String,
    pub rows: Vec<PathsRow>,
}

// Geometry in viewBox units; the CSS scales the chart to its container.
const WIDTH: f64 = 960.0;
const NAME_X: f64 = 10.0;
/// Host names are cut here; the full name stays in the row's `<title>`.
const NAME_CHARS: usize = 26;
const PLOT_LEFT: f64 = 210.0;
const PLOT_RIGHT: f64 = 750.0;
const RATIO_X: f64 = 790.0;
/// Where the legend and the axis labels sit, and the first row.
const LEGEND_Y: f64 = 42.0;
const AXIS_Y: f64 = 70.0;
const ROWS_TOP: f64 = 78.0;
const BAR_HEIGHT: f64 = 10.0;
/// A row's two bars; a row with badges has a line more.
const ROW_HEIGHT: f64 = 34.0;
const BADGE_LINE: f64 = 20.0;
const BADGE_HEIGHT: f64 = 16.0;
/// Roughly the width of one character of the badges' 11 px text.
const BADGE_CHAR: f64 = 6.3;

const ACCELERATED: &str = "#0969da";
const SOFTWARE: &str = "#bf8700";
const HIGHLIGHT: &str = "#fdecea";
const BAD: &str = "#cf222e";
const MUTED: &str = "#5d6678";

impl PathsChart {
    /// The complete `<svg>` element.
    pub fn render(&self) -> String {
        let heights: Vec<f64> = self.rows.iter().map(row_height).collect();
        let height = ROWS_TOP + heights.iter().sum::<f64>() + 12.0;
        let title = format::xml_escape(&self.title);
        let mut svg = String::with_capacity(2048 + 1024 * self.rows.len());
        let _ = write!(
            svg,
            r#"<svg class="chart paths-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{title}"><title>{title}</title><text x="{NAME_X}" y="20" font-weight="600">{title}</text>"#
        );
        draw_legend(&mut svg);
        let values: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| [r.accelerated_mb_s, r.software_mb_s])
            .flatten()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let scale = LogScale::fit(&values);
        scale.draw_axis(&mut svg, height - 12.0);
        let mut y = ROWS_TOP;
        for (row, h) in self.rows.iter().zip(&heights) {
            draw_row(&mut svg, &scale, row, y, *h);
            y += h;
        }
        if self.rows.is_empty() {
            let _ = write!(
                svg,
                r#"<text x="{PLOT_LEFT}" y="{ty}" fill="{MUTED}">No host in this view</text>"#,
                ty = ROWS_TOP + 16.0
            );
        }
        svg.push_str("</svg>");
        svg
    }
}

fn row_height(row: &PathsRow) -> f64 {
    if row.reasons.is_empty() && row.mark.is_none() && row.ran.is_none() {
        ROW_HEIGHT
    } else {
        ROW_HEIGHT + BADGE_LINE
    }
}

/// Three keys: the two paths' bars and the highlight of a host at software speed.
fn draw_legend(svg: &mut String) {
    let keys = [
        (ACCELERATED, "accelerated path (run-time detection)"),
        (SOFTWARE, "software path (forced software build)"),
        (HIGHLIGHT, "host at software speed"),
    ];
    let mut x = NAME_X;
    svg.push_str(r#"<g class="legend">"#);
    for (colour, text) in keys {
        let stroke = if colour == HIGHLIGHT {
            format!(r#" stroke="{BAD}""#)
        } else {
            String::new()
        };
        let _ = write!(
            svg,
            r#"<rect x="{x}" y="{ry}" width="14" height="{BAR_HEIGHT}" fill="{colour}"{stroke}/><text x="{tx}" y="{ty}">{text}</text>"#,
            ry = LEGEND_Y - 9.0,
            tx = x + 20.0,
            ty = LEGEND_Y,
        );
        x += 20.0 + text.len() as f64 * 6.6 + 24.0;
    }
    svg.push_str("</g>");
}

/// MB/s on a log₁₀ axis, from the power of ten at or below the smallest
/// value to the one at or above the largest: a 30× gap reads as a gap
/// whether the paths run at 2 or at 2,000 MB/s.
struct LogScale {
    lo: i32,
    hi: i32,
}

impl LogScale {
    fn fit(values: &[f64]) -> Self {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !(min.is_finite() && max.is_finite()) {
            return LogScale { lo: 0, hi: 3 };
        }
        let lo = min.log10().floor() as i32;
        let hi = (max.log10().ceil() as i32).max(lo + 1);
        LogScale { lo, hi }
    }

    fn x(&self, v: f64) -> f64 {
        let t = ((v.log10() - f64::from(self.lo)) / f64::from(self.hi - self.lo)).clamp(0.0, 1.0);
        PLOT_LEFT + t * (PLOT_RIGHT - PLOT_LEFT)
    }

    /// Labelled ticks at each power of ten, with grid lines down to `bottom`.
    fn draw_axis(&self, svg: &mut String, bottom: f64) {
        svg.push_str(r#"<g class="axis">"#);
        for e in self.lo..=self.hi {
            let v = 10f64.powi(e);
            let x = self.x(v);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{bottom}" stroke="#e6e8ec"/><text x="{x:.1}" y="{AXIS_Y}" text-anchor="middle">{label}</text>"##,
                top = AXIS_Y + 4.0,
                label = format::xml_escape(&plain(v)),
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{NAME_X}" y="{AXIS_Y}" fill="{MUTED}">MB/s, log scale</text><text x="{RATIO_X}" y="{AXIS_Y}" fill="{MUTED}">accelerated ÷ software</text></g>"#
        );
    }
}

/// One host: highlight, name, both bars (or what measures a missing one),
/// the ratio, and a line of badges under them.
fn draw_row(svg: &mut String, scale: &LogScale, row: &PathsRow, y: f64, height: f64) {
    let host = format::xml_escape(&row.host);
    let figure = |v: Option<f64>| v.map_or_else(|| "not measured".into(), format::mb_s);
    let ratio = row.ratio.map(|r| format!("{}×", format::significant(r)));
    let summary = format!(
        "{host}: accelerated {}, software {}{}",
        figure(row.accelerated_mb_s),
        figure(row.software_mb_s),
        ratio.as_deref().map(|r| format!(", {r}")).unwrap_or_default()
    );
    let class = if row.at_software_speed {
        "host-row at-software-speed"
    } else {
        "host-row"
    };
    let _ = write!(
        svg,
        r#"<g class="{class}" data-host="{host}"><title>{}</title>"#,
        format::xml_escape(&summary)
    );
    if row.at_software_speed {
        let _ = write!(
            svg,
            r#"<rect x="0" y="{y}" width="{WIDTH}" height="{height}" fill="{HIGHLIGHT}"/><rect x="0" y="{y}" width="4" height="{height}" fill="{BAD}"/>"#
        );
    }
    let shown: String = if row.host.chars().count() > NAME_CHARS {
        row.host.chars().take(NAME_CHARS - 1).chain(['…']).collect()
    } else {
        row.host.clone()
    };
    let greyed = row.mark.is_some();
    let name_fill = if greyed {
        format!(r#" fill="{MUTED}""#)
    } else {
        String::new()
    };
    let _ = write!(
        svg,
        r#"<text x="{NAME_X}" y="{ty}"{name_fill}>{}</text>"#,
        format::xml_escape(&shown),
        ty = y + 20.0
    );
    for (i, (mb_s, colour, fill)) in [
        (row.accelerated_mb_s, ACCELERATED, &row.accelerated_fill),
        (row.software_mb_s, SOFTWARE, &row.software_fill),
    ]
    .into_iter()
    .enumerate()
    {
        let top = y + 5.0 + i as f64 * (BAR_HEIGHT + 2.0);
        draw_bar(svg, scale, (top, colour, greyed), mb_s, fill.as_deref());
    }
    let ratio_fill = if row.at_software_speed { BAD } else { "#1d2330" };
    match ratio {
        Some(r) => {
            let _ = write!(
                svg,
                r#"<text class="ratio" x="{RATIO_X}" y="{ty}" font-weight="600" fill="{ratio_fill}">{}</text>"#,
                format::xml_escape(&r),
                ty = y + 20.0
            );
        }
        None => {
            let _ = write!(
                svg,
                r#"<text class="ratio" x="{RATIO_X}" y="{ty}" fill="{MUTED}">needs both paths</text>"#,
                ty = y + 20.0
            );
        }
    }
    draw_badges(svg, row, y + ROW_HEIGHT - 4.0);
    svg.push_str("</g>");
}

/// A bar from the axis to `mb_s`, its figure beside it (inside, when it
/// would run into the ratio column); or, not measured, what measures it.
fn draw_bar(
    svg: &mut String,
    scale: &LogScale,
    (top, colour, greyed): (f64, &str, bool),
    mb_s: Option<f64>,
    fill: Option<&str>,
) {
    let text_y = top + BAR_HEIGHT - 1.0;
    let Some(v) = mb_s.filter(|v| v.is_finite() && *v > 0.0) else {
        let text = match fill {
            Some(f) => format!("not measured: run {f}"),
            None => "not measured".into(),
        };
        let _ = write!(
            svg,
            r#"<text x="{x}" y="{text_y}" font-size="10" font-style="italic" fill="{MUTED}">{}</text>"#,
            format::xml_escape(&text),
            x = PLOT_LEFT + 4.0
        );
        return;
    };
    let end = scale.x(v).max(PLOT_LEFT + 2.0);
    let opacity = if greyed { r#" fill-opacity="0.35""# } else { "" };
    let label = format::xml_escape(&format::mb_s(v));
    let _ = write!(
        svg,
        r#"<rect x="{PLOT_LEFT}" y="{top:.1}" width="{w:.1}" height="{BAR_HEIGHT}" fill="{colour}"{opacity}/>"#,
        w = end - PLOT_LEFT
    );
    // About 6 px a character at 10 px.
    let inside = end + 6.0 + label.len() as f64 * 6.0 > PLOT_RIGHT;
    let (x, anchor, fill) = if inside && !greyed {
        (end - 4.0, "end", "#fff")
    } else if inside {
        (end - 4.0, "end", "#1d2330")
    } else {
        (end + 4.0, "start", "#1d2330")
    };
    let _ = write!(
        svg,
        r#"<text x="{x:.1}" y="{text_y:.1}" font-size="10" text-anchor="{anchor}" fill="{fill}">{label}</text>"#
    );
}

/// The row's badges from the plot's left edge: the mark, what ran, then
/// each explaining finding; those that do not fit are counted.
fn draw_badges(svg: &mut String, row: &PathsRow, y: f64) {
    let mut badges: Vec<(String, &str)> = Vec::new();
    if let Some(mark) = row.mark {
        badges.push((format!("{mark}: not real performance"), "mark"));
    }
    if let Some(ran) = &row.ran {
        badges.push((format!("ran {ran}"), "critical"));
    }
    badges.extend(row.reasons.iter().map(|b| (b.label.clone(), b.severity)));
    let mut x = PLOT_LEFT;
    for (i, (label, severity)) in badges.iter().enumerate() {
        let width = label.chars().count() as f64 * BADGE_CHAR + 12.0;
        if x + width > WIDTH - 4.0 {
            let _ = write!(
                svg,
                r#"<text x="{x}" y="{ty}" font-size="11" fill="{MUTED}">+{} more</text>"#,
                badges.len() - i,
                ty = y + 12.0
            );
            break;
        }
        let colour = match *severity {
            "critical" => BAD,
            "warning" => "#9a6700",
            "mark" => "#8250df",
            _ => MUTED,
        };
        let label = format::xml_escape(label);
        let _ = write!(
            svg,
            r##"<g class="badge"><title>{label}</title><rect x="{x:.1}" y="{y}" width="{width:.1}" height="{BADGE_HEIGHT}" rx="8" fill="#fff" stroke="{colour}"/><text x="{tx:.1}" y="{ty}" font-size="11" fill="{colour}">{label}</text></g>"##,
            tx = x + 6.0,
            ty = y + 12.0
        );
        x += width + 6.0;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The fleet after a tour: a native host, the emulated Nehalem without
    /// AES-NI (its accelerated request ran software), the software build
    /// (no software-path run of its own), and a hostile name.
    pub(crate) fn fleet() -> PathsChart {
        let row = |host: &str| PathsRow {
            host: host.into(),
            accelerated_mb_s: None,
            software_mb_s: None,
            ratio: None,
            ran: None,
            at_software_speed: false,
            mark: None,
            reasons: Vec::new(),
            accelerated_fill: None,
            software_fill: None,
        };
        let badge = |label: &str, severity| Badge {
            label: label.into(),
            severity,
        };
        PathsChart {
            title: "aes-256-gcm at 16 KiB, 1 thread, encrypt, static key".into(),
            rows: vec![
                PathsRow {
                    accelerated_mb_s: Some(4.92),
                    software_mb_s: Some(4.87),
                    ratio: Some(4.92 / 4.87),
                    ran: Some("software".into()),
                    at_software_speed: true,
                    mark: Some("emulated"),
                    reasons: vec![
                        badge("cpu-lacks: aes", "warning"),
                        badge("cpu-lacks: pclmulqdq", "warning"),
                        badge("cpu-lacks: avx", "warning"),
                    ],
                    ..row("x86-no-aesni")
                },
                PathsRow {
                    accelerated_mb_s: Some(61.2),
                    ran: Some("software".into()),
                    at_software_speed: true,
                    reasons: vec![badge("software-build", "warning")],
                    software_fill: Some("--suite fallback".into()),
                    ..row("x86-soft-build")
                },
                PathsRow {
                    accelerated_mb_s: Some(2391.4),
                    software_mb_s: Some(63.0),
                    ratio: Some(2391.4 / 63.0),
                    ..row("x86-aesni")
                },
                PathsRow {
                    accelerated_mb_s: Some(800.0),
                    software_mb_s: Some(60.0),
                    ratio: Some(800.0 / 60.0),
                    reasons: vec![badge("<b>\"x\"</b> & 'y'", "critical")],
                    ..row(r#"<script>alert("x")</script>&' a host name far longer than the column"#)
                },
            ],
        }
    }

    #[test]
    fn each_host_shows_both_paths_the_ratio_and_its_reasons_as_badges() {
        let svg = fleet().render();
        assert!(svg.starts_with(r#"<svg class="chart paths-chart""#), "{svg}");
        assert_eq!(svg.matches(r#"<g class="host-row"#).count(), 4);
        assert_eq!(svg.matches(r#"class="host-row at-software-speed""#).count(), 2);
        assert!(svg.contains(">38.0×</text>"), "x86-aesni's ratio: {svg}");
        assert!(svg.contains(">cpu-lacks: pclmulqdq</text>"));
        assert!(svg.contains(">emulated: not real performance</text>"));
        assert!(svg.contains(">not measured: run --suite fallback</text>"));
        assert!(svg.contains(">needs both paths</text>"));
        assert!(!svg.contains(" style="), "inline styles are forbidden by the CSP");
        super::super::tests::assert_well_formed(&svg);
    }

    #[test]
    fn hostile_host_names_and_labels_are_escaped() {
        let svg = fleet().render();
        assert!(!svg.contains("<script"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(svg.contains(r#"data-host="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"#));
        super::super::tests::assert_well_formed(&svg);
        let empty = PathsChart {
            title: "<none>".into(),
            rows: Vec::new(),
        }
        .render();
        assert!(empty.contains("No host in this view"));
        super::super::tests::assert_well_formed(&empty);
    }

    #[test]
    fn the_log_axis_spans_the_powers_of_ten_around_the_figures() {
        let s = LogScale::fit(&[4.87, 2391.4]);
        assert_eq!((s.lo, s.hi), (0, 4));
        assert_eq!(s.x(1.0), PLOT_LEFT);
        assert_eq!(s.x(10_000.0), PLOT_RIGHT);
        let one = LogScale::fit(&[100.0]);
        assert_eq!((one.lo, one.hi), (2, 3), "one value: a decade to the right of it");
        let none = LogScale::fit(&[]);
        assert!(none.hi > none.lo);
    }
}
