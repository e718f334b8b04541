//! `/providers`: which library a service should use on each machine class,
//! and what each one loses without acceleration (issue #31). Per class, a
//! table of provider × algorithm with a column per payload size: the
//! accelerated figure, its ratio to the class's fastest provider, and the
//! software figure with what the fallback costs. It opens with the answer:
//! per class and algorithm at 16 KiB, the fastest provider and every
//! provider's fallback cost. `/api/v1/providers` is the same rows as JSON
//! (`format=csv`: CSV). [`crate::report::providers`] reads and ranks them.

use std::collections::BTreeSet;

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{Html, Response};
use axum::routing::get;
use cipherfleet_core::algorithm::Algorithm;
use cipherfleet_core::path::PathUsed;
use cipherfleet_core::provider::Provider;
use serde::Deserialize;

use super::api::{self, ApiError, FormatParam};
use super::params::{self, Choice, DEFAULT_SIZE_BYTES};
use super::{WebError, WebState, format};
use crate::report::providers::{self as read, ProviderRow};

pub fn routes() -> Router<WebState> {
    Router::new()
        .route("/providers", get(page))
        .route("/api/v1/providers", get(api_providers))
}

/// What measures every provider a host has at the page's point. A constant,
/// not a [`crate::analysis::fill::Fill`]: a point has no provider there, so
/// no suite's matrix can say it measures one.
pub const FILL: &str = "cipherfleet-coordinator campaign start --suite providers";

/// The query string: both filters optional, blank meaning absent.
#[derive(Debug, Default, Deserialize)]
pub struct ProvidersQuery {
    /// A payload size as campaigns spell it (`16KiB`, `16384`).
    pub size: Option<String>,
    pub provider: Option<String>,
}

/// The filters, checked.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Filter {
    pub size_bytes: Option<u64>,
    pub provider: Option<Provider>,
}

impl ProvidersQuery {
    /// The filters, or a bad request naming the parameter and what it accepts.
    pub fn filter(&self) -> Result<Filter, WebError> {
        let size_bytes = params::given(&self.size)
            .map(|raw| params::spelled_size(raw).map_err(|e| WebError::BadRequest(format!("size={raw:?}: {e}"))))
            .transpose()?;
        let provider = params::given(&self.provider)
            .map(|raw| params::require::<Provider>("provider", raw))
            .transpose()?;
        Ok(Filter { size_bytes, provider })
    }
}

impl Filter {
    fn keeps(&self, r: &ProviderRow) -> bool {
        self.size_bytes.is_none_or(|s| s == r.size_bytes) && self.provider.is_none_or(|p| p == r.provider)
    }
}

/// One cell: a provider's figures for one algorithm and size.
#[derive(Debug, Default)]
struct CellView {
    /// The accelerated figure, with what ran when it was not acceleration.
    accelerated: String,
    /// `0.62×` of the fastest; empty in a marked class or when not measured.
    ratio: String,
    fastest: bool,
    /// The software figure and the fallback cost, or why there is none.
    software: String,
    /// Hosts behind the figures, for the cell's title.
    hosts: String,
}

struct LineView {
    provider: &'static str,
    algorithm: &'static str,
    cells: Vec<CellView>,
}

struct ClassView {
    id: String,
    class: String,
    marked: bool,
    /// The opening answer: per algorithm at 16 KiB, the fastest provider and what each loses.
    answers: Vec<String>,
    lines: Vec<LineView>,
}

#[derive(Template)]
#[template(path = "providers.html")]
pub struct ProvidersPage {
    fill: &'static str,
    classes: Vec<ClassView>,
    /// The columns: the sizes shown.
    sizes: Vec<String>,
    size_choices: Vec<Choice>,
    provider_choices: Vec<Choice>,
    /// The filters as a query string, for the download links.
    query: String,
    /// A filter left nothing to show although something was measured.
    filtered_out: bool,
}

/// The cell of `row` (none: nothing measured on this provider here).
fn cell(row: Option<&ProviderRow>, provider: Provider) -> CellView {
    let Some(r) = row else {
        return CellView {
            accelerated: "not measured".into(),
            ..CellView::default()
        };
    };
    // What ran, where it was not what the path asked for.
    let ran = |used: Option<PathUsed>, asked: PathUsed| match used {
        Some(used) if used != asked => format!(" (ran {used})"),
        _ => String::new(),
    };
    let accelerated = match r.accelerated_mb_s {
        Some(mb_s) => format!(
            "{}{}",
            format::mb_s(mb_s),
            ran(r.accelerated_path_used, PathUsed::Accelerated)
        ),
        None => "accelerated not measured".into(),
    };
    let software = match (r.software_mb_s, r.fallback_cost) {
        (Some(mb_s), Some(cost)) => format!(
            "software {}{} · fallback costs {}×",
            format::mb_s(mb_s),
            ran(r.software_path_used, PathUsed::Software),
            format::significant(cost)
        ),
        (Some(mb_s), None) => format!("software {}", format::mb_s(mb_s)),
        // The page says once that ring has no software build.
        (None, _) if provider == Provider::Ring => String::new(),
        (None, _) => "software not measured".into(),
    };
    let hosts = [("accelerated", r.accelerated_hosts), ("software", r.software_hosts)]
        .iter()
        .filter_map(|(path, n)| n.map(|n| format!("{path}: {n} host(s)")))
        .collect::<Vec<_>>()
        .join(", ");
    CellView {
        accelerated,
        ratio: r.ratio_to_fastest.map(|x| format!("{x:.2}×")).unwrap_or_default(),
        fastest: r.is_fastest(),
        software,
        hosts,
    }
}

