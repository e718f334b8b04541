//! Query parameters as the report's forms send them, read one way on every
//! page, and the `<select>` options the forms offer back.
//!
//! What is shared is how a value is read: a blank field is absent, sizes,
//! thread counts, class keys and `k`/`k=v` labels have one grammar each.
//! The wording of a refusal stays with each page (its 400 names the
//! parameter in the page's own words), so the readers here answer `Option`
//! or the parser's message and leave the [`WebError`] to the caller; only the
//! filter pages' "use one of …" refusal is shared, as [`require`]. A
//! value the database cannot hold is refused for every page at once
//! ([`refuse_unstorable`]).
//!
//! Values that are a `text_enum!` (direction, key mode, path, acceleration)
//! are read and offered through [`TextEnum`], so no page retypes their names:
//! [`require`] and [`enum_choices`]. The string forms ([`one_of`],
//! [`require_one_of`], [`plain_choices`]) remain for lists that are not an
//! enum (finding reasons, architectures).

use std::fmt::Display;
use std::str::FromStr;

use axum::extract::{Query, Request};
use axum::http::Uri;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cipherfleet_core::path::Path;
use cipherfleet_core::provider::Provider;
use cipherfleet_core::spec::{Direction, KeyMode};
use cipherfleet_core::wire;

use super::WebError;
use super::api::ApiError;
use crate::analysis::acceleration::Acceleration;
use crate::domain::labels::Labels;

/// The point a page shows without `size=`: the object-storage block size,
/// in the type of a [`cipherfleet_core::Point`]'s size.
pub const DEFAULT_SIZE_BYTES: u64 = 16 * 1024;

/// A `text_enum!` type a form offers as a `<select>` and reads back from the
/// query: every value in display order, and the text it travels as.
pub trait TextEnum: Copy + PartialEq + Display + FromStr + 'static {
    /// Every value, in the order the form lists them.
    const ALL: &'static [Self];
}

macro_rules! text_enums {
    ($($t:ty),+ $(,)?) => {
        $(impl TextEnum for $t {
            const ALL: &'static [Self] = <$t>::ALL;
        })+
    };
}

text_enums!(Direction, KeyMode, Path, Acceleration, Provider);

/// `raw` as a `T`, or a bad request naming the parameter `name` and every value of `T`.
pub fn require<T: TextEnum>(name: &str, raw: &str) -> Result<T, WebError> {
    raw.parse().map_err(|_| {
        let accepted: Vec<String> = T::ALL.iter().map(T::to_string).collect();
        WebError::BadRequest(format!("{name}={raw:?}: use one of {}", accepted.join(", ")))
    })
}

/// Every value of `T` as an option, `current` selected (`None`: none is).
pub fn enum_choices<T: TextEnum>(current: Option<T>) -> Vec<Choice> {
    T::ALL
        .iter()
        .map(|v| Choice {
            value: v.to_string(),
            text: v.to_string(),
            selected: Some(*v) == current,
        })
        .collect()
}

/// `Some(trimmed)` for a present, non-blank field: an emptied form field means "not given".
pub fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// `raw` if it is one of `allowed`, as the allowed (static) spelling. For
/// values that are not a [`TextEnum`] (finding reasons); an enum's value is `raw.parse()`.
pub fn one_of(raw: &str, allowed: &[&'static str]) -> Option<&'static str> {
    allowed.iter().copied().find(|a| *a == raw)
}

/// `raw` if it is one of `allowed`, else a bad request naming `name` and the
/// choices. For values that are not a [`TextEnum`]; an enum's is [`require`].
pub fn require_one_of(name: &str, raw: &str, allowed: &[&'static str]) -> Result<&'static str, WebError> {
    one_of(raw, allowed)
        .ok_or_else(|| WebError::BadRequest(format!("{name}={raw:?}: use one of {}", allowed.join(", "))))
}

/// A payload size in plain bytes, as the matrix links carry it. The bounds
/// keep the value in the column's type; anything else is a typo worth a 400.
pub fn byte_size(raw: &str) -> Option<u64> {
    raw.parse::<u64>().ok().filter(|n| (1..=1 << 40).contains(n))
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

/// Options whose text is their value (architectures, `online`, …); an
/// enum's options are [`enum_choices`].
pub fn plain_choices(values: &[&str], current: &str) -> Vec<Choice> {
    choices(values.iter().map(|v| (v.to_string(), v.to_string())), current)
}

/// Refuses a request whose path or query holds text the database cannot
/// store or compare (a NUL, `%00`), naming the parameter, as the page or the
/// `/api/` table answers a bad request: every page's filters (`label`,
/// `arch`, `cpu`, `kernel`, …) and path segments reach SQL as bind
/// parameters, and PostgreSQL refuses a whole statement for one NUL. One
/// layer for every page ([`super::router`]), so no page can forget it.
pub async fn refuse_unstorable(request: Request, next: Next) -> Response {
    let Some(refusal) = unstorable(request.uri()) else {
        return next.run(request).await;
    };
    let error = WebError::BadRequest(refusal);
    if request.uri().path().starts_with("/api/") {
        ApiError(error).into_response()
    } else {
        error.into_response()
    }
}

/// Why `uri` cannot be answered from the database, if it cannot.
fn unstorable(uri: &Uri) -> Option<String> {
    // A NUL reaches a path only percent-encoded.
    if uri.path().contains("%00") {
        return Some(format!(
            "the path {:?} holds %00 (a NUL character), which the database cannot store",
            uri.path()
        ));
    }
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(uri).ok()?.0;
    pairs.iter().find_map(|(name, value)| {
        let shown = name.replace('\0', "%00");
        wire::check_storable(&shown, value)
            .and_then(|()| wire::check_storable(&shown, name))
            .err()
            .map(|e| format!("{}={value:?}: {}", e.field, e.message))
    })
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
    fn a_nul_anywhere_in_a_request_is_refused_naming_where() {
        let refused = |uri: &str| unstorable(&uri.parse().unwrap());
        for fine in [
            "/hosts",
            "/hosts?label=rack%3Db7&arch=x86_64",
            "/hosts/bench%2001",
            "/?q=%0100",
        ] {
            assert_eq!(refused(fine), None, "{fine}");
        }
        for (uri, named) in [
            ("/hosts?arch=x86_64&label=%00", "label="),
            ("/api/v1/hosts?kernel=6.1%00", "kernel="),
            ("/compare?cpu=Xeon%00&size=16", "cpu="),
            ("/hosts?%00=1", "%00="),
            ("/hosts/bench%0001", "the path"),
        ] {
            let why = refused(uri).unwrap_or_else(|| panic!("{uri} was not refused"));
            assert!(why.starts_with(named) && why.contains("NUL"), "{uri}: {why}");
        }
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

    #[test]
    fn enum_values_are_read_and_offered_by_their_names() {
        assert_eq!(
            require::<Direction>("direction", "decrypt").unwrap(),
            Direction::Decrypt
        );
        let err = require::<KeyMode>("key_mode", "none").unwrap_err().to_string();
        assert!(
            err.contains("key_mode=\"none\": use one of static, per-op, hkdf-per-user"),
            "{err}"
        );
        let offered = enum_choices(Some(Path::Software));
        let texts: Vec<(&str, &str, bool)> = offered
            .iter()
            .map(|c| (c.value.as_str(), c.text.as_str(), c.selected))
            .collect();
        assert_eq!(
            texts,
            [("accelerated", "accelerated", false), ("software", "software", true)]
        );
        assert!(enum_choices::<Acceleration>(None).iter().all(|c| !c.selected));
    }
}
