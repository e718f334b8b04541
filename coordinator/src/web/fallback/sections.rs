//! The page's three lists as the template shows them: the paths table's
//! rows, the hosts at software speed (grouped, worst first), the findings
//! with readable evidence; and the pagers that move each list on its own.

use std::collections::HashMap;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use serde_json::Value;

use cipherfleet_core::path::Path;

use super::evidence::{change_lines, evidence_lines, ratio_text};
use super::{Judged, reason_label, reason_with_subject};
use crate::analysis::fill::Fill;
use crate::analysis::software_speed::SoftwareSpeed;
use crate::report::fallback::PathPoint;
use crate::store::findings::Finding;
use crate::web::format;
use crate::web::paging::{Pager, with_query};

/// A throughput cell: the figure, a link to the raw result, its sample CV.
pub(super) struct Cell {
    /// `1230 MB/s`, or "not measured" (with [`Cell::fill`]).
    pub(super) text: String,
    /// MB/s as a plain number for sorting; empty when not measured.
    pub(super) sort: String,
    /// The raw result (`/api/v1/results/{id}`): every figure can be checked.
    pub(super) href: Option<String>,
    /// `CV 2.30 %`: how much the samples spread, so a noisy ratio is not over-read.
    pub(super) cv: Option<String>,
    /// Not measured: what measures it (`--suite fallback`), the whole
    /// command being in the note above the table; none for a path the
    /// provider does not have (ring's software path).
    pub(super) fill: Option<String>,
}

impl Cell {
    /// `fill` says what measures the figure, asked only when it is missing.
    pub(super) fn new(
        mb_s: Option<f64>,
        result_id: Option<i64>,
        cv: Option<f64>,
        fill: impl FnOnce() -> Option<Fill>,
    ) -> Self {
        Cell {
            text: mb_s.map_or_else(|| "not measured".into(), format::mb_s),
            sort: mb_s.map(|v| v.to_string()).unwrap_or_default(),
            href: result_id.map(|id| format!("/api/v1/results/{id}")),
            cv: cv.map(|c| format!("CV {}", format::percent(c))),
            fill: if mb_s.is_none() { fill().map(|f| f.flag()) } else { None },
        }
    }
}

/// What measures `algorithm` on `path` at the view's point; `None` when its
/// provider cannot (ring has no software build: its software figures come
/// from hosts without the instructions).
pub(super) fn fill_of(point: &PathPoint, algorithm: Algorithm, path: Path) -> Option<Fill> {
    let at = point.at(algorithm, path);
    cipherfleet_core::spec::validate_provider(&at).ok()?;
    Fill::of(&[at])
}

/// A path not measured for some rows of the page, and the command that measures it.
pub(super) struct MissingView {
    /// `software path`.
    pub(super) path: &'static str,
    /// The algorithms whose rows lack it, in the page's order.
    pub(super) algorithms: Vec<Algorithm>,
    pub(super) command: String,
}

/// The rows' missing paths, grouped by the command that measures them.
pub(super) fn missing(rows: &[Judged], point: &PathPoint) -> Vec<MissingView> {
    let mut out: Vec<MissingView> = Vec::new();
    for r in rows {
        let p = &r.pair;
        for (path, name, mb_s) in [
            (Path::Accelerated, "accelerated path", p.accelerated_mb_s),
            (Path::Software, "software path", p.software_mb_s),
        ] {
            if mb_s.is_some() {
                continue;
            }
            let Some(command) = fill_of(point, p.algorithm, path).map(|f| f.command()) else {
                continue;
            };
            match out.iter_mut().find(|m| m.path == name && m.command == command) {
                Some(m) if m.algorithms.contains(&p.algorithm) => {}
                Some(m) => m.algorithms.push(p.algorithm),
                None => out.push(MissingView {
                    path: name,
                    algorithms: vec![p.algorithm],
                    command,
                }),
            }
        }
    }
    out
}

/// A link to a finding in the list below.
pub(super) struct ReasonLink {
    /// The finding's id: the link target is its row, `#finding-{id}`.
    pub(super) id: i64,
    /// The reason with its subject, and the kind for slow paths:
    /// `cpu-lacks: aes`, `slow-accelerated: aes-256-gcm (near-software)`.
    pub(super) label: String,
    pub(super) severity: &'static str,
}