/// The opening lines of one unmarked class: per algorithm measured at
/// 16 KiB, the fastest provider, the others' ratios, and every provider's
/// fallback cost. `rows` are the class's, in table order.
fn answers(rows: &[&ProviderRow]) -> Vec<String> {
    let at: Vec<&&ProviderRow> = rows.iter().filter(|r| r.size_bytes == DEFAULT_SIZE_BYTES).collect();
    let algorithms: BTreeSet<Algorithm> = at.iter().map(|r| r.algorithm).collect();
    let mut lines = Vec::new();
    for a in algorithms {
        let of: Vec<&&&ProviderRow> = at.iter().filter(|r| r.algorithm == a).collect();
        let Some(best) = of.iter().find(|r| r.is_fastest()) else {
            continue;
        };
        let others: Vec<String> = of
            .iter()
            .filter(|r| !r.is_fastest())
            .filter_map(|r| Some(format!("{} {:.2}×", r.provider, r.ratio_to_fastest?)))
            .collect();
        let costs: Vec<String> = of
            .iter()
            .filter_map(|r| Some(format!("{} {}×", r.provider, format::significant(r.fallback_cost?))))
            .collect();
        let mut line = format!(
            "{a}: {} is fastest at {}",
            best.provider,
            format::mb_s(best.accelerated_mb_s.unwrap_or_default())
        );
        if !others.is_empty() {
            line += &format!(" ({} of it)", others.join(", "));
        }
        line += &if costs.is_empty() {
            "; no provider's software path is measured here".to_string()
        } else {
            format!("; without acceleration it costs {}", costs.join(", "))
        };
        lines.push(line + ".");
    }
    lines
}

/// The page from every class's `rows`, showing those `filter` keeps.
pub fn page_view(rows: &[ProviderRow], filter: Filter, query: &ProvidersQuery) -> ProvidersPage {
    let shown: Vec<&ProviderRow> = rows.iter().filter(|r| filter.keeps(r)).collect();
    let sizes: BTreeSet<u64> = shown.iter().map(|r| r.size_bytes).collect();
    let mut classes: Vec<ClassView> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 && rows[i - 1].class_id == r.class_id {
            continue;
        }
        let all: Vec<&ProviderRow> = rows.iter().filter(|o| o.class_id == r.class_id).collect();
        let mine: Vec<&ProviderRow> = all.iter().copied().filter(|o| filter.keeps(o)).collect();
        if mine.is_empty() {
            continue;
        }
        let algorithms: BTreeSet<Algorithm> = mine.iter().map(|o| o.algorithm).collect();
        let mut lines = Vec::new();
        for a in algorithms {
            for &p in Provider::ALL {
                if !p.runs(a) || filter.provider.is_some_and(|f| f != p) {
                    continue;
                }
                let cells = sizes
                    .iter()
                    .map(|&s| {
                        let row = mine
                            .iter()
                            .find(|o| o.algorithm == a && o.provider == p && o.size_bytes == s);
                        cell(row.copied(), p)
                    })
                    .collect();
                lines.push(LineView {
                    provider: p.as_str(),
                    algorithm: a.name(),
                    cells,
                });
            }
        }
        classes.push(ClassView {
            id: r.class_id.clone(),
            class: r.class.clone(),
            marked: r.marked,
            answers: if r.marked { Vec::new() } else { answers(&all) },
            lines,
        });
    }
    let size_text = filter.size_bytes.map(|s| s.to_string()).unwrap_or_default();
    let all_sizes: BTreeSet<u64> = rows.iter().map(|r| r.size_bytes).collect();
    let mut size_choices = params::choices(
        std::iter::once((String::new(), "every size".to_string()))
            .chain(all_sizes.iter().map(|s| (s.to_string(), format::bytes(*s)))),
        &size_text,
    );
    if filter.size_bytes.is_some_and(|s| !all_sizes.contains(&s)) {
        size_choices.push(Choice {
            value: size_text.clone(),
            text: format::bytes(filter.size_bytes.unwrap_or_default()),
            selected: true,
        });
    }
    let mut provider_choices = params::enum_choices(filter.provider);
    provider_choices.insert(
        0,
        Choice {
            value: String::new(),
            text: "every provider".into(),
            selected: filter.provider.is_none(),
        },
    );
    let query = [
        ("size", &size_text),
        ("provider", &query.provider.clone().unwrap_or_default()),
    ]
    .iter()
    .filter(|(_, v)| !v.trim().is_empty())
    .map(|(k, v)| format!("{k}={}", super::paging::encode(v.trim())))
    .collect::<Vec<_>>()
    .join("&");
    ProvidersPage {
        fill: FILL,
        filtered_out: classes.is_empty() && !rows.is_empty(),
        classes,
        sizes: sizes.iter().map(|s| format::bytes(*s)).collect(),
        size_choices,
        provider_choices,
        query,
    }
}

