//! `/capacity` and `/api/v1/capacity` over results measured by real agents:
//! the planner's per-core figure is the stored single-thread result, cores
//! and hosts needed follow the formula from the stored 1- and 2-thread
//! results, the recommendation is the measured faster AEAD, and an
//! emulated-labelled host stays out unless asked for.

use std::time::Duration;

use cipherfleet_coordinator::web::format;
use cipherfleet_proto::v1;
use serde_json::Value;

use crate::app::{App, HttpResponse, matrix, spawn_app};

const SIZE: u64 = 16384;

/// A campaign of `algorithms` at [`SIZE`], encrypt, accelerated, static key,
/// at 1 and 2 threads (`App::start_matrix` measures 1 thread only).
async fn start_scaling_campaign(app: &App, algorithms: &[&str]) -> String {
    let scaling = v1::Matrix {
        threads: vec![1, 2],
        ..matrix(algorithms, &[SIZE], 0.05)
    };
    app.start_campaign("capacity", scaling).await
}

/// The stored latest throughput of `host` for `algorithm` at `threads`.
async fn stored_mb_s(app: &App, host: &str, algorithm: &str, threads: i32) -> f64 {
    sqlx::query_scalar(
        "SELECT p.throughput_mb_s FROM result_points p JOIN hosts h ON h.id = p.host_id \
         WHERE h.name = $1 AND p.algorithm = $2 AND p.threads = $3 AND p.size_bytes = $4 \
             AND p.direction = 'encrypt' AND p.path = 'accelerated'",
    )
    .bind(host)
    .bind(algorithm)
    .bind(threads)
    .bind(SIZE as i64)
    .fetch_one(&app.pool)
    .await
    .unwrap_or_else(|e| panic!("{host} {algorithm} threads={threads}: {e}"))
}

async fn json(app: &App, path: &str) -> Value {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    assert!(
        r.header("content-type").unwrap_or("").starts_with("application/json"),
        "{path}"
    );
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", r.body))
}

