//! `/modes?host=ID` or `?class=KEY`: how each algorithm's throughput moves
//! with the payload size (11 B → 10 MiB, log scale, one thread) and with the
//! thread count (at one size), for one host or the median of one machine
//! class. Each chart has a table of the same numbers below it (readable
//! without the picture, printable), and `/api/v1/modes` sends every point.
//!
//! Data: [`matrix::host_points`] — the primary-key range of the host(s) in
//! `result_points`, merged by [`curves`]. Without a host or class the page
//! is a chooser. [`params`] reads the query string.

mod curves;
mod params;

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use serde::Serialize;

use super::api::{self, ApiError, FormatParam};
use super::compare::Link;
use super::paging::with_query;
use cipherfleet_core::Point;
use cipherfleet_core::spec::KeyMode;

use super::params::{Choice, choices, enum_choices};
use super::svg::{LineChart, XAxis};
use super::{WebError, WebState, format};
use crate::db::matrix::{self, ClassedHost};
use crate::db::points::LatestResult;
use curves::{Merged, by_algorithm, merge, scaling};
use params::{ModesParams, ModesQuery, Subject};

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/modes", get(page))
        .route("/api/v1/modes", get(api_modes))
}

/// Who the page is about, resolved against the fleet.
struct Resolved {
    label: String,
    /// The host page, or this class in the compare matrix.
    href: String,
    host_ids: Vec<i64>,
    emulated: bool,
    simulated: bool,
    /// Marked (emulated or simulated) hosts of the class left out of its medians.
    left_out: usize,
}

fn resolve(subject: &Subject, hosts: &[ClassedHost]) -> Result<Resolved, WebError> {
    let marks = |h: &ClassedHost| (h.emulated(), h.simulated());
    match subject {
        Subject::Host(id) => {
            let h = hosts
                .iter()
                .find(|h| h.id == *id)
                .ok_or_else(|| WebError::NotFound(format!("no host with id {id}")))?;
            let (emulated, simulated) = marks(h);
            Ok(Resolved {
                label: h.name.clone(),
                href: format!("/hosts/{id}"),
                host_ids: vec![*id],
                emulated,
                simulated,
                left_out: 0,
            })
        }
        Subject::Class(key) => {
            let members: Vec<&ClassedHost> = hosts.iter().filter(|h| h.class().key() == *key).collect();
            let first = members
                .first()
                .ok_or_else(|| WebError::NotFound(format!("no host is in class {key}")))?;
            // Emulated or simulated hosts would drag a real class's medians;
            // they count only when the class has nothing else.
            let real: Vec<&ClassedHost> = members.iter().copied().filter(|h| marks(h) == (false, false)).collect();
            let chosen = if real.is_empty() { members.clone() } else { real };
            Ok(Resolved {
                label: format!(
                    "{} ({} host{})",
                    first.class().label(),
                    chosen.len(),
                    if chosen.len() == 1 { "" } else { "s" }
                ),
                href: with_query("/compare", &[("class", key.clone())]),
                host_ids: chosen.iter().map(|h| h.id).collect(),
                emulated: chosen.iter().any(|h| marks(h).0),
                simulated: chosen.iter().any(|h| marks(h).1),
                left_out: members.len() - chosen.len(),
            })
        }
    }
}

/// A table row of the payload-size table: one algorithm across sizes.
#[derive(Debug, Clone)]
struct SizeRow {
    algorithm: String,
    /// Per size column: display text and the number to sort by.
    cells: Vec<Option<(String, String)>>,
}

#[derive(Debug, Clone)]
struct ScalingView {
    algorithm: String,
    threads: u32,
    mb_s: String,
    mb_s_sort: String,
    speedup: String,
    efficiency: String,
}

#[derive(Template)]
#[template(path = "modes.html")]
struct ModesPage {
    /// Chooser (no subject) or the curves.
    chosen: bool,
    host_choices: Vec<Choice>,
    class_choices: Vec<Choice>,
    subject: Link,
    subject_kind: &'static str,
    host_value: String,
    class_value: String,
    emulated: bool,
    simulated: bool,
    left_out: usize,
    direction_choices: Vec<Choice>,
    path_choices: Vec<Choice>,
    size_choices: Vec<Choice>,
    algorithms: String,
    condition: String,
    scaling_size: String,
    /// Charts built by [`super::svg`], every text in them escaped there.
    size_chart: String,
    scaling_chart: String,
    size_columns: Vec<String>,
    size_rows: Vec<SizeRow>,
    scaling_rows: Vec<ScalingView>,
    has_scaling: bool,
    csv_href: String,
    json_href: String,
}

