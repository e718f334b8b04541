//! The `/capacity` page: the form with the inputs shown back, and each row
//! as printed (units stated, `data-sort` twins for report.js). Every agent
//! string (class labels carry CPU model names) is escaped by the template.

use askama::Template;

use super::super::format;
use cipherfleet_core::Point;
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{self, KeyMode, Nonce};

use super::super::params::{Choice, choices, enum_choices};
use super::{CapacityRow, Inputs, Measurements, plan_rows};
use crate::analysis::capacity::RateUnit;
use crate::analysis::fill::Fill;

/// One table row as printed; numbers carry `data-sort` twins for report.js.
struct RowView {
    class_key: String,
    class_label: String,
    marked: Option<&'static str>,
    hosts_in_class: usize,
    hosts_measured: usize,
    results: usize,
    measured: bool,
    per_core: String,
    /// The per-core rate in operations per second, when the target is in ops/s.
    per_core_ops: String,
    per_core_sort: String,
    spread: String,
    path_used: String,
    /// The badge's status class: `accelerated` when it ran as asked, else the
    /// worst path that ran (`partial`, `software`).
    path_status: &'static str,
    scaling: String,
    scaling_curve: String,
    linear_assumed: bool,
    cores_per_host: String,
    cores_needed: String,
    cores_needed_sort: String,
    hosts_needed: String,
    hosts_needed_sort: String,
    recommended: String,
    recommended_lead: String,
    warnings: Vec<String>,
    /// Scaling assumed linear, or nothing measured: what measures it.
    fill: Option<String>,
}

/// What measures `r`'s algorithm at its point on one thread and on all of
/// a host's cores (two when the count is unknown): the suite or matrix that
/// replaces an assumed scaling with a measured one.
fn fill(r: &CapacityRow) -> String {
    let at = |threads: u32| Point {
        algorithm: r.algorithm,
        direction: r.direction,
        size_bytes: r.size_bytes,
        threads,
        concurrency: None,
        key_mode: KeyMode::Static,
        path: r.path,
        nonce: Nonce::Counter,
        provider: cipherfleet_core::provider::Provider::RustCrypto,
    };
    let cores = r.cores_per_host.unwrap_or(2).max(2);
    Fill::of(&[at(1), at(cores)]).expect("two points").command()
}

/// The badge class for what a row's results ran (`used`, space separated):
/// `accelerated` (as asked), `partial`, or `software` for a fallback.
fn path_status(used: &str, asked: Path) -> &'static str {
    // Best first: the largest is the worst that ran.
    let worst = used.split_whitespace().filter_map(|p| p.parse::<PathUsed>().ok()).max();
    match worst {
        Some(PathUsed::Partial) => "partial",
        Some(p) if p.differs_from(asked) => "software",
        _ => "accelerated",
    }
}

fn text_or_dash<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

