//! `/scenarios`: the scenario suites' questions (object storage, legacy
//! migration, modes, fallback, field level), each answered per machine class
//! from the latest measured points ([`crate::analysis::scenarios`] holds the
//! rules). `/scenarios/{name}` is one scenario's full view; its table is at
//! `/api/v1/scenarios/{name}` (JSON: the view; `format=csv`: one row per
//! figure), and the list's answers at `/api/v1/scenarios`.
//!
//! Emulated and simulated hosts are left out: their timings are not performance.

use std::collections::HashMap;

use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use super::api::{self, ApiError, FormatParam};
use super::{WebError, WebState, format};
use crate::analysis::class::MachineClass;
use crate::analysis::overhead::Overhead;
use crate::analysis::scenarios::{self, Figure, Sample, Scenario, View};
use crate::report;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/scenarios", get(list_page))
        .route("/scenarios/{name}", get(view_page))
        .route("/api/v1/scenarios", get(api_list))
        .route("/api/v1/scenarios/{name}", get(api_view))
}

fn scenario(name: &str) -> Result<Scenario, WebError> {
    Scenario::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        WebError::NotFound(format!("no scenario {name:?}; known: {}", known.join(", ")))
    })
}

/// The views of `wanted`, from one read of the hosts grouped by class and
/// marks, and one of the points per scenario.
async fn load(state: &WebState, wanted: &[Scenario]) -> Result<Vec<View>, WebError> {
    // Measured hosts only, each group's class worked out once (a fleet is
    // thousands of hosts in a handful of groups, their points hundreds of thousands).
    let mut hosts: HashMap<i64, (MachineClass, Option<u32>)> = HashMap::new();
    for g in report::matrix::class_groups(&state.pool).await? {
        if g.emulated() || g.simulated() {
            continue;
        }
        let class = g.class();
        hosts.extend(g.host_ids.iter().map(|&id| (id, (class.clone(), None))));
    }
    let measured: Vec<i64> = hosts.keys().copied().collect();
    if !measured.is_empty() {
        for (id, cores) in report::scenarios::logical_cores(&state.pool, &measured).await? {
            if let Some(h) = hosts.get_mut(&id) {
                h.1 = cores.and_then(|c| u32::try_from(c).ok());
            }
        }
    }
    let mut views = Vec::new();
    for &scenario in wanted {
        let points = if measured.is_empty() {
            Vec::new()
        } else {
            report::scenarios::points(&state.pool, &scenario.algorithms(), &measured).await?
        };
        let samples: Vec<Sample> = points
            .into_iter()
            .filter_map(|result| {
                let (class, logical_cores) = hosts.get(&result.host_id)?;
                Some(Sample {
                    class: class.clone(),
                    logical_cores: *logical_cores,
                    result,
                })
            })
            .collect();
        views.push(scenarios::view(scenario, &samples));
    }
    Ok(views)
}

/// A figure as printed: the median, and the min–max when hosts differ. The
/// class's fill line says what measures one that is not measured.
fn figure_text(f: &Option<Figure>) -> String {
    match f {
        None => "not measured".into(),
        Some(f) if f.hosts > 1 && f.max > f.min => format!(
            "{} ({}–{}, {} hosts)",
            format::significant(f.median),
            format::significant(f.min),
            format::significant(f.max),
            f.hosts
        ),
        Some(f) => format::significant(f.median),
    }
}

struct RowView {
    subject: String,
    cells: Vec<String>,
}

struct ClassView {
    class_key: String,
    class: String,
    hosts: usize,
    answer: String,
    rows: Vec<RowView>,
    /// The command that measures what the class lacks.
    fill: Option<String>,
}

struct OverheadView {
    algorithm: String,
    size: String,
    nonce: u64,
    tag: u64,
    mac: u64,
    padding: u64,
    total: u64,
    percent: String,
}

impl From<&Overhead> for OverheadView {
    fn from(o: &Overhead) -> Self {
        OverheadView {
            algorithm: o.algorithm.name().to_string(),
            size: format::bytes(o.size_bytes),
            nonce: o.nonce_or_iv_bytes,
            tag: o.tag_bytes,
            mac: o.mac_bytes,
            padding: o.padding_bytes,
            total: o.total_bytes,
            percent: format::percent(o.fraction),
        }
    }
}

