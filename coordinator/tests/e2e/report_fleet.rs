//! The fleet pages (`/`, `/hosts`, `/hosts/{id}`, `/campaigns`,
//! `/campaigns/{id}`) and their `/api/v1` tables over real results: a normal
//! agent (labelled, with one algorithm's worker made to crash) and the
//! software build measure through the real coordinator; every page must show
//! what the database holds. Plus the empty report and the skeleton's answers
//! to bad addresses.

use std::collections::BTreeMap;
use std::time::Duration;

use cipherfleet_coordinator::analysis::acceleration::Acceleration;
use cipherfleet_coordinator::store::hosts;
use cipherfleet_coordinator::web::format;
use serde_json::Value;

use crate::app::{App, HttpResponse, spawn_app, wait_for};
use crate::html::row;

const NORMAL: &str = "fleet-normal";
const SOFT: &str = "fleet-soft";
const CRASHING: &str = "chacha20-poly1305";
/// A label value is free text from the agent: markup in it must stay text.
const HOSTILE: &str = "<img src=x onerror=alert(1)>\"'&";
const HOSTILE_ESCAPED: &str = "&#60;img src=x onerror=alert(1)&#62;&#34;&#39;&#38;";

/// The text of each cell of the host page's row for CPU feature `marker`
/// (as it appears in `data-feature`): name, advertised, usable.
fn feature_cells<'a>(html: &'a str, marker: &str) -> Vec<&'a str> {
    let r = row(html, &format!("data-feature=\"{marker}\""));
    r.split("<td>")
        .skip(1)
        .map(|c| c.split("</td>").next().unwrap_or_default())
        .collect()
}

