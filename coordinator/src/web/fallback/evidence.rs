//! Findings as a person reads them: evidence numbers with their units, the
//! series spelled out, and the fact changes around first-seen as sentences —
//! not JSON dumps.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::web::format;

/// `1.02×`, or a dash when there is nothing to divide.
pub fn ratio_text(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "–".into(), |r| format!("{}×", format::significant(r)))
}

/// Evidence keys in the order a reader wants them — what fired, on which
/// series, the numbers, then the facts — the rest follow alphabetically, so a
/// key the deriver adds later still shows.
const EVIDENCE_ORDER: &[&str] = &[
    "kind",
    "series",
    "value_mb_s",
    "reference_mb_s",
    "ratio",
    "z",
    "results",
    "reference_results",
    "series_flagged",
    "series_checked",
    "features",
    "advertised",
    "usable",
    "hypervisor_present",
    "hypervisor",
    "cpu_model_name",
    "kernel_release",
    "build_flavour",
    "agent_version",
    "same_cpu_hosts_advertising",
];
/// Evidence the list leaves to the JSON beside it: the flagged series repeat
/// the headline, the snapshot id means nothing to a reader, and the emulated
/// flag is shown as a badge instead.
const EVIDENCE_SKIPPED: &[&str] = &["flagged", "snapshot_id", "emulated"];

/// A finding's evidence as (label, value) lines a person reads: throughput
/// with its unit, ratios as `×`, lists joined, the series spelled out.
pub fn evidence_lines(evidence: &Value) -> Vec<(String, String)> {
    let Some(map) = evidence.as_object() else {
        return vec![("evidence".into(), evidence.to_string())];
    };
    let rank = |k: &str| {
        EVIDENCE_ORDER
            .iter()
            .position(|o| *o == k)
            .unwrap_or(EVIDENCE_ORDER.len())
    };
    let mut keys: Vec<&String> = map.keys().filter(|k| !EVIDENCE_SKIPPED.contains(&k.as_str())).collect();
    keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    keys.into_iter()
        .map(|k| {
            // The unit goes into the value (`512 MB/s`), so the label drops it.
            let label = k.strip_suffix("_mb_s").unwrap_or(k).replace('_', " ");
            (label, evidence_value(k, &map[k]))
        })
        .collect()
}

