//! Server-rendered SVG line charts: throughput against payload size (log₂
//! axis), against threads (linear) or over time, one line per series.
//!
//! The output is a complete `<svg class="chart">` element, built as a string
//! so that pages embed it with askama's `|safe`. That is only sound because
//! every piece of text placed in it — titles, series names (hostnames,
//! algorithm names), tick labels — goes through [`format::xml_escape`] here.
//! No `style=` attributes: the page's Content-Security-Policy forbids inline
//! styles, so colours and dashes are presentation attributes. Black axes,
//! dash patterns and marker shapes keep the lines apart in a grey-scale print.
//!
//! - [`ticks`]: the axes' scales and their labelled ticks.
//! - [`look`]: each series' colour, dash and marker.
//! - [`paths`]: `/fallback`'s chart, both paths per host on a log axis.

mod look;
pub mod paths;
mod ticks;

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::format;
use look::Look;
use ticks::{XScale, YScale, plain};

/// How the x axis maps values.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    /// Linear from the smallest to the largest x (threads, counts); `label` names the unit.
    Linear { label: String },
    /// Payload sizes in bytes on a log₂ scale, ticks at powers of two printed
    /// with [`format::bytes`]. Points with x ≤ 0 cannot be placed and are skipped.
    Bytes,
    /// Unix timestamps in seconds (see [`time_x`]), ticks in UTC.
    Time,
}

/// One line of the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// `(x, y)` in axis units; sorted by x when drawn, non-finite values skipped.
    pub points: Vec<(f64, f64)>,
}

/// A line chart, configured by chaining and turned into markup by [`LineChart::render`].
#[derive(Clone, Debug)]
pub struct LineChart {
    title: String,
    x: XAxis,
    /// Axis title, e.g. `MB/s (10^6 bytes/s)`.
    y_label: String,
    /// Unit after values in tooltips, e.g. `MB/s`.
    y_unit: String,
    series: Vec<Series>,
}

/// The x coordinate of a timestamp on an [`XAxis::Time`] chart.
pub fn time_x(t: DateTime<Utc>) -> f64 {
    t.timestamp() as f64 + f64::from(t.timestamp_subsec_millis()) / 1e3
}

// Geometry in viewBox units; the CSS scales the whole chart to its container.
const WIDTH: f64 = 720.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 34.0;
const PLOT_WIDTH: f64 = WIDTH - LEFT - RIGHT;
/// The x axis, at the foot of the plot.
const BOTTOM: f64 = TOP + PLOT_HEIGHT;
/// Below the plot: tick labels and the axis title.
const AXIS_BELOW: f64 = 48.0;
const LEGEND_ROW: f64 = 18.0;
const LEGEND_COLUMN: f64 = 205.0;
/// Legend names are cut here; the full name stays in the entry's `<title>`.
const LEGEND_CHARS: usize = 28;

/// A series ready to draw: its name and its drawable points, sorted by x.
type Drawable<'a> = (&'a str, Vec<(f64, f64)>);

impl LineChart {
    /// A chart titled `title`; the y axis defaults to throughput in MB/s.
    pub fn new(title: impl Into<String>, x: XAxis) -> Self {
        LineChart {
            title: title.into(),
            x,
            y_label: "MB/s (10^6 bytes/s)".into(),
            y_unit: "MB/s".into(),
            series: Vec::new(),
        }
    }

    /// Another y quantity: `label` titles the axis, `unit` follows values in tooltips.
    pub fn y_axis(mut self, label: impl Into<String>, unit: impl Into<String>) -> Self {
        self.y_label = label.into();
        self.y_unit = unit.into();
        self
    }

    /// Adds a line; its colour, dash and marker follow from its position.
    pub fn series(mut self, name: impl Into<String>, points: impl IntoIterator<Item = (f64, f64)>) -> Self {
        self.series.push(Series {
            name: name.into(),
            points: points.into_iter().collect(),
        });
        self
    }

    /// The complete `<svg>` element.
    pub fn render(&self) -> String {
        let series = self.drawable_series();
        let mut svg = String::with_capacity(4096);
        self.open_with_title(&mut svg, series.len());
        let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        if all.is_empty() {
            draw_no_data(&mut svg);
        } else {
            let plot = Plot {
                x: XScale::fit(&self.x, &all),
                y: YScale::fit(&all),
            };
            // Grid first, so that the axes and the lines are drawn over it.
            plot.draw_grid(&mut svg);
            self.draw_axes(&mut svg, &plot);
            for (i, (name, points)) in series.iter().enumerate() {
                self.draw_series(&mut svg, &plot, Look::of(i), name, points);
            }
            draw_legend(&mut svg, &series);
        }
        svg.push_str("</svg>");
        svg
    }

