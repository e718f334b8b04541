//! `/fallback` over real results: a normal agent and the software build
//! (`cipherfleet-agent-soft`, whose accelerated requests run in software)
//! measure both paths through the real coordinator; the page, its CSV/JSON
//! and the findings list must show what the database holds.

use std::collections::BTreeMap;
use std::time::Duration;

use cipherfleet_coordinator::analysis::slow::Thresholds;
use cipherfleet_coordinator::web::format;
use cipherfleet_proto::v1;
use serde_json::Value;

use crate::app::{App, both_paths, matrix, spawn_app, wait_for};
use crate::html::{between, text};

const ALGORITHMS: [&str; 2] = ["aes-128-gcm", "chacha20-poly1305"];
const SIZE: u64 = 16 * 1024;

/// What the database holds for one host and algorithm: the latest result of each path.
#[derive(Debug, Clone, Default)]
struct Stored {
    accelerated_mb_s: f64,
    accelerated_path_used: String,
    software_mb_s: f64,
}

impl Stored {
    fn ratio(&self) -> f64 {
        self.accelerated_mb_s / self.software_mb_s
    }
}

async fn stored(app: &App) -> BTreeMap<(String, String), Stored> {
    let rows: Vec<(String, String, String, String, f64)> = sqlx::query_as(
        "SELECT DISTINCT ON (h.name, r.algorithm, r.path) h.name, r.algorithm, r.path, r.path_used, r.throughput_mb_s \
         FROM results r JOIN hosts h ON h.id = r.host_id WHERE r.size_bytes = $1 \
         ORDER BY h.name, r.algorithm, r.path, r.created_at DESC, r.id DESC",
    )
    .bind(SIZE as i64)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let mut out: BTreeMap<(String, String), Stored> = BTreeMap::new();
    for (host, algorithm, path, path_used, mb_s) in rows {
        let entry = out.entry((host, algorithm)).or_default();
        if path == "accelerated" {
            entry.accelerated_mb_s = mb_s;
            entry.accelerated_path_used = path_used;
        } else {
            entry.software_mb_s = mb_s;
        }
    }
    out
}

/// Equal but for the last bit: serde_json's default float parsing may round
/// the last digit differently from the value that was printed.
fn assert_close(got: f64, want: f64) {
    assert!((got - want).abs() <= want.abs() * 1e-12, "{got} != {want}");
}

