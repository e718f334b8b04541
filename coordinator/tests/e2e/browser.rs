//! The report in a real headless Chromium ([`crate::chromium`]) on results from
//! real campaigns (real agents measuring, briefly): every page loads without a
//! script error or CSP violation, shows the hosts and figures a reader relies
//! on, sorts on a click — and agent-supplied markup stays text everywhere.
//!
//! The helpers here (a page visit with the checks every page must pass, the
//! agents, the campaign) also serve [`crate::xss`].
//!
//! `CIPHERFLEET_SCREENSHOTS=dir` keeps each page's screenshot there (relative
//! to the workspace root) and runs a wider matrix: `deploy/screenshots.sh`
//! makes the README's pictures this way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use cipherfleet_coordinator::analysis::slow::Thresholds;
use cipherfleet_proto::v1;
use serde_json::{Value, json};

use crate::app::{App, agent_binary, both_paths, matrix, spawn_app};
use crate::chromium::Browser;

/// AES-256-GCM against ChaCha20-Poly1305 (the classic AEAD question) plus a
/// CBC mode, at a field-sized and a 16 KiB payload, on both paths.
const ALGORITHMS: &[&str] = &["aes-256-gcm", "chacha20-poly1305", "aes-128-cbc"];
const SIZES: &[u64] = &[16, 16 * 1024];
/// The README's screenshots: more columns for the matrix, still a few minutes on one VM.
const SCREENSHOT_ALGORITHMS: &[&str] = &[
    "aes-128-gcm",
    "aes-256-gcm",
    "aes-128-cbc",
    "aes-128-ctr",
    "aes-256-ocb",
    "chacha20-poly1305",
    "des-ede3-cbc",
];
const SCREENSHOT_SIZES: &[u64] = &[16, 1024, 16 * 1024];