/// The payload-size chart (one thread, one line per algorithm) and the same
/// numbers as a table: size columns, one row per algorithm.
fn size_section(title: String, merged: &[Merged]) -> (String, Vec<String>, Vec<SizeRow>) {
    let one_thread = by_algorithm(merged, |m| m.threads == 1);
    let mut chart = LineChart::new(title, XAxis::Bytes);
    for (algorithm, pts) in &one_thread {
        chart = chart.series(
            algorithm.name(),
            pts.iter().map(|m| (m.size_bytes as f64, m.throughput_mb_s)),
        );
    }
    let sizes: BTreeSet<u64> = one_thread
        .iter()
        .flat_map(|(_, p)| p.iter().map(|m| m.size_bytes))
        .collect();
    let rows = one_thread
        .iter()
        .map(|(algorithm, pts)| SizeRow {
            algorithm: algorithm.to_string(),
            cells: sizes
                .iter()
                .map(|s| {
                    pts.iter()
                        .find(|m| m.size_bytes == *s)
                        .map(|m| (format::mb_s(m.throughput_mb_s), m.throughput_mb_s.to_string()))
                })
                .collect(),
        })
        .collect();
    let columns = sizes.iter().map(|s| format::bytes(*s)).collect();
    (chart.render(), columns, rows)
}

/// The thread-scaling chart at `size_bytes` and its table with speed-up and efficiency.
fn scaling_section(
    title: String,
    results: &[LatestResult],
    merged: &[Merged],
    size_bytes: u64,
) -> (String, Vec<ScalingView>) {
    let mut chart = LineChart::new(
        title,
        XAxis::Linear {
            label: "threads (independent workers)".into(),
        },
    );
    for (algorithm, pts) in by_algorithm(merged, |m| m.size_bytes == size_bytes) {
        chart = chart.series(
            algorithm.name(),
            pts.iter().map(|m| (f64::from(m.threads), m.throughput_mb_s)),
        );
    }
    let rows = scaling(results, merged, size_bytes)
        .iter()
        .map(|s| ScalingView {
            algorithm: s.algorithm.to_string(),
            threads: s.threads,
            mb_s: format::mb_s(s.throughput_mb_s),
            mb_s_sort: s.throughput_mb_s.to_string(),
            speedup: s
                .speedup
                .map(|v| format!("{}×", format::significant(v)))
                .unwrap_or_else(|| "–".into()),
            efficiency: s.efficiency.map(format::percent).unwrap_or_else(|| "–".into()),
        })
        .collect();
    (chart.render(), rows)
}

async fn page(State(state): State<WebState>, Query(q): Query<ModesQuery>) -> Result<Html<String>, WebError> {
    let params = ModesParams::parse(&q)?;
    let hosts = matrix::hosts(&state.pool).await?;
    let chosen = match &params.subject {
        None => None,
        Some(subject) => {
            // Unknown host or class: 404 (a stale link), not an empty page that looks like missing data.
            let who = resolve(subject, &hosts)?;
            let results = matrix::host_points(&state.pool, &who.host_ids, params.direction, params.path).await?;
            Some((subject, who, results))
        }
    };
    Ok(Html(modes_page(&params, &hosts, chosen).render()?))
}

