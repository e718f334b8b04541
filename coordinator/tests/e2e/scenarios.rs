//! `/scenarios` over real results: a normal agent and the software build
//! (`cipherfleet-agent-soft`, whose AES runs in software) answer a tiny
//! object-storage question — the scenario's three constructions with objects
//! in flight, small objects and short points so it runs in seconds — through
//! the real coordinator. The view reads points by what they measure, so this
//! explicit matrix answers it as the `object-storage` suite would; its
//! recommendation must follow the stored numbers, and give the software
//! build's class ChaCha20-Poly1305. A second test measures field-sized
//! encryptions with counter and random nonces on a real agent: the
//! field-level view's cost of random nonces is the stored figures' ratio.

use std::collections::BTreeMap;
use std::time::Duration;

use cipherfleet_proto::v1;
use serde_json::Value;

use crate::app::{matrix, spawn_app};

const ALGORITHMS: [&str; 3] = ["aes-256-gcm", "aes-128-cbc-hmac-sha256", "chacha20-poly1305"];
const SIZE: u64 = 16 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_storage_view_recommends_the_fastest_aead_per_class_and_names_aes_in_software() {
    let mut app = spawn_app().await;
    app.spawn_agent("os-native", &[]);
    app.spawn_soft_agent("os-soft", &[]);
    app.wait_online(2).await;
    let objects = v1::Matrix {
        concurrency: Some(2),
        ..matrix(&ALGORITHMS, &[SIZE], 0.05)
    };
    let id = app.start_campaign("object-storage-tiny", objects).await;
    let status = app.wait_finished(&id, Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 6, "2 hosts × 3 constructions");

    // Per host, the stored MB/s per core of each construction.
    let rows: Vec<(String, String, f64, i32)> = sqlx::query_as(
        "SELECT h.name, r.algorithm, r.throughput_mb_s, r.threads FROM result_points r JOIN hosts h ON h.id = r.host_id \
         WHERE r.concurrency = 2",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let mut fastest: BTreeMap<String, (String, f64)> = BTreeMap::new();
    for (host, algorithm, mb_s, threads) in rows {
        let per_core = mb_s / f64::from(threads);
        let best = fastest.entry(host).or_insert((algorithm.clone(), per_core));
        if per_core > best.1 {
            *best = (algorithm, per_core);
        }
    }
    assert_eq!(fastest.len(), 2, "{fastest:?}");

    let api = app.get("/api/v1/scenarios/object-storage").await;
    assert_eq!(api.status, 200, "{}", api.body);
    let view: Value = serde_json::from_str(&api.body).unwrap();
    let classes = view["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2, "one class per build: {view}");
    for class in classes {
        let label = class["class"].as_str().unwrap();
        let host = if label.ends_with("software build") {
            "os-soft"
        } else {
            "os-native"
        };
        let answer = class["answer"].as_str().unwrap();
        assert!(
            answer.starts_with(&fastest[host].0),
            "{host}: the answer {answer:?} follows the stored numbers {fastest:?}"
        );
        assert!(answer.contains("16KiB, 2 in flight"), "{answer}");
        if host == "os-soft" {
            // Which AEAD wins in software is the measurement's to say (ChaCha20-Poly1305 by
            // far on a quiet machine; under heavy load short points have come out the other
            // way): the answer follows the stored figures (above) and names the fallback.
            assert!(answer.contains("AES ran in software"), "{answer}");
        }
        let rows = class["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{class}");
        let cores_10g = rows[0]["cells"][3]["median"].as_f64().unwrap();
        assert!(cores_10g > 0.0);
    }
    let overhead = view["overhead"].as_array().unwrap();
    assert!(
        overhead
            .iter()
            .any(|o| o["size_bytes"] == SIZE && o["algorithm"] == "aes-128-cbc-hmac-sha256" && o["mac_bytes"] == 32),
        "{overhead:?}"
    );

    let page = app.get("/scenarios/object-storage").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Stored overhead per object") && page.body.contains("chacha20-poly1305"));
    let csv = app.get("/api/v1/scenarios/object-storage?format=csv").await;
    assert_eq!(csv.status, 200);
    assert!(
        csv.body
            .starts_with("scenario,class_key,class,answer,subject,column,median"),
        "{}",
        csv.body
    );
    assert!(csv.body.contains("cores per 10 Gbit/s"));

    // The list answers every scenario, this one per class; the others say nothing was measured.
    let list = app.get("/scenarios").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(list.body.contains("/scenarios/field-level") && list.body.contains("No class has measured"));
    // A scenario no class measured names the command that measures it, never a "?".
    assert!(
        list.body
            .contains("<code class=\"command\">cipherfleet-coordinator campaign start --suite field-level</code>"),
        "{}",
        list.body
    );
    assert!(!list.body.contains(" ? "), "{}", list.body);
    assert_eq!(
        list.body.matches("AES ran in software").count(),
        1,
        "the soft class's answer"
    );
    for name in ["legacy-migration", "modes", "fallback", "field-level"] {
        let page = app.get(&format!("/scenarios/{name}")).await;
        assert_eq!(page.status, 200, "{name}: {}", page.body);
        let api = app.get(&format!("/api/v1/scenarios/{name}?format=csv")).await;
        assert_eq!(api.status, 200, "{name}: {}", api.body);
    }
    let missing = app.get("/scenarios/full").await;
    assert_eq!(missing.status, 404);
    assert!(
        missing.body.contains("object-storage"),
        "the 404 names the known scenarios"
    );
    let compare = app.get("/compare").await;
    assert!(compare.body.contains("href=\"/scenarios/object-storage\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_level_view_shows_what_random_nonces_cost_from_the_measured_numbers() {
    let mut app = spawn_app().await;
    app.spawn_agent("field-native", &[]);
    app.wait_online(1).await;
    let fields = v1::Matrix {
        nonces: vec![v1::Nonce::Counter as i32, v1::Nonce::Random as i32],
        ..matrix(&["aes-256-gcm", "chacha20-poly1305"], &[11], 0.05)
    };
    let id = app.start_campaign("field-nonces", fields).await;
    let status = app.wait_finished(&id, Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 4, "2 AEADs × 2 nonce sources");

    // Each nonce source keeps its own latest point, its result recording the source.
    let rows: Vec<(String, String, f64, String)> = sqlx::query_as(
        "SELECT p.algorithm, p.nonce, p.ops_per_s, r.measurement->>'nonce' FROM result_points p \
         JOIN results r ON r.id = p.result_id WHERE p.size_bytes = 11",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    let ops = |algorithm: &str, nonce: &str| {
        let row = rows.iter().find(|r| r.0 == algorithm && r.1 == nonce).unwrap();
        assert_eq!(row.3, nonce, "the stored measurement says which nonces ran");
        row.2
    };

    let api = app.get("/api/v1/scenarios/field-level").await;
    assert_eq!(api.status, 200, "{}", api.body);
    let view: Value = serde_json::from_str(&api.body).unwrap();
    let columns: Vec<&str> = view["columns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let column = |name: &str| columns.iter().position(|c| *c == name).unwrap();
    let (random_col, cost_col) = (
        column("ops/s per core, random nonces"),
        column("× cost of random nonces"),
    );
    let class = &view["classes"][0];
    let answer = class["answer"].as_str().unwrap();
    assert!(answer.contains("random nonces cost aes-256-gcm"), "{answer}");
    for algorithm in ["aes-256-gcm", "chacha20-poly1305"] {
        let subject = format!("{algorithm} at 11 B");
        let row = class["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["subject"] == subject.as_str())
            .unwrap_or_else(|| panic!("{subject}: {class}"));
        let (counter, random) = (ops(algorithm, "counter"), ops(algorithm, "random"));
        let cell = |i: usize| row["cells"][i]["median"].as_f64().unwrap();
        assert_eq!(cell(column("ops/s per core, static key")), counter, "{row}");
        assert_eq!(cell(random_col), random, "{row}");
        let cost = cell(cost_col);
        assert!(
            (cost - counter / random).abs() <= 1e-9 * cost,
            "{cost} vs {counter} / {random}"
        );
        assert!(
            answer.contains(&format!("{algorithm} {:.1}×", counter / random)),
            "{answer}"
        );
    }

    let page = app.get("/scenarios/field-level").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("× cost of random nonces"), "{}", page.body);
    let csv = app.get("/api/v1/scenarios/field-level?format=csv").await;
    assert!(csv.body.contains("ops/s per core, random nonces"), "{}", csv.body);
    // The plain comparison leaves random nonces out: one 11 B cell per algorithm.
    let compare = app.get("/api/v1/compare?size=11").await;
    assert_eq!(compare.status, 200, "{}", compare.body);
    let cells: Value = serde_json::from_str(&compare.body).unwrap();
    let cells = cells.as_array().unwrap();
    assert_eq!(cells.len(), 2, "{cells:?}");
    assert!(cells.iter().all(|c| c["nonce"] == "counter"), "{cells:?}");
}
