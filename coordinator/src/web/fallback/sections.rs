//! The page's three lists as the template shows them: the paths table's
//! rows, the hosts at software speed (grouped, worst first), the findings
//! with readable evidence; and the pagers that move each list on its own.

use std::collections::HashMap;

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use serde_json::Value;

use super::evidence::{change_lines, evidence_lines, ratio_text};
use super::{Judged, reason_label};
use crate::analysis::software_speed::SoftwareSpeed;
use crate::store::findings::Finding;
use crate::web::format;
use crate::web::paging::{Pager, with_query};

/// A throughput cell: the figure, a link to the raw result, its sample CV.
pub(super) struct Cell {
    /// `1230 MB/s`, or "not measured".
    pub(super) text: String,
    /// MB/s as a plain number for sorting; empty when not measured.
    pub(super) sort: String,
    /// The raw result (`/api/v1/results/{id}`): every figure can be checked.
    pub(super) href: Option<String>,
    /// `CV 2.30 %`: how much the samples spread, so a noisy ratio is not over-read.
    pub(super) cv: Option<String>,
}

impl Cell {
    pub(super) fn new(mb_s: Option<f64>, result_id: Option<i64>, cv: Option<f64>) -> Self {
        Cell {
            text: mb_s.map_or_else(|| "not measured".into(), format::mb_s),
            sort: mb_s.map(|v| v.to_string()).unwrap_or_default(),
            href: result_id.map(|id| format!("/api/v1/results/{id}")),
            cv: cv.map(|c| format!("CV {}", format::percent(c))),
        }
    }
}

/// A link to a finding in the list below.
pub(super) struct ReasonLink {
    /// The finding's id: the link target is its row, `#finding-{id}`.
    pub(super) id: i64,
    /// The reason, with the kind for slow paths: `slow-accelerated (near-software)`.
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
    /// `1.02×`, or a dash; `ratio_sort` is the bare number for report.js.
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
            reasons: self.reasons.iter().map(|&i| FindingView::new(&open[i])).collect(),
            other: open
                .iter()
                .enumerate()
                .filter(|(i, f)| f.host_id == h.id && !self.reasons.contains(i))
                .map(|(_, f)| ReasonLink {
                    id: f.id,
                    label: reason_label(f),
                    severity: f.severity.as_str(),
                })
                .collect(),
        }
    }
}

/// The rows at software speed grouped by host, worst host first.
pub(super) fn slow_hosts(rows: &[Judged]) -> Vec<SlowHost<'_>> {
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
        let measured = format!(
            "{} against {} on the software path, {}",
            p.accelerated_mb_s.map_or_else(|| "–".into(), format::mb_s),
            p.software_mb_s.map_or_else(|| "not measured".into(), format::mb_s),
            ratio_text(r.ratio)
        );
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

pub(super) fn row_view(r: &Judged, open: &[Finding]) -> RowView {
    let p = &r.pair;
    RowView {
        host_id: p.host_id,
        host: r.host.host.name.clone(),
        emulated: r.host.emulated,
        simulated: r.host.simulated,
        arch: r.host.host.arch.clone().unwrap_or_else(|| "–".into()),
        algorithm: p.algorithm,
        accelerated: Cell::new(p.accelerated_mb_s, p.accelerated_result_id, p.accelerated_cv),
        path_used: p.accelerated_path_used,
        software: Cell::new(p.software_mb_s, p.software_result_id, p.software_cv),
        ratio: ratio_text(r.ratio),
        ratio_sort: r.ratio.map(|v| v.to_string()).unwrap_or_default(),
        at_software_speed: r.speed.is_some(),
        reasons: r
            .reasons
            .iter()
            .map(|&i| ReasonLink {
                id: open[i].id,
                label: reason_label(&open[i]),
                severity: open[i].severity.as_str(),
            })
            .collect(),
    }
}