/// The text of the first `<td class="…{class}…">` in `row`, tags stripped.
fn cell_text(row: &str, class: &str) -> String {
    // What `between` leaves of the opening tag is put back into one.
    text(&format!(
        "<td {}",
        between(row, &format!("class=\"num {class}\""), "</td>")
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_page_shows_both_paths_their_ratio_and_why_the_soft_build_runs_software() {
    let mut app = spawn_app().await;
    app.spawn_agent("fb-normal", &["--label", "rack=r1"]);
    app.spawn_soft_agent("fb-soft", &[]);
    app.wait_online(2).await;
    // [`ALGORITHMS`] at [`SIZE`] on both paths, on every host.
    let both = v1::Matrix {
        paths: both_paths(),
        ..matrix(&ALGORITHMS, &[SIZE], 0.05)
    };
    let id = app.start_campaign("fallback", both).await;
    let status = app.wait_finished(&id, Duration::from_secs(120)).await;
    assert_eq!(status.overall.unwrap().done, 8, "2 hosts × 2 algorithms × 2 paths");

    // The software build says what it is; the deriver opens its finding after the campaign.
    let soft_finding: i64 = wait_for("the software-build finding", Duration::from_secs(30), || async {
        sqlx::query_scalar(
            "SELECT f.id FROM findings f JOIN hosts h ON h.id = f.host_id \
             WHERE h.name = 'fb-soft' AND f.reason = 'software-build' AND f.status = 'open'",
        )
        .fetch_optional(&app.pool)
        .await
        .unwrap()
    })
    .await;

    let db = stored(&app).await;
    assert_eq!(db.len(), 4, "{db:?}");
    for alg in ALGORITHMS {
        let soft = &db[&("fb-soft".to_string(), alg.to_string())];
        assert_eq!(
            soft.accelerated_path_used, "software",
            "{alg}: the soft build cannot run hardware"
        );
    }

    let page = app.get("/fallback").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    let html = &page.body;
    assert!(
        html.contains("16 KiB, 1 thread, encrypt, static key"),
        "the default view names its point"
    );

    // Every host × algorithm row shows the stored figures and the ratio computed from them.
    let paths = between(html, "<section id=\"paths\">", "</section>");
    for ((host, alg), s) in &db {
        let row = between(
            paths,
            &format!("<tr data-host=\"{host}\" data-algorithm=\"{alg}\""),
            "</tr>",
        );
        assert_eq!(
            cell_text(row, "ratio"),
            format!("{}×", format::significant(s.ratio())),
            "{host} {alg}: {s:?}"
        );
        assert!(
            cell_text(row, "accelerated").starts_with(&format::mb_s(s.accelerated_mb_s)),
            "{row}"
        );
        assert!(
            cell_text(row, "software").starts_with(&format::mb_s(s.software_mb_s)),
            "{row}"
        );
        assert!(
            row.contains(&format!("status-{0}\">{0}</span>", s.accelerated_path_used)),
            "{host} {alg}: ran {}: {row}",
            s.accelerated_path_used
        );
        assert!(
            row.contains("href=\"/api/v1/results/"),
            "figures link to their raw results"
        );
    }
    // Worst ratio first.
    let ratios: Vec<f64> = paths
        .split("class=\"num ratio\" data-sort=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
        .collect();
    assert_eq!(ratios.len(), 4);
    assert!(ratios.windows(2).all(|w| w[0] <= w[1]), "{ratios:?}");

    // The soft host is at software speed because of its build; the normal host
    // only if the database says its accelerated path fell back or came near software.
    let slow = between(html, "<section id=\"software-speed\">", "</section>");
    let soft_row = between(slow, "<tr data-host=\"fb-soft\"", "</tr>");
    assert!(soft_row.contains("data-reason=\"software-build\""), "{soft_row}");
    assert!(
        soft_row.contains(&format!("href=\"#finding-{soft_finding}\"")),
        "{soft_row}"
    );
    assert!(!soft_row.contains("reason unknown"), "{soft_row}");
    for alg in ALGORITHMS {
        assert!(soft_row.contains(&format!(
            "<code>{alg}</code>: the accelerated request ran the software path"
        )));
    }
    let near = Thresholds::default().near_software_ratio;
    let normal_slow = ALGORITHMS.iter().any(|alg| {
        let s = &db[&("fb-normal".to_string(), alg.to_string())];
        s.accelerated_path_used == "software" || s.ratio() < near
    });
    assert_eq!(
        slow.contains("<tr data-host=\"fb-normal\""),
        normal_slow,
        "{db:?}\n{slow}"
    );

    // The finding is listed with readable evidence.
    let findings = between(html, "<section id=\"findings\">", "</section>");
    let listed = between(findings, &format!("<tr id=\"finding-{soft_finding}\""), "</tr>");
    assert!(
        listed.contains("data-host=\"fb-soft\"") && listed.contains("software-build"),
        "{listed}"
    );
    assert!(listed.contains("<dt>build flavour</dt><dd>software</dd>"), "{listed}");

    // The same rows as JSON and CSV.
    let json = app.get("/api/v1/fallback?format=json").await;
    assert_eq!(json.status, 200);
    let rows: Vec<Value> = serde_json::from_str(&json.body).unwrap();
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let key = (
            row["host_name"].as_str().unwrap().to_string(),
            row["algorithm"].as_str().unwrap().to_string(),
        );
        let s = &db[&key];
        assert_eq!(row["size_bytes"], SIZE);
        assert_close(row["accelerated_mb_s"].as_f64().unwrap(), s.accelerated_mb_s);
        assert_close(row["software_mb_s"].as_f64().unwrap(), s.software_mb_s);
        assert_close(row["ratio"].as_f64().unwrap(), s.ratio());
        assert_eq!(row["accelerated_path_used"], s.accelerated_path_used.as_str());
        let reasons = row["reasons"].as_str().unwrap();
        assert_eq!(reasons.contains("software-build"), key.0 == "fb-soft", "{row}");
    }
    let csv = app.get("/api/v1/fallback?format=csv").await;
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    let mut reader = csv::Reader::from_reader(csv.body.as_bytes());
    let headers = reader.headers().unwrap().clone();
    assert_eq!(
        headers.iter().take(9).collect::<Vec<_>>(),
        [
            "host_id",
            "host_name",
            "algorithm",
            "size_bytes",
            "accelerated_mb_s",
            "accelerated_path_used",
            "software_mb_s",
            "ratio",
            "reasons"
        ]
    );
    let csv_rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(csv_rows.len(), rows.len());
    for (record, row) in csv_rows.iter().zip(&rows) {
        assert_eq!(&record[1], row["host_name"].as_str().unwrap());
        assert_eq!(&record[2], row["algorithm"].as_str().unwrap());
        assert_close(record[7].parse::<f64>().unwrap(), row["ratio"].as_f64().unwrap());
        assert_eq!(&record[8], row["reasons"].as_str().unwrap());
    }

    // Filters narrow the view; the findings API carries the evidence.
    let labelled: Vec<Value> = serde_json::from_str(&app.get("/api/v1/fallback?label=rack%3Dr1").await.body).unwrap();
    assert_eq!(labelled.len(), 2);
    assert!(labelled.iter().all(|r| r["host_name"] == "fb-normal"), "{labelled:?}");
    let explained: Vec<Value> =
        serde_json::from_str(&app.get("/api/v1/fallback?reason=software-build").await.body).unwrap();
    assert!(
        explained.len() == 2 && explained.iter().all(|r| r["host_name"] == "fb-soft"),
        "{explained:?}"
    );
    let open: Vec<Value> = serde_json::from_str(&app.get("/api/v1/findings").await.body).unwrap();
    let listed = open
        .iter()
        .find(|f| f["id"] == soft_finding)
        .expect("the finding is listed");
    // Named as `check --format json` names it, evidence and fact changes as objects.
    assert_eq!(listed["host_name"], "fb-soft");
    assert_eq!(listed.get("host"), None, "one name for the host: host_name");
    assert_eq!(listed["evidence"]["build_flavour"], "software");
    assert!(listed["fact_changes"].is_object(), "{listed}");
    // The CSV keeps one row per finding: the objects as JSON text in their cells.
    let findings_csv = app.get("/api/v1/findings?format=csv").await;
    let mut reader = csv::Reader::from_reader(findings_csv.body.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("{name} in {headers:?}"))
    };
    let (host_col, evidence_col) = (column("host_name"), column("evidence"));
    let record = reader
        .records()
        .map(Result::unwrap)
        .find(|r| r[0] == soft_finding.to_string())
        .expect("the finding's CSV row");
    assert_eq!(&record[host_col], "fb-soft");
    let evidence: Value = serde_json::from_str(&record[evidence_col]).unwrap();
    assert_eq!(evidence["build_flavour"], "software");

    // A filter value is echoed into the form escaped, never as markup.
    let echoed = app.get("/fallback?label=%3Cscript%3Ex%3D%22%3E").await;
    assert_eq!(echoed.status, 200);
    assert!(!echoed.body.contains("<script>x"), "the label is echoed raw");
    assert!(
        echoed.body.contains("value=\"&#60;script&#62;x=&#34;&#62;\""),
        "{}",
        echoed.body
    );

    // Bad parameters are refused, as a page or as JSON.
    for path in ["/fallback?size=huge", "/fallback?threads=0", "/fallback?page=zero"] {
        let r = app.get(path).await;
        assert_eq!(r.status, 400, "{path}");
        assert!(r.header("content-type").unwrap().starts_with("text/html"), "{path}");
    }
    for path in [
        "/api/v1/fallback?direction=sideways",
        "/api/v1/fallback?reason=gremlins",
        "/api/v1/findings?status=maybe",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, 400, "{path}");
        let error: Value = serde_json::from_str(&r.body).unwrap();
        assert!(error["error"].as_str().unwrap().contains('='), "{path}: {error}");
    }
}
