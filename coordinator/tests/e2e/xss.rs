//! Agent-supplied strings in a real browser: hostnames, label values, CPU
//! models and kernel releases carrying markup are shown as text on every page,
//! in SVG charts and window titles, never run; the same strings in query
//! strings come back escaped; the CSV/JSON answers are never served as HTML.

use serde_json::Value;

use crate::app::spawn_app;
use crate::browser::{
    FOREIGN_MARKUP, Problems, Screenshots, host_id, host_row, run_campaign, spawn_agent_build, visit,
};
use crate::chromium::Browser;

/// Agent-chosen strings that would run script if a page pasted them as markup:
/// as element content, and breaking out of a double-quoted attribute.
const SCRIPT_NAME: &str = "<script>alert(1)</script>";
const IMG_NAME: &str = "\"><img src=x onerror=alert(1)>";
/// Breaking out of a single-quoted attribute (label values are free text too).
const QUOTE_LABEL: &str = "' autofocus onfocus='alert(1)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_supplied_markup_is_shown_as_text_and_never_runs() {
    let Some(mut browser) = Browser::launch() else { return };
    let mut app = spawn_app().await;
    let note_img = format!("note={IMG_NAME}");
    let note_script = format!("note={SCRIPT_NAME}");
    let quote = format!("quote={QUOTE_LABEL}");
    app.spawn_agent(SCRIPT_NAME, &["--label", &note_img, "--label", &quote]);
    // The software build gets findings, so its name also reaches /fallback and the overview's findings.
    spawn_agent_build(&mut app, "cipherfleet-agent-soft", IMG_NAME, &["--label", &note_script]);
    app.wait_online(2).await;
    let campaign = run_campaign(&app, &["aes-256-gcm"], &[16384], 0.05).await;
    let script_host = host_id(&app, SCRIPT_NAME).await;
    let img_host = host_id(&app, IMG_NAME).await;
    // An agent also reports its CPU model and kernel release; real hardware cannot
    // be made to carry markup, so store what a hostile agent's hello would.
    sqlx::query("UPDATE host_fact_snapshots SET cpu_model_name = $1, kernel_release = $2 WHERE host_id = $3")
        .bind(IMG_NAME)
        .bind(SCRIPT_NAME)
        .bind(script_host)
        .execute(&app.pool)
        .await
        .expect("storing hostile facts");
    // And its providers' facts: a kernel crypto driver and an OpenSSL build
    // named with markup (the drivers and the build are the agent's words).
    sqlx::query("UPDATE host_fact_snapshots SET kernel_drivers = $1, openssl_build = $2 WHERE host_id = $3")
        .bind(
            serde_json::json!([{"name": "aes", "driver": IMG_NAME, "module": SCRIPT_NAME, "priority": 100,
                                  "kind": "cipher", "generic": true, "path": "software", "candidates": 1}]),
        )
        .bind(
            serde_json::json!({"binary": QUOTE_LABEL, "version": SCRIPT_NAME, "platform": IMG_NAME,
                                 "libcrypto": QUOTE_LABEL, "capability_env": SCRIPT_NAME,
                                 // A watched service's name and variable (`--watch-env`) are another process's.
                                 "watched": [{"target": SCRIPT_NAME, "name": IMG_NAME, "source": QUOTE_LABEL,
                                              "capability_env": QUOTE_LABEL, "masked": [SCRIPT_NAME]}]}),
        )
        .bind(script_host)
        .execute(&app.pool)
        .await
        .expect("storing hostile provider facts");
    let shots = Screenshots {
        dir: app.dir.path().join("xss-screenshots"),
        for_readme: false,
    };
    let base = format!("http://{}", app.http);
    let mut p = Problems::default();
    let both = [SCRIPT_NAME, IMG_NAME];

    // Where host names are shown, both must appear as text: escaped, not dropped.
    let pages: Vec<(String, &[&str])> = vec![
        ("/".into(), &both),
        ("/hosts".into(), &both),
        (format!("/hosts/{script_host}"), &[SCRIPT_NAME]),
        (format!("/hosts/{img_host}"), &[IMG_NAME]),
        ("/compare".into(), &both),
        // Machine classes are named after the CPU model.
        ("/compare?rows=classes".into(), &[IMG_NAME]),
        (format!("/modes?host={script_host}"), &[SCRIPT_NAME]),
        (format!("/modes?host={img_host}"), &[IMG_NAME]),
        ("/fallback".into(), &[IMG_NAME]),
        ("/capacity".into(), &[]),
        ("/campaigns".into(), &[]),
        (format!("/campaigns/{campaign}"), &both),
        // A campaign compared with itself: every host and point, unchanged.
        (format!("/campaigns/{campaign}/compare/{campaign}"), &both),
        // The scenarios name their machine classes after the CPU model too; the
        // campaign's AES-256-GCM at 16 KiB is a point of `modes` and `fallback`.
        ("/scenarios".into(), &[IMG_NAME]),
        ("/scenarios/modes".into(), &[IMG_NAME]),
        ("/scenarios/fallback".into(), &[IMG_NAME]),
        ("/scenarios/object-storage".into(), &[]),
        ("/scenarios/legacy-migration".into(), &[]),
        ("/scenarios/field-level".into(), &[]),
        // Providers are measured by their own suite, which this fleet did not run.
        ("/providers".into(), &[]),
    ];
    let mut api = std::collections::BTreeSet::new();
    for (i, (path, names)) in pages.iter().enumerate() {
        let Some(page) = visit(&mut browser, &base, path, &format!("page-{i}"), &shots, &mut p) else {
            continue;
        };
        for name in *names {
            p.check(
                page.shows(name),
                format!("{path}: shows the host name {name:?} as text"),
            );
        }
        // Chart labels are built outside the templates: a name there must be whole text too.
        if page.svg_text.contains("alert(1)") {
            p.check(
                both.iter().any(|n| page.svg_text.contains(n)),
                format!("{path}: a mangled host name in a chart: {:?}", page.svg_text),
            );
        }
        if path.starts_with("/hosts/") {
            let title = browser.eval("document.title");
            p.check(
                title.as_str().is_some_and(|t| t.contains(names[0])),
                format!("{path}: the window title shows {:?} as text: {title}", names[0]),
            );
        }
        if *path == format!("/hosts/{script_host}") {
            let mut text = |table: &str| {
                browser
                    .eval(&format!(
                        "(document.querySelector('{table}') || {{}}).textContent || ''"
                    ))
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            let (drivers, openssl) = (text("table.kernel-drivers"), text("table.openssl"));
            p.check(
                drivers.contains(IMG_NAME) && drivers.contains(SCRIPT_NAME),
                format!("{path}: the kernel driver and module shown as text: {drivers:?}"),
            );
            p.check(
                openssl.contains(SCRIPT_NAME) && openssl.contains(IMG_NAME) && openssl.contains(QUOTE_LABEL),
                format!("{path}: the OpenSSL build shown as text: {openssl:?}"),
            );
            p.check(
                openssl.contains(&format!(
                    "{SCRIPT_NAME} ({IMG_NAME}): {QUOTE_LABEL} (masks {SCRIPT_NAME}), from {QUOTE_LABEL}"
                )),
                format!("{path}: the watched service shown as text: {openssl:?}"),
            );
        }
        if path == "/hosts" {
            let row = host_row(&mut browser, "table.hosts", SCRIPT_NAME);
            p.check(
                row.contains(&note_img) && row.contains(&quote),
                format!("/hosts: label values shown as text: {row:?}"),
            );
            p.check(
                row.matches(SCRIPT_NAME).count() >= 2 && row.contains(IMG_NAME),
                format!("/hosts: CPU model and kernel shown as text: {row:?}"),
            );
        }
        if path.starts_with("/modes") {
            p.check(
                page.svg_text.contains(names[0]),
                format!(
                    "{path}: the chart title names {:?} as text: {:?}",
                    names[0], page.svg_text
                ),
            );
        }
        let links =
            browser.eval("Array.from(document.querySelectorAll('a[href*=\"/api/v1/\"]'), a => a.getAttribute('href'))");
        api.extend(
            links
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str().map(str::to_string)),
        );
    }
    // Strings in the query string come back in form fields and error messages.
    let reflected = [
        format!(
            "/hosts?label={}&cpu={}&kernel={}",
            percent_encode(IMG_NAME),
            percent_encode(SCRIPT_NAME),
            percent_encode(QUOTE_LABEL)
        ),
        format!("/fallback?label={}", percent_encode(IMG_NAME)),
        format!("/compare?algorithms={}", percent_encode(IMG_NAME)),
        format!("/capacity?algorithm={}", percent_encode(SCRIPT_NAME)),
        format!("/providers?provider={}", percent_encode(SCRIPT_NAME)),
        format!("/modes?host={}", percent_encode(IMG_NAME)),
        format!("/campaigns/{}", percent_encode(SCRIPT_NAME)),
        format!("/campaigns/{campaign}/compare/{}", percent_encode(IMG_NAME)),
        format!("/no-such-page/{}", percent_encode(IMG_NAME)),
    ];
    for path in &reflected {
        let status = browser.goto(&format!("{base}{path}"));
        let trouble = browser.take_trouble();
        p.check(
            trouble.dialogs.is_empty() && trouble.csp.is_empty(),
            format!("{path} (HTTP {status}): {trouble:?}"),
        );
        let foreign = browser.eval(FOREIGN_MARKUP);
        p.check(
            foreign.as_array().is_some_and(Vec::is_empty),
            format!("{path} (HTTP {status}): injected markup: {foreign}"),
        );
    }
    let label = browser.goto(&format!("{base}{}", reflected[0]));
    if label == 200 {
        let value = browser.eval("(document.querySelector('input[name=label]') || {}).value");
        p.check(
            value == IMG_NAME,
            format!("/hosts: the label filter keeps its text: {value}"),
        );
    }

    // Every table's CSV and JSON, the raw results and /metrics: never HTML.
    api.insert("/api/v1/hosts".into());
    api.insert("/api/v1/hosts?format=csv".into());
    for path in &api {
        let r = app.get(path).await;
        let kind = r.header("content-type").unwrap_or_default().to_string();
        p.check(r.status == 200, format!("{path}: HTTP {}: {}", r.status, r.body));
        p.check(
            kind.starts_with("application/json") || kind.starts_with("text/csv"),
            format!("{path}: served as {kind:?}, not JSON or CSV"),
        );
        p.check(
            r.header("x-content-type-options") == Some("nosniff"),
            format!("{path}: without nosniff"),
        );
        if kind.starts_with("application/json") {
            p.check(
                serde_json::from_str::<Value>(&r.body).is_ok(),
                format!("{path}: not JSON: {}", r.body),
            );
        }
    }
    let hosts: Value = serde_json::from_str(&app.get("/api/v1/hosts").await.body).unwrap_or(Value::Null);
    for name in both {
        p.check(
            strings_in(&hosts).contains(&name.to_string()),
            format!("/api/v1/hosts: the name {name:?} exactly, got {hosts}"),
        );
    }
    let csv = app.get("/api/v1/hosts?format=csv").await.body;
    p.check(
        csv.contains("\"\"\"><img src=x onerror=alert(1)>\""),
        format!("/api/v1/hosts?format=csv: the name quoted as one CSV field: {csv}"),
    );
    let metrics = app.get("/metrics").await;
    p.check(
        metrics.status == 200
            && metrics
                .header("content-type")
                .is_some_and(|t| t.starts_with("text/plain"))
            && metrics.header("x-content-type-options") == Some("nosniff"),
        format!("/metrics: plain text, not sniffed: {:?}", metrics.headers),
    );
    eprintln!(
        "xss test: {} pages, {} query-string reflections, {} API answers checked",
        pages.len(),
        reflected.len(),
        api.len()
    );
    p.assert_none();
}

