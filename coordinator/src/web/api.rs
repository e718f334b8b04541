//! `/api/v1/…`: every report table as JSON (default) or CSV (`?format=csv`),
//! with the same filters as its page. CSV columns follow the rows' field
//! order, flattened fields (a row's `Point`) included.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::WebError;
use crate::store::findings::{Finding, Severity};

/// `?format=`: how a table is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Json,
    Csv,
}

/// The `format` query parameter, extracted beside a page's own filters.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub struct FormatParam {
    #[serde(default)]
    pub format: Format,
}

/// A [`WebError`] answered as `{"error": "…"}` instead of a page.
#[derive(Debug)]
pub struct ApiError(pub WebError);

impl<E: Into<WebError>> From<E> for ApiError {
    fn from(e: E) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let message = if !self.0.log_server_side("API query") {
            self.0.to_string()
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            "database unavailable".to_string()
        } else {
            "internal error; see the coordinator's log".to_string()
        };
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
    }
}

/// A finding as every findings table of the API sends it (`/api/v1/findings`,
/// `/api/v1/hosts/{id}/findings`), named as `check --format json` names it:
/// evidence and fact changes are JSON objects (in the CSV, a cell of their
/// JSON text, so the CSV stays one row per finding).
#[derive(Debug, Serialize)]
pub struct FindingApiRow {
    pub id: i64,
    pub host_id: i64,
    pub host_name: String,
    pub reason: String,
    pub kind: Option<String>,
    pub subject: String,
    pub severity: Severity,
    /// `open` or `resolved`.
    pub status: String,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub summary: String,
    pub evidence: serde_json::Value,
    pub fact_changes: serde_json::Value,
}

impl From<Finding> for FindingApiRow {
    fn from(f: Finding) -> Self {
        FindingApiRow {
            id: f.id,
            host_id: f.host_id,
            host_name: f.host_name,
            reason: f.reason,
            kind: f.kind,
            subject: f.subject,
            severity: f.severity,
            status: f.status,
            first_seen: f.first_seen,
            last_seen: f.last_seen,
            resolved_at: f.resolved_at,
            summary: f.summary,
            evidence: f.evidence,
            fact_changes: f.fact_changes,
        }
    }
}

/// `rows` as a JSON array or as `name.csv`.
pub fn table<T: Serialize>(name: &str, rows: &[T], format: Format) -> Result<Response, ApiError> {
    match format {
        Format::Json => Ok(axum::Json(rows).into_response()),
        Format::Csv => {
            let body = to_csv(rows).map_err(|e| WebError::BadRequest(format!("table {name} as CSV: {e}")))?;
            Ok((
                [
                    (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
                    (
                        header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{name}.csv\""),
                    ),
                ],
                body,
            )
                .into_response())
        }
    }
}

/// Adds `Link: <next>; rel="next"` (RFC 8288) to a paged table's answer
/// while a next page follows (`next` is its path and query).
pub fn link_next(answer: &mut Response, next: Option<String>) {
    if let Some(next) = next
        && let Ok(value) = format!("<{next}>; rel=\"next\"").parse()
    {
        answer.headers_mut().insert(header::LINK, value);
    }
}

/// CSV with a header row, written in one pass over each row as a JSON
/// object, so rows that `#[serde(flatten)]` a [`cipherfleet_core::Point`]
/// work (the csv crate cannot serialise flattened structs). Columns follow
/// the first row's field order; a nested value is written as its JSON text;
/// cells that a spreadsheet would run as a formula (agent strings starting
/// with `=`, `+`, `-`, `@`) get a leading `'`.
pub fn to_csv<T: Serialize>(rows: &[T]) -> Result<String, csv::Error> {
    let objects = rows
        .iter()
        .map(|row| {
            let json = serde_json::to_string(row).map_err(|e| e.to_string())?;
            serde_json::from_str::<OrderedObject>(&json).map_err(|e| format!("a row is not an object: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| csv::Error::from(std::io::Error::other(e)))?;
    let Some(first) = objects.first() else {
        return Ok(String::new());
    };
    let columns: Vec<&str> = first.0.iter().map(|(k, _)| k.as_str()).collect();
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(&columns)?;
    for object in &objects {
        out.write_record(columns.iter().map(|c| cell(object.get(c))))?;
    }
    let bytes = out.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("CSV of UTF-8 strings"))
}

/// A JSON object's members in the order they were written (a row's field
/// order), which `serde_json::Map` does not keep.
struct OrderedObject(Vec<(String, serde_json::Value)>);

impl OrderedObject {
    fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

impl<'de> Deserialize<'de> for OrderedObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(OrderedObject(members))
            }
        }
        d.deserialize_map(Members)
    }
}

/// One value as a CSV cell: empty for null or missing, the text of a string
/// (neutralised), JSON text for anything else.
fn cell(value: Option<&serde_json::Value>) -> String {
    match value {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => neutralise(s).into_owned(),
        Some(other) => other.to_string(),
    }
}

fn neutralise(cell: &str) -> std::borrow::Cow<'_, str> {
    let risky = matches!(cell.chars().next(), Some('=' | '+' | '-' | '@' | '\t' | '\r'));
    if risky && cell.parse::<f64>().is_err() {
        format!("'{cell}").into()
    } else {
        cell.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        host: String,
        mb_s: f64,
        note: Option<String>,
    }

    #[test]
    fn csv_keeps_field_order_and_quotes_and_defuses_formulas() {
        let rows = [
            Row {
                host: "a,b \"x\"".into(),
                mb_s: -1.5,
                note: None,
            },
            Row {
                host: "=HYPERLINK(\"http://x\")".into(),
                mb_s: 2.0,
                note: Some("@SUM(A1)".into()),
            },
        ];
        let csv = to_csv(&rows).unwrap();
        assert_eq!(
            csv,
            "host,mb_s,note\n\"a,b \"\"x\"\"\",-1.5,\n\"'=HYPERLINK(\"\"http://x\"\")\",2.0,'@SUM(A1)\n"
        );
    }

    #[test]
    fn flattened_points_become_columns() {
        #[derive(Serialize)]
        struct PointRow {
            host: String,
            #[serde(flatten)]
            point: cipherfleet_core::Point,
            mb_s: f64,
        }
        let point = cipherfleet_core::spec::Suite::Quick.expand(1)[0].point;
        let csv = to_csv(&[PointRow {
            host: "h".into(),
            point,
            mb_s: 1.5,
        }])
        .unwrap();
        assert_eq!(
            csv,
            "host,algorithm,direction,size_bytes,threads,concurrency,key_mode,path,nonce,mb_s\n\
             h,aes-128-gcm,encrypt,16,1,,static,accelerated,counter,1.5\n"
        );
    }

    #[test]
    fn an_empty_table_is_an_empty_csv() {
        assert_eq!(to_csv::<Row>(&[]).unwrap(), "");
    }
}
