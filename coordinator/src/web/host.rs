//! `/hosts/{id}`: one host — its current facts (features advertised against
//! usable) and how they changed over time ([`super::host_facts`]), its
//! findings with their evidence, a chart of its key algorithms over time and
//! its results page by page, with the kernel's crypto drivers and the host's
//! OpenSSL build beside the CPU features. Tables also under
//! `/api/v1/hosts/{id}/{results,changes,findings}`; the providers' facts
//! under `/api/v1/hosts/{id}/providers`.

use askama::Template;
use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use cipherfleet_core::Point;
use cipherfleet_core::path::PathUsed;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::api::{self, ApiError, FindingApiRow, FormatParam};
use super::format::MemoryText;
use super::host_facts::{
    Fact, FactChange, FeatureRow, KernelDriverRow, fact_changes, facts_table, feature_rows, features_checked,
    kernel_drivers, openssl_facts,
};
use super::host_history;
use super::hosts::label_texts;
use super::paging::{Pager, parse_id};
use super::svg::{LineChart, XAxis, time_x};
use super::{WebError, WebState, format, shell};
use crate::analysis::acceleration::Acceleration;
use crate::analysis::unexplained;
use crate::domain::memory::StoredMemory;
use crate::report::host_results::{self, HostResult, ThroughputSample};
use crate::store::findings::{self, Finding};
use crate::store::hosts::{self, Host, HostWithFacts};
use crate::store::rollups;
use crate::store::snapshots::{self, Snapshot};

/// Results per page on the host page, and per request of the API: a busy
/// host collects tens of thousands of results, never sent in one answer.
const PER_PAGE: u64 = 50;
const API_PER_PAGE: u64 = 1000;

/// The series of the host's history chart: the algorithms capacity questions
/// are asked about, at the object-storage chunk size.
const KEY_ALGORITHMS: [&str; 5] = [
    "aes-256-gcm",
    "aes-128-gcm",
    "chacha20-poly1305",
    "aes-128-cbc",
    "aes-128-cbc-hmac-sha256",
];
/// 16 KiB: large enough to measure the cipher rather than per-call overhead.
const KEY_SIZE: i64 = 16 * 1024;
/// Latest points per algorithm drawn.
const CHART_POINTS: i64 = 200;

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/hosts/{id}", get(page))
        .route("/api/v1/hosts/{id}/results", get(api_results))
        .route("/api/v1/hosts/{id}/changes", get(api_changes))
        .route("/api/v1/hosts/{id}/findings", get(api_findings))
        .route("/api/v1/hosts/{id}/providers", get(api_providers))
        .route("/api/v1/hosts/{id}/history", get(api_history))
}

/// `?page=` as text, so a bad value gets a clear 400 rather than axum's plain rejection.
#[derive(Debug, Default, Deserialize)]
struct PageQuery {
    page: Option<String>,
}

/// A finding as the host page shows it.
#[derive(Debug, Clone)]
struct FindingView {
    /// `critical`, `warning` or `info`: also the badge's CSS class.
    severity: &'static str,
    reason: String,
    /// Empty when the reason has no kinds.
    kind: String,
    subject: String,
    /// `open` or `resolved`.
    status: String,
    summary: String,
    first_seen: String,
    last_seen: String,
    /// Empty while open.
    resolved_at: String,
    /// Pretty-printed JSON (escaped by the template like any text).
    evidence: String,
    /// The fact changes around the finding, when there were any.
    fact_changes: Option<String>,
}

impl FindingView {
    fn new(f: &Finding) -> Self {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        // The deriver stores `{"changes": {…}, "from": …, "to": …}`; an empty
        // `changes` says nothing worth a second block.
        let has_changes = match &f.fact_changes {
            Value::Null => false,
            Value::Object(m) => match m.get("changes") {
                Some(Value::Object(c)) => !c.is_empty(),
                _ => !m.is_empty(),
            },
            Value::Array(a) => !a.is_empty(),
            _ => true,
        };
        FindingView {
            severity: f.severity.as_str(),
            reason: f.reason.clone(),
            kind: f.kind.clone().unwrap_or_default(),
            subject: f.subject.clone(),
            status: f.status.clone(),
            summary: f.summary.clone(),
            first_seen: format::timestamp(f.first_seen),
            last_seen: format::timestamp(f.last_seen),
            resolved_at: f.resolved_at.map(format::timestamp).unwrap_or_default(),
            evidence: pretty(&f.evidence),
            fact_changes: has_changes.then(|| pretty(&f.fact_changes)),
        }
    }
}

