//! `/fallback`: the accelerated path against the software path, per host and
//! algorithm at one point of the matrix (16 KiB, 1 thread, encrypt by
//! default) on one provider (`provider=`, the built-in RustCrypto crates by
//! default), worst ratio first; the hosts whose accelerated path runs at
//! software speed, with the open findings that explain it; and every open
//! finding with its evidence. The tables are also at `/api/v1/fallback` (same
//! filters, 1,000 rows a page) and `/api/v1/findings?status=open|resolved|all`.
//!
//! Rows come from `fallback_pairs` ([`model::pairs`]: both paths side by side
//! with their ratio indexed, kept from `result_points`), so a page reads its
//! 50 rows. Another provider's rows come from its few `provider_points`,
//! which the report's queries pair up themselves (the provider is part of
//! [`PathPoint`]): nothing here tells the two apart but the words. The hosts at software speed are grouped in SQL from the cases
//! the rule ([`crate::analysis::software_speed`]) finds slow on each of the
//! fleet's few host CPUs, and stored per point with the point's row count
//! ([`views`]: read back until rows of the point or the hosts' CPUs change;
//! a list that changes made stale is shown as of when it was computed while
//! the background [`refresh`] computes it again). Only the rows of the hosts
//! on the page of that list are read and judged row by row, and only the
//! findings of the hosts shown are read. A reason filter needs every row's
//! explanation, so that view reads all its rows and open findings.
//!
//! - [`chart`]: the chart the page opens with, both paths per host.
//! - [`hosts`]: the fleet's hosts, read again only after they change.
//! - [`evidence`]: findings' evidence and fact changes as readable lines.
//! - [`params`]: the filters, checked once, and the links that keep them.
//! - [`sections`]: the lists as the template shows them, each with its own pager.
//! - [`api`]: the two tables as JSON/CSV.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;

use super::paging::{Pager, with_query};
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::Suite;

use super::params::{Choice, choices, enum_choices, label_text};
use super::{WebError, WebState, format};
use crate::analysis::fill::Fill;
use crate::analysis::slow::Thresholds;
use crate::analysis::software_speed::{HostCpu, SoftwareSpeed, explains_on, judge, ratio};
use crate::findings::REASONS;
use crate::report::fallback::{self as model, PathPair, PathPoint};
use crate::report::fallback_hosts::{HostInfo, ViewHosts};
use crate::report::fallback_views as views;
use crate::store::findings::{self as findings_store, Finding};
use sections::{
    FindingView, MissingView, PAGE_PARAMS, PagerView, Pages, RowView, SlowHostView, missing, row_view, slow_hosts,
};

mod api;
mod chart;
mod evidence;
mod params;
mod sections;

pub use params::FallbackQuery;
use params::{Filters, NO_REASON};

/// Rows (hosts, findings) per page of each of the page's three lists.
const PER_PAGE: u64 = 50;
pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/fallback", get(page))
        .route("/api/v1/fallback", get(api::fallback))
        .route("/api/v1/findings", get(api::findings))
}

/// A finding's reason as the report names it: the kind is part of it for slow paths.
fn reason_label(f: &Finding) -> String {
    match &f.kind {
        Some(kind) => format!("{} ({kind})", f.reason),
        None => f.reason.clone(),
    }
}

/// A finding's reason with what it is about, where no Subject column is
/// beside it: `cpu-lacks: aes`, `slow-accelerated: aes-256-gcm (near-software)`.
/// A host lacking three instructions has three findings that differ only there.
fn reason_with_subject(f: &Finding) -> String {
    // A software build is the whole build: its subject adds nothing.
    let subject = match f.subject.as_str() {
        "" | "build" => None,
        s => Some(s.replace(',', ", ")),
    };
    match (subject, &f.kind) {
        (Some(s), Some(kind)) => format!("{}: {s} ({kind})", f.reason),
        (Some(s), None) => format!("{}: {s}", f.reason),
        (None, _) => reason_label(f),
    }
}