/// The accelerated agent and the software build (`cipherfleet-agent-soft` as the daemon).
const FAST: &str = "web-accelerated";
const SOFT: &str = "web-software-build";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_real_campaign_results_in_a_real_browser() {
    let Some(mut browser) = Browser::launch() else { return };
    let started = Instant::now();
    let mut app = spawn_app().await;
    spawn_agent_build(&mut app, "cipherfleet-agent", FAST, &[]);
    spawn_agent_build(&mut app, "cipherfleet-agent-soft", SOFT, &[]);
    app.wait_online(2).await;
    let shots = Screenshots::new(&app);
    // Longer points for the README: steadier figures, smaller CVs.
    let (algorithms, sizes, seconds) = if shots.for_readme {
        (SCREENSHOT_ALGORITHMS, SCREENSHOT_SIZES, 0.25)
    } else {
        (ALGORITHMS, SIZES, 0.05)
    };
    let campaign = run_campaign(&app, algorithms, sizes, seconds).await;
    let measured = started.elapsed();
    let fast = host_id(&app, FAST).await;
    let soft = host_id(&app, SOFT).await;
    // What the pages must show, as stored by the real run (never typed in here).
    let fast_gcm = stored(&app, fast, "aes-256-gcm", 16384, "accelerated").await;
    let soft_gcm = stored(&app, soft, "aes-256-gcm", 16384, "accelerated").await;
    let fast_gcm_software = stored(&app, fast, "aes-256-gcm", 16384, "software").await;
    let jobs_per_host = (algorithms.len() * sizes.len() * 2).to_string();
    let base = format!("http://{}", app.http);
    let mut p = Problems::default();

    if let Some(page) = visit(&mut browser, &base, "/", "overview", &shots, &mut p) {
        p.check(page.shows(FAST) && page.shows(SOFT), "/: the overview lists both hosts");
        let configurations = browser.eval(&texts("table.configurations tbody tr"));
        p.check(
            contains_row(&configurations, std::env::consts::ARCH),
            format!("/: hosts grouped by arch: {configurations}"),
        );
        let findings = browser.eval(&texts("table.findings tbody tr"));
        p.check(
            contains_row(&findings, SOFT),
            format!("/: an open finding for the software build: {findings}"),
        );
        let headers = browser.eval(&texts("table.configurations thead th"));
        let names: Vec<&str> = headers
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str())
            .collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        p.check(
            unique.len() == names.len(),
            format!("/: one heading per column of the configurations: {names:?}"),
        );
        let campaigns = browser.eval(&texts(&format!("tr[data-campaign=\"{campaign}\"]")));
        p.check(
            contains_row(&campaigns, &format!("{0} / {0}", algorithms.len() * sizes.len() * 4)),
            format!("/: the recent campaign, every job settled: {campaigns}"),
        );
    }
    if visit(&mut browser, &base, "/hosts", "hosts", &shots, &mut p).is_some() {
        let soft_row = host_row(&mut browser, "table.hosts", SOFT);
        p.check(
            soft_row.contains("software") && soft_row.contains("online"),
            format!("/hosts: the software build's row says online and software: {soft_row:?}"),
        );
        p.check(
            !host_row(&mut browser, "table.hosts", FAST).is_empty(),
            "/hosts: a row for the accelerated host",
        );
        sorts_on_click(&mut browser, "/hosts", "table.hosts", &mut p);
    }
    for (id, name, shot) in [(fast, FAST, "host"), (soft, SOFT, "host-software")] {
        let path = format!("/hosts/{id}");
        if let Some(page) = visit(&mut browser, &base, &path, shot, &shots, &mut p) {
            let h1 = browser.eval("document.querySelector('h1').textContent");
            p.check(
                h1.as_str().is_some_and(|t| t.contains(name)),
                format!("{path}: heading names {name}: {h1}"),
            );
            p.check(page.charts >= 1, format!("{path}: a chart of key algorithms over time"));
            fits_1400_px(&mut browser, &path, &mut p);
            let tallest = browser.eval(
                "Math.max(...Array.from(document.querySelectorAll('table.features tbody tr'), r => r.getBoundingClientRect().height))",
            );
            p.check(
                tallest.as_f64().is_some_and(|h| h < 40.0),
                format!("{path}: CPU-feature rows are one line high, not stretched: {tallest} px"),
            );
            p.check(
                page.svg_text.contains("aes-256-gcm") || page.svg_text.contains("AES-256-GCM"),
                format!("{path}: the chart names AES-256-GCM: {:?}", page.svg_text),
            );
            if name == SOFT {
                let badge = browser.eval("(document.querySelector('#acceleration') || {}).textContent");
                p.check(
                    badge == "software",
                    format!("{path}: acceleration badge says software, got {badge}"),
                );
            }
        }
    }

    // The matrix at an explicit point: the cell shows the stored figure, links
    // to that very result, and flags the software build's fallback.
    let compare = "/compare?rows=hosts&size=16384&threads=1&direction=encrypt&path=accelerated";
    if let Some(page) = visit(&mut browser, &base, compare, "compare", &shots, &mut p) {
        p.check(page.shows("MB/s"), "/compare: states its unit");
        for (host, result) in [(FAST, &fast_gcm), (SOFT, &soft_gcm)] {
            let cell = matrix_cell(&mut browser, host, "aes-256-gcm");
            let text = cell["text"].as_str().unwrap_or_default();
            let expected = cipherfleet_coordinator::web::format::mb_s(result.mb_s);
            p.check(
                text.contains(&expected),
                format!("/compare: cell {host} × aes-256-gcm shows {expected}: {cell}"),
            );
            p.check(
                text.contains("CV"),
                format!("/compare: cell {host} × aes-256-gcm shows the CV: {cell}"),
            );
            p.check(
                cell["links"] == json!([format!("/api/v1/results/{}", result.id)]),
                format!(
                    "/compare: cell {host} × aes-256-gcm links to result {}: {cell}",
                    result.id
                ),
            );
            let flagged = text.contains("ran in software");
            p.check(
                flagged == (result.path_used == "software"),
                format!(
                    "/compare: cell {host} × aes-256-gcm flags a fallback iff it ran {}: {cell}",
                    result.path_used
                ),
            );
        }
        sorts_on_click(&mut browser, "/compare", "table.matrix", &mut p);
        // A seed view, followed as a reader would: its link on the page.
        let seed = browser.eval(
            "(Array.from(document.querySelectorAll('.seeds a')).find(a => a.textContent.includes('ChaCha20')) || {}).href",
        );
        match seed.as_str() {
            Some(url) => {
                let path = url.trim_start_matches(&base).to_string();
                if visit(&mut browser, &base, &path, "compare-seed", &shots, &mut p).is_some() {
                    let cell = matrix_cell(&mut browser, FAST, "chacha20-poly1305");
                    p.check(
                        cell["p99"]
                            .as_str()
                            .is_some_and(|t| t.chars().any(|c| c.is_ascii_digit())),
                        format!("{path}: the AEAD seed view shows P99 for {FAST} × chacha20-poly1305: {cell}"),
                    );
                }
            }
            None => p.check(false, "/compare: a seed view link about ChaCha20-Poly1305"),
        }
    }
    let modes = format!("/modes?host={fast}");
    if let Some(page) = visit(&mut browser, &base, &modes, "modes", &shots, &mut p) {
        p.check(page.charts >= 1, format!("{modes}: throughput-against-size charts"));
        p.check(
            page.svg_text.to_lowercase().contains("aes-256-gcm"),
            format!("{modes}: a chart legend names AES-256-GCM: {:?}", page.svg_text),
        );
        p.check(
            page.svg_text.contains("MB/s"),
            format!("{modes}: the chart's axis states MB/s"),
        );
    }
    if let Some(page) = visit(&mut browser, &base, "/fallback", "fallback", &shots, &mut p) {
        // The page opens with its answer: both paths per host, the software build
        // highlighted (its AES-256-GCM ran in software) with its reason as a badge.
        let chart = browser.eval(
            "Array.from(document.querySelectorAll('svg.paths-chart g.host-row'), g => \
               ({host: g.dataset.host, slow: g.classList.contains('at-software-speed'), text: g.textContent}))",
        );
        let row = |host: &str| {
            chart
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["host"] == host)
                .cloned()
                .unwrap_or_default()
        };
        // The accelerated host ran on hardware; it is highlighted only when its
        // measured ratio is under the deriver's threshold (a debug-build agent on
        // a loaded machine measures AES-GCM near its software path).
        let fast_ratio = fast_gcm.mb_s / fast_gcm_software.mb_s;
        let near_software = fast_ratio < Thresholds::default().near_software_ratio;
        p.check(
            row(FAST)["slow"] == near_software && row(FAST)["text"].as_str().is_some_and(|t| t.contains('×')),
            format!(
                "/fallback: the chart shows {FAST}'s ratio ({fast_ratio:.2} stored), highlighted iff under the threshold: {chart}"
            ),
        );
        p.check(
            row(SOFT)["slow"] == (soft_gcm.path_used == "software")
                && row(SOFT)["text"].as_str().is_some_and(|t| t.contains("software-build")),
            format!("/fallback: the chart highlights {SOFT} with its software-build badge: {chart}"),
        );
        p.check(
            chart.as_array().is_some_and(|rows| {
                let first_fast = rows.iter().position(|r| r["slow"] == false).unwrap_or(rows.len());
                rows.iter().skip(first_fast).all(|r| r["slow"] == false)
            }),
            format!("/fallback: hosts at software speed come first in the chart: {chart}"),
        );
        says_what_fills_it(&page, "/fallback", &mut p);
        fits_1400_px(&mut browser, "/fallback", &mut p);
        // The software build is a fact of the host (a finding), whatever ran.
        let findings = browser.eval(&format!(
            "Array.from(document.querySelectorAll('#findings tr')).filter(r => r.dataset.host === {}).map(r => r.dataset.reason)",
            json!(SOFT)
        ));
        p.check(
            findings
                .as_array()
                .is_some_and(|r| r.contains(&json!("software-build"))),
            format!("/fallback: an open software-build finding for {SOFT}: {findings}"),
        );
        // "At software speed": AES-256-GCM is listed as having run in software
        // exactly when it did (tiny debug-build measurements may flag other noise).
        for (host, result) in [(FAST, &fast_gcm), (SOFT, &soft_gcm)] {
            let item = browser.eval(&format!(
                "(Array.from(document.querySelectorAll('#software-speed tr')).filter(r => r.dataset.host === {}) \
                   .flatMap(r => Array.from(r.querySelectorAll('li'), li => li.textContent)) \
                   .find(t => t.startsWith('aes-256-gcm:')) || '')",
                json!(host)
            ));
            let item = item.as_str().unwrap_or_default();
            let says_software = item.contains("ran the software path");
            p.check(
                says_software == (result.path_used == "software"),
                format!(
                    "/fallback: {host} ran AES-256-GCM {}; at software speed it says: {item:?}",
                    result.path_used
                ),
            );
        }
        let ran = browser.eval(&format!(
            "(Array.from(document.querySelectorAll('table.paths tr')).find(r => r.dataset.host === {} && r.dataset.algorithm === 'aes-256-gcm') || {{}}).textContent",
            json!(SOFT)
        ));
        p.check(
            ran.as_str()
                .is_some_and(|t| t.contains(&soft_gcm.path_used) && t.contains('×')),
            format!("/fallback: {SOFT} × aes-256-gcm shows what ran and the ratio: {ran}"),
        );
        sorts_on_click(&mut browser, "/fallback", "table.paths", &mut p);
    }
    if let Some(page) = visit(&mut browser, &base, "/capacity", "capacity", &shots, &mut p) {
        let per_core = browser.eval(&texts("table.capacity td.per-core"));
        p.check(
            per_core
                .as_array()
                .is_some_and(|c| c.iter().any(|t| t.as_str().is_some_and(|t| t.contains("MB/s")))),
            format!("/capacity: a measured per-core figure in MB/s: {per_core}"),
        );
        p.check(page.shows("Hosts needed"), "/capacity: says how many hosts are needed");
    }
    for path in [
        "/scenarios",
        "/scenarios/legacy-migration",
        "/scenarios/fallback",
        "/providers",
    ] {
        let shot = path.trim_start_matches('/').replace('/', "-");
        if let Some(page) = visit(&mut browser, &base, path, &shot, &shots, &mut p) {
            says_what_fills_it(&page, path, &mut p);
            if path == "/providers" {
                fits_1400_px(&mut browser, path, &mut p);
            }
        }
    }
    if visit(&mut browser, &base, "/campaigns", "campaigns", &shots, &mut p).is_some() {
        let row = browser.eval(&texts(&format!("tr[data-campaign=\"{campaign}\"]")));
        p.check(
            contains_row(&row, "browser"),
            format!("/campaigns: lists campaign {campaign}: {row}"),
        );
    }
    let campaign_path = format!("/campaigns/{campaign}");
    if visit(&mut browser, &base, &campaign_path, "campaign", &shots, &mut p).is_some() {
        for host in [FAST, SOFT] {
            let row = host_row(&mut browser, "table.campaign-hosts", host);
            p.check(
                row.contains(&jobs_per_host) && row.contains("100"),
                format!("{campaign_path}: {host} finished its {jobs_per_host} jobs: {row:?}"),
            );
        }
    }
    eprintln!(
        "browser test: campaign measured in {measured:.1?}, pages checked in {:.1?}; screenshots in {}",
        started.elapsed() - measured,
        shots.dir.display()
    );
    p.assert_none();
}