impl RowView {
    fn new(r: &CapacityRow, unit: RateUnit) -> Self {
        let measured = r.per_core_mb_s.is_some();
        let spread = match (r.per_core_min_mb_s, r.per_core_max_mb_s) {
            (Some(lo), Some(hi)) if r.hosts_measured > 1 => {
                format!(
                    "{}–{} MB/s over {} hosts",
                    format::significant(lo),
                    format::significant(hi),
                    r.hosts_measured
                )
            }
            _ => String::new(),
        };
        let scaling = match (r.run_threads, r.efficiency, r.scaling_assumed_linear) {
            (_, _, Some(true)) => "100 % assumed (linear)".to_string(),
            (Some(t), Some(e), _) => format!("{} at {t} threads", format::percent(e)),
            _ => "–".into(),
        };
        let curve: Vec<String> = r
            .scaling
            .split_whitespace()
            .filter_map(|pair| {
                let (t, e) = pair.split_once(':')?;
                Some(format!("{t} thr: {}", format::percent(e.parse().ok()?)))
            })
            .collect();
        // One measured count is already the headline; the curve adds something only beyond that.
        let scaling_curve = if curve.len() > 1 {
            curve.join(", ")
        } else {
            String::new()
        };
        let recommended_lead = match (&r.runner_up_algorithm, r.recommended_ratio) {
            (Some(other), Some(x)) => format!("{}× faster than {other}", format::significant(x)),
            _ if r.recommended_algorithm.is_some() => "the only authenticated algorithm measured".into(),
            _ => String::new(),
        };
        RowView {
            class_key: r.class_key.clone(),
            class_label: r.class_label.clone(),
            marked: match (r.emulated, r.simulated) {
                (true, _) => Some("emulated"),
                (false, true) => Some("simulated"),
                _ => None,
            },
            hosts_in_class: r.hosts_in_class,
            hosts_measured: r.hosts_measured,
            results: r.results,
            measured,
            per_core: text_or_dash(r.per_core_mb_s, format::mb_s),
            per_core_ops: match (unit, r.per_core_mb_s) {
                (RateUnit::Ops, Some(mb_s)) => {
                    format!("{} ops/s", format::significant(mb_s * 1e6 / r.size_bytes as f64))
                }
                _ => String::new(),
            },
            per_core_sort: r.per_core_mb_s.map(|v| v.to_string()).unwrap_or_default(),
            spread,
            path_used: r.path_used.clone(),
            path_status: path_status(&r.path_used, r.path),
            scaling,
            scaling_curve,
            linear_assumed: r.scaling_assumed_linear == Some(true),
            cores_per_host: text_or_dash(r.cores_per_host, |c| c.to_string()),
            // Cores are bought whole: round up, keep the exact figure in the JSON.
            cores_needed: text_or_dash(r.cores_needed, |c| format!("{}", c.ceil())),
            cores_needed_sort: r.cores_needed.map(|v| v.to_string()).unwrap_or_default(),
            hosts_needed: text_or_dash(r.hosts_needed, |h| h.to_string()),
            hosts_needed_sort: r.hosts_needed.map(|v| v.to_string()).unwrap_or_default(),
            recommended: match (r.recommended_algorithm, r.emulated || r.simulated) {
                (Some(a), _) => {
                    let mb_s = r.recommended_per_core_mb_s.map(format::mb_s).unwrap_or_default();
                    format!("{a} ({mb_s} per core)")
                }
                (None, true) => "not ranked: these timings are not real performance".into(),
                (None, false) => "–".into(),
            },
            recommended_lead,
            warnings: r
                .warnings
                .split("; ")
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect(),
            fill: (!measured || r.scaling_assumed_linear == Some(true)).then(|| fill(r)),
        }
    }
}

#[derive(Template)]
#[template(path = "capacity.html")]
pub(super) struct CapacityPage {
    inputs: Inputs,
    target_text: String,
    target_mb_s: String,
    provision_mb_s: String,
    size_text: String,
    units: Vec<Choice>,
    sizes: Vec<Choice>,
    algorithms: Vec<Choice>,
    directions: Vec<Choice>,
    paths: Vec<Choice>,
    providers: Vec<Choice>,
    query: String,
    rows: Vec<RowView>,
    any_hosts: bool,
    excluded: usize,
}

