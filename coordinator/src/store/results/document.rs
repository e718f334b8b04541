//! A measurement document stored once ([`Checked::stored_once`]): without the
//! host facts its snapshot holds and the figures its typed columns hold.
//!
//! The document's members are cut from the agent's text as slices, and only
//! the members compared are parsed: the host's facts and the figures.
//! Parsing the whole document into a tree and writing it out again cost the
//! session about 1.4 times as much for the agent's document
//! (docs/performance.md, "Ingest, 1,000 agents"), and the members kept are
//! stored as the agent wrote them.

use serde_json::value::RawValue;

use super::{Checked, FromSnapshot, figures};
use crate::store::raw::RawObject;
use crate::store::snapshots::CurrentFacts;

/// Separates the keys of a [`FromSnapshot`] in the insert's text column: a
/// character no fact name holds (`string_to_array` splits on it). A key
/// holding it was written escaped, so its host is stored whole ([`RawObject`]).
pub(super) const KEY_SEPARATOR: char = '\u{1f}';

impl Checked {
    /// The measurement stored once: without the figures its typed columns
    /// hold ([`figures`]), and its `host` without the keys whose value
    /// `snapshot` holds already, which are named instead. Worked out here
    /// rather than in the insert: there the host's comparison cost PostgreSQL
    /// about half again its CPU per result (docs/performance.md, "Ingest,
    /// 1,000 agents"). A document that is no JSON object stays whole.
    pub fn stored_once(mut self, snapshot: Option<&CurrentFacts>) -> Self {
        let Ok(mut doc) = serde_json::from_str::<RawObject>(&self.json) else {
            return self;
        };
        let host = snapshot.and_then(|snapshot| {
            let (keys, text) = without_facts(doc.get("host")?, snapshot)?;
            let snapshot_id = snapshot.snapshot_id;
            Some((FromSnapshot { snapshot_id, keys }, text))
        });
        let bits = figures::leave_out(&mut doc, &self.columns);
        if host.is_none() && bits == 0 {
            return self;
        }
        let json = write_object(doc.iter().map(|(k, v)| match &host {
            Some((_, text)) if *k == "host" => (*k, text.as_str()),
            _ => (*k, v.get()),
        }));
        self.json = json;
        self.figures_in_columns = bits;
        self.from_snapshot = host.map(|(from, _)| from);
        self
    }
}

/// `host` without the keys whose value `snapshot` holds: those keys and the
/// object left, or `None` if `host` is no object of plain keys.
fn without_facts(host: &RawValue, snapshot: &CurrentFacts) -> Option<(Vec<String>, String)> {
    let mut host: RawObject = serde_json::from_str(host.get()).ok()?;
    let keys: Vec<&str> = host
        .iter()
        .filter(|(k, v)| snapshot.holds(k, v))
        .map(|(k, _)| *k)
        .collect();
    for k in &keys {
        host.remove(k);
    }
    let text = write_object(host.iter().map(|(k, v)| (*k, v.get())));
    Some((keys.into_iter().map(str::to_owned).collect(), text))
}

