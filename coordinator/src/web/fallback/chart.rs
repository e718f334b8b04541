//! The chart `/fallback` opens with ([`crate::web::svg::paths`]): for one
//! algorithm, each host's accelerated and software figures with their
//! ratio, the hosts at software speed highlighted and first, each explaining
//! finding a badge with its subject. The tables below hold every algorithm;
//! the chart answers the page's question at a glance.
//!
//! The algorithm is the `fallback` suite's first with rows at the view's
//! point (AES-256-GCM), else the first the page shows. The hosts are those
//! of the page of the "at software speed" list, then the others by name, up
//! to [`CHART_HOSTS`]: an order of detection, never a ranking by speed.

use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::{Path, PathUsed};

use super::sections::fill_of;
use super::{Filters, Judged, Lists, explain, fallback_algorithms, findings_of, judge_pair, reason_with_subject};
use crate::report::fallback::{self as model, PathPoint};
use crate::report::fallback_hosts::ViewHosts;
use crate::store::findings::Finding;
use crate::web::svg::paths::{Badge, PathsChart, PathsRow};
use crate::web::{WebError, WebState};

/// Hosts the chart shows at most; the lists below page through the rest.
const CHART_HOSTS: usize = 24;

/// The chart as the page embeds it.
pub(super) struct ChartView {
    /// Markup from [`PathsChart::render`], which escapes every text it places.
    pub(super) svg: String,
    pub(super) algorithm: Algorithm,
    /// Hosts at software speed on this page of that list left out of the chart.
    pub(super) more_slow: usize,
}

/// The chart of the view, or `None` when no host has a row at its point.
pub(super) async fn chart(
    state: &WebState,
    filters: &Filters,
    point: &PathPoint,
    lists: &Lists,
) -> Result<Option<ChartView>, WebError> {
    let mut candidates = fallback_algorithms();
    for r in lists.rows.iter().chain(&lists.slow) {
        if !candidates.contains(&r.pair.algorithm) {
            candidates.push(r.pair.algorithm);
        }
    }
    let hosts = ViewHosts::load(&state.pool, filters.keep().as_deref()).await?;
    for algorithm in candidates {
        let mut slow: Vec<&Judged> = lists.slow.iter().filter(|r| r.pair.algorithm == algorithm).collect();
        slow.sort_by(|a, b| a.host.host.name.cmp(&b.host.host.name));
        let more_slow = slow.len().saturating_sub(CHART_HOSTS);
        slow.truncate(CHART_HOSTS);
        let shown: Vec<i64> = slow.iter().map(|r| r.pair.host_id).collect();
        let room = CHART_HOSTS - slow.len();
        let others = if room > 0 {
            model::algorithm_pairs(&state.pool, point, hosts.kept(), algorithm, &shown, room as i64).await?
        } else {
            Vec::new()
        };
        if slow.is_empty() && others.is_empty() {
            continue;
        }
        let mut others: Vec<Judged> = others
            .into_iter()
            .filter_map(|p| judge_pair(&hosts, filters, p))
            .collect();
        let open = findings_of(state, others.iter().map(|r| r.pair.host_id)).await?;
        explain(&mut others, &open, point);
        let mut rows: Vec<PathsRow> = slow
            .iter()
            .map(|r| chart_row(r, &lists.open, point))
            .chain(others.iter().map(|r| chart_row(r, &open, point)))
            .collect();
        // At software speed first, then by name: both parts come by name already.
        rows.sort_by_key(|r| !r.at_software_speed);
        let chart = PathsChart {
            title: format!(
                "{algorithm} at {}: accelerated against software path per host",
                filters.describe()
            ),
            rows,
        };
        return Ok(Some(ChartView {
            svg: chart.render(),
            algorithm,
            more_slow,
        }));
    }
    Ok(None)
}

/// One judged row as the chart draws it; `open` holds its reasons' findings.
fn chart_row(r: &Judged, open: &[Finding], point: &PathPoint) -> PathsRow {
    let p = &r.pair;
    let fill = |mb_s: Option<f64>, path| {
        if mb_s.is_none() {
            fill_of(point, p.algorithm, path).map(|f| f.flag())
        } else {
            None
        }
    };
    PathsRow {
        host: r.host.host.name.clone(),
        accelerated_mb_s: p.accelerated_mb_s,
        software_mb_s: p.software_mb_s,
        ratio: r.ratio,
        ran: p
            .accelerated_path_used
            .filter(|u| *u != PathUsed::Accelerated)
            .map(|u| u.to_string()),
        at_software_speed: r.speed.is_some(),
        mark: if r.host.emulated {
            Some("emulated")
        } else if r.host.simulated {
            Some("simulated")
        } else {
            None
        },
        reasons: r
            .reasons
            .iter()
            .map(|&i| Badge {
                label: reason_with_subject(&open[i]),
                severity: open[i].severity.as_str(),
            })
            .collect(),
        accelerated_fill: fill(p.accelerated_mb_s, Path::Accelerated),
        software_fill: fill(p.software_mb_s, Path::Software),
    }
}
