//! `/modes?host=ID` or `?class=KEY`: how each algorithm's throughput moves
//! with the payload size (11 B → 10 MiB, log scale, one thread) and with the
//! thread count (at one size), for one host or the median of one machine
//! class. Each chart has a table of the same numbers below it (readable
//! without the picture, printable), and `/api/v1/modes` sends every point.
//!
//! Data: [`matrix::host_points`] — the primary-key range of the host(s) in
//! `result_points` (another provider's in `provider_points`), merged by
//! [`curves`] — and the fleet as the chooser lists it (host names, and the
//! hosts grouped by class). Without a host or class the page is a chooser.
//! [`params`] reads the query string; [`api`] is `/api/v1/modes`.

mod api;
mod curves;
mod params;

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;

use super::compare::Link;
use super::paging::with_query;
use cipherfleet_core::Point;
use cipherfleet_core::spec::{KeyMode, Nonce};

use super::params::{Choice, choices, enum_choices};
use super::svg::{LineChart, XAxis};
use super::{WebError, WebState, format};
use crate::analysis::fill::Fill;
use crate::analysis::scenarios::Scenario;
use crate::domain::latest::LatestResult;
use crate::report::matrix::{self, ClassGroup};
use curves::{Merged, by_algorithm, merge, scaling};
use params::{ModesParams, ModesQuery, Subject};

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/modes", get(page))
        .route("/api/v1/modes", get(api::modes))
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

/// The fleet as the page lists and resolves it.
struct Fleet {
    /// Every host's id and name, by name.
    names: Vec<(i64, String)>,
    groups: Vec<ClassGroup>,
}

impl Fleet {
    async fn read(state: &WebState) -> Result<Fleet, WebError> {
        let (names, groups) = tokio::try_join!(matrix::host_names(&state.pool), matrix::class_groups(&state.pool))?;
        Ok(Fleet { names, groups })
    }
}

fn resolve(subject: &Subject, fleet: &Fleet) -> Result<Resolved, WebError> {
    let marks = |g: &ClassGroup| (g.emulated(), g.simulated());
    match subject {
        Subject::Host(id) => {
            let (_, name) = fleet
                .names
                .iter()
                .find(|(h, _)| h == id)
                .ok_or_else(|| WebError::NotFound(format!("no host with id {id}")))?;
            let (emulated, simulated) = fleet
                .groups
                .iter()
                .find(|g| g.host_ids.binary_search(id).is_ok())
                .map(marks)
                .unwrap_or_default();
            Ok(Resolved {
                label: name.clone(),
                href: format!("/hosts/{id}"),
                host_ids: vec![*id],
                emulated,
                simulated,
                left_out: 0,
            })
        }
        Subject::Class(key) => {
            let members: Vec<&ClassGroup> = fleet.groups.iter().filter(|g| g.class().key() == *key).collect();
            let first = members
                .first()
                .ok_or_else(|| WebError::NotFound(format!("no host is in class {key}")))?;
            // Emulated or simulated hosts would drag a real class's medians;
            // they count only when the class has nothing else.
            let real: Vec<&ClassGroup> = members.iter().copied().filter(|g| marks(g) == (false, false)).collect();
            let chosen = if real.is_empty() { members.clone() } else { real };
            let count = |groups: &[&ClassGroup]| groups.iter().map(|g| g.host_ids.len()).sum::<usize>();
            let mut host_ids: Vec<i64> = chosen.iter().flat_map(|g| g.host_ids.iter().copied()).collect();
            host_ids.sort_unstable();
            Ok(Resolved {
                label: format!(
                    "{} ({} host{})",
                    first.class().label(),
                    count(&chosen),
                    if count(&chosen) == 1 { "" } else { "s" }
                ),
                href: with_query("/compare", &[("class", key.clone())]),
                host_ids,
                emulated: chosen.iter().any(|g| marks(g).0),
                simulated: chosen.iter().any(|g| marks(g).1),
                left_out: count(&members) - count(&chosen),
            })
        }
    }
}

/// A table row of the payload-size table: one algorithm across sizes.
#[derive(Debug, Clone)]
struct SizeRow {
    algorithm: String,
    /// Per size column; `None` where nothing was measured.
    cells: Vec<Option<SizeCell>>,
}

/// One algorithm at one size.
#[derive(Debug, Clone)]
struct SizeCell {
    text: String,
    /// The number to sort by.
    sort: String,
    /// Too few samples behind the figure: marked in the cell.
    low_samples: bool,
}