/// What the usable cell says: a badge where the CPU has it but programs cannot use it.
fn usable_text(advertised: bool, usable: bool) -> &'static str {
    match (advertised, usable) {
        (true, false) => "<span class=\"badge status-software\">advertised but not usable</span>",
        (_, true) => "yes",
        (false, false) => "no",
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

async fn ok_page(app: &App, path: &str) -> HttpResponse {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    assert!(r.header("content-type").unwrap().starts_with("text/html"), "GET {path}");
    r
}

async fn json(app: &App, path: &str) -> Value {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", r.body))
}

/// CSV header and data lines (the tables here have no line breaks in cells).
async fn csv(app: &App, path: &str) -> (String, Vec<String>) {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    assert!(r.header("content-type").unwrap().starts_with("text/csv"), "GET {path}");
    let mut lines = r.body.lines().map(str::to_owned);
    (lines.next().unwrap_or_default(), lines.collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_pages_show_the_hosts_campaign_and_results_the_database_holds() {
    let mut app = spawn_app().await;
    // The debug agent's worker aborts on this algorithm: a real failure with
    // the agent's own error text.
    let mut normal = app.agent_command(NORMAL);
    normal
        .args(["--label", "class=gen-e2e", "--label", &format!("note={HOSTILE}")])
        .env("CIPHERFLEET_WORKER_FAULT", format!("abort:{CRASHING}"));
    let child = normal.spawn().expect("starting the agent");
    app.track_agent(child);
    app.spawn_soft_agent(SOFT, &[]);
    app.wait_online(2).await;
    let campaign = app.start_matrix(&["aes-256-gcm", CRASHING], &[16 * 1024], 0.05).await;
    // A running campaign's page reloads itself; a finished one does not.
    let early = app.get(&format!("/campaigns/{campaign}")).await;
    assert_eq!(
        early.header("refresh").is_some(),
        early.body.contains("status-running\" id=\"campaign-status\""),
        "{:?}",
        early.headers
    );
    app.wait_finished(&campaign, Duration::from_secs(120)).await;

    // What the database says, to compare the pages with.
    let fleet: BTreeMap<String, hosts::HostWithFacts> = hosts::list_with_facts(&app.pool)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.host.name.clone(), h))
        .collect();
    let (normal_id, soft_id) = (fleet[NORMAL].host.id, fleet[SOFT].host.id);
    let normal_status = fleet[NORMAL].acceleration();
    assert_eq!(
        fleet[SOFT].acceleration(),
        Acceleration::Software,
        "the software build says so in its facts"
    );
    let results: Vec<(i64, String, String, f64)> = sqlx::query_as(
        "SELECT r.id, h.name, r.algorithm, r.throughput_mb_s FROM results r JOIN hosts h ON h.id = r.host_id ORDER BY r.id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let jobs: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT h.name, j.status, count(*) FROM jobs j JOIN hosts h ON h.id = j.host_id \
         WHERE j.campaign_id = $1 GROUP BY h.name, j.status",
    )
    .bind(campaign.parse::<i64>().unwrap())
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let count = |host: &str, status: &str| {
        jobs.iter()
            .filter(|(h, s, _)| h == host && s == status)
            .map(|(_, _, n)| *n)
            .sum::<i64>()
    };
    assert_eq!((count(NORMAL, "done"), count(NORMAL, "failed")), (1, 1), "{jobs:?}");
    assert_eq!((count(SOFT, "done"), count(SOFT, "failed")), (2, 0), "{jobs:?}");
    let error: String = sqlx::query_scalar("SELECT error FROM jobs WHERE status = 'failed'")
        .fetch_one(&app.pool)
        .await
        .unwrap();

    // Overview: both hosts under their acceleration status, the campaign's progress.
    let overview = ok_page(&app, "/").await.body;
    assert!(
        overview.contains("Hosts: <strong>2</strong> (2 online now)"),
        "{overview}"
    );
    let soft_group = row(&overview, &format!("<a href=\"/hosts/{soft_id}\">{SOFT}</a>"));
    assert!(soft_group.contains("status-software"), "{soft_group}");
    let normal_group = row(&overview, &format!("<a href=\"/hosts/{normal_id}\">{NORMAL}</a>"));
    assert!(
        normal_group.contains(&format!("status-{normal_status}")),
        "{normal_group}"
    );
    let recent = row(&overview, &format!("data-campaign=\"{campaign}\""));
    assert!(
        recent.contains("4 / 4") && recent.contains("status-finished"),
        "{recent}"
    );
    // The deriver finds the software build; the overview lists it with its host.
    wait_for("the software-build finding", Duration::from_secs(30), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM findings WHERE host_id = $1 AND status = 'open'")
            .bind(soft_id)
            .fetch_one(&app.pool)
            .await
            .ok()?;
        (n > 0).then_some(())
    })
    .await;
    let overview = ok_page(&app, "/").await.body;
    // Among its rows (its kernel's AES may be a finding too, on a machine without aesni_intel).
    let link = format!("<td><a href=\"/hosts/{soft_id}\">{SOFT}</a></td>");
    let rows: Vec<&str> = overview.split("<tr").filter(|r| r.contains(&link)).collect();
    assert!(rows.iter().any(|r| r.contains("software-build")), "{rows:?}");

    // Hosts: one row each with labels and badges; filters narrow them.
    let list = ok_page(&app, "/hosts").await.body;
    assert!(list.contains("showing 1–2 of 2 hosts"), "{list}");
    let normal_row = row(&list, &format!("data-host=\"{NORMAL}\""));
    for want in [
        format!("status-{normal_status}\">{normal_status}</span>"),
        "<code>class=gen-e2e</code>".to_string(),
        "status-online".to_string(),
    ] {
        assert!(normal_row.contains(&want), "{want} in {normal_row}");
    }
    assert!(row(&list, &format!("data-host=\"{SOFT}\"")).contains("status-software\">software</span>"));
    assert!(
        normal_row.contains(&format!("<code>note={HOSTILE_ESCAPED}</code>")),
        "{normal_row}"
    );
    // Filtering on the hostile label finds its host and shows the value back, escaped.
    let hostile = ok_page(
        &app,
        "/hosts?label=note%3D%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E%22%27%26",
    )
    .await
    .body;
    assert!(hostile.contains("showing 1–1 of 1 hosts"), "{hostile}");
    assert!(
        hostile.contains(&format!("value=\"note={HOSTILE_ESCAPED}\"")),
        "{hostile}"
    );
    for page in [&list, &hostile] {
        assert!(!page.contains("<img"), "agent markup reached the page");
    }
    let labelled = ok_page(&app, "/hosts?label=class%3Dgen-e2e&status=online").await.body;
    assert!(labelled.contains(NORMAL) && !labelled.contains(SOFT), "{labelled}");
    assert!(labelled.contains("showing 1–1 of 1 hosts"), "{labelled}");
    let software = ok_page(&app, "/hosts?accel=software").await.body;
    assert!(software.contains(SOFT));
    assert_eq!(software.contains(NORMAL), normal_status == Acceleration::Software);
    assert_eq!(app.get("/hosts?status=sideways").await.status, 400);

    let (header, rows) = csv(&app, "/api/v1/hosts?format=csv").await;
    assert!(header.starts_with("id,name,labels,arch,cpu_model,"), "{header}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let api = json(&app, "/api/v1/hosts?label=class%3Dgen-e2e").await;
    assert_eq!(api.as_array().unwrap().len(), 1, "{api}");
    assert_eq!(api[0]["name"], NORMAL);
    assert_eq!(api[0]["acceleration"], normal_status.as_str());
    assert_eq!(api[0]["online"], true);
    assert!(api[0]["labels"].as_str().unwrap().contains("class=gen-e2e"), "{api}");
    assert!(
        api[0]["labels"].as_str().unwrap().contains(&format!("note={HOSTILE}")),
        "JSON keeps the text as sent"
    );

    // Host pages: each stored result, its value as the database has it, a link to the raw measurement.
    for (name, id) in [(NORMAL, normal_id), (SOFT, soft_id)] {
        let page = ok_page(&app, &format!("/hosts/{id}")).await.body;
        let badge = format!(
            "class=\"badge status-{}\" id=\"acceleration\"",
            fleet[name].acceleration()
        );
        assert!(page.contains(&badge), "{name}: {badge}");
        assert!(page.contains("<svg class=\"chart\""), "{name}: the history chart");
        // Every feature the agent's probe checked has a row, present or not, in the stored order.
        let facts: Value = sqlx::query_scalar(
            "SELECT s.facts FROM host_fact_snapshots s JOIN hosts h ON s.id = h.current_snapshot_id WHERE h.id = $1",
        )
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        let list = |k: &str| -> Vec<&str> {
            facts["features"][k]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect()
        };
        let (checked, advertised, usable) = (list("checked"), list("advertised"), list("usable"));
        assert!(!checked.is_empty(), "{name}: the probe checks features: {facts}");
        let mut at = 0;
        for feature in &checked {
            let (a, u) = (advertised.contains(feature), usable.contains(feature));
            let cells = feature_cells(&page, feature);
            assert_eq!(
                cells,
                [format!("<code>{feature}</code>").as_str(), yes_no(a), usable_text(a, u)],
                "{name}: {feature}"
            );
            let here = page.find(&format!("data-feature=\"{feature}\"")).unwrap();
            assert!(here > at, "{name}: {feature} out of the checked order {checked:?}");
            at = here;
        }
        assert!(!page.contains("<img"), "{name}: agent markup reached the page");
        let mine: Vec<_> = results.iter().filter(|r| r.1 == name).collect();
        assert!(
            page.contains(&format!("showing 1–{n} of {n} results", n = mine.len())),
            "{page}"
        );
        for (rid, _, algorithm, mb_s) in mine {
            let r = row(&page, &format!("data-result=\"{rid}\""));
            assert!(r.contains(&format!("<td>{algorithm}</td>")), "{r}");
            assert!(r.contains(&format::mb_s(*mb_s)), "{} in {r}", format::mb_s(*mb_s));
            assert!(r.contains(&format!("href=\"/api/v1/results/{rid}\"")), "{r}");
            let raw = json(&app, &format!("/api/v1/results/{rid}")).await;
            assert_eq!(raw["host_name"], name);
            assert_eq!(raw["measurement"]["throughput_mb_s"].as_f64(), Some(*mb_s));
        }
        let (header, rows) = csv(&app, &format!("/api/v1/hosts/{id}/results?format=csv")).await;
        assert!(header.starts_with("id,campaign_id,created_at,algorithm,"), "{header}");
        assert_eq!(rows.len(), results.iter().filter(|r| r.1 == name).count());
    }
    let soft_page = ok_page(&app, &format!("/hosts/{soft_id}")).await.body;
    assert!(
        soft_page.contains("<tr><th>Agent build</th><td>software</td></tr>"),
        "{soft_page}"
    );
    assert!(soft_page.contains("software-build"), "the host's finding is listed");

    // Campaigns: progress equal to the job counts, the failure with the agent's words.
    let campaigns = ok_page(&app, "/campaigns").await.body;
    let listed = row(&campaigns, &format!("data-campaign=\"{campaign}\""));
    assert!(
        listed.contains("4 / 4") && listed.contains("status-finished"),
        "{listed}"
    );
    assert!(
        listed.contains("<span class=\"badge status-failed\">1</span>"),
        "{listed}"
    );
    let detail = ok_page(&app, &format!("/campaigns/{campaign}")).await;
    assert_eq!(detail.header("refresh"), None, "a finished campaign stops reloading");
    let detail = detail.body;
    assert!(
        detail.contains("<strong class=\"progress-count\">4 / 4</strong>"),
        "{detail}"
    );
    for name in [NORMAL, SOFT] {
        let r = row(&detail, &format!("data-host=\"{name}\""));
        assert!(
            r.contains(&format!("<td class=\"num done\">{}</td>", count(name, "done"))),
            "{r}"
        );
        assert!(
            r.contains(&format!(
                "<td class=\"num total\">{}</td>",
                count(name, "done") + count(name, "failed")
            )),
            "{r}"
        );
    }
    let failure = row(&detail, &format!("<td>{CRASHING}</td>"));
    assert!(
        failure.contains(&format!("href=\"/hosts/{normal_id}\">{NORMAL}</a>")),
        "{failure}"
    );
    assert!(failure.contains("worker killed by signal"), "{failure}");
    let per_host = json(&app, &format!("/api/v1/campaigns/{campaign}/hosts")).await;
    for h in per_host.as_array().unwrap() {
        let name = h["host_name"].as_str().unwrap();
        assert_eq!(h["done"], count(name, "done"), "{h}");
        assert_eq!(h["failed"], count(name, "failed"), "{h}");
    }
    let failures = json(&app, &format!("/api/v1/campaigns/{campaign}/failures")).await;
    assert_eq!(failures.as_array().unwrap().len(), 1, "{failures}");
    assert_eq!(failures[0]["error"], error.as_str());
    assert_eq!(failures[0]["host_name"], NORMAL);
    let (header, rows) = csv(&app, "/api/v1/campaigns?format=csv").await;
    assert!(header.starts_with("id,name,suite,status,"), "{header}");
    assert_eq!(rows.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_report_says_how_to_start_and_bad_addresses_get_clear_answers() {
    let app = spawn_app().await;

    let home = ok_page(&app, "/").await;
    let csp = home.header("content-security-policy").expect("CSP header");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("style-src 'self'"),
        "{csp}"
    );
    for want in [
        "No agent has connected yet",
        "cipherfleet-agent run --coordinator https://COORDINATOR:7443 --ca-cert",
        "cipherfleet-coordinator campaign start --suite quick",
    ] {
        assert!(home.body.contains(want), "{want:?} on the empty overview");
    }
    assert!(ok_page(&app, "/hosts").await.body.contains("No host has connected yet"));
    assert!(ok_page(&app, "/campaigns").await.body.contains("No campaign yet"));
    let providers = ok_page(&app, "/providers").await.body;
    assert!(
        providers.contains("No provider beyond the built-in one has been measured yet")
            && providers.contains("cipherfleet-coordinator campaign start --suite providers"),
        "{providers}"
    );
    assert_eq!(json(&app, "/api/v1/providers").await, serde_json::json!([]));
    let (header, rows) = csv(&app, "/api/v1/hosts?format=csv").await;
    assert_eq!((header.as_str(), rows.len()), ("", 0), "an empty table is an empty CSV");

    let css = app.get("/static/style.css").await;
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));

    for (path, status, message) in [
        ("/no/such/page", 404, "no page at /no/such/page"),
        ("/hosts/4242", 404, "no host with id 4242"),
        ("/hosts/abc", 400, "&#34;abc&#34; is not a host id"),
        ("/campaigns/4242", 404, "no campaign with id 4242"),
        ("/campaigns/x1", 400, "is not a campaign id"),
        ("/hosts?page=0", 400, "is not a page number"),
        ("/providers?size=huge", 400, "size=&#34;huge&#34;"),
        (
            "/providers?provider=libsodium",
            400,
            "use one of rustcrypto, ring, openssl, kernel",
        ),
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, status, "GET {path}");
        assert!(
            r.header("content-type").unwrap().starts_with("text/html"),
            "GET {path}: an error page"
        );
        assert!(r.body.contains(message), "GET {path}: {message:?} in {}", r.body);
    }
    for (path, status) in [
        ("/api/v1/results/4242", 404),
        ("/api/v1/results/abc", 400),
        ("/api/v1/hosts/7/results", 404),
        ("/api/v1/providers?size=0", 400),
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, status, "GET {path}");
        let body: Value = serde_json::from_str(&r.body).unwrap();
        assert!(body["error"].is_string(), "GET {path}: {body}");
    }
}

