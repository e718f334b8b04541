//! `/capacity`: the capacity planner, and `/api/v1/capacity` (the same as
//! JSON: inputs and rows; `format=csv`: the rows).
//!
//! For each machine class ([`MachineClass`]) it reads the latest measured
//! points of the chosen algorithm at one payload size, direction and path,
//! and turns them into per-core MB/s, thread-scaling efficiency, and cores
//! and hosts needed for a target rate ([`crate::analysis::capacity`] holds
//! the formulas). Beside them: the recommended algorithm of the class, the
//! fastest measured authenticated one at that size, with its lead.
//!
//! Emulated (`emulated` label) and simulated (`simulated` label) hosts are
//! left out unless `include=emulated`; when included they form their own
//! rows, marked, so their timings never blend into a real class's figures.

use std::collections::BTreeMap;

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::api::{self, ApiError, FormatParam};
use super::{WebError, WebState, format};
use crate::analysis::capacity::{self as model, DEFAULT_HEADROOM, HostSeries, RateUnit, Target, ThreadPoint};
use crate::analysis::class::MachineClass;
use crate::db::capacity::{self as store, ClassHost, MeasuredPoint, PointFilter};

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/capacity", get(page))
        .route("/api/v1/capacity", get(api_capacity))
}

/// The payload sizes the form offers: the benchmark matrix's.
const SIZES: [u64; 10] = [11, 16, 18, 64, 256, 1024, 8192, 16384, 1 << 20, 10 << 20];
/// Beyond this a headroom factor is a typo, not a plan.
const MAX_HEADROOM: f64 = 100.0;

/// The query string as sent; every field optional (an empty field is the default).
#[derive(Debug, Default, Deserialize)]
pub struct CapacityQuery {
    target: Option<String>,
    unit: Option<String>,
    size: Option<String>,
    algorithm: Option<String>,
    headroom: Option<String>,
    direction: Option<String>,
    path: Option<String>,
    include: Option<String>,
}

/// Validated inputs, echoed in the JSON answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inputs {
    pub target: f64,
    pub unit: RateUnit,
    pub size_bytes: u64,
    pub algorithm: String,
    pub headroom: f64,
    pub direction: String,
    pub path: String,
    /// `include=emulated`: emulated and simulated hosts are planned with (in rows of their own).
    pub include_emulated: bool,
    /// The target in MB/s of plaintext, and that × headroom.
    pub target_mb_s: f64,
    pub provision_mb_s: f64,
}

/// `Some(trimmed)` for a present, non-blank field.
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn bad(field: &str, message: String) -> WebError {
    WebError::BadRequest(format!("{field}: {message}"))
}

impl CapacityQuery {
    /// The inputs, or a bad request naming the field and what it accepts.
    pub fn inputs(&self) -> Result<Inputs, WebError> {
        let target = match given(&self.target) {
            None => 10.0,
            Some(t) => t
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| bad("target", format!("{t:?} is not a positive number")))?,
        };
        let unit = match given(&self.unit) {
            None => RateUnit::Gbit,
            Some(u) => u.parse().map_err(|e| bad("unit", e))?,
        };
        let size_bytes = match given(&self.size) {
            None => 16384,
            Some(s) => cipherfleet_agent::spec::parse_size(s).map_err(|e| bad("size", e.message))?,
        };
        let algorithm = match given(&self.algorithm) {
            None => "aes-256-gcm".to_string(),
            Some(a) => a
                .parse::<cipherfleet_agent::algorithm::Algorithm>()
                .map_err(|e| bad("algorithm", e.to_string()))?
                .name()
                .to_string(),
        };
        let headroom = match given(&self.headroom) {
            None => DEFAULT_HEADROOM,
            Some(h) => h
                .parse::<f64>()
                .ok()
                .filter(|v| (1.0..=MAX_HEADROOM).contains(v))
                .ok_or_else(|| {
                    bad(
                        "headroom",
                        format!("{h:?} is not a factor from 1 to {MAX_HEADROOM} (1.3 = 30 % spare)"),
                    )
                })?,
        };
        let direction = one_of("direction", given(&self.direction), &["encrypt", "decrypt"])?;
        let path = one_of("path", given(&self.path), &["accelerated", "software"])?;
        let include_emulated = match given(&self.include) {
            None => false,
            Some("emulated") => true,
            Some(other) => {
                return Err(bad(
                    "include",
                    format!("{other:?} is not known; the only value is emulated"),
                ));
            }
        };
        let target_mb_s = Target { value: target, unit }.mb_s(size_bytes);
        Ok(Inputs {
            target,
            unit,
            size_bytes,
            algorithm,
            headroom,
            direction,
            path,
            include_emulated,
            target_mb_s,
            provision_mb_s: target_mb_s * headroom,
        })
    }
}

