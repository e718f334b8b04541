//! Query parameters as the report's forms send them, read one way on every
//! page, and the `<select>` options the forms offer back.
//!
//! What is shared is how a value is read: a blank field is absent, sizes,
//! thread counts, class keys and `k`/`k=v` labels have one grammar each.
//! The wording of a refusal stays with each page (its 400 names the
//! parameter in the page's own words), so the readers here answer `Option`
//! or the parser's message and leave the [`WebError`] to the caller; only the
//! filter pages' "use one of …" refusal is shared, as [`require_one_of`].

use super::WebError;
use crate::db::hosts::Labels;

/// The point a page shows without `size=`: the object-storage block size.
pub const DEFAULT_SIZE: i64 = 16 * 1024;
/// The `direction=` values; the first is the default.
pub const DIRECTIONS: [&str; 2] = ["encrypt", "decrypt"];
/// The `path=` values; the first is the default.
pub const PATHS: [&str; 2] = ["accelerated", "software"];

/// `Some(trimmed)` for a present, non-blank field: an emptied form field means "not given".
pub fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// `raw` if it is one of `allowed`, as the allowed (static) spelling.
pub fn one_of(raw: &str, allowed: &[&'static str]) -> Option<&'static str> {
    allowed.iter().copied().find(|a| *a == raw)
}

/// `raw` if it is one of `allowed`, else a bad request naming `name` and the choices.
pub fn require_one_of(name: &str, raw: &str, allowed: &[&'static str]) -> Result<&'static str, WebError> {
    one_of(raw, allowed)
        .ok_or_else(|| WebError::BadRequest(format!("{name}={raw:?}: use one of {}", allowed.join(", "))))
}

/// A payload size in plain bytes, as the matrix links carry it. The bounds
/// keep the value in the column's type; anything else is a typo worth a 400.
pub fn byte_size(raw: &str) -> Option<i64> {
    raw.parse::<i64>().ok().filter(|n| (1..=1 << 40).contains(n))
}

/// A payload size as campaigns spell it (`16384`, `16KiB`, `10MiB`): the
/// agent's own parser, so the report accepts what a suite file does.
pub fn spelled_size(raw: &str) -> Result<u64, String> {
    cipherfleet_core::spec::parse_size(raw).map_err(|e| e.message)
}

/// A thread count from 1 to `max`.
pub fn thread_count(raw: &str, max: i32) -> Option<i32> {
    raw.parse::<i32>().ok().filter(|n| (1..=max).contains(n))
}

/// A machine-class key ([`crate::analysis::class::MachineClass::key`]),
/// lowercased. Keys are hex digests: checking the shape keeps agent text
/// out of the filter.
pub fn class_key(raw: &str) -> Option<String> {
    (raw.len() == 16 && raw.chars().all(|c| c.is_ascii_hexdigit())).then(|| raw.to_ascii_lowercase())
}

/// A label filter: `key=value`, or `key` alone for "has the label".
pub type LabelFilter = (String, Option<String>);

/// Reads `key=value` or `key` (spaces around either side dropped).
pub fn label(raw: &str) -> LabelFilter {
    match raw.split_once('=') {
        Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
        None => (raw.to_string(), None),
    }
}

/// Whether `labels` pass `filter` (no filter passes everything).
pub fn label_matches(filter: &Option<LabelFilter>, labels: &Labels) -> bool {
    match filter {
        None => true,
        Some((k, None)) => labels.contains_key(k),
        Some((k, Some(v))) => labels.get(k) == Some(v),
    }
}

/// The filter as the form field shows it ("" for none), so a link keeps it.
pub fn label_text(filter: &Option<LabelFilter>) -> String {
    match filter {
        None => String::new(),
        Some((k, None)) => k.clone(),
        Some((k, Some(v))) => format!("{k}={v}"),
    }
}

/// One `<option>` of a form's `<select>`.
#[derive(Debug, Clone)]
pub struct Choice {
    pub value: String,
    pub text: String,
    pub selected: bool,
}

/// `(value, text)` pairs as options, the one equal to `current` selected.
pub fn choices(values: impl IntoIterator<Item = (String, String)>, current: &str) -> Vec<Choice> {
    values
        .into_iter()
        .map(|(value, text)| Choice {
            selected: value == current,
            value,
            text,
        })
        .collect()
}

/// Options whose text is their value (`encrypt`, `software`, …).
pub fn plain_choices(values: &[&str], current: &str) -> Vec<Choice> {
    choices(values.iter().map(|v| (v.to_string(), v.to_string())), current)
}

/// A page's query struct from `name=value` pairs, read by the router's own
/// extractor so a test sees what a request would (blank values included).
#[cfg(test)]
pub fn query_from<T: serde::de::DeserializeOwned>(pairs: &[(&str, &str)]) -> T {
    use super::paging::encode;
    let query: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let uri: axum::http::Uri = format!("/?{}", query.join("&"))
        .parse()
        .expect("an encoded query is a valid URI");
    axum::extract::Query::<T>::try_from_uri(&uri)
        .unwrap_or_else(|e| panic!("{pairs:?}: {e}"))
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_fields_are_absent_and_values_are_trimmed() {
        assert_eq!(given(&None), None);
        assert_eq!(given(&Some("  ".into())), None);
        assert_eq!(given(&Some(" 16KiB ".into())), Some("16KiB"));
    }

    #[test]
    fn labels_read_back_as_they_were_written() {
        let f = Some(label("rack = b7"));
        assert_eq!(f, Some(("rack".into(), Some("b7".into()))));
        assert_eq!(label_text(&f), "rack=b7");
        let labels: Labels = [("rack".to_string(), "b7".to_string())].into();
        assert!(label_matches(&f, &labels));
        assert!(label_matches(&Some(label("rack")), &labels));
        assert!(!label_matches(&Some(label("rack=b8")), &labels));
        assert!(label_matches(&None, &labels));
    }

    #[test]
    fn sizes_threads_and_class_keys_refuse_nonsense() {
        assert_eq!(byte_size("16384"), Some(16384));
        assert_eq!((byte_size("0"), byte_size("16KiB")), (None, None));
        assert_eq!(spelled_size("16KiB"), Ok(16384));
        assert!(spelled_size("16 parsecs").is_err());
        assert_eq!(
            (thread_count("4", 8), thread_count("9", 8), thread_count("0", 8)),
            (Some(4), None, None)
        );
        assert_eq!(class_key("00FF00ff00ff00ff").as_deref(), Some("00ff00ff00ff00ff"));
        assert_eq!(class_key("xyz"), None);
    }
}