/// One row of the view, judged.
#[derive(Clone)]
struct Judged {
    host: Arc<HostInfo>,
    pair: PathPair,
    ratio: Option<f64>,
    speed: Option<SoftwareSpeed>,
    /// Indices into the open findings: those that explain this row.
    reasons: Vec<usize>,
}

/// `pair` judged on its host; `None` when the filters leave the host out.
/// Its reasons are filled in by [`explain`], once the findings are read.
fn judge_pair(hosts: &ViewHosts, filters: &Filters, pair: PathPair) -> Option<Judged> {
    let host = hosts.get(pair.host_id)?.clone();
    let ratio = ratio(pair.accelerated_mb_s, pair.software_mb_s);
    let speed = judge(
        pair.algorithm,
        filters.key_mode,
        HostCpu {
            arch: host.host.arch.as_deref(),
            advertised: host.host.features_advertised.as_deref(),
        },
        pair.accelerated_path_used,
        ratio,
        host.emulated,
        filters.size_bytes,
        &Thresholds::default(),
    );
    Some(Judged {
        host,
        pair,
        ratio,
        speed,
        reasons: Vec::new(),
    })
}

/// Fills in which of `open` (holding at least every open finding of the
/// rows' hosts) explain each row, measured at `point` (on its provider).
fn explain(rows: &mut [Judged], open: &[Finding], point: &PathPoint) {
    let mut by_host: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, f) in open.iter().enumerate() {
        by_host.entry(f.host_id).or_default().push(i);
    }
    for r in rows {
        r.reasons = by_host
            .get(&r.pair.host_id)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| {
                let f = &open[i];
                explains_on(point.provider, &f.reason, &f.subject, r.pair.algorithm, point.key_mode)
            })
            .collect();
    }
}

/// Every row of a view filtered by reason (worst ratio first, unmeasured
/// ratios last) and every open finding: the reason filter needs each row's
/// explanation, so it reads the whole view.
async fn load_all(state: &WebState, filters: &Filters, reason: &str) -> Result<(Vec<Judged>, Vec<Finding>), WebError> {
    let point = filters.point();
    let hosts = ViewHosts::load(&state.pool, filters.keep().as_deref()).await?;
    let (pairs, open) = tokio::try_join!(
        model::pairs(&state.pool, &point, hosts.kept(), None, 0),
        findings_store::list_open(&state.pool)
    )?;
    let mut rows: Vec<Judged> = pairs
        .into_iter()
        .filter_map(|p| judge_pair(&hosts, filters, p))
        .collect();
    explain(&mut rows, &open, &filters.point());
    rows.retain(|r| match reason {
        NO_REASON => r.reasons.is_empty(),
        reason => r.reasons.iter().any(|&i| open[i].reason == reason),
    });
    Ok((rows, open))
}

/// The open findings of `host_ids`, each once.
async fn findings_of(state: &WebState, host_ids: impl IntoIterator<Item = i64>) -> Result<Vec<Finding>, WebError> {
    let mut ids: Vec<i64> = host_ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(findings_store::list_open_for_hosts(&state.pool, &ids).await?)
}

/// The page's three lists, each cut to its page: the paths table's rows,
/// the rows at software speed of the hosts on the page of that list, the
/// open findings; with the findings the rows' reasons point into.
struct Lists {
    pages: Pages,
    rows: Vec<Judged>,
    slow: Vec<Judged>,
    findings: Vec<Finding>,
    /// Every open finding of the hosts above (indices of `reasons`).
    open: Vec<Finding>,
    /// Some row of the whole view (not only this page) is of an emulated host.
    any_emulated: bool,
    /// Set when the list at software speed is the stored one of a point whose
    /// rows changed since: when it was computed.
    slow_as_of: Option<DateTime<Utc>>,
}

