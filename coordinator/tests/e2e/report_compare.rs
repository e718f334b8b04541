//! `/compare` and `/modes` on results of a real campaign (real agents —
//! the accelerated build, the software build and a host labelled emulated —
//! measuring briefly through the real coordinator): every cell, link, class
//! median, chart label and API row is checked against what the run stored in
//! `result_points`, never against typed-in numbers.

use std::collections::BTreeMap;

use cipherfleet_coordinator::web::format;
use cipherfleet_proto::v1;

use crate::app::{App, both_paths, matrix, spawn_app};
use crate::html::{between, text};

const ACCEL: &str = "cmp-accelerated";
/// The same machine and build as [`ACCEL`], labelled emulated: it must never share ACCEL's class row.
const EMULATED: &str = "cmp-emulated";
/// `cipherfleet-agent-soft` as the daemon: a host whose build forces software.
const SOFT: &str = "cmp-software-build";
const ALGORITHMS: &[&str] = &["aes-256-gcm", "chacha20-poly1305", "des-ede3-cbc"];
const SIZES: &[u64] = &[16, 16384];

/// One row of `result_points` with its host's name.
#[derive(Debug, Clone, sqlx::FromRow)]
struct Stored {
    host_id: i64,
    host: String,
    algorithm: String,
    size_bytes: i64,
    threads: i32,
    path: String,
    path_used: String,
    result_id: i64,
    throughput_mb_s: f64,
    latency_p99_ns: i64,
    cv: Option<f64>,
}