/// A page that lacks data says what fills it: no `?` standing for a figure,
/// and a "not measured" only on a page that names the command measuring it.
pub(crate) fn says_what_fills_it(page: &Page, path: &str, p: &mut Problems) {
    let questions: Vec<&str> = page
        .text
        .lines()
        .filter(|l| l.contains(" ? ") || l.contains(" ?)") || l.ends_with(" ?"))
        .collect();
    p.check(
        questions.is_empty(),
        format!("{path}: '?' in place of a figure: {questions:?}"),
    );
    p.check(
        !page.shows("not measured") || page.shows("cipherfleet-coordinator campaign start --"),
        format!("{path}: says 'not measured' without the command that measures it"),
    );
}

/// The page fits a 1,400 px window: nothing wider than the page, no table
/// wider than its scroll box, no chart text past its SVG's edge.
pub(crate) fn fits_1400_px(browser: &mut Browser, path: &str, p: &mut Problems) {
    let overflow = browser.eval(
        "(() => { const found = [];\
           if (document.documentElement.scrollWidth > window.innerWidth) found.push('page ' + document.documentElement.scrollWidth);\
           for (const w of document.querySelectorAll('.table-wrap')) {\
             const t = w.querySelector('table');\
             if (t && t.scrollWidth > w.clientWidth + 1) found.push(t.className + ' ' + t.scrollWidth + ' > ' + w.clientWidth);\
           }\
           for (const svg of document.querySelectorAll('svg.chart')) {\
             const s = svg.getBoundingClientRect();\
             for (const t of svg.querySelectorAll('text')) {\
               const r = t.getBoundingClientRect();\
               if (r.left < s.left - 0.5 || r.right > s.right + 0.5) found.push('chart text ' + t.textContent);\
             }\
           }\
           return found; })()",
    );
    p.check(
        overflow.as_array().is_some_and(Vec::is_empty),
        format!("{path}: wider than a 1,400 px window: {overflow}"),
    );
}