impl Lists {
    /// From every row of the view and every open finding.
    fn whole(rows: Vec<Judged>, open: Vec<Finding>, asked: [u64; 3]) -> Self {
        let slow_order = slow_host_order(&rows);
        let pages = Pages([
            Pager::new(asked[0], PER_PAGE, rows.len() as u64),
            Pager::new(asked[1], PER_PAGE, slow_order.len() as u64),
            Pager::new(asked[2], PER_PAGE, open.len() as u64),
        ]);
        let on_page: Vec<i64> = pages.slice(1, &slow_order).copied().collect();
        let any_emulated = rows.iter().any(|r| r.host.emulated);
        let findings = pages.slice(2, &open).cloned().collect();
        let (mut page_rows, mut slow) = (Vec::new(), Vec::new());
        let first = pages.0[0].offset() as usize;
        for (i, r) in rows.into_iter().enumerate() {
            if r.speed.is_some() && on_page.contains(&r.pair.host_id) {
                slow.push(r.clone());
            }
            if i >= first && i < first + PER_PAGE as usize {
                page_rows.push(r);
            }
        }
        Lists {
            pages,
            rows: page_rows,
            slow,
            findings,
            open,
            any_emulated,
            slow_as_of: None,
        }
    }

    /// Reading only what the page shows: the count and one page of rows, the
    /// rows of the hosts on the page of the list at software speed (judged
    /// here), and the findings of the hosts on the page. The count and that
    /// list are the point's stored ones ([`views::slow_view`]), a filter
    /// picking its hosts from the list and counting its own rows.
    async fn paged(state: &WebState, filters: &Filters, point: &PathPoint, asked: [u64; 3]) -> Result<Self, WebError> {
        let t = Thresholds::default();
        let hosts = ViewHosts::load(&state.pool, filters.keep().as_deref()).await?;
        let emulated: Vec<i64> = hosts.iter().filter(|h| h.emulated).map(|h| h.host.id).collect();
        let cases = hosts.fleet_cases(point);
        let (stored, filtered_total, open_count, emulated_rows) = tokio::try_join!(
            views::slow_view(&state.pool, point, &cases),
            async {
                match hosts.kept() {
                    Some(kept) => model::count_pairs(&state.pool, point, Some(kept)).await.map(Some),
                    None => Ok(None),
                }
            },
            findings_store::count_open(&state.pool),
            async {
                if emulated.is_empty() {
                    Ok(0)
                } else {
                    model::count_pairs(&state.pool, point, Some(&emulated)).await
                }
            }
        )?;
        if stored.changed {
            state.refresh.now();
        }
        let total = filtered_total.unwrap_or(stored.pairs);
        let slow_order: Vec<i64> = if hosts.filtered() {
            stored
                .slow_hosts
                .iter()
                .copied()
                .filter(|id| hosts.get(*id).is_some())
                .collect()
        } else {
            stored.slow_hosts
        };
        let pages = Pages([
            Pager::new(asked[0], PER_PAGE, u64::try_from(total).unwrap_or(0)),
            Pager::new(asked[1], PER_PAGE, slow_order.len() as u64),
            Pager::new(asked[2], PER_PAGE, u64::try_from(open_count).unwrap_or(0)),
        ]);
        // The rows of the hosts on this page of the list, judged here as every row shown is.
        let on_page: Vec<i64> = pages.slice(1, &slow_order).copied().collect();
        let algorithms = hosts.judged_algorithms(filters.key_mode);
        let candidates = if on_page.is_empty() {
            Vec::new()
        } else {
            model::slow_candidates(&state.pool, point, Some(&on_page), &algorithms, t.near_software_ratio).await?
        };
        let mut slow: Vec<Judged> = candidates
            .into_iter()
            .filter_map(|p| judge_pair(&hosts, filters, p))
            .filter(|r| r.speed.is_some())
            .collect();
        let (page, findings) = tokio::try_join!(
            model::pairs(
                &state.pool,
                point,
                hosts.kept(),
                Some(PER_PAGE as i64),
                pages.0[0].offset() as i64
            ),
            model::open_findings(&state.pool, PER_PAGE as i64, pages.0[2].offset() as i64)
        )?;
        let mut rows: Vec<Judged> = page
            .into_iter()
            .filter_map(|p| judge_pair(&hosts, filters, p))
            .collect();
        let open = findings_of(state, rows.iter().chain(&slow).map(|r| r.pair.host_id)).await?;
        explain(&mut rows, &open, point);
        explain(&mut slow, &open, point);
        Ok(Lists {
            pages,
            rows,
            slow,
            findings,
            open,
            any_emulated: emulated_rows > 0,
            slow_as_of: stored.changed.then_some(stored.computed_at),
        })
    }
}