    /// Every series with the points that can be drawn: finite, and x > 0 on the log axis.
    fn drawable_series(&self) -> Vec<Drawable<'_>> {
        self.series
            .iter()
            .map(|s| {
                let mut kept: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite() && (self.x != XAxis::Bytes || *x > 0.0))
                    .collect();
                kept.sort_by(|a, b| a.0.total_cmp(&b.0));
                (s.name.as_str(), kept)
            })
            .collect()
    }

    /// The opening tag, sized for a legend of `entries`, and the chart's title.
    fn open_with_title(&self, svg: &mut String, entries: usize) {
        // The legend grows downwards, so the chart's height depends on how many series it names.
        let legend_rows = entries.div_ceil(legend_columns());
        let height = TOP + PLOT_HEIGHT + AXIS_BELOW + legend_rows as f64 * LEGEND_ROW + 8.0;
        let title = format::xml_escape(&self.title);
        let _ = write!(
            svg,
            r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{title}"><title>{title}</title>"#
        );
        let _ = write!(svg, r#"<text x="{LEFT}" y="20" font-weight="600">{title}</text>"#);
    }

    /// Both axes with their ticks, tick labels and titles.
    fn draw_axes(&self, svg: &mut String, plot: &Plot) {
        let _ = write!(
            svg,
            r##"<g class="axis"><line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{BOTTOM}" stroke="#222"/><line x1="{LEFT}" x2="{r}" y1="{BOTTOM}" y2="{BOTTOM}" stroke="#222"/>"##,
            r = WIDTH - RIGHT
        );
        for &t in &plot.y.ticks {
            let _ = write!(
                svg,
                r##"<line x1="{a}" x2="{LEFT}" y1="{y:.1}" y2="{y:.1}" stroke="#222"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{label}</text>"##,
                a = LEFT - 4.0,
                tx = LEFT - 7.0,
                y = plot.py(t),
                ty = plot.py(t) + 4.0,
                label = format::xml_escape(&plain(t)),
            );
        }
        for (t, label) in &plot.x.ticks {
            let x = plot.px(*t);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{BOTTOM}" y2="{b}" stroke="#222"/><text x="{tx:.1}" y="{ty}" text-anchor="middle">{label}</text>"##,
                b = BOTTOM + 4.0,
                tx = label_x(x, label),
                ty = BOTTOM + 17.0,
                label = format::xml_escape(label),
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{cx}" y="{ty}" text-anchor="middle">{xl}</text><text transform="translate(16 {cy}) rotate(-90)" text-anchor="middle">{yl}</text></g>"#,
            cx = LEFT + PLOT_WIDTH / 2.0,
            ty = BOTTOM + 36.0,
            xl = format::xml_escape(&self.x.title()),
            cy = TOP + PLOT_HEIGHT / 2.0,
            yl = format::xml_escape(&self.y_label),
        );
    }

    /// One series as a group: its line, and a marker per point whose
    /// tooltip gives the exact figures, so a reader can check the chart
    /// against the table. The group's `<title>` names the line for screen
    /// readers and on hover.
    fn draw_series(&self, svg: &mut String, plot: &Plot, look: Look, name: &str, points: &[(f64, f64)]) {
        let name = format::xml_escape(name);
        let _ = write!(svg, r#"<g class="series"><title>{name}</title>"#);
        if points.len() > 1 {
            let coords: Vec<String> = points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", plot.px(x), plot.py(y)))
                .collect();
            let _ = write!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{}/>"#,
                coords.join(" "),
                look.colour,
                look.dash_attribute()
            );
        }
        for &(x, y) in points {
            let tip = format!(
                "{name}: {} → {} {}",
                self.x.value(x),
                exact(y),
                format::xml_escape(&self.y_unit)
            );
            svg.push_str(&look.marker(plot.px(x), plot.py(y), &tip));
        }
        svg.push_str("</g>");
    }
}

/// The plot's scales: where a point lands, in viewBox units.
struct Plot {
    x: XScale,
    y: YScale,
}

impl Plot {
    fn px(&self, x: f64) -> f64 {
        LEFT + self.x.fraction(x) * PLOT_WIDTH
    }

    fn py(&self, y: f64) -> f64 {
        TOP + PLOT_HEIGHT - self.y.fraction(y) * PLOT_HEIGHT
    }

    /// Light lines across the plot at every tick of both axes.
    fn draw_grid(&self, svg: &mut String) {
        svg.push_str(r#"<g class="grid">"#);
        for &t in &self.y.ticks {
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{r}" y1="{y:.1}" y2="{y:.1}" stroke="#e6e8ec"/>"##,
                r = WIDTH - RIGHT,
                y = self.py(t)
            );
        }
        for &(t, _) in &self.x.ticks {
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{BOTTOM}" stroke="#e6e8ec"/>"##,
                x = self.px(t)
            );
        }
        svg.push_str("</g>");
    }
}