/// A stored result, as the database has it.
struct Stored {
    id: i64,
    mb_s: f64,
    path_used: String,
}

/// The latest 1-thread encrypt result of `host` at one point.
async fn stored(app: &App, host: i64, algorithm: &str, size: i64, path: &str) -> Stored {
    let (id, mb_s, path_used) = sqlx::query_as(
        "SELECT id, throughput_mb_s, path_used FROM results WHERE host_id = $1 AND algorithm = $2 \
         AND size_bytes = $3 AND path = $4 AND threads = 1 AND direction = 'encrypt' ORDER BY id DESC LIMIT 1",
    )
    .bind(host)
    .bind(algorithm)
    .bind(size)
    .bind(path)
    .fetch_one(&app.pool)
    .await
    .unwrap_or_else(|e| panic!("result of host {host} {algorithm} {size} {path}: {e}"));
    Stored { id, mb_s, path_used }
}

/// JS: the text of every element matching `selector`.
pub fn texts(selector: &str) -> String {
    format!(
        "Array.from(document.querySelectorAll({}), e => e.textContent)",
        json!(selector)
    )
}

/// The text of the row of `table` whose `data-host` is exactly `host` ("" when none).
pub fn host_row(browser: &mut Browser, table: &str, host: &str) -> String {
    let script = format!(
        "(Array.from(document.querySelectorAll({})).find(r => r.dataset.host === {}) || {{textContent: ''}}).textContent",
        json!(format!("{table} tr[data-host]")),
        json!(host)
    );
    browser.eval(&script).as_str().unwrap_or_default().to_string()
}