/// `value` if it is one of `allowed` (the first is the default).
fn one_of(field: &str, value: Option<&str>, allowed: &[&str]) -> Result<String, WebError> {
    match value {
        None => Ok(allowed[0].to_string()),
        Some(v) if allowed.contains(&v) => Ok(v.to_string()),
        Some(v) => Err(bad(field, format!("{v:?} is not one of {}", allowed.join(", ")))),
    }
}

impl Inputs {
    /// The query string of this view (values are validated tokens and numbers: nothing to encode).
    fn query(&self) -> String {
        let mut q = format!(
            "target={}&unit={}&size={}&algorithm={}&headroom={}&direction={}&path={}",
            self.target,
            self.unit.as_str(),
            self.size_bytes,
            self.algorithm,
            self.headroom,
            self.direction,
            self.path
        );
        if self.include_emulated {
            q.push_str("&include=emulated");
        }
        q
    }
}

/// One machine class (real, or emulated/simulated hosts of that class) at the
/// chosen point: a flat row for JSON and CSV. Empty figures: not measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityRow {
    /// `?class=` key of [`MachineClass::key`].
    pub class_key: String,
    pub class_label: String,
    pub emulated: bool,
    pub simulated: bool,
    /// Hosts of the class in the fleet, and those with a single-thread measurement.
    pub hosts_in_class: usize,
    pub hosts_measured: usize,
    /// Latest results (one per host and thread count) behind the figures.
    pub results: usize,
    pub algorithm: String,
    pub size_bytes: u64,
    pub direction: String,
    pub path: String,
    /// What the results really ran on, e.g. `accelerated` or `software`.
    pub path_used: String,
    pub per_core_mb_s: Option<f64>,
    pub per_core_min_mb_s: Option<f64>,
    pub per_core_max_mb_s: Option<f64>,
    /// Threads a host would run and the measured efficiency there.
    pub run_threads: Option<u32>,
    pub efficiency: Option<f64>,
    /// Only one thread measured: linear scaling assumed.
    pub scaling_assumed_linear: Option<bool>,
    /// Every measured efficiency, `threads:efficiency` separated by spaces.
    pub scaling: String,
    pub cores_per_host: Option<u32>,
    pub target_mb_s: f64,
    pub provision_mb_s: f64,
    pub cores_needed: Option<f64>,
    pub hosts_needed: Option<u64>,
    pub recommended_algorithm: Option<String>,
    pub recommended_per_core_mb_s: Option<f64>,
    pub runner_up_algorithm: Option<String>,
    pub runner_up_per_core_mb_s: Option<f64>,
    /// recommended / runner-up per-core MB/s.
    pub recommended_ratio: Option<f64>,
    pub warnings: String,
}

/// What the planner read, before planning.
pub struct Measurements {
    pub hosts: Vec<ClassHost>,
    pub points: Vec<MeasuredPoint>,
}

/// Hosts that count: marked ones only with `include=emulated`.
fn counted(host: &ClassHost, inputs: &Inputs) -> bool {
    inputs.include_emulated || !(host.emulated || host.simulated)
}