/// The `<tr>` of class `key` (real or marked, by `emulated`).
fn table_row<'a>(page: &'a HttpResponse, key: &str, emulated: bool) -> &'a str {
    let open = if emulated {
        format!("<tr class=\"emulated\" data-class=\"{key}\">")
    } else {
        format!("<tr data-class=\"{key}\">")
    };
    let start = page
        .body
        .find(&open)
        .unwrap_or_else(|| panic!("no row {open} in\n{}", page.body));
    let end = page.body[start..].find("</tr>").unwrap() + start;
    &page.body[start..end]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_is_planned_from_stored_results_and_leaves_emulated_hosts_out_by_default() {
    let mut app = spawn_app().await;
    app.spawn_agent("cap-real", &[]);
    app.spawn_agent("cap-emu", &["--label", "emulated=qemu"]);
    app.wait_online(2).await;
    let id = start_scaling_campaign(&app, &["aes-256-gcm", "chacha20-poly1305"]).await;
    let status = app.wait_finished(&id, Duration::from_secs(120)).await;
    let overall = status.overall.unwrap();
    assert_eq!((overall.done, overall.failed), (8, 0), "{:?}", status.failures);

    let gcm1 = stored_mb_s(&app, "cap-real", "aes-256-gcm", 1).await;
    let gcm2 = stored_mb_s(&app, "cap-real", "aes-256-gcm", 2).await;
    let chacha1 = stored_mb_s(&app, "cap-real", "chacha20-poly1305", 1).await;
    let emu1 = stored_mb_s(&app, "cap-emu", "aes-256-gcm", 1).await;
    let cores: i32 = sqlx::query_scalar(
        "SELECT s.logical_cores FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id \
         WHERE h.name = 'cap-real'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();

    // 40 Gbit/s = 5000 MB/s; × 1.5 headroom. Two threads run if the host has two cores.
    let query = "target=40&unit=gbit&size=16384&algorithm=aes-256-gcm&headroom=1.5";
    let (threads, efficiency) = if cores >= 2 { (2, gcm2 / (2.0 * gcm1)) } else { (1, 1.0) };
    let cores_needed = 5000.0 * 1.5 / (gcm1 * efficiency);
    let hosts_needed = (cores_needed / f64::from(cores)).ceil() as u64;
    let (best, runner_up, ratio) = if gcm1 >= chacha1 {
        ("aes-256-gcm", "chacha20-poly1305", gcm1 / chacha1)
    } else {
        ("chacha20-poly1305", "aes-256-gcm", chacha1 / gcm1)
    };

    let answer = json(&app, &format!("/api/v1/capacity?{query}")).await;
    assert_eq!(answer["inputs"]["target_mb_s"], 5000.0);
    assert_eq!(answer["inputs"]["provision_mb_s"], 7500.0);
    assert_eq!(answer["excluded_hosts"], 1, "the emulated host is left out");
    let rows = answer["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "one real class: {rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row["hosts_in_class"].as_u64(), row["hosts_measured"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(row["emulated"], false);
    assert_eq!(
        row["per_core_mb_s"].as_f64(),
        Some(gcm1),
        "per-core is the stored 1-thread result"
    );
    assert_eq!(row["path_used"], "accelerated");
    assert_eq!(row["cores_per_host"].as_i64(), Some(i64::from(cores)));
    assert_eq!(row["run_threads"].as_u64(), Some(threads));
    assert!(close(row["efficiency"].as_f64().unwrap(), efficiency), "{row}");
    assert!(close(row["cores_needed"].as_f64().unwrap(), cores_needed), "{row}");
    assert_eq!(row["hosts_needed"].as_u64(), Some(hosts_needed), "{row}");
    assert_eq!(row["recommended_algorithm"], best);
    assert_eq!(row["runner_up_algorithm"], runner_up);
    assert!(close(row["recommended_ratio"].as_f64().unwrap(), ratio), "{row}");
    assert!(row["warnings"].as_str().unwrap().contains("one host only"), "{row}");
    let key = row["class_key"].as_str().unwrap().to_string();

    // The page shows the same figures in the class's row.
    let page = app.get(&format!("/capacity?{query}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Target <strong>40.0 Gbit/s</strong> = 5000 MB/s"),
        "{}",
        page.body
    );
    assert!(page.body.contains("1 emulated or simulated host(s) left out"));
    assert!(!page.body.contains("<tr class=\"emulated\""));
    let tr = table_row(&page, &key, false);
    assert!(tr.contains(&format!(">{}<", format::mb_s(gcm1))), "{tr}");
    assert!(
        tr.contains(&format!("<strong>{hosts_needed}</strong>")),
        "hosts needed {hosts_needed}: {tr}"
    );
    assert!(
        tr.contains(&format!(">{}<", cores_needed.ceil())),
        "cores needed {cores_needed}: {tr}"
    );
    assert!(
        tr.contains(&format!("{}× faster than {runner_up}", format::significant(ratio))),
        "{tr}"
    );
    assert!(tr.contains("one host only"), "{tr}");

    // include=emulated: the emulated host appears in a marked row of its own.
    let with = json(&app, &format!("/api/v1/capacity?{query}&include=emulated")).await;
    assert_eq!(with["excluded_hosts"], 0);
    let rows = with["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let marked: Vec<&Value> = rows.iter().filter(|r| r["emulated"] == true).collect();
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0]["per_core_mb_s"].as_f64(), Some(emu1));
    let real = rows.iter().find(|r| r["emulated"] == false).unwrap();
    assert_eq!(real["per_core_mb_s"].as_f64(), Some(gcm1), "the real row is unchanged");
    let page = app.get(&format!("/capacity?{query}&include=emulated")).await;
    assert_eq!(page.status, 200);
    let tr = table_row(&page, marked[0]["class_key"].as_str().unwrap(), true);
    assert!(tr.contains("<span class=\"badge emulated\">emulated</span>"), "{tr}");
    assert!(page.body.contains("name=\"include\" value=\"emulated\" checked"));

    // The rows as CSV, in field order.
    let csv = app.get(&format!("/api/v1/capacity?{query}&format=csv")).await;
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    assert!(csv.body.starts_with("class_key,class_label,emulated,"), "{}", csv.body);
    assert_eq!(csv.body.lines().count(), 2, "{}", csv.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_planner_defaults_explains_an_empty_fleet_and_rejects_bad_input() {
    let app = spawn_app().await;
    let page = app.get("/capacity").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Target <strong>10.0 Gbit/s</strong> = 1250 MB/s"),
        "{}",
        page.body
    );
    assert!(page.body.contains("<option value=\"aes-256-gcm\" selected>"));
    assert!(page.body.contains("<option value=\"16384\" selected>16 KiB</option>"));
    assert!(page.body.contains("No hosts yet"));
    assert!(page.body.contains("campaign start --suite full"));

    for (query, field) in [
        ("headroom=0.5", "headroom"),
        ("target=-1", "target"),
        ("unit=furlongs", "unit"),
        ("algorithm=%3Cscript%3E", "algorithm"),
    ] {
        let page = app.get(&format!("/capacity?{query}")).await;
        assert_eq!(page.status, 400, "{query}");
        assert!(page.body.contains(&format!("{field}: ")), "{query}: {}", page.body);
        assert!(!page.body.contains("<script>"), "{query}: the value is escaped");
        let api = app.get(&format!("/api/v1/capacity?{query}")).await;
        assert_eq!(api.status, 400, "{query}");
        let error: Value = serde_json::from_str(&api.body).unwrap();
        assert!(
            error["error"].as_str().unwrap().starts_with(&format!("{field}: ")),
            "{error}"
        );
    }
}