/// Failures collected over every page, so one run names every missing piece.
#[derive(Default)]
pub struct Problems(Vec<String>);

impl Problems {
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.0.push(what.into());
        }
    }

    pub fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} problem(s):\n- {}",
            self.0.len(),
            self.0.join("\n- ")
        );
    }
}

/// What a loaded page shows.
pub struct Page {
    /// `main`'s rendered text (what a reader sees, entities decoded).
    pub text: String,
    /// `svg.chart` elements.
    pub charts: u64,
    /// The text inside every SVG (labels, legends, titles).
    pub svg_text: String,
}

impl Page {
    pub fn shows(&self, s: &str) -> bool {
        self.text.contains(s)
    }
}

/// Where screenshots go.
pub struct Screenshots {
    pub dir: PathBuf,
    /// `CIPHERFLEET_SCREENSHOTS` is set: the pictures are for the README.
    pub for_readme: bool,
}

impl Screenshots {
    pub fn new(app: &App) -> Screenshots {
        match std::env::var_os("CIPHERFLEET_SCREENSHOTS") {
            Some(dir) => {
                // Relative to the workspace root, where deploy/screenshots.sh runs.
                let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
                std::fs::create_dir_all(&dir).expect("creating the screenshot directory");
                Screenshots { dir, for_readme: true }
            }
            None => Screenshots {
                dir: app.dir.path().join("screenshots"),
                for_readme: false,
            },
        }
    }