/// A row of the memory table: one algorithm's cipher state, its peak RSS
/// per payload size, and its heap use per operation while measuring.
#[derive(Debug, Clone)]
struct MemoryRow {
    algorithm: String,
    /// The keyed cipher state; the same at every size, so one figure.
    state: String,
    state_sort: String,
    /// Peak RSS per size column (the payload buffers grow with the size).
    rss: Vec<String>,
    /// The most any size allocated per operation: `0 allocs/op` when none did.
    heap: String,
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
    provider_choices: Vec<Choice>,
    /// Whose figures these are ([`format::measured_on`]).
    measured_on: &'static str,
    /// The built-in provider's: the page points to the others.
    builtin: bool,
    size_choices: Vec<Choice>,
    algorithms: String,
    condition: String,
    scaling_size: String,
    /// Charts built by [`super::svg`], every text in them escaped there.
    size_chart: String,
    scaling_chart: String,
    size_columns: Vec<String>,
    size_rows: Vec<SizeRow>,
    memory_rows: Vec<MemoryRow>,
    /// Some cell's figure rests on too few samples (the cells say which).
    any_low_samples: bool,
    scaling_rows: Vec<ScalingView>,
    has_scaling: bool,
    /// One thread count or none at this size: what measures the scaling.
    scaling_fill: Option<String>,
    csv_href: String,
    json_href: String,
}

/// The payload-size chart (one thread, one line per algorithm), the same
/// numbers as a table (size columns, one row per algorithm) and its memory table.
fn size_section(title: String, merged: &[Merged]) -> (String, Vec<String>, Vec<SizeRow>, Vec<MemoryRow>) {
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
                    pts.iter().find(|m| m.size_bytes == *s).map(|m| SizeCell {
                        text: format::mb_s(m.throughput_mb_s),
                        sort: m.throughput_mb_s.to_string(),
                        low_samples: m.low_samples,
                    })
                })
                .collect(),
        })
        .collect();
    let memory = one_thread
        .iter()
        .filter(|(_, pts)| pts.iter().any(|m| m.memory.cipher_state_bytes.is_some()))
        .map(|(algorithm, pts)| memory_row(algorithm.to_string(), pts, &sizes))
        .collect();
    let columns = sizes.iter().map(|s| format::bytes(*s)).collect();
    (chart.render(), columns, rows, memory)
}

/// The memory row of one algorithm's points (some of which report memory).
fn memory_row(algorithm: String, points: &[&Merged], sizes: &BTreeSet<u64>) -> MemoryRow {
    let state = points.iter().find_map(|m| m.memory.cipher_state_bytes);
    let rss = sizes
        .iter()
        .map(|s| {
            points
                .iter()
                .find(|m| m.size_bytes == *s)
                .and_then(|m| m.memory.peak_rss_bytes)
                .map_or_else(|| "–".into(), |b| format::bytes(b.max(0) as u64))
        })
        .collect();
    // The heap part of the point that allocated most (all say 0 allocs/op when none did).
    let worst = points
        .iter()
        .filter(|m| m.memory.cipher_state_bytes.is_some())
        .max_by(|a, b| {
            let allocs = |m: &Merged| m.memory.allocs_per_op.unwrap_or(-1.0);
            allocs(a).total_cmp(&allocs(b))
        });
    MemoryRow {
        algorithm,
        state: state.map_or_else(|| "–".into(), |b| format::bytes(b.max(0) as u64)),
        state_sort: state.map(|b| b.to_string()).unwrap_or_default(),
        rss,
        heap: worst.map_or_else(|| "–".into(), |m| format::heap_per_op(&m.memory)),
    }
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
    let fleet = Fleet::read(&state).await?;
    let chosen = match &params.subject {
        None => None,
        Some(subject) => {
            // Unknown host or class: 404 (a stale link), not an empty page that looks like missing data.
            let who = resolve(subject, &fleet)?;
            let results = matrix::host_points(
                &state.pool,
                &who.host_ids,
                params.direction,
                params.path,
                params.provider,
            )
            .await?;
            Some((subject, who, results))
        }
    };
    Ok(Html(modes_page(&params, &fleet, chosen).render()?))
}