/// One evidence value; `key` picks the unit. Integers stay exact (counts,
/// ids), other numbers get three significant figures like the rest of the report.
fn evidence_value(key: &str, v: &Value) -> String {
    match v {
        // A near-software comparison has no spread, hence no z-score: not "unknown".
        Value::Null if key == "z" => "–".into(),
        Value::Null => "unknown".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) if key.ends_with("_mb_s") => n.as_f64().map_or_else(|| n.to_string(), format::mb_s),
        Value::Number(n) if key == "ratio" => n.as_f64().map_or_else(|| n.to_string(), |r| ratio_text(Some(r))),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.as_f64().map_or_else(|| n.to_string(), format::significant),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "none".into(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                // A list of records (the kernel's drivers): each as its `name value` pairs,
                // words a narrow column can wrap rather than one long JSON token.
                Value::Object(_) => format!("({})", evidence_value(key, i)),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(o) if key == "series" => series_text(o),
        // Nested settings (the thresholds) as one line of `name value` pairs.
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| format!("{} {}", k.replace('_', " "), evidence_value(k, v)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A series key as words: `aes-128-gcm, 16 KiB, encrypt, 1 thread, static key`.
fn series_text(o: &serde_json::Map<String, Value>) -> String {
    let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let mut parts = vec![text("algorithm")];
    if let Some(size) = o.get("size_bytes").and_then(Value::as_u64) {
        parts.push(format::bytes(size));
    }
    parts.push(text("direction"));
    if let Some(t) = o.get("threads").and_then(Value::as_i64) {
        parts.push(if t == 1 {
            "1 thread".into()
        } else {
            format!("{t} threads")
        });
    }
    if let Some(c) = o.get("concurrency").and_then(Value::as_i64) {
        parts.push(format!("{c} in flight"));
    }
    parts.push(format!("{} key", text("key_mode")));
    // Left out for the built-in crates (as in every stored point).
    if let Some(provider) = o.get("provider").and_then(Value::as_str) {
        parts.push(format!("on {provider}"));
    }
    parts.join(", ")
}

/// The fact changes around a finding's first-seen as sentences:
/// `kernel release: 5.4.0 → 6.1.0`, `features usable: lost avx, avx2`.
pub fn change_lines(fact_changes: &Value) -> Vec<String> {
    let taken = |side: &str| {
        fact_changes
            .get(side)
            .and_then(|s| s.get("taken_at"))
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<DateTime<Utc>>().ok())
            .map(format::timestamp)
    };
    let mut out = Vec::new();
    let changes = fact_changes.get("changes").and_then(Value::as_object);
    match (taken("from"), taken("to")) {
        (Some(from), Some(to)) => out.push(format!("facts of {from} against {to}:")),
        (None, Some(to)) => out.push(format!("first facts on record ({to}): nothing earlier to compare")),
        _ => {}
    }
    // By fact name, whatever order the stored object kept (serde_json keeps insertion order here).
    let mut sorted: Vec<(&String, &Value)> = changes.into_iter().flatten().collect();
    sorted.sort_by_key(|(name, _)| *name);
    for (name, change) in sorted {
        let name = name.replace('_', " ");
        let side = |k: &str| change.get(k).map(|v| evidence_value("", v));
        if let (Some(from), Some(to)) = (side("from"), side("to")) {
            out.push(format!("{name}: {from} → {to}"));
            continue;
        }
        let parts: Vec<String> = ["lost", "gained"]
            .into_iter()
            .filter(|k| change.get(k).and_then(Value::as_array).is_some_and(|a| !a.is_empty()))
            .filter_map(|k| side(k).map(|list| format!("{k} {list}")))
            .collect();
        if !parts.is_empty() {
            out.push(format!("{name}: {}", parts.join("; ")));
        }
    }
    if changes.is_some_and(|c| c.is_empty()) && taken("from").is_some() {
        out.push("no fact changed".into());
    }
    if let Some(at) = fact_changes
        .get("last_good_result_at")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<DateTime<Utc>>().ok())
    {
        out.push(format!("last result at normal speed: {}", format::timestamp(at)));
    }
    if out.is_empty() {
        out.push("no fact changes recorded".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn evidence_reads_as_numbers_with_units() {
        let evidence = json!({
            "kind": "near-software",
            "value_mb_s": 512.4,
            "reference_mb_s": 500.0,
            "ratio": 1.0248,
            "z": null,
            "results": 3,
            "series": {"algorithm": "aes-128-gcm", "direction": "encrypt", "size_bytes": 16384,
                       "threads": 1, "concurrency": null, "key_mode": "static"},
            "flagged": [{"ratio": 1.0}],
            "emulated": false,
            "thresholds": {"near_software_ratio": 1.5},
        });
        let lines = evidence_lines(&evidence);
        let get = |k: &str| lines.iter().find(|(l, _)| l == k).map(|(_, v)| v.as_str());
        assert_eq!(lines[0].0, "kind");
        assert_eq!(
            get("series"),
            Some("aes-128-gcm, 16 KiB, encrypt, 1 thread, static key")
        );
        assert_eq!(get("value"), Some("512 MB/s"));
        assert_eq!(get("reference"), Some("500 MB/s"));
        assert_eq!(get("ratio"), Some("1.02×"));
        assert_eq!(get("z"), Some("–"));
        assert_eq!(get("results"), Some("3"));
        assert_eq!(get("thresholds"), Some("near software ratio 1.50"));
        assert_eq!(get("flagged"), None);
        let facts = evidence_lines(&json!({"features": ["aes"], "usable": [], "hypervisor_present": true}));
        assert_eq!(
            facts,
            vec![
                ("features".to_string(), "aes".to_string()),
                ("usable".to_string(), "none".to_string()),
                ("hypervisor present".to_string(), "yes".to_string()),
            ]
        );
        let drivers = evidence_lines(&json!({"kernel_drivers": [
            {"name": "aes", "driver": "aes-generic", "generic": true},
            {"name": "cbc(aes)", "driver": "cbc(aes-generic)", "generic": true},
        ]}));
        assert_eq!(
            drivers[0].1,
            "(driver aes-generic, generic yes, name aes), (driver cbc(aes-generic), generic yes, name cbc(aes))",
            "records in a list read as words, not JSON"
        );
    }

    #[test]
    fn fact_changes_read_as_sentences() {
        let changes = json!({
            "from": {"snapshot_id": 1, "taken_at": "2026-11-01T10:00:00Z"},
            "to": {"snapshot_id": 2, "taken_at": "2026-11-02T11:30:00Z"},
            "changes": {
                "kernel_release": {"from": "5.4.0", "to": "6.1.0"},
                "features_usable": {"gained": [], "lost": ["avx", "avx2"]},
            },
        });
        assert_eq!(
            change_lines(&changes),
            vec![
                "facts of 2026-11-01 10:00 UTC against 2026-11-02 11:30 UTC:",
                "features usable: lost avx, avx2",
                "kernel release: 5.4.0 → 6.1.0",
            ]
        );
        let first = json!({"from": null, "to": {"snapshot_id": 1, "taken_at": "2026-11-01T10:00:00Z"}, "changes": {}});
        assert_eq!(
            change_lines(&first),
            vec!["first facts on record (2026-11-01 10:00 UTC): nothing earlier to compare"]
        );
        assert_eq!(change_lines(&json!({})), vec!["no fact changes recorded"]);
    }
}
