//! `/compare`: the matrix. Rows are hosts or machine classes (`rows=`),
//! columns algorithms, each cell the MB/s of one view — payload size,
//! threads, direction, path — with its sample CV and a link to the raw
//! result. Colours scale per column; every view is a link (query parameters)
//! and `/api/v1/compare` answers the same cells as JSON or CSV.
//!
//! - [`params`]: the query string, checked, and the link of a view.
//! - [`grid`]: rows, cells and colours (pure functions).
//! - [`api`]: `/api/v1/compare`, the same rows as JSON or CSV.
//!
//! Data, sized by the page and not by the fleet: the hosts grouped by class
//! ([`matrix::class_groups`]), the view's class cells and host counts
//! ([`view_summaries`]), and for host rows one page of hosts by name with
//! their latest results ([`matrix::view_points`]). The API pages host rows
//! as the page does (`page=`, with a `Link` header to the next page).

mod api;
mod grid;
mod params;

use std::collections::{BTreeSet, HashMap};

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use chrono::{DateTime, Utc};

use cipherfleet_core::Point;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::spec::{KeyMode, Suite};

use super::paging::{Pager, with_query};
use super::params::{Choice, choices, enum_choices};
use super::{WebError, WebState, format};
use crate::analysis::fill::Fill;
use crate::domain::latest::LatestResult;
use crate::report::classes::{self, ClassRow};
use crate::report::matrix::{self, Slice, View};
use crate::report::view_summaries::{self, Cells, Stale};
use grid::{Cell, Frame, Grid, RowHead, heat_map, nearest};
use params::{CompareParams, CompareQuery, Metric, Rows};
pub use params::{direction, names, not_valid, parse_algorithms, path, provider, size};

/// Rows per page of the matrix.
const PER_PAGE: u64 = 50;
/// Suggestions an empty view offers.
const SUGGESTIONS: usize = 4;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/compare", get(page))
        .route("/api/v1/compare", get(api::compare))
}

/// "16 KiB per operation, 1 thread, encrypt, accelerated path".
fn describe(view: &View) -> String {
    format!(
        "{} per operation, {} thread{}, {}, {} path",
        format::bytes(view.size_bytes),
        view.threads,
        if view.threads == 1 { "" } else { "s" },
        view.direction,
        view.path
    )
}

