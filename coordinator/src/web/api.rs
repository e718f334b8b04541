//! `/api/v1/…`: every report table as JSON (default) or CSV (`?format=csv`),
//! with the same filters as its page. Rows are flat structs; CSV columns
//! follow their field order.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::WebError;

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

/// CSV with a header row; cells that a spreadsheet would run as a formula
/// (agent strings starting with `=`, `+`, `-`, `@`) get a leading `'`.
pub fn to_csv<T: Serialize>(rows: &[T]) -> Result<String, csv::Error> {
    let mut raw = csv::Writer::from_writer(Vec::new());
    for row in rows {
        raw.serialize(row)?;
    }
    let raw = raw.into_inner().map_err(|e| e.into_error())?;
    if rows.is_empty() {
        return Ok(String::new());
    }
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(&raw[..]);
    let mut out = csv::Writer::from_writer(Vec::new());
    for record in reader.records() {
        let record = record?;
        out.write_record(record.iter().map(|cell| neutralise(cell).into_owned()))?;
    }
    let bytes = out.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("CSV of UTF-8 strings"))
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
    fn an_empty_table_is_an_empty_csv() {
        assert_eq!(to_csv::<Row>(&[]).unwrap(), "");
    }
}
