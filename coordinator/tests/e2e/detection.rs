//! Detection that does not wait: two identical native agents run a small
//! campaign; one is restarted with its benchmark workers under an emulated
//! Nehalem (`CIPHERFLEET_WORKER_PREFIX`), so its facts still show AES-NI
//! while its workers run AES and GHASH in software. After one more campaign
//! the coordinator must say so — an `unexplained-fallback` finding that
//! `check` fails on and `/metrics` counts — and stop counting the host as
//! accelerated on the overview and `/hosts`.
//!
//! Needs x86-64 and `qemu-x86_64-static`; skips loudly without them, or when
//! this machine's own CPU does not show AES-NI and CLMUL to begin with.

use std::process::Command;
use std::time::Duration;

use cipherfleet_coordinator::store::findings::{self, Finding};
use serde_json::Value;

use crate::app::{App, spawn_app, wait_for};
use crate::findings::{check, sample};
use crate::html::between;

const NEHALEM: &str = "qemu-x86_64-static -cpu Nehalem";
const ALGORITHMS: [&str; 2] = ["aes-256-gcm", "aes-128-cbc"];

/// Why the test cannot run here, if it cannot.
fn unsuitable_machine() -> Option<&'static str> {
    if std::env::consts::ARCH != "x86_64" {
        return Some("not x86-64: the emulated CPU is an x86-64 Nehalem");
    }
    let qemu = Command::new("qemu-x86_64-static").arg("--version").output();
    if !qemu.is_ok_and(|o| o.status.success()) {
        return Some("qemu-x86_64-static is missing: run deploy/install-deps.sh");
    }
    None
}

/// Each host's acceleration status, as `/api/v1/hosts` reports it.
async fn statuses(app: &App) -> Vec<(String, String)> {
    let hosts = app.get("/api/v1/hosts").await;
    assert_eq!(hosts.status, 200, "{}", hosts.body);
    let rows: Vec<Value> = serde_json::from_str(&hosts.body).unwrap();
    let mut s: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().into(),
                r["acceleration"].as_str().unwrap().into(),
            )
        })
        .collect();
    s.sort();
    s
}

/// Runs the small campaign on both hosts; returns its id.
async fn run_campaign(app: &App, name: &str) -> String {
    let id = app
        .start_campaign(name, crate::app::matrix(&ALGORITHMS, &[1024], 0.05))
        .await;
    let status = app.wait_finished(&id, Duration::from_secs(120)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (4, 0), "{:?}", status.failures);
    id
}