    /// README pictures stay under ~300 KB: a long page is shrunk a little (GitHub
    /// shows them narrower than 1400 px anyway).
    fn take(&self, browser: &mut Browser) -> Vec<u8> {
        let mut png = browser.screenshot(1.0);
        if self.for_readme {
            for scale in [0.85, 0.7] {
                if png.len() <= 300_000 {
                    break;
                }
                png = browser.screenshot(scale);
            }
        }
        png
    }
}

/// Loads `path`, runs the checks every page must pass (HTTP 200, no script
/// error, no CSP violation, no foreign script or inline handler), saves its
/// screenshot as `name.png`, and returns what it shows; `None` when it did not load.
pub fn visit(
    browser: &mut Browser,
    base: &str,
    path: &str,
    name: &str,
    shots: &Screenshots,
    p: &mut Problems,
) -> Option<Page> {
    let status = browser.goto(&format!("{base}{path}"));
    let trouble = browser.take_trouble();
    if status != 200 {
        let text = browser.eval("document.querySelector('main') ? document.querySelector('main').innerText : ''");
        p.check(
            false,
            format!("{path}: HTTP {status}: {}", text.as_str().unwrap_or_default().trim()),
        );
        return None;
    }
    p.check(trouble.is_empty(), format!("{path}: {trouble:?}"));
    let foreign = browser.eval(FOREIGN_MARKUP);
    p.check(
        foreign.as_array().is_some_and(Vec::is_empty),
        format!("{path}: markup no page of ours has: {foreign}"),
    );
    std::fs::create_dir_all(&shots.dir).expect("screenshot directory");
    std::fs::write(shots.dir.join(format!("{name}.png")), shots.take(browser)).expect("saving a screenshot");
    let seen = browser.eval(
        "({text: document.querySelector('main').innerText, \
           charts: document.querySelectorAll('svg.chart').length, \
           svg: Array.from(document.querySelectorAll('svg'), s => s.textContent).join(' ')})",
    );
    Some(Page {
        text: seen["text"].as_str().unwrap_or_default().to_string(),
        charts: seen["charts"].as_u64().unwrap_or(0),
        svg_text: seen["svg"].as_str().unwrap_or_default().to_string(),
    })
}

/// Lists what an injection would leave in the DOM: scripts other than the
/// report's own, `on…` handler attributes, `javascript:` URLs, `<img src=x>`,
/// and elements that embed other documents.
pub const FOREIGN_MARKUP: &str = r#"(() => {
  const found = [];
  const ours = location.origin + '/static/report.js';
  for (const s of document.querySelectorAll('script')) {
    if (s.src !== ours) found.push('script ' + (s.src || s.textContent.slice(0, 80)));
  }
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.toLowerCase().startsWith('on')) found.push(el.localName + ' ' + a.name + '=' + a.value);
      if (/^\s*javascript:/i.test(a.value)) found.push(el.localName + ' ' + a.name + '=' + a.value);
    }
  }
  for (const img of document.querySelectorAll('img')) {
    if (img.getAttribute('src') === 'x') found.push('img src=x');
  }
  for (const el of document.querySelectorAll('iframe, object, embed, foreignObject')) found.push(el.localName);
  return found;
})()"#;

/// Clicks a header of the first `selector` table twice and checks that the
/// rows came out ascending, then descending, by that column (a numeric
/// `data-sort` column when there is one with two different values, else text).
fn sorts_on_click(browser: &mut Browser, path: &str, selector: &str, p: &mut Problems) {
    let script = format!("({SORT_TWICE})({})", json!(selector));
    let outcome = browser.eval(&script);
    let ok = outcome["ascending"] == true && outcome["descending"] == true && outcome["first"] != outcome["second"];
    p.check(ok, format!("{path}: clicking a header sorts {selector}: {outcome}"));
    let trouble = browser.take_trouble();
    p.check(trouble.is_empty(), format!("{path}: sorting: {trouble:?}"));
}