/// The planner's rows, one per class (marked hosts in rows of their own),
/// sorted by class label; and how many marked hosts were left out.
pub fn plan_rows(m: &Measurements, inputs: &Inputs) -> (Vec<CapacityRow>, usize) {
    type Group<'a> = (MachineClass, bool, bool);
    let excluded = m.hosts.iter().filter(|h| !counted(h, inputs)).count();
    let mut groups: BTreeMap<Group, Vec<&ClassHost>> = BTreeMap::new();
    for h in m.hosts.iter().filter(|h| counted(h, inputs)) {
        let class = MachineClass::of(
            h.arch.as_deref(),
            h.cpu_vendor.as_deref(),
            h.cpu_model_name.as_deref(),
            &h.features_usable,
            h.build_flavour.as_deref(),
        );
        groups.entry((class, h.emulated, h.simulated)).or_default().push(h);
    }
    let mut by_host: BTreeMap<(i64, &str), Vec<ThreadPoint>> = BTreeMap::new();
    for p in &m.points {
        by_host
            .entry((p.host_id, p.algorithm.as_str()))
            .or_default()
            .push(ThreadPoint {
                threads: u32::try_from(p.threads).unwrap_or(0),
                mb_s: p.throughput_mb_s,
                path_used: p.path_used.clone(),
            });
    }
    let series = |hosts: &[&ClassHost], algorithm: &str| -> Vec<HostSeries> {
        hosts
            .iter()
            .filter_map(|h| {
                Some(HostSeries {
                    host_id: h.host_id,
                    logical_cores: h.logical_cores.and_then(|c| u32::try_from(c).ok()),
                    points: by_host.get(&(h.host_id, algorithm))?.clone(),
                })
            })
            .collect()
    };
    let mut algorithms: Vec<&str> = m.points.iter().map(|p| p.algorithm.as_str()).collect();
    algorithms.sort();
    algorithms.dedup();

    let mut rows: Vec<CapacityRow> = groups
        .iter()
        .map(|((class, emulated, simulated), hosts)| {
            let estimate = model::estimate(&series(hosts, &inputs.algorithm), &inputs.path);
            let plan = estimate
                .as_ref()
                .map(|e| model::plan(e, inputs.target_mb_s, inputs.headroom));
            let candidates: Vec<(String, f64)> = algorithms
                .iter()
                .filter(|a| model::is_candidate(a))
                .filter_map(|a| {
                    Some((
                        a.to_string(),
                        model::estimate(&series(hosts, a), &inputs.path)?.per_core_mb_s,
                    ))
                })
                .collect();
            let recommendation = model::recommend(&candidates);
            let e = estimate.as_ref();
            CapacityRow {
                class_key: class.key(),
                class_label: class.label(),
                emulated: *emulated,
                simulated: *simulated,
                hosts_in_class: hosts.len(),
                hosts_measured: e.map_or(0, |e| e.hosts),
                results: e.map_or(0, |e| e.results),
                algorithm: inputs.algorithm.clone(),
                size_bytes: inputs.size_bytes,
                direction: inputs.direction.clone(),
                path: inputs.path.clone(),
                path_used: e.map(|e| e.paths_used.join(" ")).unwrap_or_default(),
                per_core_mb_s: e.map(|e| e.per_core_mb_s),
                per_core_min_mb_s: e.map(|e| e.per_core_min_mb_s),
                per_core_max_mb_s: e.map(|e| e.per_core_max_mb_s),
                run_threads: e.map(|e| e.run_threads),
                efficiency: e.map(|e| e.efficiency),
                scaling_assumed_linear: e.map(|e| e.linear_assumed),
                scaling: e
                    .map(|e| {
                        let curve: Vec<String> = e
                            .scaling
                            .iter()
                            .map(|s| format!("{}:{:.3}", s.threads, s.efficiency))
                            .collect();
                        curve.join(" ")
                    })
                    .unwrap_or_default(),
                cores_per_host: e.and_then(|e| e.cores_per_host),
                target_mb_s: inputs.target_mb_s,
                provision_mb_s: inputs.provision_mb_s,
                cores_needed: plan.map(|p| p.cores_needed),
                hosts_needed: plan.and_then(|p| p.hosts_needed),
                recommended_algorithm: recommendation.as_ref().map(|r| r.algorithm.clone()),
                recommended_per_core_mb_s: recommendation.as_ref().map(|r| r.per_core_mb_s),
                runner_up_algorithm: recommendation.as_ref().and_then(|r| r.runner_up.clone()),
                runner_up_per_core_mb_s: recommendation.as_ref().and_then(|r| r.runner_up_per_core_mb_s),
                recommended_ratio: recommendation.as_ref().and_then(|r| r.ratio()),
                warnings: e
                    .map(|e| {
                        e.warnings
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .unwrap_or_else(|| "no single-thread measurement of this algorithm at this point".into()),
            }
        })
        .collect();
    // Measured classes first, then by label; marked rows after their real class.
    rows.sort_by(|a, b| {
        (a.per_core_mb_s.is_none(), &a.class_label, a.emulated, a.simulated).cmp(&(
            b.per_core_mb_s.is_none(),
            &b.class_label,
            b.emulated,
            b.simulated,
        ))
    });
    (rows, excluded)
}

/// Reads what the planner needs: the hosts, and the points of the chosen
/// algorithm plus every recommendation candidate.
async fn measure(state: &WebState, inputs: &Inputs) -> Result<Measurements, WebError> {
    let mut algorithms: Vec<String> = cipherfleet_agent::algorithm::ALL
        .iter()
        .map(|a| a.name().to_string())
        .filter(|a| model::is_candidate(a))
        .collect();
    algorithms.push(inputs.algorithm.clone());
    let size_bytes = i64::try_from(inputs.size_bytes).map_err(|_| bad("size", "too large".into()))?;
    let hosts = store::hosts(&state.pool).await?;
    let points = store::points(
        &state.pool,
        PointFilter {
            size_bytes,
            direction: &inputs.direction,
            path: &inputs.path,
            algorithms: &algorithms,
        },
    )
    .await?;
    Ok(Measurements { hosts, points })
}

/// The JSON answer: what was asked, and the rows.
#[derive(Serialize)]
struct CapacityAnswer<'a> {
    inputs: &'a Inputs,
    /// Emulated or simulated hosts left out (`include=emulated` plans with them).
    excluded_hosts: usize,
    rows: &'a [CapacityRow],
}

async fn api_capacity(
    State(state): State<WebState>,
    Query(query): Query<CapacityQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let inputs = query.inputs()?;
    let (rows, excluded_hosts) = plan_rows(&measure(&state, &inputs).await?, &inputs);
    match format.format {
        api::Format::Csv => api::table("capacity", &rows, format.format),
        api::Format::Json => Ok(axum::Json(CapacityAnswer {
            inputs: &inputs,
            excluded_hosts,
            rows: &rows,
        })
        .into_response()),
    }
}

/// One option of a `<select>`.
struct Choice {
    value: String,
    text: String,
    selected: bool,
}

fn choices(items: impl IntoIterator<Item = (String, String)>, current: &str) -> Vec<Choice> {
    items
        .into_iter()
        .map(|(value, text)| Choice {
            selected: value == current,
            value,
            text,
        })
        .collect()
}

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
    path_fell_back: bool,
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
            path_fell_back: measured && r.path_used != r.path,
            scaling,
            scaling_curve,
            linear_assumed: r.scaling_assumed_linear == Some(true),
            cores_per_host: text_or_dash(r.cores_per_host, |c| c.to_string()),
            // Cores are bought whole: round up, keep the exact figure in the JSON.
            cores_needed: text_or_dash(r.cores_needed, |c| format!("{}", c.ceil())),
            cores_needed_sort: r.cores_needed.map(|v| v.to_string()).unwrap_or_default(),
            hosts_needed: text_or_dash(r.hosts_needed, |h| h.to_string()),
            hosts_needed_sort: r.hosts_needed.map(|v| v.to_string()).unwrap_or_default(),
            recommended: text_or_dash(r.recommended_algorithm.clone(), |a| {
                let mb_s = r.recommended_per_core_mb_s.map(format::mb_s).unwrap_or_default();
                format!("{a} ({mb_s} per core)")
            }),
            recommended_lead,
            warnings: r
                .warnings
                .split("; ")
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }
}