/// The page over what was read (the subject resolved, with its latest
/// results, or `None` for the chooser): a pure function of the rows.
fn modes_page(
    params: &ModesParams,
    hosts: &[ClassedHost],
    chosen: Option<(&Subject, Resolved, Vec<LatestResult>)>,
) -> ModesPage {
    let host_choices = choices(
        hosts.iter().map(|h| (h.id.to_string(), h.name.clone())),
        &match &params.subject {
            Some(Subject::Host(id)) => id.to_string(),
            _ => String::new(),
        },
    );
    let classes: BTreeMap<String, String> = hosts
        .iter()
        .map(|h| {
            let c = h.class();
            (c.key(), c.label())
        })
        .collect();
    let mut class_list: Vec<(String, String)> = classes.into_iter().collect();
    class_list.sort_by(|a, b| a.1.cmp(&b.1));
    let class_choices = choices(
        class_list,
        match &params.subject {
            Some(Subject::Class(k)) => k,
            _ => "",
        },
    );
    let mut page = ModesPage {
        chosen: false,
        host_choices,
        class_choices,
        subject: Link {
            text: String::new(),
            href: String::new(),
        },
        subject_kind: "",
        host_value: String::new(),
        class_value: String::new(),
        emulated: false,
        simulated: false,
        left_out: 0,
        direction_choices: enum_choices(Some(params.direction)),
        path_choices: enum_choices(Some(params.path)),
        size_choices: Vec::new(),
        algorithms: super::compare::names(&params.algorithms),
        condition: format!("{}, {} path, one static key", params.direction, params.path),
        scaling_size: format::bytes(params.size_bytes),
        size_chart: String::new(),
        scaling_chart: String::new(),
        size_columns: Vec::new(),
        size_rows: Vec::new(),
        scaling_rows: Vec::new(),
        has_scaling: false,
        csv_href: String::new(),
        json_href: String::new(),
    };
    let Some((subject, who, results)) = chosen else {
        return page;
    };
    let merged = merge(&results, &params.algorithms);

    // The chart titles carry the mark too: a chart is often copied without its page.
    let mark = if who.emulated {
        " — emulated: not real performance"
    } else if who.simulated {
        " — simulated data"
    } else {
        ""
    };
    let size_title = format!(
        "{}: throughput by payload size, 1 thread, {}{mark}",
        who.label, params.direction
    );
    let (size_chart, size_columns, size_rows) = size_section(size_title, &merged);
    page.size_columns = size_columns;
    page.size_rows = size_rows;
    let scaling_title = format!(
        "{}: throughput by threads at {}, {}{mark}",
        who.label,
        format::bytes(params.size_bytes),
        params.direction
    );
    let (scaling_chart, scaling_rows) = scaling_section(scaling_title, &results, &merged, params.size_bytes);
    page.has_scaling = !scaling_rows.is_empty();
    page.scaling_rows = scaling_rows;
    // Sizes with a thread-scaling curve (more than one thread count stored).
    let mut with_threads: BTreeMap<u64, BTreeSet<u32>> = BTreeMap::new();
    for m in &merged {
        with_threads.entry(m.size_bytes).or_default().insert(m.threads);
    }
    page.size_choices = choices(
        with_threads
            .keys()
            .copied()
            .chain([params.size_bytes])
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .map(|s| {
                let n = with_threads.get(&s).map_or(0, BTreeSet::len);
                (
                    s.to_string(),
                    format!(
                        "{} ({n} thread count{})",
                        format::bytes(s),
                        if n == 1 { "" } else { "s" }
                    ),
                )
            }),
        &params.size_bytes.to_string(),
    );

    let pairs = params.query_pairs();
    let with_format = |f: &str| {
        let mut p = pairs.clone();
        p.push(("format", f.to_string()));
        with_query("/api/v1/modes", &p)
    };
    page.chosen = true;
    page.subject = Link {
        text: who.label,
        href: who.href,
    };
    page.subject_kind = match subject {
        Subject::Host(_) => "host",
        Subject::Class(_) => "class",
    };
    match subject {
        Subject::Host(id) => page.host_value = id.to_string(),
        Subject::Class(key) => page.class_value = key.clone(),
    }
    page.emulated = who.emulated;
    page.simulated = who.simulated;
    page.left_out = who.left_out;
    page.size_chart = size_chart;
    page.scaling_chart = scaling_chart;
    page.csv_href = with_format("csv");
    page.json_href = with_format("json");
    page
}

/// One point as `/api/v1/modes` sends it.
#[derive(Debug, Serialize)]
struct ModeRow {
    /// Host name or class label.
    subject: String,
    emulated: bool,
    simulated: bool,
    /// The merged point (one static key, no object-storage concurrency).
    #[serde(flatten)]
    point: Point,
    throughput_mb_s: f64,
    latency_p99_ns: f64,
    cv: Option<f64>,
    hosts: usize,
    result_id: Option<i64>,
}