/// One row of the paths table; numbers preformatted here so tests can check them.
pub(super) struct RowView {
    pub(super) host_id: i64,
    pub(super) host: String,
    pub(super) emulated: bool,
    pub(super) simulated: bool,
    pub(super) arch: String,
    pub(super) algorithm: Algorithm,
    pub(super) accelerated: Cell,
    /// What ran for the accelerated request; `None` if not measured.
    pub(super) path_used: Option<PathUsed>,
    pub(super) software: Cell,
    /// `1.02×`, or what it needs; `ratio_sort` is the bare number for report.js.
    pub(super) ratio: String,
    pub(super) ratio_sort: String,
    /// Also listed in the section above: the row is highlighted.
    pub(super) at_software_speed: bool,
    /// The open findings that explain this algorithm on this host.
    pub(super) reasons: Vec<ReasonLink>,
}

/// A finding as the lists show it: evidence and fact changes spelled out.
pub(super) struct FindingView {
    pub(super) id: i64,
    pub(super) host_id: i64,
    pub(super) host: String,
    pub(super) emulated: bool,
    pub(super) label: String,
    pub(super) reason: String,
    pub(super) subject: String,
    pub(super) severity: &'static str,
    pub(super) first_seen: String,
    pub(super) last_seen: String,
    pub(super) summary: String,
    pub(super) evidence: Vec<(String, String)>,
    pub(super) changes: Vec<String>,
    /// The evidence as compact JSON, for the curious (escaped by the template).
    pub(super) raw: String,
}

impl FindingView {
    pub(super) fn new(f: &Finding) -> Self {
        FindingView {
            id: f.id,
            host_id: f.host_id,
            host: f.host_name.clone(),
            emulated: f.evidence.get("emulated") == Some(&Value::Bool(true)),
            label: reason_label(f),
            reason: f.reason.clone(),
            subject: f.subject.clone(),
            severity: f.severity.as_str(),
            first_seen: format::timestamp(f.first_seen),
            last_seen: format::timestamp(f.last_seen),
            summary: f.summary.clone(),
            evidence: evidence_lines(&f.evidence),
            changes: change_lines(&f.fact_changes),
            raw: f.evidence.to_string(),
        }
    }
}

/// One algorithm of a host in the "at software speed" section.
pub(super) struct SlowItem {
    pub(super) algorithm: Algorithm,
    pub(super) why: String,
}

/// A host in the "at software speed" section, in the order of its worst row.
pub(super) struct SlowHost<'a> {
    pub(super) first: &'a Judged,
    pub(super) items: Vec<SlowItem>,
    /// Indices into the open findings: those that explain at least one item.
    pub(super) reasons: Vec<usize>,
}

/// [`SlowHost`] as the template shows it, built for the hosts of one page only.
pub(super) struct SlowHostView {
    pub(super) host_id: i64,
    pub(super) host: String,
    pub(super) emulated: bool,
    pub(super) simulated: bool,
    pub(super) arch: String,
    pub(super) cpu: String,
    pub(super) items: Vec<SlowItem>,
    pub(super) reasons: Vec<FindingView>,
    /// The host's other open findings, shown beside "reason unknown".
    pub(super) other: Vec<ReasonLink>,
}

impl ReasonLink {
    fn new(f: &Finding) -> Self {
        ReasonLink {
            id: f.id,
            label: reason_with_subject(f),
            severity: f.severity.as_str(),
        }
    }
}

impl SlowHost<'_> {
    pub(super) fn view(&self, open: &[Finding]) -> SlowHostView {
        let info = &self.first.host;
        let h = &info.host;
        SlowHostView {
            host_id: h.id,
            host: h.name.clone(),
            emulated: info.emulated,
            simulated: info.simulated,
            arch: h.arch.clone().unwrap_or_else(|| "–".into()),
            cpu: h.cpu_model_name.clone().unwrap_or_else(|| "unknown CPU".into()),
            items: self
                .items
                .iter()
                .map(|i| SlowItem {
                    algorithm: i.algorithm,
                    why: i.why.clone(),
                })
                .collect(),
            reasons: self
                .reasons
                .iter()
                .map(|&i| FindingView {
                    label: reason_with_subject(&open[i]),
                    ..FindingView::new(&open[i])
                })
                .collect(),
            other: open
                .iter()
                .enumerate()
                .filter(|(i, f)| f.host_id == h.id && !self.reasons.contains(i))
                .map(|(_, f)| ReasonLink::new(f))
                .collect(),
        }
    }
}

