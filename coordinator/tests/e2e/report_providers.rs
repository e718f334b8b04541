//! `/providers` and `/api/v1/providers` through the real coordinator, over
//! results stored with their provider as the providers suite leaves them:
//! the page opens with the class's fastest provider and each provider's
//! fallback cost, the API sends the same rows as JSON and CSV, the filters
//! narrow both, and an emulated host's figure is shown but never ranks.

use cipherfleet_coordinator::domain::labels::Labels;
use serde_json::Value;

use crate::app::spawn_app;
use crate::db_helpers::{hello, store_provider_results, with_features};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_page_and_api_answer_from_stored_provider_results() {
    let app = spawn_app().await;
    let pool = &app.pool;
    let cpu = with_features(&["aes", "pclmulqdq", "avx"]);
    let (p1, p2) = (hello(pool, "p1", None, &cpu).await, hello(pool, "p2", None, &cpu).await);
    let emulated: Labels = [("emulated".to_string(), "qemu".to_string())].into();
    let vm = hello(pool, "p-vm", Some(&emulated), &cpu).await;
    store_provider_results(
        pool,
        &[
            (p1, "openssl", "accelerated", "accelerated", 4000.0, 16384, 1, 0),
            (p2, "openssl", "accelerated", "accelerated", 6000.0, 16384, 1, 0),
            (p1, "openssl", "software", "software", 1000.0, 16384, 1, 0),
            (p1, "rustcrypto", "accelerated", "accelerated", 2500.0, 16384, 1, 0),
            (p1, "rustcrypto", "software", "software", 250.0, 16384, 1, 0),
            (p1, "kernel", "accelerated", "accelerated", 3000.0, 1024, 1, 0),
            (vm, "ring", "accelerated", "accelerated", 90000.0, 16384, 1, 0),
        ],
    )
    .await;

    let page = app.get("/providers").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let answer = "aes-256-gcm: openssl is fastest at 5000 MB/s (rustcrypto 0.50× of it); \
                  without acceleration it costs rustcrypto 10.0×, openssl 5.00×.";
    assert!(page.body.contains(answer), "{}", page.body);
    assert!(page.body.contains("software 1000 MB/s · fallback costs 5.00×"));
    // The emulated class's ring figure is shown, unranked; ring's own 16 KiB
    // is not measured on the real class, and the page names what measures it.
    assert!(page.body.contains("90000 MB/s") && page.body.contains("emulated / simulated"));
    assert_eq!(
        page.body.matches("fastest</span>").count(),
        2,
        "openssl at 16 KiB, kernel at 1 KiB"
    );
    assert!(page.body.contains("not measured"));
    assert!(
        page.body
            .contains("cipherfleet-coordinator campaign start --suite providers")
    );

    // One size's column; the answer above the table stays the one at 16 KiB.
    let one_kib = app.get("/providers?size=1KiB").await.body;
    assert!(
        one_kib.contains(">3000 MB/s <") && !one_kib.contains(">5000 MB/s <"),
        "{one_kib}"
    );
    assert!(one_kib.contains(answer) && !one_kib.contains("90000 MB/s"), "{one_kib}");

    let api = app.get("/api/v1/providers").await;
    assert_eq!(api.status, 200, "{}", api.body);
    let rows: Vec<Value> = serde_json::from_str(&api.body).unwrap();
    let openssl = rows
        .iter()
        .find(|r| r["provider"] == "openssl" && r["size_bytes"] == 16384)
        .unwrap_or_else(|| panic!("an openssl row: {rows:#?}"));
    assert_eq!(openssl["accelerated_mb_s"], 5000.0);
    assert_eq!(openssl["accelerated_hosts"], 2);
    assert_eq!(openssl["fallback_cost"], 5.0);
    assert_eq!(openssl["ratio_to_fastest"], 1.0);
    let ring = rows.iter().find(|r| r["provider"] == "ring").unwrap();
    assert_eq!(
        (&ring["marked"], &ring["ratio_to_fastest"]),
        (&Value::Bool(true), &Value::Null)
    );

    let csv = app
        .get("/api/v1/providers?format=csv&size=16KiB&provider=openssl")
        .await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    let lines: Vec<&str> = csv.body.lines().collect();
    assert!(
        lines[0].starts_with("class_id,class_key,class,marked,provider,algorithm,size_bytes,accelerated_mb_s"),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 2, "{}", csv.body);
    assert!(
        lines[1].contains(",false,openssl,aes-256-gcm,16384,5000"),
        "{}",
        lines[1]
    );
}