async fn page(State(state): State<WebState>, Query(query): Query<ProvidersQuery>) -> Result<Html<String>, WebError> {
    let filter = query.filter()?;
    let rows = read::table(&state.pool).await?;
    Ok(Html(page_view(&rows, filter, &query).render()?))
}

async fn api_providers(
    State(state): State<WebState>,
    Query(query): Query<ProvidersQuery>,
    Query(format): Query<FormatParam>,
) -> Result<Response, ApiError> {
    let filter = query.filter()?;
    let rows: Vec<ProviderRow> = read::table(&state.pool)
        .await?
        .into_iter()
        .filter(|r| filter.keeps(r))
        .collect();
    api::table("providers", &rows, format.format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(class: &str, provider: Provider, acc: Option<f64>, soft: Option<f64>, ratio: Option<f64>) -> ProviderRow {
        ProviderRow {
            class_id: "0123456789abcdef".into(),
            class_key: "0123456789abcdef".into(),
            class: class.into(),
            marked: false,
            provider,
            algorithm: "aes-256-gcm".parse().unwrap(),
            size_bytes: DEFAULT_SIZE_BYTES,
            accelerated_mb_s: acc,
            accelerated_hosts: acc.map(|_| 2),
            accelerated_path_used: acc.map(|_| PathUsed::Accelerated),
            software_mb_s: soft,
            software_hosts: soft.map(|_| 2),
            software_path_used: soft.map(|_| PathUsed::Software),
            ratio_to_fastest: ratio,
            fallback_cost: acc.zip(soft).map(|(a, s)| a / s),
        }
    }

    const HOSTILE: &str = "x86_64 · <script>alert(1)</script>";

    fn rendered(rows: &[ProviderRow], pairs: &[(&str, &str)]) -> String {
        let query: ProvidersQuery = params::query_from(pairs);
        let filter = query.filter().expect("a valid filter");
        page_view(rows, filter, &query).render().expect("renders")
    }

    #[test]
    fn the_page_opens_with_the_fastest_provider_and_each_fallback_cost_escaping_agent_text() {
        let rows = [
            row(HOSTILE, Provider::RustCrypto, Some(2500.0), Some(250.0), Some(0.5)),
            row(HOSTILE, Provider::Ring, Some(4500.0), None, Some(0.9)),
            row(HOSTILE, Provider::Openssl, Some(5000.0), Some(1000.0), Some(1.0)),
        ];
        let html = rendered(&rows, &[]);
        assert!(!html.contains("<script>alert(1)"), "agent text escaped");
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "and shown: {html}"
        );
        assert!(
            html.contains(
                "aes-256-gcm: openssl is fastest at 5000 MB/s (rustcrypto 0.50×, ring 0.90× of it); \
                 without acceleration it costs rustcrypto 10.0×, openssl 5.00×."
            ),
            "{html}"
        );
        assert!(html.contains("1.00× fastest"));
        assert!(html.contains("software 1000 MB/s · fallback costs 5.00×"));
        // Said once, not in each of ring's cells.
        assert_eq!(html.matches("no software build").count(), 1);
        // The kernel runs AES-256-GCM but was not measured: said, with what measures it.
        assert!(html.contains("not measured") && html.contains(FILL));
        assert!(!html.contains(" ? "));
    }

    #[test]
    fn an_empty_fleet_says_what_fills_the_page_and_filters_are_checked() {
        let html = rendered(&[], &[]);
        assert!(html.contains("No provider beyond the built-in one has been measured yet"));
        assert!(html.contains(FILL));
        let rows = [row("x86_64 · Xeon", Provider::Openssl, Some(5000.0), None, Some(1.0))];
        let other_size = rendered(&rows, &[("size", "1KiB")]);
        assert!(
            other_size.contains("No provider was measured at this size"),
            "{other_size}"
        );
        assert!(rendered(&rows, &[("size", ""), ("provider", "")]).contains("5000 MB/s"));
        for (name, value) in [("size", "huge"), ("provider", "libsodium")] {
            let query: ProvidersQuery = params::query_from(&[(name, value)]);
            let err = query.filter().expect_err("refused").to_string();
            assert!(err.contains(&format!("{name}=\"{value}\"")), "{err}");
        }
    }
}