fn unexplained<'a>(open: &'a [Finding], host: &str) -> Vec<&'a Finding> {
    open.iter()
        .filter(|f| f.host_name == host && f.reason == "unexplained-fallback")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_losing_aes_ni_under_intact_facts_are_found_after_one_campaign() {
    if let Some(why) = unsuitable_machine() {
        eprintln!("\n!!! SKIPPED workers_losing_aes_ni_under_intact_facts_are_found_after_one_campaign: {why}\n");
        return;
    }
    let mut app = spawn_app().await;
    app.spawn_agent("e2e-steady", &[]);
    let restarted = app.spawn_agent("e2e-moved", &[]);
    app.wait_online(2).await;
    let native = [
        ("e2e-moved".to_string(), "accelerated".to_string()),
        ("e2e-steady".to_string(), "accelerated".to_string()),
    ];
    if statuses(&app).await != native {
        eprintln!(
            "\n!!! SKIPPED workers_losing_aes_ni_under_intact_facts_are_found_after_one_campaign: this CPU is not accelerated by its facts\n"
        );
        return;
    }

    // A healthy run: what ran is what the facts promise.
    let before = run_campaign(&app, "before").await;
    let ran: Vec<String> = sqlx::query_scalar("SELECT DISTINCT path_used FROM results")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(ran, ["accelerated"], "native workers");

    // Restarted with its workers on an emulated CPU without AES-NI or CLMUL;
    // the daemon, and so its facts, stay native.
    app.kill_agent(restarted);
    let mut moved = app.agent_command("e2e-moved");
    moved.env("CIPHERFLEET_WORKER_PREFIX", NEHALEM);
    let child = moved.spawn().expect("restarting the agent");
    app.track_agent(child);
    wait_for("the restarted agent's session", Duration::from_secs(30), || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM agent_sessions s JOIN hosts h ON h.id = s.host_id \
             WHERE h.name = 'e2e-moved'",
        )
        .fetch_one(&app.pool)
        .await
        .ok()?;
        (n >= 2).then_some(())
    })
    .await;
    app.wait_online(2).await;
    let after = run_campaign(&app, "after").await;

    // The campaign's end triggers a fleet pass: one finding per lost primitive,
    // AES's naming both results (the first result alone opens it).
    let open = wait_for("the unexplained fallback", Duration::from_secs(20), || async {
        let open = findings::list_open(&app.pool).await.ok()?;
        let found = unexplained(&open, "e2e-moved");
        let both = found
            .iter()
            .any(|f| f.subject == "aes" && f.evidence["results_in_software"] == 2);
        (found.len() == 2 && both).then_some(open)
    })
    .await;
    let found = unexplained(&open, "e2e-moved");
    let subjects: Vec<&str> = found.iter().map(|f| f.subject.as_str()).collect();
    assert_eq!(subjects, ["aes", "ghash"], "{open:#?}");
    assert!(found.iter().all(|f| f.severity.as_str() == "critical"), "{found:#?}");
    let aes = found[0];
    assert_eq!(aes.evidence["results_in_software"], 2, "{}", aes.evidence);
    let usable: Vec<&str> = aes.evidence["usable"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        usable.contains(&"aes"),
        "the probe's facts show AES-NI: {}",
        aes.evidence
    );
    assert_eq!(
        aes.evidence["results"][0]["backends"]["aes"], "soft",
        "{}",
        aes.evidence
    );
    assert!(aes.summary.contains("AES ran in software"), "{}", aes.summary);
    assert!(unexplained(&open, "e2e-steady").is_empty(), "{open:#?}");

    // `check` fails, naming it.
    let (code, listed) = check(&app, &[]);
    assert_eq!(code, 1, "{listed}");
    assert!(
        listed.as_array().unwrap().iter().any(|f| f["host_name"] == "e2e-moved"
            && f["reason"] == "unexplained-fallback"
            && f["subject"] == "aes"
            && f["severity"] == "critical"),
        "{listed}"
    );

    // `/metrics` counts it, and the host is no longer accelerated.
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let m = &metrics.body;
    let open_series = "cipherfleet_findings_open{reason=\"unexplained-fallback\",severity=\"critical\"}";
    assert_eq!(sample(m, open_series), 2.0, "{m}");
    assert_eq!(
        sample(m, "cipherfleet_hosts_with_findings{reason=\"unexplained-fallback\"}"),
        1.0
    );
    assert_eq!(
        sample(m, "cipherfleet_hosts_by_acceleration{status=\"accelerated\"}"),
        1.0
    );
    assert_eq!(sample(m, "cipherfleet_hosts_by_acceleration{status=\"software\"}"), 1.0);

    assert_eq!(
        statuses(&app).await,
        [
            ("e2e-moved".to_string(), "software".to_string()),
            ("e2e-steady".to_string(), "accelerated".to_string()),
        ]
    );
    let hosts = app.get("/hosts").await;
    let row = between(&hosts.body, "<tr data-host=\"e2e-moved\">", "</tr>");
    assert!(row.contains("status-software\">software</span>"), "{row}");
    let overview = app.get("/").await;
    let counts = between(&overview.body, "<p id=\"acceleration\">", "</p>");
    assert!(counts.contains("1 accelerated</span>"), "{counts}");
    assert!(counts.contains("1 software</span>"), "{counts}");

    // The two campaigns side by side: the moved host's points fell, significantly,
    // and ran in software; the campaign page links the comparison.
    let campaign = app.get(&format!("/campaigns/{after}")).await;
    let link = format!("href=\"/campaigns/{before}/compare/{after}\"");
    assert!(campaign.body.contains(&link), "{}", campaign.body);
    let compared = app.get(&format!("/campaigns/{before}/compare/{after}")).await;
    assert_eq!(compared.status, 200, "{}", compared.body);
    let moved_rows = compared.body.matches("<tr data-host=\"e2e-moved\"").count();
    assert_eq!(moved_rows, 2, "{}", compared.body);
    assert!(compared.body.contains("accelerated → software"), "{}", compared.body);
    let api = app.get(&format!("/api/v1/campaigns/{before}/compare/{after}")).await;
    let rows: Vec<Value> = serde_json::from_str(&api.body).unwrap();
    assert_eq!(rows.len(), 4, "{rows:#?}");
    for r in rows.iter().filter(|r| r["host_name"] == "e2e-moved") {
        assert_eq!(
            (&r["before_path_used"], &r["after_path_used"]),
            (&"accelerated".into(), &"software".into())
        );
        // Debug builds on a shared machine measure a few ops per sample, so
        // how significant the fall is depends on the earlier run's spread;
        // the verdict must follow its z either way (thresholds: unit tests).
        let z = r["z"].as_f64();
        let slower = z.is_some_and(|z| z <= -3.0);
        assert_eq!(r["verdict"] == "slower", slower, "{r}");
        assert!(z.is_none_or(|z| z < 0.0), "the software run is slower: {r}");
        if let Some(ratio) = r["ratio"].as_f64() {
            assert!(ratio < 0.5, "{r}");
        }
    }
    let csv = app
        .get(&format!("/api/v1/campaigns/{before}/compare/{after}?format=csv"))
        .await;
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert!(
        csv.body.starts_with(
            "host_id,host_name,algorithm,direction,size_bytes,threads,concurrency,key_mode,path,nonce,before_result_id,"
        ),
        "{}",
        csv.body
    );
    assert_eq!(csv.body.lines().count(), 5, "{}", csv.body);
    let missing = app.get(&format!("/campaigns/{before}/compare/999999")).await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("no campaign with id 999999"), "{}", missing.body);
    assert_eq!(
        app.get(&format!("/api/v1/campaigns/x/compare/{after}")).await.status,
        400
    );

    // The fallback page names the finding that explains the software run.
    let page = app.get("/fallback?size=1024").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("unexplained-fallback"), "{}", page.body);
}