/// The XSS checks above pass only if they can fail: on a page that does
/// carry the payloads as markup, they see every one of them.
#[test]
fn the_injection_checks_catch_markup_that_got_through() {
    let Some(mut browser) = Browser::launch() else { return };
    let page = format!("<p>{SCRIPT_NAME}</p><p title=\"{IMG_NAME}\"></p><p title='{QUOTE_LABEL}'></p>");
    browser.goto(&format!("data:text/html,{}", percent_encode(&page)));
    let trouble = browser.take_trouble();
    assert!(!trouble.dialogs.is_empty(), "the alert() was seen: {trouble:?}");
    let found = browser.eval(FOREIGN_MARKUP).to_string();
    for marker in [
        "script alert(1)",
        "img onerror=alert(1)",
        "img src=x",
        "onfocus=alert(1)",
    ] {
        assert!(found.contains(marker), "{marker:?} in {found}");
    }
    // Under a CSP like the report's, nothing runs, but the violation is on record.
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'self'; style-src 'self'\">";
    browser.goto(&format!(
        "data:text/html,{}",
        percent_encode(&format!("{csp}{page}<b style=\"color:red\">x</b>"))
    ));
    let trouble = browser.take_trouble();
    assert!(trouble.dialogs.is_empty(), "{trouble:?}");
    for directive in ["script-src-elem", "script-src-attr", "style-src-attr"] {
        assert!(
            trouble.csp.iter().any(|v| v.contains(directive)),
            "{directive} in {:?}",
            trouble.csp
        );
    }
}

/// Every string anywhere in `v`.
fn strings_in(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings_in).collect(),
        Value::Object(o) => o.values().flat_map(strings_in).collect(),
        _ => vec![],
    }
}

/// `s` for a query string: everything but unreserved characters percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
