//! Memory, sample sufficiency and the agent's build profile in the report:
//! a normal agent and the software build measure AES-128-GCM and 3DES through
//! the real coordinator; the host page, the modes page and their `/api/v1`
//! JSON and CSV must show what each worker reported. Soft AES keeps another
//! key state than AES-NI, and 3DES another again: the pages must tell them apart.

use std::collections::BTreeMap;

use cipherfleet_coordinator::domain::memory::StoredMemory;
use cipherfleet_coordinator::store::results;
use cipherfleet_coordinator::web::format;
use cipherfleet_core::facts::Codegen;
use cipherfleet_core::measurement::Memory;
use serde_json::Value;

use crate::app::{App, spawn_app};
use crate::html::row;

const NATIVE: &str = "memory-native";
const SOFT: &str = "memory-soft";
const ALGORITHMS: [&str; 2] = ["aes-128-gcm", "des-ede3-cbc"];

async fn body(app: &App, path: &str) -> String {
    let r = app.get(path).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    r.body
}

async fn json(app: &App, path: &str) -> Value {
    let text = body(app, path).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
}

/// What a stored measurement says, by algorithm: (result id, its memory object, low_samples).
/// Read whole ([`results::stored`]): the stored document leaves out the figures its columns hold.
type Reported = BTreeMap<String, (i64, Value, bool)>;

async fn reported(app: &App, host: &str) -> Reported {
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT r.id, r.algorithm FROM results r JOIN hosts h ON h.id = r.host_id WHERE h.name = $1")
            .bind(host)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let mut reported = Reported::new();
    for (id, alg) in rows {
        let m = results::stored(&app.pool, id)
            .await
            .unwrap()
            .expect("the result")
            .measurement;
        let low = m["low_samples"].as_bool().expect("schema /2 reports low_samples");
        reported.insert(alg, (id, m["memory"].clone(), low));
    }
    reported
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_modes_pages_show_each_points_memory_and_sample_sufficiency() {
    let mut app = spawn_app().await;
    app.spawn_agent(NATIVE, &[]);
    app.spawn_soft_agent(SOFT, &[]);
    app.wait_online(2).await;
    app.run_campaign("memory", crate::app::matrix(&ALGORITHMS, &[1024], 0.1))
        .await;

    let ids: BTreeMap<String, i64> = sqlx::query_as::<_, (String, i64)>("SELECT name, id FROM hosts")
        .fetch_all(&app.pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let (native, soft) = (reported(&app, NATIVE).await, reported(&app, SOFT).await);
    let state = |r: &Reported, alg: &str| r[alg].1["cipher_state_bytes"].as_u64().expect("a state size");
    // What the issue asks the report to make visible: AES-NI's key state is
    // not soft AES's, and 3DES has a size of its own.
    assert_ne!(state(&native, "aes-128-gcm"), state(&soft, "aes-128-gcm"));
    assert_ne!(state(&native, "aes-128-gcm"), state(&native, "des-ede3-cbc"));

    for (name, reported) in [(NATIVE, &native), (SOFT, &soft)] {
        let id = ids[name];
        // The JSON API: the four figures and low_samples as the worker reported them.
        let api = json(&app, &format!("/api/v1/hosts/{id}/results")).await;
        let api = api.as_array().expect("rows");
        assert_eq!(api.len(), ALGORITHMS.len(), "{name}");
        for r in api {
            let alg = r["algorithm"].as_str().unwrap();
            let (result_id, memory, low) = &reported[alg];
            assert_eq!(r["id"].as_i64(), Some(*result_id));
            for field in [
                "cipher_state_bytes",
                "peak_rss_bytes",
                "heap_bytes_per_op",
                "allocs_per_op",
            ] {
                assert_eq!(r[field].as_f64(), memory[field].as_f64(), "{name} {alg} {field}: {r}");
            }
            assert_eq!(r["allocs_per_op"].as_f64(), Some(0.0), "no measured loop allocates");
            assert_eq!(r["low_samples"].as_bool(), Some(*low), "{r}");
        }

        // The CSV: the same columns, the state in its cell.
        let csv = body(&app, &format!("/api/v1/hosts/{id}/results?format=csv")).await;
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let column = |n: &str| {
            header
                .iter()
                .position(|h| *h == n)
                .unwrap_or_else(|| panic!("no {n} in {header:?}"))
        };
        let (alg_col, state_col, low_col) = (column("algorithm"), column("cipher_state_bytes"), column("low_samples"));
        for line in lines {
            let cells: Vec<&str> = line.split(',').collect();
            let alg = cells[alg_col];
            assert_eq!(cells[state_col], state(reported, alg).to_string(), "{name}: {line}");
            assert_eq!(cells[low_col], reported[alg].2.to_string(), "{name}: {line}");
        }

        // The host page: each result's row shows its state, RSS and heap use.
        let page = body(&app, &format!("/hosts/{id}")).await;
        for (alg, (result_id, memory, _)) in reported {
            let memory: Memory = serde_json::from_value(memory.clone()).unwrap();
            let text = format::memory(&StoredMemory::from(Some(&memory))).unwrap();
            let r = row(&page, &format!("data-result=\"{result_id}\""));
            assert!(
                r.contains(&text.state) && r.contains(&text.detail),
                "{name} {alg}: {text:?} in {r}"
            );
            assert!(r.contains("0 allocs/op"), "{r}");
        }
        // And how the agent was compiled, from its facts.
        let facts: Value = sqlx::query_scalar(
            "SELECT s.facts FROM hosts h JOIN host_fact_snapshots s ON s.id = h.current_snapshot_id WHERE h.id = $1",
        )
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        let codegen: Codegen = serde_json::from_value(facts["build"]["codegen"].clone()).unwrap();
        assert!(
            page.contains(&format!(
                "<tr><th>Agent compiled with</th><td>{}</td></tr>",
                codegen.summary()
            )),
            "{name}: no build profile on the host page"
        );

        // The modes page and its API: one row per algorithm with the state.
        let modes = body(&app, &format!("/modes?host={id}")).await;
        let api = json(&app, &format!("/api/v1/modes?host={id}")).await;
        for alg in ALGORITHMS {
            let r = row(&modes, &format!("data-algorithm=\"{alg}\""));
            let shown = format::bytes(state(reported, alg));
            assert!(r.contains(&format!(">{shown}</td>")), "{name} {alg}: {shown} in {r}");
            let point = api
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["algorithm"] == alg)
                .unwrap_or_else(|| panic!("{alg} in {api}"));
            assert_eq!(
                point["cipher_state_bytes"].as_u64(),
                Some(state(reported, alg)),
                "{point}"
            );
            assert_eq!(point["low_samples"].as_bool(), Some(reported[alg].2), "{point}");
        }
    }
}
