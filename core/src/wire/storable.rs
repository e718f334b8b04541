//! What a database can hold of the text that crosses the wire. PostgreSQL
//! stores no NUL character (U+0000) in a `text` value, nor a `\u0000` escape
//! in a `jsonb` one, and refuses the whole row for it. Text that names or
//! selects something (a host's name, a label, a campaign's name, a filter) is
//! refused with its field named ([`check_storable`], [`check_storable_json`]);
//! text that only reports (a job's error, a worker's stderr) is made
//! storable instead, and says so ([`storable_text`]).

use std::borrow::Cow;

use super::{WireError, wire_error};

/// What [`storable_text`] appends to text it changed.
pub const NUL_REPLACED: &str = " [NUL characters replaced with U+FFFD: the database stores none]";

/// Refuses `value` if the database cannot store it (it holds a NUL), naming `field`.
pub fn check_storable(field: &str, value: &str) -> Result<(), WireError> {
    if value.contains('\0') {
        return Err(wire_error(
            field,
            "contains a NUL character (U+0000), which the database cannot store",
        ));
    }
    Ok(())
}

/// Refuses the JSON text `json` if a string or key in it holds a `\u0000`
/// escape, which `jsonb` cannot store, naming the value inside it after
/// `field` (`hello.facts.facts_json.cpu.model_name`). JSON text holds no raw
/// NUL (control characters must be escaped), so the escape is all there is to
/// look for; the text is parsed again only to name where it is.
pub fn check_storable_json(field: &str, json: &str) -> Result<(), WireError> {
    if !has_nul_escape(json) {
        return Ok(());
    }
    let at = serde_json::from_str::<serde_json::Value>(json)
        .ok()
        .and_then(|v| path_to_nul(&v))
        .unwrap_or_default();
    Err(wire_error(
        format!("{field}{at}"),
        "holds \\u0000 (a NUL character), which the database cannot store",
    ))
}

/// `text` with every NUL replaced with U+FFFD and [`NUL_REPLACED`] after it
/// (unchanged, and not copied, when it has none): free text that reports
/// rather than names, kept rather than refused.
pub fn storable_text(text: &str) -> Cow<'_, str> {
    if !text.contains('\0') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!("{}{NUL_REPLACED}", text.replace('\0', "\u{FFFD}")))
}

/// Whether the JSON text has a `\u0000` escape; an escaped backslash before
/// `u0000` does not count.
fn has_nul_escape(json: &str) -> bool {
    // Most text has no `\u0000` at all, which a substring search finds out
    // many times faster than the walk that tells it from `\\u0000`
    // (docs/performance.md, "Ingest, 1,000 agents").
    if !json.contains("\\u0000") {
        return false;
    }
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) == Some(&b'u') && bytes.get(i + 2..i + 6) == Some(b"0000".as_slice()) {
            return true;
        }
        // The backslash and the character it escapes.
        i += 2;
    }
    false
}

/// Where in `v` a string or key holds a NUL: `.cpu.model_name`, `[2]`.
fn path_to_nul(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => s.contains('\0').then(String::new),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| path_to_nul(item).map(|rest| format!("[{i}]{rest}"))),
        serde_json::Value::Object(fields) => fields.iter().find_map(|(key, value)| {
            let shown = key.replace('\0', "\\u0000");
            if key.contains('\0') {
                return Some(format!(".{shown}"));
            }
            path_to_nul(value).map(|rest| format!(".{shown}{rest}"))
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_a_nul_is_refused_naming_the_field() {
        check_storable("name", "nightly run").unwrap();
        check_storable("name", "").unwrap();
        let err = check_storable("name", "night\0ly").unwrap_err();
        assert_eq!(err.field, "name");
        assert!(err.message.contains("NUL"), "{err}");
    }

    #[test]
    fn json_with_a_nul_escape_is_refused_naming_the_value() {
        let cases = [
            (r#"{"cpu":{"model_name":"Xeon\u0000"}}"#, "facts.cpu.model_name"),
            (r#"{"features":["aes","\u0000"]}"#, "facts.features[1]"),
            (r#"{"a\u0000b":1}"#, "facts.a\\u0000b"),
            (r#"[{"k":"\u0000"}]"#, "facts[0].k"),
        ];
        for (json, field) in cases {
            let err = check_storable_json("facts", json).unwrap_err();
            assert_eq!(err.field, field, "{json}");
        }
        for fine in [
            r#"{"k":"\\u0000"}"#,
            r#"{"k":"\u0001 \u00e9 \n"}"#,
            r#"{"k":"ends with a backslash \\"}"#,
            "{}",
        ] {
            check_storable_json("facts", fine).unwrap();
        }
    }

    #[test]
    fn report_text_is_kept_with_its_nul_replaced_and_a_note() {
        assert!(matches!(storable_text("plain"), Cow::Borrowed("plain")));
        let kept = storable_text("worker said a\0b\0");
        assert_eq!(kept, format!("worker said a\u{FFFD}b\u{FFFD}{NUL_REPLACED}"));
        check_storable("error", &kept).unwrap();
    }
}