/// The page over what was read (the subject resolved, with its latest
/// results, or `None` for the chooser): a pure function of the rows.
fn modes_page(
    params: &ModesParams,
    fleet: &Fleet,
    chosen: Option<(&Subject, Resolved, Vec<LatestResult>)>,
) -> ModesPage {
    let host_choices = choices(
        fleet.names.iter().map(|(id, name)| (id.to_string(), name.clone())),
        &match &params.subject {
            Some(Subject::Host(id)) => id.to_string(),
            _ => String::new(),
        },
    );
    let classes: BTreeMap<String, String> = fleet
        .groups
        .iter()
        .map(|g| {
            let c = g.class();
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
        provider_choices: enum_choices(Some(params.provider)),
        measured_on: format::measured_on(params.provider),
        builtin: params.provider.is_rustcrypto(),
        size_choices: Vec::new(),
        algorithms: super::compare::names(&params.algorithms),
        condition: format!("{}, {} path, one static key", params.direction, params.path),
        scaling_size: format::bytes(params.size_bytes),
        size_chart: String::new(),
        scaling_chart: String::new(),
        size_columns: Vec::new(),
        size_rows: Vec::new(),
        memory_rows: Vec::new(),
        any_low_samples: false,
        scaling_rows: Vec::new(),
        has_scaling: false,
        scaling_fill: None,
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
    let (size_chart, size_columns, size_rows, memory_rows) = size_section(size_title, &merged);
    page.size_columns = size_columns;
    page.any_low_samples = size_rows.iter().flat_map(|r| &r.cells).flatten().any(|c| c.low_samples);
    page.size_rows = size_rows;
    page.memory_rows = memory_rows;
    let scaling_title = format!(
        "{}: throughput by threads at {}, {}{mark}",
        who.label,
        format::bytes(params.size_bytes),
        params.direction
    );
    let (scaling_chart, scaling_rows) = scaling_section(scaling_title, &results, &merged, params.size_bytes);
    page.has_scaling = !scaling_rows.is_empty();
    if !merged
        .iter()
        .any(|m| m.size_bytes == params.size_bytes && m.threads > 1)
    {
        page.scaling_fill = scaling_fill(params).map(|f| f.command());
    }
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

/// What measures thread scaling at the page's size: the AES-256 modes the
/// provider implements on one thread and on all cores (the `modes` suite at
/// 16 KiB; elsewhere a matrix). `None` when it implements none of them.
fn scaling_fill(params: &ModesParams) -> Option<Fill> {
    let points: Vec<Point> = Scenario::Modes
        .algorithms()
        .into_iter()
        .filter(|a| params.provider.runs(*a))
        .flat_map(|algorithm| {
            [1, 2].map(|threads| Point {
                algorithm,
                direction: params.direction,
                size_bytes: params.size_bytes,
                threads,
                concurrency: None,
                key_mode: KeyMode::Static,
                path: params.path,
                nonce: Nonce::Counter,
                provider: params.provider,
            })
        })
        .collect();
    Fill::of(&points)
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::Path;

    use super::*;
    use crate::analysis::cells::tests::result;
    use crate::domain::memory::StoredMemory;

    /// Neoverse-N1 hosts `(id, name, emulated)`, each in a group of its own.
    fn fleet(hosts: &[(i64, &str, bool)]) -> Fleet {
        Fleet {
            names: hosts.iter().map(|(id, name, _)| (*id, name.to_string())).collect(),
            groups: hosts
                .iter()
                .map(|(id, _, emulated)| ClassGroup {
                    host_ids: vec![*id],
                    emulated_label: emulated.then(|| "qemu".to_string()),
                    simulated_label: None,
                    arch: Some("aarch64".into()),
                    cpu_vendor: Some("ARM".into()),
                    cpu_model_name: Some("Neoverse-N1".into()),
                    features_usable: Some(vec!["aes".into(), "pmull".into()]),
                    build_flavour: Some("accelerated".into()),
                    hypervisor: None,
                    cpuinfo_foreign: None,
                })
                .collect(),
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
    fn one_thread_count_names_what_measures_thread_scaling() {
        let hosts = fleet(&[(1, "arm-1", false)]);
        let subject = params(&[("host", "1")]).subject.unwrap();
        let one_thread = || vec![at(1, "aes-256-ctr", 16384, 1, 1000.0)];
        let who = resolve(&subject, &hosts).unwrap();
        let page = modes_page(&params(&[("host", "1")]), &hosts, Some((&subject, who, one_thread())));
        assert_eq!(
            page.scaling_fill.as_deref(),
            Some("cipherfleet-coordinator campaign start --suite modes")
        );
        let mut scaled = one_thread();
        scaled.push(at(1, "aes-256-ctr", 16384, 2, 1900.0));
        let who = resolve(&subject, &hosts).unwrap();
        let page = modes_page(&params(&[("host", "1")]), &hosts, Some((&subject, who, scaled)));
        assert_eq!(page.scaling_fill, None, "two thread counts: measured");
        // No suite measures the modes on all cores at 1 KiB: a matrix of those points.
        let fill = scaling_fill(&params(&[("host", "1"), ("size", "1024")]))
            .unwrap()
            .command();
        assert!(
            fill.contains("--matrix") && fill.contains("\"threads\":[1,2]"),
            "{fill}"
        );
        // ring runs only AES-256-GCM of the modes: the matrix asks ring for that alone.
        let fill = scaling_fill(&params(&[("host", "1"), ("provider", "ring")]))
            .unwrap()
            .command();
        assert!(
            fill.contains("\"providers\":[\"ring\"]") && fill.contains("aes-256-gcm") && !fill.contains("aes-256-cbc"),
            "{fill}"
        );
    }

    #[test]
    fn without_a_subject_the_page_is_a_chooser() {
        let hosts = fleet(&[(1, "arm-1", false)]);
        let page = modes_page(&params(&[]), &hosts, None);
        assert!(!page.chosen);
        assert_eq!(page.host_choices.len(), 1);
        assert_eq!(page.class_choices.len(), 1);
        assert!(page.size_rows.is_empty() && page.size_chart.is_empty());
    }

    #[test]
    fn a_class_leaves_emulated_hosts_out_and_scales_each_host_against_itself() {
        let hosts = fleet(&[(1, "arm-1", false), (2, "arm-2", false), (3, "arm-qemu", true)]);
        let key = hosts.groups[0].class().key();
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
        let cells: Vec<&str> = gcm.cells.iter().map(|c| c.as_ref().unwrap().text.as_str()).collect();
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
        assert!(page.memory_rows.is_empty(), "no result reported memory");
    }

    #[test]
    fn a_host_shows_its_memory_per_algorithm_and_marks_cells_with_few_samples() {
        let hosts = fleet(&[(1, "arm-1", false)]);
        let p = params(&[("host", "1")]);
        let subject = p.subject.clone().unwrap();
        let who = resolve(&subject, &hosts).unwrap();
        let with_memory = |mut r: LatestResult, state, rss| {
            r.memory = StoredMemory {
                cipher_state_bytes: Some(state),
                peak_rss_bytes: Some(rss),
                heap_bytes_per_op: Some(0.0),
                allocs_per_op: Some(0.0),
            };
            r
        };
        let mut few = with_memory(at(1, "des-ede3-cbc", 16384, 1, 8.0), 400, 3 << 20);
        few.low_samples = true;
        let results = vec![
            with_memory(at(1, "aes-128-gcm", 16, 1, 100.0), 976, 2 << 20),
            with_memory(at(1, "aes-128-gcm", 16384, 1, 2000.0), 976, 3 << 20),
            with_memory(at(1, "des-ede3-cbc", 16, 1, 7.0), 400, 2 << 20),
            few,
            // An old agent's result: no memory, so no row of its own.
            at(1, "chacha20-poly1305", 16, 1, 300.0),
        ];
        let page = modes_page(&p, &hosts, Some((&subject, who, results)));
        let rows: Vec<(&str, &str, Vec<&str>, &str)> = page
            .memory_rows
            .iter()
            .map(|r| {
                (
                    r.algorithm.as_str(),
                    r.state.as_str(),
                    r.rss.iter().map(String::as_str).collect(),
                    r.heap.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("aes-128-gcm", "976 B", vec!["2 MiB", "3 MiB"], "0 allocs/op"),
                ("des-ede3-cbc", "400 B", vec!["2 MiB", "3 MiB"], "0 allocs/op"),
            ]
        );
        let des = page.size_rows.iter().find(|r| r.algorithm == "des-ede3-cbc").unwrap();
        let marks: Vec<bool> = des.cells.iter().map(|c| c.as_ref().unwrap().low_samples).collect();
        assert_eq!(marks, [false, true]);
        assert!(page.any_low_samples);
        let html = page.render().unwrap();
        assert!(html.contains("few samples") && html.contains("976 B"), "{html}");
    }
}