/// A result row; numbers formatted with units, raw values for sorting.
#[derive(Debug, Clone)]
struct ResultView {
    id: i64,
    /// `None` only if the job row is gone.
    campaign_id: Option<i64>,
    at: String,
    /// Seconds since the epoch: the `data-sort` key of the formatted time.
    at_sort: i64,
    /// What was measured; its `path` is the one asked for.
    point: Point,
    size: String,
    path_used: PathUsed,
    /// It ran another path than asked (partly or wholly in software): badged
    /// on the page, with this status class (`partial` or `software`).
    fell_back: Option<&'static str>,
    mb_s: String,
    mb_s_sort: f64,
    cv: String,
    p99: String,
    p99_sort: i64,
    samples: i32,
    /// Too few samples to trust the figures: badged beside the count.
    low_samples: bool,
    /// `None`: the agent did not report memory.
    memory: Option<MemoryText>,
    /// The cipher state in bytes, for sorting the memory column.
    memory_sort: String,
}

impl ResultView {
    fn new(r: &HostResult) -> Self {
        ResultView {
            id: r.id,
            campaign_id: r.campaign_id,
            at: format::timestamp(r.created_at),
            at_sort: r.created_at.timestamp(),
            point: r.point,
            size: format::bytes(r.point.size_bytes),
            path_used: r.path_used,
            fell_back: r.fell_back().then_some(match r.path_used {
                PathUsed::Partial => "partial",
                _ => "software",
            }),
            mb_s: format::mb_s(r.throughput_mb_s),
            mb_s_sort: r.throughput_mb_s,
            cv: r.cv.map(format::percent).map(|p| format!("CV {p}")).unwrap_or_default(),
            p99: format::nanos(r.latency_p99_ns as f64),
            p99_sort: r.latency_p99_ns,
            samples: r.samples,
            low_samples: r.low_samples,
            memory: format::memory(&r.memory),
            memory_sort: r.memory.cipher_state_bytes.map(|b| b.to_string()).unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "host.html")]
struct HostPage {
    host: Host,
    /// `k=v`, in key order.
    labels: Vec<String>,
    /// [`HostWithFacts::acceleration`] of the current facts.
    acceleration: Acceleration,
    /// Connected now, per the scheduler.
    online: bool,
    emulated: bool,
    simulated: bool,
    first_seen: String,
    last_seen: String,
    /// When the current snapshot was taken; empty without facts.
    facts_taken: String,
    facts: Vec<Fact>,
    /// Every feature the probe checked, then any other a list names.
    features: Vec<FeatureRow>,
    /// The snapshot says what was checked; without it, unlisted features are unknown.
    features_checked: bool,
    /// The kernel's chosen crypto drivers; `None` when the agent did not report them.
    kernel_drivers: Option<Vec<KernelDriverRow>>,
    /// The host's OpenSSL build; `None` when the agent did not report one.
    openssl: Option<Vec<Fact>>,
    /// Newest first.
    changes: Vec<FactChange>,
    /// Open and resolved, newest first: the host's history of findings.
    findings: Vec<FindingView>,
    /// Built by [`LineChart::render`], which escapes every text it places.
    chart: String,
    /// The whole history, daily or monthly, and the sentence saying which
    /// ([`host_history`]); `None` until there are two periods.
    history_chart: Option<(String, String)>,
    /// How many latest results per algorithm the first chart draws.
    chart_points: i64,
    results: Vec<ResultView>,
    /// "showing 1–50 of N" for the results table.
    summary: String,
    /// Links to newer / older results, when there are any.
    prev: Option<String>,
    next: Option<String>,
    /// `host=NAME` quoted for the shell, for the copy-paste `campaign start --select`.
    select_arg: String,
}

/// The host's current snapshot among its `history` (the latest, should the
/// current one be gone).
fn current_snapshot<'a>(host: &Host, history: &'a [Snapshot]) -> Option<&'a Snapshot> {
    history
        .iter()
        .find(|s| Some(s.id) == host.current_snapshot_id)
        .or(history.last())
}

