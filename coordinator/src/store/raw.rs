//! JSON read as slices of its text: the members of a document are compared
//! or kept without building a tree of it.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON object's members as slices of its text, by key. A key written with
/// escapes cannot be borrowed, so such an object does not parse as one: it
/// is stored whole. A borrowed key is therefore written back as it came.
pub type RawObject<'a> = BTreeMap<&'a str, &'a RawValue>;

/// Whether `raw` is the JSON value `value`.
pub fn same(raw: &RawValue, value: &Value) -> bool {
    serde_json::from_str::<Value>(raw.get()).is_ok_and(|v| v == *value)
}