/// The page for `inputs` over what was measured.
pub(super) fn page_view(inputs: Inputs, measurements: &Measurements) -> CapacityPage {
    let (rows, excluded) = plan_rows(measurements, &inputs);
    // The payload sizes of the benchmark matrix, and the one asked for.
    let mut sizes: Vec<u64> = spec::SIZES.to_vec();
    if !sizes.contains(&inputs.size_bytes) {
        sizes.push(inputs.size_bytes);
        sizes.sort_unstable();
    }
    CapacityPage {
        target_text: format!("{} {}", format::significant(inputs.target), inputs.unit.symbol()),
        target_mb_s: format::mb_s(inputs.target_mb_s),
        provision_mb_s: format::mb_s(inputs.provision_mb_s),
        size_text: format::bytes(inputs.size_bytes),
        units: choices(
            RateUnit::ALL.map(|u| (u.as_str().to_string(), u.symbol().to_string())),
            inputs.unit.as_str(),
        ),
        sizes: choices(
            sizes.iter().map(|s| (s.to_string(), format::bytes(*s))),
            &inputs.size_bytes.to_string(),
        ),
        algorithms: choices(
            cipherfleet_core::algorithm::ALL
                .iter()
                .map(|a| (a.name().to_string(), a.name().to_string())),
            inputs.algorithm.name(),
        ),
        directions: enum_choices(Some(inputs.direction)),
        paths: enum_choices(Some(inputs.path)),
        providers: enum_choices(Some(inputs.provider)),
        query: inputs.query(),
        rows: rows.iter().map(|r| RowView::new(r, inputs.unit)).collect(),
        any_hosts: !measurements.hosts.is_empty(),
        excluded,
        inputs,
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::fixtures::{class_host, point};
    use super::*;
    use crate::web::capacity::CapacityQuery;

    fn query(pairs: &[(&str, &str)]) -> CapacityQuery {
        crate::web::params::query_from(pairs)
    }

    #[test]
    fn a_class_without_the_algorithm_is_listed_as_not_measured() {
        let m = Measurements {
            hosts: vec![class_host(1, "CPU", 4, false)],
            points: vec![point(1, "chacha20-poly1305", 1, 300.0)],
        };
        let (rows, _) = plan_rows(&m, &query(&[]).inputs().unwrap());
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].per_core_mb_s, rows[0].cores_needed, rows[0].hosts_needed),
            (None, None, None)
        );
        assert_eq!(
            rows[0].recommended_algorithm.map(|a| a.name()),
            Some("chacha20-poly1305")
        );
        let view = RowView::new(&rows[0], RateUnit::Gbit);
        assert_eq!((view.per_core.as_str(), view.hosts_needed.as_str()), ("–", "–"));
        assert_eq!(view.recommended_lead, "the only authenticated algorithm measured");
    }

    #[test]
    fn the_path_badge_names_the_worst_that_ran() {
        use Path::{Accelerated, Software};
        let cases = [
            ("accelerated", Accelerated, "accelerated"),
            ("accelerated partial", Accelerated, "partial"),
            ("accelerated partial software", Accelerated, "software"),
            ("software", Software, "accelerated"),
            ("accelerated", Software, "software"),
            ("", Accelerated, "accelerated"),
        ];
        for (used, asked, want) in cases {
            assert_eq!(path_status(used, asked), want, "{used:?} for {asked}");
        }
    }

    #[test]
    fn agent_text_is_escaped_in_the_page() {
        let hostile = "<script>alert(1)</script>\" onmouseover=\"x";
        let mut h = class_host(1, hostile, 2, true);
        h.arch = Some("<img src=x onerror=alert(2)>".into());
        let m = Measurements {
            hosts: vec![h],
            points: vec![point(1, "aes-256-gcm", 1, 100.0)],
        };
        let html = page_view(query(&[("include", "emulated")]).inputs().unwrap(), &m)
            .render()
            .unwrap();
        // The text is there, as text: no raw tag or attribute break-out.
        assert!(html.contains("script&#62;alert(1)"), "{html}");
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("<img src=x"), "{html}");
        assert!(!html.contains("\" onmouseover"), "{html}");
        assert!(!html.contains(" style="), "CSP forbids inline styles");
    }

    #[test]
    fn an_ops_target_shows_the_per_core_rate_in_ops() {
        let m = Measurements {
            hosts: vec![class_host(1, "CPU", 4, false)],
            points: vec![point(1, "aes-256-gcm", 1, 22.0)],
        };
        let inputs = query(&[("unit", "ops"), ("size", "11"), ("target", "1e6")])
            .inputs()
            .unwrap();
        let (rows, _) = plan_rows(&m, &inputs);
        // 22 MB/s of 11-byte records is 2 M records/s per core; 1 M/s needs half a core.
        assert_eq!(RowView::new(&rows[0], inputs.unit).per_core_ops, "2000000 ops/s");
        assert_eq!(rows[0].cores_needed, Some(0.5 * 1.3));
        assert_eq!(RowView::new(&rows[0], RateUnit::Mb).per_core_ops, "");
    }
}