/// The classic questions, as links.
fn seed_views() -> Vec<Link> {
    let seed = |label: &str, pairs: &[(&'static str, &str)]| Link {
        text: label.to_string(),
        href: with_query(
            "/compare",
            &pairs.iter().map(|(k, v)| (*k, v.to_string())).collect::<Vec<_>>(),
        ),
    };
    vec![
        seed(
            "AES vs DES vs 3DES (CBC)",
            &[("algorithms", "aes-128-cbc,aes-192-cbc,aes-256-cbc,des-cbc,des-ede3-cbc")],
        ),
        seed(
            "ECB / CBC / CTR / GCM / CCM / OCB at 16 KiB (AES-128)",
            &[
                ("size", "16384"),
                (
                    "algorithms",
                    "aes-128-ecb,aes-128-cbc,aes-128-ctr,aes-128-gcm,aes-128-ccm,aes-128-ocb",
                ),
            ],
        ),
        seed(
            "AES-256-GCM vs AES-128-CBC (+HMAC) vs ChaCha20-Poly1305, with P99",
            &[
                (
                    "algorithms",
                    "aes-256-gcm,aes-128-cbc,aes-128-cbc-hmac-sha256,chacha20-poly1305",
                ),
                ("metric", "p99"),
            ],
        ),
    ]
}

/// The scenario views (`/scenarios/{name}`), where the classic questions are answered per class.
fn scenario_links() -> Vec<Link> {
    crate::analysis::scenarios::Scenario::ALL
        .iter()
        .map(|s| Link {
            text: s.name().to_string(),
            href: format!("/scenarios/{}", s.name()),
        })
        .collect()
}

/// A link with its text; both escaped by the template.
#[derive(Debug, Clone)]
pub struct Link {
    pub text: String,
    pub href: String,
}

/// A cell as the template prints it.
#[derive(Debug, Clone)]
struct CellView {
    mb_s: String,
    p99: Option<String>,
    /// "CV 1.2 %" (hosts) or "3 hosts · CV 4.0 % across hosts" (classes).
    note: String,
    href: Option<String>,
    /// The cell's class: `heat-0` … `heat-9` within its column, or `unranked`
    /// (greyed) for emulated and simulated rows, which never rank.
    shade: String,
    /// The metric as a plain number, for click-to-sort.
    sort: String,
    /// What ran other than asked, and its badge's status class (`software`, `partial`).
    fell_back: Option<(String, &'static str)>,
}

#[derive(Debug, Clone)]
struct RowView {
    head: RowHead,
    hosts_note: Option<String>,
    cells: Vec<Option<CellView>>,
}

/// The cell's badge for results that ran other than asked: wholly in software
/// is the worse news, partly in software (`partial`) named as such.
fn fell_back_badge(c: &Cell, rows: Rows) -> Option<(String, &'static str)> {
    let (count, what, status) = if c.fell_back > 0 {
        (c.fell_back, "ran in software", "software")
    } else if c.partial > 0 {
        (c.partial, "ran partly in software", "partial")
    } else {
        return None;
    };
    let text = match rows {
        Rows::Hosts => what.to_string(),
        Rows::Classes if c.fell_back > 0 && c.partial > 0 => format!("{count} {what}, {} partly", c.partial),
        Rows::Classes => format!("{count} {what}"),
    };
    Some((text, status))
}

fn cell_view(c: &Cell, heat: Option<u8>, metric: Metric, rows: Rows) -> CellView {
    let note = match rows {
        Rows::Hosts => match c.cv {
            Some(cv) => format!("CV {}", format::percent(cv)),
            None => "CV –".into(),
        },
        Rows::Classes => {
            let hosts = format!("median of {} host{}", c.hosts, if c.hosts == 1 { "" } else { "s" });
            match c.cv {
                Some(cv) if c.hosts > 1 => format!("{hosts} · CV {} across hosts", format::percent(cv)),
                _ => hosts,
            }
        }
    };
    CellView {
        mb_s: format::mb_s(c.throughput_mb_s),
        p99: (metric == Metric::P99).then(|| format!("P99 {}", format::nanos(c.latency_p99_ns))),
        note,
        href: c.result_id.map(|id| format!("/api/v1/results/{id}")),
        shade: heat.map_or_else(|| "unranked".to_string(), |h| format!("heat-{h}")),
        sort: c.metric(metric).to_string(),
        fell_back: fell_back_badge(c, rows),
    }
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    classes_mode: bool,
    p99_mode: bool,
    heading: String,
    algorithms: String,
    size_choices: Vec<Choice>,
    thread_choices: Vec<Choice>,
    direction_choices: Vec<Choice>,
    path_choices: Vec<Choice>,
    provider_choices: Vec<Choice>,
    /// Whose figures these are ([`format::measured_on`]).
    measured_on: &'static str,
    /// The built-in provider's: the page points to the others.
    builtin: bool,
    seeds: Vec<Link>,
    scenario_links: Vec<Link>,
    /// Set when the rows are limited to one class: its label, and the link to all classes.
    class_filter: Option<Link>,
    /// The class key of that filter (hex), kept by the form.
    class_key: String,
    /// Switches to the other row mode, same view.
    switch_rows: Link,
    columns: Vec<String>,
    rows: Vec<RowView>,
    any_marked: bool,
    empty: Option<String>,
    suggestions: Vec<Link>,
    summary: String,
    /// "2026-12-02 08:03:04 UTC, 42 s ago" when the class figures miss newer results.
    cells_as_of: Option<String>,
    prev: Option<String>,
    next: Option<String>,
    csv_href: String,
    json_href: String,
}

/// The point of an algorithm's cell in `view`: the comparison pages show
/// one static key and no object-storage concurrency.
fn view_point(view: &View, algorithm: cipherfleet_core::algorithm::Algorithm) -> Point {
    Point {
        algorithm,
        direction: view.direction,
        size_bytes: view.size_bytes,
        threads: view.threads,
        concurrency: None,
        key_mode: KeyMode::Static,
        path: view.path,
        nonce: cipherfleet_core::spec::Nonce::Counter,
        provider: view.provider,
    }
}

/// What measures the view: those of its algorithms (the quick suite's
/// headline six when none were asked for) its provider implements, at its
/// point. `None` when the provider implements none of them.
fn view_fill(params: &CompareParams) -> Option<Fill> {
    let algorithms: Vec<Algorithm> = if params.algorithms.is_empty() {
        Suite::Quick
            .matrices(1)
            .into_iter()
            .flat_map(|m| m.algorithms)
            .collect()
    } else {
        params.algorithms.clone()
    };
    let points: Vec<Point> = algorithms
        .into_iter()
        .filter(|a| params.view.provider.runs(*a))
        .map(|a| view_point(&params.view, a))
        .collect();
    Fill::of(&points)
}

/// What a view read: the fleet's class rows, one page of the matrix, and
/// the latest results behind a page of host rows.
struct Loaded {
    classes: Vec<ClassRow>,
    grid: Grid,
    points: Vec<LatestResult>,
    pager: Pager,
    /// Set when the class cells (the class rows, and the colour scale of
    /// host rows) miss newer results: when the oldest of them was computed.
    cells_as_of: Option<DateTime<Utc>>,
}

/// Reads one page of `params`: the class cells of the view (computed first
/// where there are none; where newer results made them stale, as stored,
/// with a background refresh asked for), then the page's rows.
async fn load(state: &WebState, params: &CompareParams) -> Result<Loaded, WebError> {
    let (classes, assignment) = classes::current(&state.pool).await?;
    let asked: Vec<&str> = if params.algorithms.is_empty() {
        cipherfleet_core::algorithm::ALL.iter().map(|a| a.name()).collect()
    } else {
        params.algorithms.iter().map(|a| a.name()).collect()
    };
    let Cells { cells, changed_since } =
        view_summaries::class_cells(&state.pool, &params.view, &asked, &assignment, Stale::Show).await?;
    if changed_since.is_some() {
        state.refresh.now();
    }
    let frame = Frame::new(params, &classes, &cells);
    let columns = frame.column_names();
    let (grid, points, pager) = match params.rows {
        Rows::Classes => {
            let hosts: HashMap<String, usize> =
                view_summaries::row_hosts(&state.pool, &params.view, &columns, &assignment)
                    .await?
                    .into_iter()
                    .map(|(row, n)| (row, usize::try_from(n).unwrap_or_default()))
                    .collect();
            let pager = Pager::new(params.page, PER_PAGE, frame.rows.len() as u64);
            let grid = Grid::classes(params, &frame, &hosts, (pager.offset(), PER_PAGE));
            (grid, Vec::new(), pager)
        }
        Rows::Hosts => {
            let only = frame.only_hosts(params, &classes);
            let page = |offset| {
                view_summaries::host_page(&state.pool, &params.view, &columns, only.as_deref(), offset, PER_PAGE)
            };
            let asked = Pager::new(params.page, PER_PAGE, u64::MAX);
            let (total, mut hosts) = page(asked.offset()).await?;
            let pager = Pager::new(params.page, PER_PAGE, total);
            if pager.offset() != asked.offset() {
                // Past the last page (a stale link): show the last one.
                hosts = page(pager.offset()).await?.1;
            }
            let ids: Vec<i64> = hosts.iter().map(|(id, _)| *id).collect();
            let points = matrix::view_points(&state.pool, &params.view, &frame.columns, &ids).await?;
            let grid = Grid::hosts(params, &frame, &classes, &hosts, &points, total);
            (grid, points, pager)
        }
    };
    Ok(Loaded {
        classes,
        grid,
        points,
        pager,
        cells_as_of: changed_since,
    })
}

async fn page(State(state): State<WebState>, Query(q): Query<CompareQuery>) -> Result<Html<String>, WebError> {
    let params = CompareParams::parse(&q)?;
    // Independent reads on two pool connections: the page waits for the slower.
    let (loaded, slices) = tokio::try_join!(load(&state, &params), async {
        Ok::<_, WebError>(matrix::slices(&state.pool, params.view.provider).await?)
    })?;
    Ok(Html(compare_page(&params, &loaded, &slices).render()?))
}

/// The page of `params` over what was read: a pure function of the rows.
fn compare_page(params: &CompareParams, loaded: &Loaded, slices: &[Slice]) -> ComparePage {
    let m = &loaded.grid;
    let pager = &loaded.pager;
    // Colours come from every row of the view, so a cell keeps its colour from page to page.
    let heat = heat_map(m, params.metric);
    let rows: Vec<RowView> = m
        .rows
        .iter()
        .zip(&heat)
        .map(|((head, cells), heats)| RowView {
            head: head.clone(),
            hosts_note: (params.rows == Rows::Classes)
                .then(|| format!("{} host{}", head.hosts, if head.hosts == 1 { "" } else { "s" })),
            cells: cells
                .iter()
                .zip(heats)
                .map(|(c, h)| c.as_ref().map(|c| cell_view(c, *h, params.metric, params.rows)))
                .collect(),
        })
        .collect();
    let pairs = params.query_pairs();
    let with = |extra: (&'static str, &str)| {
        let mut p = pairs.clone();
        p.push((extra.0, extra.1.to_string()));
        with_query("/api/v1/compare", &p)
    };
    // The filters offer what is stored, plus the current value (a link may
    // name a view with no data; the form must still show what was asked).
    let sizes: BTreeSet<u64> = slices
        .iter()
        .map(|s| s.size_bytes)
        .chain([params.view.size_bytes])
        .collect();
    let threads: BTreeSet<u32> = slices.iter().map(|s| s.threads).chain([params.view.threads]).collect();
    let empty = (m.total == 0).then(|| {
        if slices.is_empty() {
            "No results are stored yet: connect an agent and run a campaign, then every finished job shows up here."
                .to_string()
        } else {
            let mut what = describe(&params.view);
            if !params.algorithms.is_empty() {
                what.push_str(&format!(
                    ", algorithms {}",
                    names(&params.algorithms).replace(',', ", ")
                ));
            }
            if let Some(class) = &params.class {
                what.push_str(&format!(", class {class}"));
            }
            match view_fill(params) {
                Some(fill) => format!("No results for {what}: {} measures them.", fill.command()),
                None => format!(
                    "No results for {what}: the {} provider implements none of these algorithms.",
                    params.view.provider
                ),
            }
        }
    });
    let suggestions = if m.total == 0 {
        nearest(slices, &params.view, SUGGESTIONS)
            .into_iter()
            .map(|s| Link {
                text: format!(
                    "{} × {} thread{}",
                    format::bytes(s.size_bytes),
                    s.threads,
                    if s.threads == 1 { "" } else { "s" }
                ),
                href: with_query("/compare", &params.at(s).query_pairs()),
            })
            .collect()
    } else {
        Vec::new()
    };
    // The same view with the other kind of rows.
    let mut other = params.clone();
    other.rows = if params.rows == Rows::Hosts {
        Rows::Classes
    } else {
        Rows::Hosts
    };
    other.page = 1;
    let class_filter = params.class.as_ref().map(|key| {
        let label = loaded
            .classes
            .iter()
            .find(|c| c.key == *key)
            .map(|c| c.label.clone())
            .unwrap_or_else(|| format!("unknown class {key}"));
        let mut all = params.clone();
        all.class = None;
        all.page = 1;
        Link {
            text: label,
            href: with_query("/compare", &all.query_pairs()),
        }
    });

    ComparePage {
        classes_mode: params.rows == Rows::Classes,
        p99_mode: params.metric == Metric::P99,
        heading: describe(&params.view),
        algorithms: names(&params.algorithms),
        size_choices: choices(
            sizes.iter().map(|s| (s.to_string(), format::bytes(*s))),
            &params.view.size_bytes.to_string(),
        ),
        thread_choices: choices(
            threads.iter().map(|t| (t.to_string(), t.to_string())),
            &params.view.threads.to_string(),
        ),
        direction_choices: enum_choices(Some(params.view.direction)),
        path_choices: enum_choices(Some(params.view.path)),
        provider_choices: enum_choices(Some(params.view.provider)),
        measured_on: format::measured_on(params.view.provider),
        builtin: params.view.provider.is_rustcrypto(),
        seeds: seed_views(),
        scenario_links: scenario_links(),
        class_filter,
        class_key: params.class.clone().unwrap_or_default(),
        switch_rows: Link {
            text: if params.rows == Rows::Hosts {
                "machine classes"
            } else {
                "hosts"
            }
            .into(),
            href: with_query("/compare", &other.query_pairs()),
        },
        columns: m.columns.iter().map(|a| a.name().to_string()).collect(),
        any_marked: m.any_marked,
        rows,
        empty,
        suggestions,
        summary: pager.summary(),
        cells_as_of: loaded.cells_as_of.map(format::as_of),
        prev: pager.prev_href("/compare", &pairs),
        next: pager.next_href("/compare", &pairs),
        csv_href: with(("format", "csv")),
        json_href: with(("format", "json")),
    }
}

#[cfg(test)]
mod tests {
    use cipherfleet_core::path::Path;

    use super::grid::tests::cells_of;
    use super::*;
    use crate::analysis::cells::tests::result;
    use crate::report::classes::class_rows;
    use crate::report::classes::tests::group;

    fn params(pairs: &[(&str, &str)]) -> CompareParams {
        CompareParams::parse(&crate::web::params::query_from(pairs)).unwrap()
    }

    fn slice(size_bytes: u64, threads: u32) -> Slice {
        Slice { size_bytes, threads }
    }

    /// What `load` reads for `params` from a fleet of `groups` with `points`, named `h{id}`.
    fn loaded(params: &CompareParams, groups: &[matrix::ClassGroup], points: &[LatestResult]) -> Loaded {
        let classes = class_rows(groups);
        let cells = cells_of(&classes, points);
        let frame = Frame::new(params, &classes, &cells);
        let columns = frame.columns.clone();
        let shown = |p: &&LatestResult| columns.contains(&p.point.algorithm);
        let (grid, pager) = match params.rows {
            Rows::Classes => {
                let mut hosts: HashMap<String, usize> = HashMap::new();
                for row in &classes {
                    let with: BTreeSet<i64> = points
                        .iter()
                        .filter(shown)
                        .filter(|p| row.host_ids.contains(&p.host_id))
                        .map(|p| p.host_id)
                        .collect();
                    hosts.insert(row.id.clone(), with.len());
                }
                let pager = Pager::new(params.page, PER_PAGE, frame.rows.len() as u64);
                (Grid::classes(params, &frame, &hosts, (0, PER_PAGE)), pager)
            }
            Rows::Hosts => {
                let only = frame.only_hosts(params, &classes);
                let ids: BTreeSet<i64> = points
                    .iter()
                    .filter(shown)
                    .map(|p| p.host_id)
                    .filter(|id| only.as_ref().is_none_or(|o| o.contains(id)))
                    .collect();
                let page: Vec<(i64, String)> = ids.iter().map(|id| (*id, format!("h{id}"))).collect();
                let pager = Pager::new(params.page, PER_PAGE, page.len() as u64);
                let grid = Grid::hosts(params, &frame, &classes, &page, points, page.len() as u64);
                (grid, pager)
            }
        };
        Loaded {
            classes,
            grid,
            points: points.to_vec(),
            pager,
            cells_as_of: None,
        }
    }

    #[test]
    fn class_rows_show_the_median_the_spread_and_what_fell_back() {
        let groups = [group(&[1, 2, 3], "Xeon", false)];
        let points = [
            result(1, "aes-256-gcm", 1000.0, Path::Accelerated),
            result(2, "aes-256-gcm", 3000.0, Path::Accelerated),
            result(3, "aes-256-gcm", 2000.0, Path::Software),
        ];
        let p = params(&[("rows", "classes")]);
        let page = compare_page(&p, &loaded(&p, &groups, &points), &[slice(16384, 1)]);
        assert!(page.classes_mode);
        assert_eq!(
            page.heading,
            "16 KiB per operation, 1 thread, encrypt, accelerated path"
        );
        assert_eq!(page.columns, ["aes-256-gcm"]);
        assert_eq!(page.rows.len(), 1);
        assert_eq!(page.rows[0].hosts_note.as_deref(), Some("3 hosts"));
        let cell = page.rows[0].cells[0].as_ref().unwrap();
        assert_eq!(cell.mb_s, "2000 MB/s");
        assert_eq!(cell.note, "median of 3 hosts · CV 50.0 % across hosts");
        assert_eq!(cell.fell_back, Some(("1 ran in software".to_string(), "software")));
        assert_eq!(cell.href, None, "a class cell has no single raw result");
        assert!(page.empty.is_none() && page.suggestions.is_empty());
        assert!(page.csv_href.contains("rows=classes") && page.csv_href.contains("format=csv"));
    }

    #[test]
    fn host_rows_link_their_result_and_an_empty_view_suggests_stored_ones() {
        let groups = [group(&[1], "Xeon", false)];
        let points = [result(1, "aes-256-gcm", 1500.0, Path::Accelerated)];
        let p = params(&[]);
        let page = compare_page(&p, &loaded(&p, &groups, &points), &[slice(16384, 1)]);
        let cell = page.rows[0].cells[0].as_ref().unwrap();
        assert_eq!(cell.note, "CV 1.00 %");
        assert_eq!(
            cell.href.as_deref(),
            Some(format!("/api/v1/results/{}", points[0].result_id).as_str())
        );
        assert_eq!(cell.fell_back, None);
        assert_eq!(page.summary, "showing 1–1 of 1");

        let p = params(&[("size", "64"), ("algorithms", "des-cbc")]);
        let empty = compare_page(&p, &loaded(&p, &groups, &[]), &[slice(16384, 1), slice(1024, 2)]);
        assert_eq!(
            empty.empty.as_deref(),
            Some(
                "No results for 64 B per operation, 1 thread, encrypt, accelerated path, algorithms des-cbc: \
                 cipherfleet-coordinator campaign start --suite standard measures them."
            )
        );
        let texts: Vec<&str> = empty.suggestions.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["1 KiB × 2 threads", "16 KiB × 1 thread"]);
        assert_eq!(
            empty.suggestions[0].href,
            "/compare?size=1024&threads=2&algorithms=des-cbc"
        );
        assert_eq!(
            empty.suggestions[1].href, "/compare?algorithms=des-cbc",
            "16 KiB is the default"
        );
        let p = params(&[]);
        let nothing = compare_page(&p, &loaded(&p, &groups, &[]), &[]);
        assert!(nothing.empty.unwrap().starts_with("No results are stored yet"));
    }
}