/// The rows at software speed grouped by host, worst host first.
pub(super) fn slow_hosts<'a>(rows: &'a [Judged], point: &PathPoint) -> Vec<SlowHost<'a>> {
    let mut hosts: Vec<SlowHost> = Vec::new();
    let mut index: HashMap<i64, usize> = HashMap::new();
    for r in rows {
        let Some(speed) = r.speed else { continue };
        let p = &r.pair;
        let at = *index.entry(p.host_id).or_insert_with(|| {
            hosts.push(SlowHost {
                first: r,
                items: Vec::new(),
                reasons: Vec::new(),
            });
            hosts.len() - 1
        });
        // The figures as far as they are measured; what is not, with what measures it.
        let measured = match (p.accelerated_mb_s, p.software_mb_s) {
            (Some(a), Some(s)) => format!(
                "{} against {} on the software path, {}",
                format::mb_s(a),
                format::mb_s(s),
                ratio_text(r.ratio)
            ),
            (a, s) => {
                let (known, path) = match (a, s) {
                    (Some(a), None) => (format!("{}; ", format::mb_s(a)), Path::Software),
                    (None, Some(s)) => (format!("{} on the software path; ", format::mb_s(s)), Path::Accelerated),
                    _ => (String::new(), Path::Software),
                };
                // The whole command is above the tables; here what tells it apart.
                match fill_of(point, p.algorithm, path) {
                    Some(fill) => format!("{known}the {path} path is not measured: run {}", fill.flag()),
                    None => format!("{known}the {path} path is not measured ({} has none)", point.provider),
                }
            }
        };
        let why = match speed {
            SoftwareSpeed::RanSoftware => format!("the accelerated request ran the software path ({measured})"),
            SoftwareSpeed::RanPartial => {
                format!("the accelerated request ran partly in software, some primitives without hardware ({measured})")
            }
            SoftwareSpeed::NearSoftware => format!("ran on hardware at software speed ({measured})"),
        };
        let host = &mut hosts[at];
        host.items.push(SlowItem {
            algorithm: p.algorithm,
            why,
        });
        for &i in &r.reasons {
            if !host.reasons.contains(&i) {
                host.reasons.push(i);
            }
        }
    }
    hosts
}

/// The page parameters of the three lists, in the order [`Pages`] holds them.
pub(super) const PAGE_PARAMS: [&str; 3] = ["page", "spage", "fpage"];
/// The sections the page parameters move, as anchors.
pub(super) const PAGE_ANCHORS: [&str; 3] = ["paths", "software-speed", "findings"];

/// A list's pager as the template prints it.
pub(super) struct PagerView {
    pub(super) summary: String,
    pub(super) prev: Option<String>,
    pub(super) next: Option<String>,
}

/// Where each of the page's three lists stands (paths, software speed,
/// findings); a link moves one and keeps the filters and the others.
pub(super) struct Pages(pub(super) [Pager; 3]);

impl Pages {
    pub(super) fn view(&self, filters: &[(&'static str, String)], which: usize) -> PagerView {
        let link = |n: u64| {
            let mut pairs = filters.to_vec();
            for (i, name) in PAGE_PARAMS.into_iter().enumerate() {
                let page = if i == which { n } else { self.0[i].page };
                pairs.push((name, if page > 1 { page.to_string() } else { String::new() }));
            }
            format!("{}#{}", with_query("/fallback", &pairs), PAGE_ANCHORS[which])
        };
        let pager = &self.0[which];
        PagerView {
            summary: pager.summary(),
            prev: (pager.page > 1).then(|| link(pager.page - 1)),
            next: (pager.page < pager.last_page()).then(|| link(pager.page + 1)),
        }
    }

    /// The rows of list `which` on its current page.
    pub(super) fn slice<'a, T>(&self, which: usize, rows: &'a [T]) -> impl Iterator<Item = &'a T> {
        let pager = &self.0[which];
        rows.iter().skip(pager.offset() as usize).take(pager.per_page as usize)
    }
}

pub(super) fn row_view(r: &Judged, open: &[Finding], point: &PathPoint) -> RowView {
    let p = &r.pair;
    let fill = |path| move || fill_of(point, p.algorithm, path);
    RowView {
        host_id: p.host_id,
        host: r.host.host.name.clone(),
        emulated: r.host.emulated,
        simulated: r.host.simulated,
        arch: r.host.host.arch.clone().unwrap_or_else(|| "–".into()),
        algorithm: p.algorithm,
        accelerated: Cell::new(
            p.accelerated_mb_s,
            p.accelerated_result_id,
            p.accelerated_cv,
            fill(Path::Accelerated),
        ),
        path_used: p.accelerated_path_used,
        software: Cell::new(
            p.software_mb_s,
            p.software_result_id,
            p.software_cv,
            fill(Path::Software),
        ),
        ratio: r
            .ratio
            .map_or_else(|| "needs both paths".into(), |x| ratio_text(Some(x))),
        ratio_sort: r.ratio.map(|v| v.to_string()).unwrap_or_default(),
        at_software_speed: r.speed.is_some(),
        reasons: r.reasons.iter().map(|&i| ReasonLink::new(&open[i])).collect(),
    }
}