async fn api_modes(
    State(state): State<WebState>,
    Query(q): Query<ModesQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let params = ModesParams::parse(&q)?;
    let subject = params
        .subject
        .as_ref()
        .ok_or_else(|| WebError::BadRequest("give host=ID or class=KEY".into()))?;
    let hosts = matrix::hosts(&state.pool).await?;
    let who = resolve(subject, &hosts)?;
    let results = matrix::host_points(&state.pool, &who.host_ids, params.direction, params.path).await?;
    let rows: Vec<ModeRow> = merge(&results, &params.algorithms)
        .into_iter()
        .map(|m| ModeRow {
            subject: who.label.clone(),
            emulated: who.emulated,
            simulated: who.simulated,
            point: Point {
                algorithm: m.algorithm,
                direction: params.direction,
                size_bytes: m.size_bytes,
                threads: m.threads,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: params.path,
            },
            throughput_mb_s: m.throughput_mb_s,
            latency_p99_ns: m.latency_p99_ns,
            cv: m.cv,
            hosts: m.hosts,
            result_id: m.result_id,
        })
        .collect();
    api::table("modes", &rows, format.format)
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::Path;
    use sqlx::types::Json;

    use super::*;
    use crate::analysis::cells::tests::result;

    fn host(id: i64, name: &str, labels: &[(&str, &str)]) -> ClassedHost {
        ClassedHost {
            id,
            name: name.into(),
            labels: Json(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            arch: Some("aarch64".into()),
            cpu_vendor: Some("ARM".into()),
            cpu_model_name: Some("Neoverse-N1".into()),
            features_usable: Some(vec!["aes".into(), "pmull".into()]),
            build_flavour: Some("accelerated".into()),
            hypervisor: None,
            cpuinfo_foreign: None,
        }
    }

    fn params(pairs: &[(&str, &str)]) -> ModesParams {
        ModesParams::parse(&crate::web::params::query_from(pairs)).unwrap()
    }

    fn at(host_id: i64, algorithm: &str, size_bytes: u64, threads: u32, mb_s: f64) -> LatestResult {
        let mut r = result(host_id, algorithm, mb_s, Path::Accelerated);
        r.point.size_bytes = size_bytes;
        r.point.threads = threads;
        r
    }

    #[test]
    fn without_a_subject_the_page_is_a_chooser() {
        let hosts = [host(1, "arm-1", &[])];
        let page = modes_page(&params(&[]), &hosts, None);
        assert!(!page.chosen);
        assert_eq!(page.host_choices.len(), 1);
        assert_eq!(page.class_choices.len(), 1);
        assert!(page.size_rows.is_empty() && page.size_chart.is_empty());
    }

    #[test]
    fn a_class_leaves_emulated_hosts_out_and_scales_each_host_against_itself() {
        let hosts = [
            host(1, "arm-1", &[]),
            host(2, "arm-2", &[]),
            host(3, "arm-qemu", &[("emulated", "qemu")]),
        ];
        let key = hosts[0].class().key();
        let p = params(&[("class", key.as_str())]);
        let subject = p.subject.clone().unwrap();
        let who = resolve(&subject, &hosts).unwrap();
        assert_eq!((who.host_ids.clone(), who.left_out), (vec![1, 2], 1));
        let results = vec![
            at(1, "aes-256-gcm", 64, 1, 100.0),
            at(2, "aes-256-gcm", 64, 1, 300.0),
            at(1, "aes-256-gcm", 16384, 1, 1000.0),
            at(1, "aes-256-gcm", 16384, 2, 1800.0),
            at(2, "aes-256-gcm", 16384, 1, 120.0),
        ];
        let page = modes_page(&p, &hosts, Some((&subject, who, results)));
        assert!(page.chosen && page.left_out == 1 && !page.emulated);
        assert_eq!(page.subject_kind, "class");
        assert_eq!(page.size_columns, ["64 B", "16 KiB"]);
        let gcm = &page.size_rows[0];
        assert_eq!(gcm.algorithm, "aes-256-gcm");
        // Medians over the two hosts: 200 at 64 B, 560 at 16 KiB.
        let cells: Vec<&str> = gcm.cells.iter().map(|c| c.as_ref().unwrap().0.as_str()).collect();
        assert_eq!(cells, ["200 MB/s", "560 MB/s"]);
        let rows: Vec<(u32, &str, &str)> = page
            .scaling_rows
            .iter()
            .map(|r| (r.threads, r.speedup.as_str(), r.efficiency.as_str()))
            .collect();
        assert_eq!(rows, [(1, "1.00×", "100 %"), (2, "1.80×", "90.0 %")]);
        assert!(page.has_scaling);
        assert!(page.size_chart.contains("<svg") && page.scaling_chart.contains("aes-256-gcm"));
        assert!(page.json_href.starts_with("/api/v1/modes?class="), "{}", page.json_href);
    }
}