async fn stored(app: &App) -> Vec<Stored> {
    sqlx::query_as(
        "SELECT p.host_id, h.name AS host, p.algorithm, p.size_bytes, p.threads, p.path, p.path_used, p.result_id, \
             p.throughput_mb_s, p.latency_p99_ns, p.cv \
         FROM result_points p JOIN hosts h ON h.id = p.host_id \
         WHERE p.direction = 'encrypt' AND p.concurrency = 0 AND p.key_mode = 'static' \
         ORDER BY h.name, p.algorithm, p.size_bytes, p.threads, p.path",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Runs `algorithms` × `sizes` × `threads` on both paths, encrypt, on every host, and waits for it.
async fn run(app: &App, algorithms: &[&str], sizes: &[u64], threads: &[u32]) {
    let both = v1::Matrix {
        threads: threads.to_vec(),
        paths: both_paths(),
        ..matrix(algorithms, sizes, 0.05)
    };
    app.run_campaign("compare", both).await;
}

/// The matrix's column headings (algorithms), in page order.
fn columns(html: &str) -> Vec<String> {
    let head = between(html, "<thead><tr>", "</tr></thead>");
    head.split("<th").skip(2).map(|th| text(&format!("<th{th}"))).collect()
}

/// The matrix row `data-row="{row}"`: each column heading with its cell's markup.
fn matrix_row(html: &str, row: &str) -> BTreeMap<String, String> {
    let columns = columns(html);
    let body = between(html, &format!("<tr data-row=\"{row}\">"), "</tr>");
    let cells: Vec<String> = body
        .split("<td")
        .skip(1)
        .map(|td| format!("<td{}", td.split("</td>").next().unwrap()))
        .collect();
    assert_eq!(columns.len(), cells.len(), "row {row}: {body}");
    columns.into_iter().zip(cells).collect()
}

/// What a matrix cell must show for a stored point, in hosts mode.
fn assert_cell_shows(cell: &str, p: &Stored, what: &str) {
    let mb_s = format::mb_s(p.throughput_mb_s);
    assert!(text(cell).contains(&mb_s), "{what}: shows {mb_s}: {cell}");
    let cv = match p.cv {
        Some(cv) => format!("CV {}", format::percent(cv)),
        None => "CV –".into(),
    };
    assert!(cell.contains(&cv), "{what}: shows {cv}: {cell}");
    let link = format!("<a href=\"/api/v1/results/{}\">", p.result_id);
    assert!(
        cell.contains(&link),
        "{what}: links to its raw result {}: {cell}",
        p.result_id
    );
    assert_eq!(
        cell.contains("ran in software"),
        p.path_used != p.path,
        "{what}: flags a fallback iff the worker ran {}: {cell}",
        p.path_used
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_modes_show_exactly_what_a_real_campaign_stored() {
    let mut app = spawn_app().await;
    app.spawn_agent(ACCEL, &[]);
    app.spawn_agent(EMULATED, &["--label", "emulated=qemu"]);
    app.spawn_soft_agent(SOFT, &[]);
    app.wait_online(3).await;
    run(&app, ALGORITHMS, SIZES, &[1]).await;
    // A second thread count at 16 KiB for the scaling curve.
    run(&app, &["aes-256-gcm"], &[16384], &[2]).await;
    let points = stored(&app).await;
    assert_eq!(points.len(), 3 * (3 * 2 * 2 + 2), "every job left its point");
    let id_of = |name: &str| points.iter().find(|p| p.host == name).unwrap().host_id;
    let (accel, emulated, soft) = (id_of(ACCEL), id_of(EMULATED), id_of(SOFT));

    // Host rows, each view's cells exactly the stored figures.
    for path in ["accelerated", "software"] {
        for size in SIZES {
            let url = format!("/compare?size={size}&path={path}");
            let page = app.get(&url).await;
            assert_eq!(page.status, 200, "{url}: {}", page.body);
            assert!(
                page.body.contains("MB/s (10<sup>6</sup> bytes/s)"),
                "{url}: states the unit"
            );
            for host in [accel, emulated, soft] {
                let row = matrix_row(&page.body, &host.to_string());
                assert_eq!(
                    columns(&page.body),
                    ["aes-256-gcm", "chacha20-poly1305", "des-ede3-cbc"],
                    "{url}: columns in the agent's order"
                );
                for (algorithm, cell) in &row {
                    let p = points
                        .iter()
                        .find(|p| {
                            p.host_id == host
                                && p.algorithm == *algorithm
                                && p.size_bytes == *size as i64
                                && p.threads == 1
                                && p.path == path
                        })
                        .unwrap();
                    assert_cell_shows(cell, p, &format!("{url}: {} × {algorithm}", p.host));
                }
            }
            let emulated_row = between(&page.body, &format!("<tr data-row=\"{emulated}\">"), "</th>");
            assert!(
                emulated_row.contains("badge emulated"),
                "{url}: the emulated host is marked"
            );
            let accel_row = between(&page.body, &format!("<tr data-row=\"{accel}\">"), "</th>");
            assert!(
                !accel_row.contains("badge emulated"),
                "{url}: only the emulated host is marked"
            );
            // Emulated figures never rank: greyed, never a colour of the scale,
            // whether qemu ran faster or slower than the real hosts.
            for (algorithm, cell) in matrix_row(&page.body, &emulated.to_string()) {
                assert!(
                    cell.starts_with("<td class=\"num unranked\""),
                    "{url}: the emulated host's {algorithm} is greyed: {cell}"
                );
            }
            for host in [accel, soft] {
                for (algorithm, cell) in matrix_row(&page.body, &host.to_string()) {
                    assert!(
                        cell.starts_with("<td class=\"num heat-"),
                        "{url}: host {host}'s {algorithm} is on the colour scale: {cell}"
                    );
                }
            }
        }
    }
    // DES has no hardware path: asked for acceleration it runs in software,
    // so the fallback flag above was checked both ways.
    assert!(
        points
            .iter()
            .any(|p| p.path == "accelerated" && p.path_used == "software"),
        "some accelerated-path job ran in software: {points:?}"
    );

    // Class rows: the accelerated machine's class without the emulated twin, which has its own row.
    let page = app.get("/compare?rows=classes").await;
    assert_eq!(page.status, 200);
    let rows = page.body.matches("<tr data-row=").count();
    assert_eq!(rows, 3, "accelerated class, its emulated twin, the software build");
    // The class of the accelerated host (the one definition, analysis::class), shared by its twin.
    let fleet = cipherfleet_coordinator::report::matrix::class_groups(&app.pool)
        .await
        .unwrap();
    let key_of = |id: i64| fleet.iter().find(|g| g.host_ids.contains(&id)).unwrap().class().key();
    let class_key = key_of(accel);
    assert_eq!(key_of(emulated), class_key, "same machine, same build");
    assert_ne!(key_of(soft), class_key, "the software build is another class");
    let real = matrix_row(&page.body, &class_key);
    let twin_row = matrix_row(&page.body, &format!("{class_key}-emulated"));
    assert!(
        twin_row
            .values()
            .all(|cell| cell.starts_with("<td class=\"num unranked\"")),
        "the emulated twin's class row is greyed: {twin_row:?}"
    );
    assert!(
        real.values().all(|cell| cell.starts_with("<td class=\"num heat-")),
        "the real class is coloured: {real:?}"
    );
    let at = |host: i64, algorithm: &str| {
        points
            .iter()
            .find(|p| {
                p.host_id == host
                    && p.algorithm == algorithm
                    && p.size_bytes == 16384
                    && p.threads == 1
                    && p.path == "accelerated"
            })
            .unwrap()
    };
    for algorithm in ALGORITHMS {
        let cell = &real[*algorithm];
        assert!(
            text(cell).contains(&format::mb_s(at(accel, algorithm).throughput_mb_s)),
            "class {class_key} × {algorithm}: the median of its one real host: {cell}"
        );
        assert!(cell.contains("median of 1 host"), "{cell}");
        assert!(
            !cell.contains("/api/v1/results/"),
            "a class cell is not one result: {cell}"
        );
        let twin = &twin_row[*algorithm];
        assert!(
            text(twin).contains(&format::mb_s(at(emulated, algorithm).throughput_mb_s)),
            "the emulated twin's own row × {algorithm}: {twin}"
        );
    }
    assert!(page.body.contains("badge emulated"));

    // The class link filters host rows to that class: the accelerated host and its twin.
    let page = app.get(&format!("/compare?class={class_key}")).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.body.matches("<tr data-row=").count(), 2, "{}", page.body);
    assert!(!page.body.contains(&format!("<tr data-row=\"{soft}\">")));

    // The AEAD seed view shows P99 next to MB/s.
    let seed = app
        .get("/compare?algorithms=aes-256-gcm,aes-128-cbc,aes-128-cbc-hmac-sha256,chacha20-poly1305&metric=p99")
        .await;
    let row = matrix_row(&seed.body, &accel.to_string());
    assert_eq!(
        columns(&seed.body),
        [
            "aes-256-gcm",
            "aes-128-cbc",
            "aes-128-cbc-hmac-sha256",
            "chacha20-poly1305"
        ],
        "asked columns in the asked order"
    );
    let gcm = at(accel, "aes-256-gcm");
    let p99 = format!(
        "<span class=\"p99\">P99 {}</span>",
        format::nanos(gcm.latency_p99_ns as f64)
    );
    assert!(row["aes-256-gcm"].contains(&p99), "{p99} in {}", row["aes-256-gcm"]);
    assert!(row["aes-128-cbc"].contains("–"), "not measured: an empty cell");

    // JSON and CSV carry the same cells as the page, exactly.
    let json = app.get("/api/v1/compare?size=16&path=software&format=json").await;
    assert_eq!(json.status, 200);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json.body).unwrap();
    let want: Vec<&Stored> = points
        .iter()
        .filter(|p| p.size_bytes == 16 && p.path == "software" && p.threads == 1)
        .collect();
    assert_eq!(rows.len(), want.len(), "{}", json.body);
    for p in want {
        let r = rows
            .iter()
            .find(|r| r["host_id"] == p.host_id && r["algorithm"] == p.algorithm.as_str())
            .unwrap_or_else(|| panic!("no API row for {} × {}", p.host, p.algorithm));
        assert_eq!(r["throughput_mb_s"].as_f64(), Some(p.throughput_mb_s));
        assert_eq!(r["result_id"].as_i64(), Some(p.result_id));
        assert_eq!(r["latency_p99_ns"].as_i64(), Some(p.latency_p99_ns));
        assert_eq!(r["cv"].as_f64(), p.cv);
        assert_eq!(r["host_name"], p.host.as_str());
        assert_eq!(r["emulated"], p.host == EMULATED);
    }
    let csv = app.get("/api/v1/compare?size=16&path=software&format=csv").await;
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    let mut reader = csv::Reader::from_reader(csv.body.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), rows.len());
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    for record in &records {
        let json_row = rows
            .iter()
            .find(|r| r["result_id"].as_i64() == record[column("result_id")].parse().ok())
            .unwrap();
        assert_eq!(
            record[column("throughput_mb_s")].parse::<f64>().ok(),
            json_row["throughput_mb_s"].as_f64()
        );
    }
    let classes = app.get("/api/v1/compare?rows=classes&format=json").await;
    let classes: Vec<serde_json::Value> = serde_json::from_str(&classes.body).unwrap();
    assert_eq!(
        classes.len(),
        3 * ALGORITHMS.len(),
        "three class rows × three algorithms"
    );
    assert!(classes.iter().all(|r| r["hosts"] == 1));

    // /modes: the payload-size chart and the scaling table from the same points.
    let page = app.get(&format!("/modes?host={accel}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let svg = between(&page.body, "<svg", "</svg>");
    for algorithm in ALGORITHMS {
        assert!(
            svg.contains(&format!(">{algorithm}</text>")),
            "legend names {algorithm}"
        );
        for size in SIZES {
            let p = points
                .iter()
                .find(|p| {
                    p.host_id == accel
                        && p.algorithm == *algorithm
                        && p.size_bytes == *size as i64
                        && p.threads == 1
                        && p.path == "accelerated"
                })
                .unwrap();
            let tip = format!("{algorithm}: {} → ", format::bytes(*size));
            assert!(svg.contains(&tip), "a point of {algorithm} at {}", format::bytes(*size));
            let table = between(&page.body, "<table class=\"sortable modes-sizes\">", "</table>");
            assert!(
                table.contains(&format::mb_s(p.throughput_mb_s)),
                "table has {algorithm} at {size}"
            );
        }
    }
    assert!(
        svg.contains(">16 B</text>") && svg.contains(">16 KiB</text>"),
        "size ticks"
    );
    let one = at(accel, "aes-256-gcm").throughput_mb_s;
    let two = points
        .iter()
        .find(|p| p.host_id == accel && p.algorithm == "aes-256-gcm" && p.threads == 2 && p.path == "accelerated")
        .unwrap()
        .throughput_mb_s;
    let scaling = between(&page.body, "<table class=\"sortable modes-threads\">", "</table>");
    let speedup = format!("{}×", format::significant(two / one));
    assert!(scaling.contains(&speedup), "2-thread speed-up {speedup}: {scaling}");
    assert!(
        page.body.matches("<svg class=\"chart\"").count() == 2,
        "size and thread charts"
    );

    // A class's curves leave its emulated twin out, and say so.
    let page = app.get(&format!("/modes?class={class_key}")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("1 emulated or simulated host of this class left out"),
        "{}",
        page.body
    );
    let modes: Vec<serde_json::Value> =
        serde_json::from_str(&app.get(&format!("/api/v1/modes?class={class_key}")).await.body).unwrap();
    let gcm = modes
        .iter()
        .find(|r| r["algorithm"] == "aes-256-gcm" && r["size_bytes"] == 16384 && r["threads"] == 1)
        .unwrap();
    assert_eq!(
        gcm["throughput_mb_s"].as_f64(),
        Some(one),
        "the class median of one real host is its value"
    );
    assert_eq!(gcm["hosts"], 1);

    // An empty view names itself and offers the nearest stored ones.
    let page = app.get("/compare?size=1024").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("No results for 1 KiB per operation"),
        "{}",
        page.body
    );
    let nearby = between(&page.body, "Stored views nearby:", "</p>");
    assert!(
        nearby.starts_with(" <a href=\"/compare\">16 KiB × 1 thread</a>"),
        "{nearby}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_get_a_400_naming_them_and_an_empty_fleet_a_hint() {
    let app = spawn_app().await;
    for (url, name) in [
        ("/compare?size=abc", "size"),
        ("/compare?direction=sideways", "direction"),
        ("/compare?algorithms=aes-512-gcm", "aes-512-gcm"),
        ("/modes?host=abc", "host"),
        ("/modes?host=1&class=00000000000000ff", "not both"),
    ] {
        let page = app.get(url).await;
        assert_eq!(page.status, 400, "{url}");
        assert!(page.body.contains(name), "{url}: names {name}: {}", page.body);
        assert!(page.header("content-type").unwrap().starts_with("text/html"));
    }
    let api = app.get("/api/v1/compare?threads=0").await;
    assert_eq!(api.status, 400);
    let error: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("threads"), "{error}");
    assert_eq!(app.get("/modes?host=424242").await.status, 404);

    let page = app.get("/compare").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("No results are stored yet"), "{}", page.body);
    let page = app.get("/modes").await;
    assert!(page.body.contains("No host has connected yet"), "{}", page.body);
}