fn class_views(v: &View) -> Vec<ClassView> {
    v.classes
        .iter()
        .map(|c| ClassView {
            class_key: c.class_key.clone(),
            class: c.class.clone(),
            hosts: c.hosts,
            answer: c.answer.clone(),
            fill: c.fill.as_ref().map(|f| f.command()),
            rows: c
                .rows
                .iter()
                .map(|r| RowView {
                    subject: r.subject.clone(),
                    cells: r.cells.iter().map(figure_text).collect(),
                })
                .collect(),
        })
        .collect()
}

struct ScenarioSummary {
    name: &'static str,
    question: &'static str,
    classes: Vec<ClassView>,
    /// The command that runs the scenario, for a scenario no class measured.
    fill: String,
}

#[derive(Template)]
#[template(path = "scenarios.html")]
struct ListPage {
    scenarios: Vec<ScenarioSummary>,
}

#[derive(Template)]
#[template(path = "scenario.html")]
struct ViewPage {
    name: &'static str,
    question: &'static str,
    /// The command that runs the scenario.
    fill: String,
    columns: Vec<&'static str>,
    classes: Vec<ClassView>,
    overhead: Vec<OverheadView>,
}

async fn list_page(State(state): State<WebState>) -> Result<Html<String>, WebError> {
    let views = load(&state, &Scenario::ALL).await?;
    let scenarios = views
        .iter()
        .map(|v| ScenarioSummary {
            name: v.scenario.name(),
            question: v.scenario.question(),
            classes: class_views(v),
            fill: v.scenario.fill().command(),
        })
        .collect();
    Ok(Html(ListPage { scenarios }.render()?))
}

async fn view_page(State(state): State<WebState>, Path(name): Path<String>) -> Result<Html<String>, WebError> {
    let scenario = scenario(&name)?;
    let view = load(&state, &[scenario]).await?.remove(0);
    let page = ViewPage {
        name: scenario.name(),
        question: scenario.question(),
        fill: scenario.fill().command(),
        columns: view.columns.clone(),
        classes: class_views(&view),
        overhead: view.overhead.iter().map(OverheadView::from).collect(),
    };
    Ok(Html(page.render()?))
}

/// One figure of a view, as a CSV row.
#[derive(Serialize)]
struct FigureRow<'a> {
    scenario: &'static str,
    class_key: &'a str,
    class: &'a str,
    answer: &'a str,
    subject: &'a str,
    column: &'static str,
    /// Empty when not measured (then `fill` says what measures it).
    median: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    hosts: Option<usize>,
    /// The command that measures a figure that is not measured.
    fill: Option<String>,
}

fn figure_rows(v: &View) -> Vec<FigureRow<'_>> {
    let mut rows = Vec::new();
    for c in &v.classes {
        for r in &c.rows {
            for (column, f) in v.columns.iter().zip(&r.cells) {
                rows.push(FigureRow {
                    scenario: v.scenario.name(),
                    class_key: &c.class_key,
                    class: &c.class,
                    answer: &c.answer,
                    subject: &r.subject,
                    column,
                    median: f.map(|f| f.median),
                    min: f.map(|f| f.min),
                    max: f.map(|f| f.max),
                    hosts: f.map(|f| f.hosts),
                    fill: f.is_none().then(|| v.scenario.fill().command()),
                });
            }
        }
    }
    rows
}

async fn api_view(
    State(state): State<WebState>,
    Path(name): Path<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let scenario = scenario(&name)?;
    let view = load(&state, &[scenario]).await?.remove(0);
    match f.format {
        api::Format::Json => Ok(axum::Json(&view).into_response()),
        api::Format::Csv => api::table(&format!("scenario-{name}"), &figure_rows(&view), f.format),
    }
}

/// One scenario's answer for one class.
#[derive(Serialize)]
struct AnswerRow<'a> {
    scenario: &'static str,
    class_key: &'a str,
    class: &'a str,
    hosts: usize,
    answer: &'a str,
    /// The command that measures what the class lacks; empty when nothing is.
    fill: Option<String>,
}

async fn api_list(State(state): State<WebState>, Query(f): Query<FormatParam>) -> Result<Response, ApiError> {
    let views = load(&state, &Scenario::ALL).await?;
    let rows: Vec<AnswerRow> = views
        .iter()
        .flat_map(|v| {
            v.classes.iter().map(|c| AnswerRow {
                scenario: v.scenario.name(),
                class_key: &c.class_key,
                class: &c.class,
                hosts: c.hosts,
                answer: &c.answer,
                fill: c.fill.as_ref().map(|f| f.command()),
            })
        })
        .collect();
    api::table("scenarios", &rows, f.format)
}
