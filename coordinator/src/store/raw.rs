//! JSON read as slices of its text: the members of a document are compared
//! or kept without building a tree of it.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

/// A JSON object's members as slices of its text, by key. A key written with
/// escapes cannot be borrowed, so such an object does not parse as one: it
/// is stored whole. A borrowed key is therefore written back as it came.
pub type RawObject<'a> = BTreeMap<&'a str, &'a RawValue>;

/// Whether `raw` is the JSON value `value`: whether parsing it would give a
/// `Value` equal to `value`. Compared as the text is read, without building
/// that tree, and given up at the first difference: storing a measurement
/// once compares its host facts and figures this way, in less than half the
/// time of parsing each into a tree (docs/performance.md, "Ingest, 1,000
/// agents").
pub fn same(raw: &RawValue, value: &Value) -> bool {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    Equal(value).deserialize(&mut de).is_ok() && de.end().is_ok()
}

/// Reads one JSON value, failing at its first difference from the `Value`:
/// each `visit_*` is the tree serde_json's own `Value` visitor would build,
/// compared instead of built.
struct Equal<'v>(&'v Value);

/// The error that ends a comparison at a difference.
fn differs<E: de::Error>() -> E {
    E::custom("differs")
}

fn check<E: de::Error>(equal: bool) -> Result<(), E> {
    if equal { Ok(()) } else { Err(differs()) }
}

impl<'de> DeserializeSeed<'de> for Equal<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Equal<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        check(*self.0 == Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<(), E> {
        check(*self.0 == Value::Number(n.into()))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<(), E> {
        check(*self.0 == Value::Number(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<(), E> {
        check(*self.0 == Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        check(self.0.as_str() == Some(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        check(self.0.is_null())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Value::Array(items) = self.0 else {
            return Err(differs());
        };
        for item in items {
            seq.next_element_seed(Equal(item))?.ok_or_else(differs)?;
        }
        check(seq.next_element::<IgnoredAny>()?.is_none())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Value::Object(members) = self.0 else {
            return Err(differs());
        };
        // The members met, by address: a key written twice parses to one
        // member (the last), so counting keys alone could miss one.
        let mut met: Vec<*const Value> = Vec::with_capacity(members.len());
        while let Some(member) = map.next_key_seed(Member(members))? {
            let member = member.ok_or_else(differs)?;
            if met.contains(&std::ptr::from_ref(member)) {
                return Err(differs());
            }
            met.push(member);
            map.next_value_seed(Equal(member))?;
        }
        check(met.len() == members.len())
    }
}

/// Reads an object's key: the `Value` of that key among `members`, if any.
struct Member<'v>(&'v Map<String, Value>);

impl<'de, 'v> DeserializeSeed<'de> for Member<'v> {
    type Value = Option<&'v Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, 'v> Visitor<'de> for Member<'v> {
    type Value = Option<&'v Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object's key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.get(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `same`, and what parsing the text into a `Value` says.
    fn both(text: &str, value: &Value) -> (bool, bool) {
        let parsed = serde_json::from_str::<Value>(text).is_ok_and(|v| v == *value);
        let raw: &RawValue = match serde_json::from_str(text) {
            Ok(raw) => raw,
            Err(_) => return (false, parsed),
        };
        (same(raw, value), parsed)
    }

    #[test]
    fn a_text_is_the_value_exactly_when_it_parses_to_it() {
        let value = serde_json::json!({
            "s": "x\"y", "e": "é", "i": 3, "n": -3, "f": 1.5, "z": 0.0, "t": true, "null": null,
            "list": [1, [2, {}], "a"], "o": {"p": {"q": []}}, "big": u64::MAX,
        });
        let text = value.to_string();
        let cases = [
            (text.as_str(), true),
            (
                r#"{"s":"x\"y","e":"\u00e9","i":3,"n":-3,"f":1.5,"z":0.0,"t":true,"null":null,
                "list":[1,[2,{}],"a"],"o":{"p":{"q":[]}},"big":18446744073709551615}"#,
                true,
            ),
            // Reordered members and spaces are the same value.
            (
                r#" { "big":18446744073709551615, "o":{"p":{"q":[ ]}}, "list":[1,[2,{}],"a"],"null":null,
                "t":true,"z":0.0,"f":1.5,"n":-3,"i":3,"e":"é","s":"x\"y" } "#,
                true,
            ),
            // An integer is no float of the same size, nor the other way round.
            (&text.replace(r#""i":3"#, r#""i":3.0"#), false),
            (&text.replace(r#""z":0.0"#, r#""z":0"#), false),
            (&text.replace(r#""n":-3"#, r#""n":-3.0"#), false),
            (&text.replace(r#""f":1.5"#, r#""f":15e-1"#), true),
            // A member missing, one more, one written twice.
            (&text.replace(r#""t":true,"#, ""), false),
            (&text.replace(r#""t":true,"#, r#""t":true,"u":1,"#), false),
            (&text.replace(r#""t":true,"#, r#""i":3,"#), false),
            // An item missing, one more, a value changed deep down.
            (&text.replace(r#"[2,{}]"#, r#"[2]"#), false),
            (&text.replace(r#"[2,{}]"#, r#"[2,{},3]"#), false),
            (&text.replace(r#""q":[]"#, r#""q":[null]"#), false),
            (&text.replace(r#""q":[]"#, r#""q":{}"#), false),
            (&text.replace(r#""s":"x\"y""#, r#""s":"x""#), false),
            (&text.replace("true", "false"), false),
            (&text.replace("null", "0"), false),
            // Trailing text, or no JSON at all.
            (&format!("{text} 1"), false),
            ("{", false),
        ];
        for (text, expected) in cases {
            assert_eq!(both(text, &value), (expected, expected), "{text}");
        }
        // A member written twice parses to its last value; compared, it
        // differs: the member is then kept as sent, which loses nothing.
        for twice in [r#""t":true,"t":true,"#, r#""t":false,"t":true,"#] {
            let text = text.replace(r#""t":true,"#, twice);
            assert_eq!(both(&text, &value), (false, true), "{text}");
        }
        for (text, value) in [
            ("null", Value::Null),
            ("[]", serde_json::json!([])),
            ("-0", serde_json::json!(-0.0)),
            ("1e2", serde_json::json!(100.0)),
            ("\"\"", serde_json::json!("")),
            ("[1,2]", serde_json::json!([1, 2, 3])),
            ("{}", serde_json::json!({"a": 1})),
            ("1", serde_json::json!("1")),
        ] {
            let (by_text, parsed) = both(text, &value);
            assert_eq!(by_text, parsed, "{text} against {value}");
        }
    }
}