/// The hosts with a row at software speed, in the order of their worst row.
fn slow_host_order(rows: &[Judged]) -> Vec<i64> {
    let mut seen = HashSet::new();
    rows.iter()
        .filter(|r| r.speed.is_some())
        .map(|r| r.pair.host_id)
        .filter(|id| seen.insert(*id))
        .collect()
}

/// The algorithms of the `fallback` suite: what the page is about first.
fn fallback_algorithms() -> Vec<Algorithm> {
    Suite::Fallback
        .matrices(1)
        .into_iter()
        .flat_map(|m| m.algorithms)
        .collect()
}

/// The fallback suite's points at `point` that its provider measures (ring
/// runs no software path, the kernel no large payloads): what the page asks
/// to have measured.
fn page_points(point: &PathPoint) -> Vec<cipherfleet_core::Point> {
    fallback_algorithms()
        .into_iter()
        .flat_map(|a| [point.at(a, Path::Accelerated), point.at(a, Path::Software)])
        .filter(|p| cipherfleet_core::spec::validate_provider(p).is_ok())
        .collect()
}

/// What measures both paths of the fallback suite's algorithms at `point`:
/// the `fallback` suite itself at its sizes, a bigger suite or a matrix
/// elsewhere (`providers` for the other providers); `None` when the
/// provider measures none of them there.
fn page_fill(point: &PathPoint) -> Option<Fill> {
    Fill::of(&page_points(point))
}

/// What another provider's software path is, after whose figures the page
/// shows ([`format::measured_on`], which says ring has none of its own).
fn software_path(provider: Provider) -> Option<&'static str> {
    match provider {
        Provider::Openssl => Some("its software path is the same openssl speed with its capability vector masked"),
        Provider::Kernel => Some("its software path is the kernel's generic driver"),
        Provider::RustCrypto | Provider::Ring => None,
    }
}

/// The page; every string is escaped by the template (no `|safe` anywhere).
#[derive(Template)]
#[template(path = "fallback.html")]
struct FallbackPage {
    view: String,
    threshold: String,
    min_size: String,
    sizes: Vec<Choice>,
    threads: u32,
    directions: Vec<Choice>,
    key_modes: Vec<Choice>,
    providers: Vec<Choice>,
    /// The built-in crates: the heading says how their two paths are built.
    rustcrypto: bool,
    /// Whose figures these are ([`format::measured_on`]), and another provider's software path.
    measured_on: &'static str,
    software_path: Option<&'static str>,
    label: String,
    archs: Vec<Choice>,
    reasons: Vec<Choice>,
    csv_href: String,
    json_href: String,
    /// Both paths per host of one algorithm, the answer at a glance.
    chart: Option<chart::ChartView>,
    slow_hosts: Vec<SlowHostView>,
    slow_pager: PagerView,
    /// "12:03:04 UTC (42 s ago)" when the list misses newer results.
    slow_as_of: Option<String>,
    rows: Vec<RowView>,
    rows_pager: PagerView,
    /// Paths some rows of the page lack, each with the command that measures it.
    missing: Vec<MissingView>,
    /// What measures both paths of the fallback suite's algorithms at this
    /// point: `cipherfleet-coordinator campaign start --suite fallback` at the
    /// default one; empty when the provider measures none of them here.
    fill: String,
    /// Those algorithms, named in the sentence around [`FallbackPage::fill`].
    fill_algorithms: String,
    any_emulated: bool,
    findings: Vec<FindingView>,
    findings_pager: PagerView,
}