#[derive(Template)]
#[template(path = "capacity.html")]
struct CapacityPage {
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
    query: String,
    rows: Vec<RowView>,
    any_hosts: bool,
    excluded: usize,
}

async fn page(State(state): State<WebState>, Query(query): Query<CapacityQuery>) -> Result<Html<String>, WebError> {
    let inputs = query.inputs()?;
    let measurements = measure(&state, &inputs).await?;
    Ok(Html(page_view(inputs, &measurements).render()?))
}

/// The page for `inputs` over what was measured.
fn page_view(inputs: Inputs, measurements: &Measurements) -> CapacityPage {
    let (rows, excluded) = plan_rows(measurements, &inputs);
    let mut sizes: Vec<u64> = SIZES.to_vec();
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
            cipherfleet_agent::algorithm::ALL
                .iter()
                .map(|a| (a.name().to_string(), a.name().to_string())),
            &inputs.algorithm,
        ),
        directions: choices(
            ["encrypt", "decrypt"].map(|d| (d.to_string(), d.to_string())),
            &inputs.direction,
        ),
        paths: choices(
            ["accelerated", "software"].map(|p| (p.to_string(), p.to_string())),
            &inputs.path,
        ),
        query: inputs.query(),
        rows: rows.iter().map(|r| RowView::new(r, inputs.unit)).collect(),
        any_hosts: !measurements.hosts.is_empty(),
        excluded,
        inputs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> CapacityQuery {
        let mut q = CapacityQuery::default();
        for (k, v) in pairs {
            let v = Some(v.to_string());
            match *k {
                "target" => q.target = v,
                "unit" => q.unit = v,
                "size" => q.size = v,
                "algorithm" => q.algorithm = v,
                "headroom" => q.headroom = v,
                "direction" => q.direction = v,
                "path" => q.path = v,
                "include" => q.include = v,
                _ => unreachable!("{k}"),
            }
        }
        q
    }

    #[test]
    fn no_parameters_plan_ten_gbit_of_aes_256_gcm_at_16_kib() {
        let i = query(&[]).inputs().unwrap();
        assert_eq!(
            (i.target, i.unit, i.size_bytes, i.algorithm.as_str(), i.headroom),
            (10.0, RateUnit::Gbit, 16384, "aes-256-gcm", 1.3)
        );
        assert_eq!(
            (i.direction.as_str(), i.path.as_str(), i.include_emulated),
            ("encrypt", "accelerated", false)
        );
        assert_eq!(i.target_mb_s, 1250.0);
        assert_eq!(i.provision_mb_s, 1625.0);
        // Blank form fields are the defaults too.
        assert_eq!(query(&[("target", " "), ("unit", "")]).inputs().unwrap(), i);
    }

    #[test]
    fn parameters_are_read_and_ops_use_the_payload_size() {
        let i = query(&[
            ("target", "2e6"),
            ("unit", "ops"),
            ("size", "18"),
            ("algorithm", "ChaCha20-Poly1305"),
            ("headroom", "1"),
            ("direction", "decrypt"),
            ("path", "software"),
            ("include", "emulated"),
        ])
        .inputs()
        .unwrap();
        assert_eq!(i.algorithm, "chacha20-poly1305");
        assert_eq!(i.target_mb_s, 36.0);
        assert!(i.include_emulated);
        assert_eq!(
            i.query(),
            "target=2000000&unit=ops&size=18&algorithm=chacha20-poly1305&headroom=1&direction=decrypt&path=software&include=emulated"
        );
        assert_eq!(query(&[("size", "16KiB")]).inputs().unwrap().size_bytes, 16384);
    }

    #[test]
    fn bad_parameters_are_rejected_naming_the_field() {
        for (field, value) in [
            ("headroom", "0.5"),
            ("headroom", "NaN"),
            ("target", "-1"),
            ("target", "inf"),
            ("target", "lots"),
            ("unit", "furlongs"),
            ("size", "0"),
            ("size", "16 parsecs"),
            ("algorithm", "rot13"),
            ("direction", "sideways"),
            ("path", "fast"),
            ("include", "everything"),
        ] {
            match query(&[(field, value)]).inputs() {
                Err(WebError::BadRequest(m)) => assert!(m.starts_with(&format!("{field}: ")), "{field}={value}: {m}"),
                other => panic!("{field}={value}: {other:?}"),
            }
        }
    }

    fn class_host(id: i64, model: &str, cores: i32, emulated: bool) -> ClassHost {
        ClassHost {
            host_id: id,
            name: format!("h{id}"),
            emulated,
            simulated: false,
            arch: Some("x86_64".into()),
            cpu_vendor: Some("GenuineIntel".into()),
            cpu_model_name: Some(model.into()),
            features_usable: vec!["aes".into(), "pclmulqdq".into()],
            build_flavour: Some("accelerated".into()),
            logical_cores: Some(cores),
        }
    }

    fn point(host_id: i64, algorithm: &str, threads: i32, mb_s: f64) -> MeasuredPoint {
        MeasuredPoint {
            host_id,
            algorithm: algorithm.into(),
            threads,
            throughput_mb_s: mb_s,
            ops_per_s: mb_s * 1e6 / 16384.0,
            path_used: "accelerated".into(),
            result_id: host_id * 100 + i64::from(threads),
        }
    }

    #[test]
    fn classes_are_planned_apart_and_marked_hosts_only_on_request() {
        let m = Measurements {
            hosts: vec![
                class_host(1, "Fast CPU", 4, false),
                class_host(2, "Fast CPU", 4, false),
                class_host(3, "Slow CPU", 2, false),
                class_host(4, "Fast CPU", 4, true),
                // In the fleet, never measured: counted in its class, not in the figures.
                class_host(5, "Slow CPU", 2, false),
            ],
            points: vec![
                point(1, "aes-256-gcm", 1, 1000.0),
                point(1, "aes-256-gcm", 4, 3600.0),
                point(2, "aes-256-gcm", 1, 1200.0),
                point(2, "aes-256-gcm", 4, 4320.0),
                point(1, "chacha20-poly1305", 1, 500.0),
                point(3, "aes-256-gcm", 1, 100.0),
                point(3, "chacha20-poly1305", 1, 400.0),
                point(4, "aes-256-gcm", 1, 10.0),
            ],
        };
        let inputs = query(&[("target", "10"), ("headroom", "1")]).inputs().unwrap();
        let (rows, excluded) = plan_rows(&m, &inputs);
        assert_eq!(excluded, 1);
        assert_eq!(rows.len(), 2);
        let fast = &rows[0];
        assert!(fast.class_label.contains("Fast CPU"), "{}", fast.class_label);
        assert_eq!((fast.hosts_in_class, fast.hosts_measured, fast.results), (2, 2, 4));
        assert_eq!(fast.per_core_mb_s, Some(1100.0));
        assert_eq!((fast.run_threads, fast.efficiency), (Some(4), Some(0.9)));
        // 1250 MB/s / (1100 × 0.9) cores, one 4-core host.
        assert!((fast.cores_needed.unwrap() - 1250.0 / 990.0).abs() < 1e-9);
        assert_eq!(fast.hosts_needed, Some(1));
        assert_eq!(fast.recommended_algorithm.as_deref(), Some("aes-256-gcm"));
        assert_eq!(fast.runner_up_algorithm.as_deref(), Some("chacha20-poly1305"));
        assert_eq!(fast.recommended_ratio, Some(1100.0 / 500.0));

        let slow = &rows[1];
        assert_eq!((slow.hosts_in_class, slow.hosts_measured), (2, 1));
        assert_eq!(slow.hosts_needed, Some(7), "12.5 cores on 2-core hosts, linear assumed");
        assert_eq!(slow.scaling_assumed_linear, Some(true));
        assert_eq!(slow.recommended_algorithm.as_deref(), Some("chacha20-poly1305"));
        assert_eq!(slow.recommended_ratio, Some(4.0));
        assert!(slow.warnings.contains("linear scaling assumed"), "{}", slow.warnings);

        let with = query(&[("include", "emulated")]).inputs().unwrap();
        let (rows, excluded) = plan_rows(&m, &with);
        assert_eq!(excluded, 0);
        let marked: Vec<&CapacityRow> = rows.iter().filter(|r| r.emulated).collect();
        assert_eq!(marked.len(), 1, "the emulated host is a row of its own");
        assert_eq!((marked[0].hosts_in_class, marked[0].per_core_mb_s), (1, Some(10.0)));
        assert_eq!(
            rows.iter()
                .find(|r| !r.emulated && r.class_key == marked[0].class_key)
                .unwrap()
                .hosts_in_class,
            2
        );
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
        assert_eq!(rows[0].recommended_algorithm.as_deref(), Some("chacha20-poly1305"));
        let view = RowView::new(&rows[0], RateUnit::Gbit);
        assert_eq!((view.per_core.as_str(), view.hosts_needed.as_str()), ("–", "–"));
        assert_eq!(view.recommended_lead, "the only authenticated algorithm measured");
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