/// An object of these members, given as key and value text: keys of a
/// [`RawObject`], which need no escaping.
pub(super) fn write_object<'a>(members: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::from("{");
    for (k, v) in members {
        if out.len() > 1 {
            out.push(',');
        }
        out.push('"');
        out.push_str(k);
        out.push_str("\":");
        out.push_str(v);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn host_of(sent: &Value, facts: &Value) -> Option<(Vec<String>, Value)> {
        let text = sent.to_string();
        let doc: RawObject = serde_json::from_str(&text).unwrap();
        let snapshot = CurrentFacts::new(1, facts.as_object().unwrap().clone());
        let (mut keys, host) = without_facts(doc.get("host")?, &snapshot)?;
        keys.sort();
        Some((keys, serde_json::from_str(&host).expect("the host left is JSON")))
    }

    #[test]
    fn a_measurement_keeps_only_the_host_facts_its_snapshot_lacks() {
        let facts = json!({"cpu": {"model": "EPYC"}, "os": "linux", "features": ["aes"]});
        let sent = json!({"figures": {"x": 1}, "host": {
            "cpu": {"model": "EPYC"}, "os": "linux", "features": ["aes", "avx"], "noise": {"load": 3.5}}});
        assert_eq!(
            host_of(&sent, &facts),
            Some((
                vec!["cpu".to_owned(), "os".to_owned()],
                json!({"features": ["aes", "avx"], "noise": {"load": 3.5}})
            )),
            "equal values only"
        );
        // No host object, or one with a key written escaped (such as one
        // holding the separator): stored whole.
        for sent in [
            json!({"figures": {}}),
            json!({"host": "x"}),
            json!({"host": {"os": "linux", "a\u{1f}b": "linux"}}),
        ] {
            assert_eq!(host_of(&sent, &facts), None, "{sent}");
        }
    }

    #[test]
    fn the_members_kept_are_written_as_the_agent_wrote_them() {
        let text = r#"{ "b" : 1.50 , "a":[1, 2],"host":{"os":"linux","k":"v"} }"#;
        let snapshot = CurrentFacts::new(3, json!({"os": "linux"}).as_object().unwrap().clone());
        let doc: RawObject = serde_json::from_str(text).unwrap();
        let (keys, host) = without_facts(doc["host"], &snapshot).unwrap();
        assert_eq!((keys, host.as_str()), (vec!["os".to_owned()], r#"{"k":"v"}"#));
        assert_eq!(
            write_object(doc.iter().map(|(k, v)| (*k, v.get()))),
            r#"{"a":[1, 2],"b":1.50,"host":{"os":"linux","k":"v"}}"#
        );
        assert_eq!(write_object(std::iter::empty()), "{}");
    }

    #[test]
    fn facts_probed_in_report_order_are_the_snapshots_text_and_only_the_noise_stays() {
        use crate::domain::facts::NormalisedFacts;
        use cipherfleet_core::facts::HostFacts;
        use cipherfleet_core::path::Flavour;
        let mut facts = HostFacts::unknown("x86_64", Flavour::Accelerated);
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        facts.features.checked = names(&["aes", "pclmulqdq", "ssse3", "avx", "avx2", "vaes"]);
        facts.features.advertised = names(&["aes", "pclmulqdq", "avx"]);
        facts.features.usable = names(&["pclmulqdq", "aes"]);
        facts.noise.load_average = Some([0.5, 0.4, 0.3]);
        // The snapshot as the agent's hello stores it: lists sorted, load average dropped.
        let Value::Object(normalised) = NormalisedFacts::new(&serde_json::to_value(&facts).unwrap()).facts else {
            panic!("an object")
        };
        let snapshot = CurrentFacts::new(1, normalised);
        let mut texts = snapshot.agent_texts();
        texts.sort_unstable();
        let mut expected: Vec<&str> = snapshot
            .facts
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "noise")
            .collect();
        expected.sort_unstable();
        assert_eq!(texts, expected, "every fact but the volatile noise is the agent's text");
        let sent = serde_json::to_string(&json!({ "host": facts })).unwrap();
        let doc: RawObject = serde_json::from_str(&sent).unwrap();
        let (keys, host) = without_facts(doc["host"], &snapshot).unwrap();
        assert!(keys.iter().any(|k| k == "features"), "{keys:?}");
        let host: serde_json::Map<String, Value> = serde_json::from_str(&host).unwrap();
        assert_eq!(host.keys().collect::<Vec<_>>(), ["noise"]);
    }

    #[test]
    fn facts_compare_by_the_agents_text_and_parsed_alike() {
        use cipherfleet_core::facts::HostFacts;
        use cipherfleet_core::path::Flavour;
        let mut facts = HostFacts::unknown("x86_64", Flavour::Accelerated);
        facts.hostname = Some("db-1".into());
        facts.memory_total_bytes = Some(1 << 34);
        let stored = serde_json::to_value(&facts).unwrap();
        let snapshot = CurrentFacts::new(1, stored.as_object().unwrap().clone());
        assert_eq!(
            snapshot.agent_texts().len(),
            snapshot.facts.len(),
            "every fact as the agent writes it: {:?}",
            snapshot.agent_texts()
        );
        // As the agent writes it; reformatted; one fact changed.
        let agent = serde_json::to_string(&serde_json::json!({ "host": facts })).unwrap();
        let agent = agent.replace(r#"{"host":"#, r#"{"host": "#);
        let spaced = serde_json::to_string_pretty(&serde_json::json!({ "host": stored })).unwrap();
        facts.hostname = Some("db-2".into());
        let changed = serde_json::to_string(&serde_json::json!({ "host": facts })).unwrap();
        for (text, left) in [(&agent, 0), (&spaced, 0), (&changed, 1)] {
            let doc: RawObject = serde_json::from_str(text).unwrap();
            let (keys, host) = without_facts(doc["host"], &snapshot).unwrap();
            assert_eq!(keys.len(), snapshot.facts.len() - left, "{text}");
            let host: serde_json::Map<String, Value> = serde_json::from_str(&host).unwrap();
            assert_eq!(host.len(), left, "{host:?}");
        }
    }
}