/// The host or a 404 page naming the id.
async fn host_or_404(state: &WebState, raw_id: &str) -> Result<Host, WebError> {
    let id = parse_id(raw_id, "host")?;
    hosts::get(&state.pool, id)
        .await?
        .ok_or_else(|| WebError::NotFound(format!("no host with id {id}")))
}

async fn page(
    State(state): State<WebState>,
    UrlPath(raw_id): UrlPath<String>,
    Query(q): Query<PageQuery>,
) -> Result<Html<String>, WebError> {
    let page = Pager::parse_page(q.page.as_deref())?;
    let host = host_or_404(&state, &raw_id).await?;
    let history = snapshots::history(&state.pool, host.id).await?;
    let current = current_snapshot(&host, &history);
    let findings = findings::list_for_host(&state.pool, host.id).await?;
    // The acceleration verdict is the shared one, over the current facts.
    let with_facts = HostWithFacts {
        host: host.clone(),
        arch: current.and_then(|s| s.columns.arch.clone()),
        cpu_model_name: current.and_then(|s| s.columns.cpu_model_name.clone()),
        kernel_release: current.and_then(|s| s.columns.kernel_release.clone()),
        logical_cores: current.and_then(|s| s.columns.logical_cores),
        features_usable: current.map(|s| s.columns.features_usable.clone()),
        build_flavour: current.and_then(|s| s.columns.build_flavour.clone()),
        hypervisor: current.and_then(|s| s.columns.hypervisor.clone()),
        cpuinfo_foreign: current.and_then(|s| s.columns.cpuinfo_foreign),
        // What its latest results ran, as the hosts list reads it.
        ran_in_software: findings
            .iter()
            .filter(|f| f.status == "open" && f.reason == unexplained::REASON)
            .map(|f| f.subject.clone())
            .collect(),
    };

    let total = host_results::count(&state.pool, host.id).await?;
    let pager = Pager::new(page, PER_PAGE, total as u64);
    let results = host_results::list(&state.pool, host.id, PER_PAGE as i64, pager.offset() as i64).await?;
    let series = host_results::key_series(&state.pool, host.id, &KEY_ALGORITHMS, KEY_SIZE, CHART_POINTS).await?;
    let whole_history = rollups::history(&state.pool, host.id, &KEY_ALGORITHMS, KEY_SIZE).await?;
    let base = format!("/hosts/{}", host.id);

    let view = HostPage {
        labels: label_texts(&host.labels.0),
        acceleration: with_facts.acceleration(),
        online: state.scheduler.is_online_in_cluster(host.id).await?,
        emulated: with_facts.emulated(),
        simulated: with_facts.simulated(),
        first_seen: format::timestamp(host.first_seen),
        last_seen: format::timestamp(host.last_seen),
        facts_taken: current.map(|s| format::timestamp(s.taken_at)).unwrap_or_default(),
        facts: current.map(facts_table).unwrap_or_default(),
        features: current.map(feature_rows).unwrap_or_default(),
        features_checked: current.is_some_and(features_checked),
        kernel_drivers: current.and_then(kernel_drivers),
        openssl: current.and_then(openssl_facts),
        changes: fact_changes(&history),
        findings: findings.iter().map(FindingView::new).collect(),
        chart: key_chart(&series),
        history_chart: host_history::chart(&whole_history, &KEY_ALGORITHMS, KEY_SIZE as u64),
        chart_points: CHART_POINTS,
        results: results.iter().map(ResultView::new).collect(),
        summary: pager.summary(),
        prev: pager.prev_href(&base, &[]),
        next: pager.next_href(&base, &[]),
        select_arg: shell::quote(&format!("host={}", host.name)),
        host,
    };
    Ok(Html(view.render()?))
}

/// Throughput of the key algorithms over time, one line each.
fn key_chart(samples: &[ThroughputSample]) -> String {
    let mut chart = LineChart::new(
        format!(
            "Key algorithms over time: {} encrypt, 1 thread, accelerated path",
            format::bytes(KEY_SIZE as u64)
        ),
        XAxis::Time,
    );
    for alg in KEY_ALGORITHMS {
        let line: Vec<(f64, f64)> = samples
            .iter()
            .filter(|p| p.algorithm.name() == alg)
            .map(|p| (time_x(p.created_at), p.throughput_mb_s))
            .collect();
        if !line.is_empty() {
            chart = chart.series(alg, line);
        }
    }
    chart.render()
}