const SORT_TWICE: &str = r#"(selector) => {
  const table = document.querySelector(selector);
  if (!table || !table.tHead || !table.tBodies[0]) return {error: 'no table ' + selector};
  const heads = Array.from(table.tHead.rows[table.tHead.rows.length - 1].cells);
  const column = i => Array.from(table.tBodies[0].rows, r => r.cells[i]);
  const numeric = i => column(i).every(c => c && c.dataset.sort !== undefined && c.dataset.sort !== '' && !Number.isNaN(Number(c.dataset.sort)));
  const distinct = (i, f) => new Set(column(i).map(f)).size > 1;
  const text = c => (c ? c.textContent.trim().toLowerCase() : '');
  let pick = heads.findIndex((_, i) => numeric(i) && distinct(i, c => c.dataset.sort));
  const isNumber = pick >= 0;
  if (!isNumber) pick = heads.findIndex((_, i) => distinct(i, text));
  if (pick < 0) return {error: 'no column with two different values', rows: table.tBodies[0].rows.length};
  const values = () => column(pick).map(c => (isNumber ? Number(c.dataset.sort) : text(c)));
  const inOrder = (v, dir) => v.every((x, i) => i === 0 || (dir > 0 ? v[i - 1] <= x : v[i - 1] >= x));
  const before = values();
  heads[pick].click();
  const first = values();
  heads[pick].click();
  const second = values();
  return {column: heads[pick].textContent.trim(), before, first, second,
          ascending: inOrder(first, 1), descending: inOrder(second, -1)};
}"#;

/// The matrix cell in the row naming `host` and the column naming `algorithm`:
/// its text and links, or null.
fn matrix_cell(browser: &mut Browser, host: &str, algorithm: &str) -> Value {
    let script = format!("({MATRIX_CELL})({}, {})", json!(host), json!(algorithm));
    browser.eval(&script)
}

const MATRIX_CELL: &str = r#"(host, algorithm) => {
  for (const table of document.querySelectorAll('main table')) {
    if (!table.tHead || !table.tBodies[0]) continue;
    const heads = Array.from(table.tHead.rows[table.tHead.rows.length - 1].cells, c => c.textContent.trim().toLowerCase());
    const col = heads.findIndex(h => h.includes(algorithm));
    if (col < 0) continue;
    for (const row of table.tBodies[0].rows) {
      if (row.cells[0] && row.cells[0].textContent.includes(host) && row.cells[col]) {
        const cell = row.cells[col];
        const p99 = cell.querySelector('.p99');
        return {text: cell.textContent.trim(), class: cell.className, p99: p99 ? p99.textContent : null,
                links: Array.from(cell.querySelectorAll('a'), a => a.getAttribute('href'))};
      }
    }
  }
  return null;
}"#;

fn contains_row(rows: &Value, host: &str) -> bool {
    rows.as_array()
        .into_iter()
        .flatten()
        .any(|r| r.as_str().is_some_and(|t| t.contains(host)))
}

/// Starts the agent binary `binary` (`cipherfleet-agent`, or `cipherfleet-agent-soft`
/// whose crypto crates are all forced to software: a host whose build forces
/// software) with [`App::agent_command`]'s flags. The binaries come from
/// `$CIPHERFLEET_AGENT_DIR` when set (deploy/screenshots.sh points it at release
/// builds, so the README shows real speeds), else from beside the test binary.
pub fn spawn_agent_build(app: &mut App, binary: &str, name: &str, extra: &[&str]) -> usize {
    let path = match std::env::var_os("CIPHERFLEET_AGENT_DIR") {
        Some(dir) => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir).join(binary),
        None => agent_binary().with_file_name(binary),
    };
    app.spawn_agent_build(&path, name, extra)
}

/// Runs `algorithms` × `sizes` on both paths on every host and waits for it:
/// a tiny but real campaign. Returns its id.
pub async fn run_campaign(app: &App, algorithms: &[&str], sizes: &[u64], seconds: f64) -> String {
    let both = v1::Matrix {
        paths: both_paths(),
        ..matrix(algorithms, sizes, seconds)
    };
    app.run_campaign("browser", both).await
}

pub async fn host_id(app: &App, name: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM hosts WHERE name = $1")
        .bind(name)
        .fetch_one(&app.pool)
        .await
        .unwrap_or_else(|e| panic!("host {name:?}: {e}"))
}