/// `GET /fallback`: the filters, the hosts at software speed, both paths per
/// host and algorithm, the open findings; each list paged on its own.
async fn page(State(state): State<WebState>, Query(q): Query<FallbackQuery>) -> Result<Html<String>, WebError> {
    let filters = Filters::parse(&q)?;
    let mut asked = [1; 3];
    for (i, raw) in [&q.page, &q.spage, &q.fpage].into_iter().enumerate() {
        asked[i] = Pager::parse_page(raw.as_deref()).map_err(|_| {
            WebError::BadRequest(format!(
                "{}={:?} is not a page number (1, 2, 3, …)",
                PAGE_PARAMS[i],
                raw.as_deref().unwrap_or("")
            ))
        })?;
    }
    let t = Thresholds::default();
    let point = filters.point();
    let lists = async {
        match filters.reason {
            Some(reason) => {
                let (rows, open) = load_all(&state, &filters, reason).await?;
                Ok(Lists::whole(rows, open, asked))
            }
            None => Lists::paged(&state, &filters, &point, asked).await,
        }
    };
    let form = async {
        Ok::<_, WebError>(tokio::try_join!(
            model::sizes(&state.pool, filters.provider),
            model::archs(&state.pool)
        )?)
    };
    let (lists, (measured_sizes, archs)) = tokio::try_join!(lists, form)?;
    let chart = chart::chart(&state, &filters, &point, &lists).await?;
    let pairs = filters.query_pairs();

    let mut sizes: Vec<u64> = measured_sizes;
    if !sizes.contains(&filters.size_bytes) {
        sizes.push(filters.size_bytes);
        sizes.sort_unstable();
    }
    let mut arch_values: Vec<(String, String)> = vec![(String::new(), "any".into())];
    arch_values.extend(archs.into_iter().map(|a| (a.clone(), a)));
    let mut reason_values: Vec<(String, String)> = vec![(String::new(), "any".into())];
    reason_values.extend(REASONS.iter().map(|r| (r.to_string(), r.to_string())));
    reason_values.push((NO_REASON.into(), "no open finding".into()));

    let view = FallbackPage {
        view: filters.describe(),
        threshold: format!("{}×", format::significant(t.near_software_ratio)),
        min_size: format::bytes(t.near_software_min_size_bytes),
        sizes: choices(
            sizes.iter().map(|s| (s.to_string(), format::bytes(*s))),
            &filters.size_bytes.to_string(),
        ),
        threads: filters.threads,
        directions: enum_choices(Some(filters.direction)),
        key_modes: enum_choices(Some(filters.key_mode)),
        providers: enum_choices(Some(filters.provider)),
        rustcrypto: filters.provider.is_rustcrypto(),
        measured_on: format::measured_on(filters.provider),
        software_path: software_path(filters.provider),
        label: label_text(&filters.label),
        archs: choices(arch_values, filters.arch.as_deref().unwrap_or("")),
        reasons: choices(reason_values, filters.reason.unwrap_or("")),
        csv_href: with_query(
            "/api/v1/fallback",
            &[pairs.clone(), vec![("format", "csv".into())]].concat(),
        ),
        json_href: with_query("/api/v1/fallback", &pairs),
        chart,
        any_emulated: lists.any_emulated,
        rows: lists.rows.iter().map(|r| row_view(r, &lists.open, &point)).collect(),
        missing: missing(&lists.rows, &point),
        fill: page_fill(&point).map(|f| f.command()).unwrap_or_default(),
        fill_algorithms: page_points(&point)
            .iter()
            .map(|p| p.algorithm.name())
            .fold(Vec::new(), |mut names, a| {
                if !names.contains(&a) {
                    names.push(a);
                }
                names
            })
            .join(", "),
        rows_pager: lists.pages.view(&pairs, 0),
        slow_pager: lists.pages.view(&pairs, 1),
        slow_as_of: lists.slow_as_of.map(format::as_of),
        slow_hosts: slow_hosts(&lists.slow, &point)
            .iter()
            .map(|h| h.view(&lists.open))
            .collect(),
        findings: lists.findings.iter().map(FindingView::new).collect(),
        findings_pager: lists.pages.view(&pairs, 2),
    };
    Ok(Html(view.render()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> FallbackQuery {
        super::super::params::query_from(pairs)
    }

    #[test]
    fn the_provider_defaults_to_the_built_in_crates_and_links_keep_any_other() {
        let plain = Filters::parse(&query(&[])).unwrap();
        assert_eq!(plain.provider, Provider::RustCrypto);
        assert_eq!(plain.point().provider, Provider::RustCrypto);
        // The default is left out of links, blank or spelled out: they read as before providers.
        for default in [&[][..], &[("provider", "")][..], &[("provider", "rustcrypto")][..]] {
            let f = Filters::parse(&query(default)).unwrap();
            assert_eq!(with_query("/fallback", &f.query_pairs()), "/fallback", "{default:?}");
        }

        let f = Filters::parse(&query(&[("provider", "openssl"), ("size", "1KiB")])).unwrap();
        assert_eq!(f.provider, Provider::Openssl);
        let point = f.point();
        assert_eq!(point.provider, Provider::Openssl);
        assert_eq!(
            point.at("aes-128-gcm".parse().unwrap(), Path::Software).provider,
            Provider::Openssl
        );
        assert_eq!(f.describe(), "1 KiB, 1 thread, encrypt, static key, on openssl");
        let link = with_query("/fallback", &f.query_pairs());
        assert_eq!(link, "/fallback?size=1024&provider=openssl");
        // What a link carries reads back as the same filters.
        let again: Vec<(&str, String)> = f.query_pairs();
        let pairs: Vec<(&str, &str)> = again.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(Filters::parse(&query(&pairs)).unwrap(), f);
        let pages = sections::Pages([
            Pager::new(1, PER_PAGE, 120),
            Pager::new(1, PER_PAGE, 0),
            Pager::new(1, PER_PAGE, 0),
        ]);
        let next = pages.view(&f.query_pairs(), 0).next.unwrap();
        assert!(next.contains("provider=openssl") && next.contains("page=2"), "{next}");

        let err = Filters::parse(&query(&[("provider", "libsodium")])).unwrap_err();
        assert!(matches!(err, WebError::BadRequest(_)));
        assert!(
            err.to_string()
                .contains("provider=\"libsodium\": use one of rustcrypto, ring, openssl, kernel"),
            "{err}"
        );
    }

    #[test]
    fn the_page_asks_a_provider_only_for_the_points_it_measures() {
        let at = |provider: &str| Filters::parse(&query(&[("provider", provider)])).unwrap().point();
        let rustcrypto = page_points(&at("rustcrypto"));
        assert_eq!(rustcrypto.len(), 2 * fallback_algorithms().len());
        assert_eq!(page_fill(&at("rustcrypto")).unwrap().flag(), "--suite fallback");
        // ring has no software build, and runs only its AEADs.
        let ring = page_points(&at("ring"));
        assert!(!ring.is_empty());
        assert!(
            ring.iter()
                .all(|p| p.path == Path::Accelerated && p.provider == Provider::Ring),
            "{ring:?}"
        );
        assert_eq!(page_fill(&at("openssl")).unwrap().flag(), "--suite providers");
        assert!(sections::fill_of(&at("ring"), "aes-256-gcm".parse().unwrap(), Path::Software).is_none());
        assert!(format::measured_on(Provider::Ring).contains("ring has no software build"));
        assert!(software_path(Provider::Openssl).is_some_and(|s| s.contains("masked")));
    }
}