/// A row of `/api/v1/hosts/{id}/results`: the point's seven columns, then what ran.
#[derive(Debug, Serialize)]
struct ResultApiRow {
    id: i64,
    campaign_id: Option<i64>,
    created_at: DateTime<Utc>,
    #[serde(flatten)]
    point: Point,
    path_used: PathUsed,
    throughput_mb_s: f64,
    ops_per_s: f64,
    latency_p99_ns: i64,
    cv: Option<f64>,
    samples: i32,
    /// Fewer samples than the figures need to be trusted, even after the run was extended.
    low_samples: bool,
    /// `cipher_state_bytes`, `peak_rss_bytes`, `heap_bytes_per_op`, `allocs_per_op`; null when not reported.
    #[serde(flatten)]
    memory: StoredMemory,
    /// The stored measurement, as the agent sent it.
    raw: String,
}

/// `?page=N`: 1000 rows per page, newest first.
async fn api_results(
    State(state): State<WebState>,
    UrlPath(raw_id): UrlPath<String>,
    Query(q): Query<PageQuery>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let page = Pager::parse_page(q.page.as_deref())?;
    let host = host_or_404(&state, &raw_id).await?;
    let total = host_results::count(&state.pool, host.id).await?;
    let pager = Pager::new(page, API_PER_PAGE, total as u64);
    let rows: Vec<ResultApiRow> = host_results::list(&state.pool, host.id, API_PER_PAGE as i64, pager.offset() as i64)
        .await?
        .into_iter()
        .map(|r| ResultApiRow {
            raw: format!("/api/v1/results/{}", r.id),
            id: r.id,
            campaign_id: r.campaign_id,
            created_at: r.created_at,
            point: r.point,
            path_used: r.path_used,
            throughput_mb_s: r.throughput_mb_s,
            ops_per_s: r.ops_per_s,
            latency_p99_ns: r.latency_p99_ns,
            cv: r.cv,
            samples: r.samples,
            low_samples: r.low_samples,
            memory: r.memory,
        })
        .collect();
    api::table(&format!("host-{}-results", host.id), &rows, f.format)
}

async fn api_changes(
    State(state): State<WebState>,
    UrlPath(raw_id): UrlPath<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let host = host_or_404(&state, &raw_id).await?;
    let history = snapshots::history(&state.pool, host.id).await?;
    api::table(&format!("host-{}-changes", host.id), &fact_changes(&history), f.format)
}

/// `GET /api/v1/hosts/{id}/providers`: the providers' facts of the host's
/// current snapshot — the kernel's chosen crypto drivers and the host's
/// OpenSSL build, as the agent reported them (`null` when it did not).
async fn api_providers(State(state): State<WebState>, UrlPath(raw_id): UrlPath<String>) -> Result<Response, ApiError> {
    let host = host_or_404(&state, &raw_id).await?;
    let history = snapshots::history(&state.pool, host.id).await?;
    let current = current_snapshot(&host, &history);
    let c = current.map(|s| &s.columns);
    Ok(axum::Json(serde_json::json!({
        "host_id": host.id,
        "snapshot_id": current.map(|s| s.id),
        "kernel_drivers": c.and_then(|c| c.kernel_drivers.as_ref()),
        "openssl": c.and_then(|c| c.openssl_build.as_ref()),
    }))
    .into_response())
}

/// `GET /api/v1/hosts/{id}/history`: every period of the host's key points
/// (the algorithms and size of its charts), oldest first per algorithm, with
/// its resolution, count, quantiles and path mix ([`host_history`]).
async fn api_history(
    State(state): State<WebState>,
    UrlPath(raw_id): UrlPath<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let host = host_or_404(&state, &raw_id).await?;
    let rows = rollups::history(&state.pool, host.id, &KEY_ALGORITHMS, KEY_SIZE).await?;
    api::table(&format!("host-{}-history", host.id), &rows, f.format)
}

async fn api_findings(
    State(state): State<WebState>,
    UrlPath(raw_id): UrlPath<String>,
    Query(f): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let host = host_or_404(&state, &raw_id).await?;
    let rows: Vec<FindingApiRow> = findings::list_for_host(&state.pool, host.id)
        .await?
        .into_iter()
        .map(FindingApiRow::from)
        .collect();
    api::table(&format!("host-{}-findings", host.id), &rows, f.format)
}