/// An emulated Nehalem's probe finds SSSE3 only: the host page must still
/// list AES, the feature that decides its speed, as checked and absent; and
/// feature names, sent by agents, stay text. Facts of an older agent that did
/// not say what it checked list what it found and say the rest is unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_page_lists_every_checked_cpu_feature_absent_ones_as_no() {
    let app = spawn_app().await;
    let facts = |features: Value| {
        serde_json::json!({
            "schema_version": 1, "arch": "x86_64", "kernel_release": "6.1.0",
            "cpu": {"vendor": "GenuineIntel", "model_name": "Intel Core i7 9xx (Nehalem Class Core i7)"},
            "virtualization": {"hypervisor": true, "kind": "kvm"},
            "features": features,
            "build": {"flavour": "accelerated"}
        })
    };
    let nehalem = facts(serde_json::json!({
        "source": "cpuid",
        "checked": ["aes", "pclmulqdq", "ssse3", "avx", HOSTILE],
        "advertised": ["ssse3", "avx", HOSTILE],
        "usable": ["ssse3"],
    }));
    let old = facts(serde_json::json!({"advertised": ["pclmulqdq", "aes"], "usable": ["aes"]}));
    let mut ids = Vec::new();
    for (name, facts) in [("emulated-nehalem", &nehalem), ("old-agent", &old)] {
        let up = hosts::upsert_host_with_facts(&app.pool, name, None, facts)
            .await
            .unwrap();
        ids.push(up.host_id);
    }

    let page = ok_page(&app, &format!("/hosts/{}", ids[0])).await.body;
    for (feature, advertised, usable) in [
        ("aes", "no", "no"),
        ("pclmulqdq", "no", "no"),
        ("ssse3", "yes", "yes"),
        ("avx", "yes", usable_text(true, false)),
    ] {
        assert_eq!(
            feature_cells(&page, feature),
            [format!("<code>{feature}</code>").as_str(), advertised, usable],
            "{feature}"
        );
    }
    assert_eq!(
        feature_cells(&page, HOSTILE_ESCAPED),
        [
            format!("<code>{HOSTILE_ESCAPED}</code>").as_str(),
            "yes",
            usable_text(true, false)
        ]
    );
    assert!(!page.contains("<img"), "a feature name's markup reached the page");
    assert!(!page.contains("unknown, not absent"), "{page}");

    let page = ok_page(&app, &format!("/hosts/{}", ids[1])).await.body;
    assert_eq!(feature_cells(&page, "aes"), ["<code>aes</code>", "yes", "yes"]);
    assert_eq!(
        feature_cells(&page, "pclmulqdq"),
        ["<code>pclmulqdq</code>", "yes", usable_text(true, false)]
    );
    assert!(!page.contains("data-feature=\"ssse3\""), "{page}");
    assert!(
        page.contains("did not report which CPU features it checked: a feature not listed is unknown, not absent"),
        "{page}"
    );
}