/// A dashed empty frame saying so, in place of the plot.
fn draw_no_data(svg: &mut String) {
    let _ = write!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" fill="none" stroke="#999" stroke-dasharray="4 4"/><text x="{cx}" y="{cy}" text-anchor="middle" fill="#5d6678">No data for this view</text>"##,
        cx = LEFT + PLOT_WIDTH / 2.0,
        cy = TOP + PLOT_HEIGHT / 2.0,
    );
}

/// Roughly half the width of an x tick label of the charts' 12 px text.
fn half_width(label: &str) -> f64 {
    label.chars().count() as f64 * 3.5
}

/// Where a tick label centred under `x` is drawn: moved in just enough to
/// stay inside the chart, so the last time label (`12-05 08:00`) is not cut.
fn label_x(x: f64, label: &str) -> f64 {
    let half = half_width(label);
    x.min(WIDTH - 2.0 - half).max(half + 2.0)
}

/// Legend entries side by side under the plot.
fn legend_columns() -> usize {
    (PLOT_WIDTH / LEGEND_COLUMN).floor().max(1.0) as usize
}

/// The legend, in columns under the axis title: each entry a short stretch
/// of the line with its marker, and the name, cut to fit.
fn draw_legend(svg: &mut String, series: &[Drawable<'_>]) {
    let columns = legend_columns();
    svg.push_str(r#"<g class="legend">"#);
    for (i, (name, _)) in series.iter().enumerate() {
        let look = Look::of(i);
        let x = LEFT + (i % columns) as f64 * LEGEND_COLUMN;
        let y = BOTTOM + AXIS_BELOW + (i / columns) as f64 * LEGEND_ROW + 4.0;
        let shown: String = if name.chars().count() > LEGEND_CHARS {
            name.chars().take(LEGEND_CHARS - 1).chain(['…']).collect()
        } else {
            name.to_string()
        };
        let _ = write!(
            svg,
            r#"<g><title>{full}</title><line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" stroke="{c}" stroke-width="2"{d}/>{m}<text x="{tx}" y="{ty}">{shown}</text></g>"#,
            full = format::xml_escape(name),
            x2 = x + 24.0,
            c = look.colour,
            d = look.dash_attribute(),
            m = look.marker(x + 12.0, y, ""),
            tx = x + 30.0,
            ty = y + 4.0,
            shown = format::xml_escape(&shown),
        );
    }
    svg.push_str("</g>");
}

impl XAxis {
    fn title(&self) -> String {
        match self {
            XAxis::Linear { label } => label.clone(),
            XAxis::Bytes => "payload size (bytes per operation, log scale)".into(),
            XAxis::Time => "time (UTC)".into(),
        }
    }

    /// An x value as a tooltip states it.
    fn value(&self, x: f64) -> String {
        match self {
            XAxis::Linear { .. } => plain(x),
            XAxis::Bytes => format::bytes(x.round() as u64),
            XAxis::Time => DateTime::<Utc>::from_timestamp(x as i64, 0)
                .map(format::timestamp)
                .unwrap_or_else(|| plain(x)),
        }
    }
}

/// A measured value as a tooltip gives it: six significant figures, not the tables' three.
fn exact(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = v.abs().log10().floor() as i32;
    let decimals = (5 - digits).max(0) as usize;
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that every tag is closed in order and that no raw `<` or `&`
    /// reaches text: the chart is well-formed XML as far as a page can tell.
    pub(super) fn assert_well_formed(svg: &str) {
        let mut open: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                        .iter()
                        .any(|e| entity.starts_with(e)),
                    "bare & in {text:?}"
                );
            }
            let end = rest[start..].find('>').expect("unterminated tag") + start;
            let tag = &rest[start + 1..end];
            assert!(!tag.contains('<'), "'<' inside a tag: {tag:?}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop().as_deref(), Some(name), "closing </{name}> out of order");
            } else if !tag.ends_with('/') {
                open.push(tag.split_whitespace().next().unwrap_or_default().to_string());
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert!(rest.is_empty(), "text after </svg>: {rest:?}");
    }

    fn sizes_chart() -> LineChart {
        LineChart::new("Throughput by payload size", XAxis::Bytes)
            .series(
                "aes-256-gcm",
                [(11.0, 40.5), (16384.0, 2391.4), (10.0 * 1048576.0, 2600.0)],
            )
            .series("des-ede3-cbc", [(16384.0, 25.0), (11.0, 9.0)])
    }

    #[test]
    fn a_chart_is_one_well_formed_svg_with_title_axes_and_legend() {
        let svg = sizes_chart().render();
        assert!(svg.starts_with(r#"<svg class="chart""#), "{svg}");
        assert!(svg.contains(r#"role="img""#));
        assert!(svg.contains("<title>Throughput by payload size</title>"));
        assert!(svg.contains("MB/s (10^6 bytes/s)"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        // Legend entries carry the names, tooltips the exact values.
        assert!(svg.contains(">des-ede3-cbc</text>"));
        assert!(
            svg.contains("<title>aes-256-gcm: 16 KiB → 2391.40 MB/s</title>"),
            "{svg}"
        );
        assert!(!svg.contains("style="), "inline styles are forbidden by the CSP");
        assert_well_formed(&svg);
    }

    #[test]
    fn hostile_series_names_are_escaped_everywhere() {
        let evil = r#"<script>alert("x")</script>&'"#;
        let svg = LineChart::new(evil, XAxis::Linear { label: evil.into() })
            .y_axis(evil, evil)
            .series(evil, [(1.0, 1.0), (2.0, 3.0)])
            .render();
        assert!(!svg.contains("<script"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"));
        assert_well_formed(&svg);
    }

    #[test]
    fn payload_sizes_are_labelled_in_binary_units() {
        let svg = sizes_chart().render();
        // 11 B … 10 MiB: 16 B to 8 MiB fit, every second power labelled.
        for label in [
            "16 B", "64 B", "256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB",
        ] {
            assert!(
                svg.contains(&format!(r#"text-anchor="middle">{label}</text>"#)),
                "{label} missing"
            );
        }
        assert!(!svg.contains(">8 MiB</text>"));
    }

    #[test]
    fn empty_data_draws_a_no_data_chart() {
        for chart in [
            LineChart::new("Nothing", XAxis::Bytes),
            // A series whose only point cannot sit on a log axis counts as empty.
            LineChart::new("Nothing", XAxis::Bytes).series("x", [(0.0, 5.0), (f64::NAN, 1.0)]),
        ] {
            let svg = chart.render();
            assert!(svg.contains("No data for this view"), "{svg}");
            assert!(!svg.contains("<polyline"));
            assert_well_formed(&svg);
        }
    }

    #[test]
    fn a_single_point_is_drawn_as_a_marker_inside_the_plot() {
        let svg = LineChart::new(
            "One",
            XAxis::Linear {
                label: "threads".into(),
            },
        )
        .series("aes-128-ctr", [(4.0, 100.0)])
        .render();
        assert!(!svg.contains("<polyline"));
        assert!(svg.contains(r#"<circle cx="384.0""#), "centred: {svg}");
        assert_well_formed(&svg);
    }

    #[test]
    fn time_tooltips_state_the_utc_minute() {
        let day = 86400.0;
        let t = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let svg = LineChart::new("History", XAxis::Time)
            .series("host-a", [(time_x(t), 10.0), (time_x(t) + day, 12.0)])
            .render();
        assert!(
            svg.contains("<title>host-a: 2023-11-14 22:13 UTC → 10.0000 MB/s</title>"),
            "{svg}"
        );
        assert!(
            svg.contains(r#"text-anchor="middle">11-15 00:00</text>"#),
            "a tick at midnight: {svg}"
        );
        assert_well_formed(&svg);
    }

    #[test]
    fn tick_labels_at_the_edges_stay_inside_the_chart() {
        // The host page's chart: its last tick falls on the plot's right end.
        let t0 = DateTime::<Utc>::from_timestamp(1_764_900_000, 0).unwrap();
        let svg = LineChart::new("Key algorithms over time", XAxis::Time)
            .series("aes-256-gcm", [(time_x(t0), 10.0), (time_x(t0) + 6.0 * 3600.0, 12.0)])
            .render();
        let labels: Vec<(f64, &str)> = svg
            .split(r#"<text x=""#)
            .skip(1)
            .filter_map(|t| {
                let (x, rest) = t.split_once('"')?;
                let label = rest.strip_prefix(&format!(r#" y="{}" text-anchor="middle">"#, BOTTOM + 17.0))?;
                Some((x.parse().ok()?, label.split('<').next()?))
            })
            .collect();
        assert!(labels.len() >= 3, "{svg}");
        for (x, label) in labels {
            assert!(
                x - half_width(label) >= 0.0 && x + half_width(label) <= WIDTH,
                "{label:?} at {x} runs past the chart"
            );
        }
        assert_eq!(
            label_x(400.0, "12-05 08:00"),
            400.0,
            "a label in the middle stays centred"
        );
    }

    #[test]
    fn series_beyond_the_palette_differ_by_dash() {
        let mut chart = LineChart::new(
            "Many",
            XAxis::Linear {
                label: "threads".into(),
            },
        );
        for i in 0..9 {
            chart = chart.series(format!("s{i}"), [(1.0, i as f64), (2.0, i as f64 + 1.0)]);
        }
        let svg = chart.render();
        assert_eq!(
            svg.matches(r#"stroke-dasharray="6 3""#).count(),
            4,
            "two lines and their legend keys"
        );
        assert_well_formed(&svg);
    }
}
