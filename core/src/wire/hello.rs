//! Host facts and labels to the wire, and the checks on a `Hello`.

use std::collections::HashSet;

use cipherfleet_proto::v1;

use super::{
    MAX_CREDENTIAL_LEN, MAX_FACTS_JSON_LEN, MAX_FIELD_LEN, MAX_LABEL_KEY_LEN, MAX_LABEL_VALUE_LEN, MAX_LABELS,
    MAX_LIST_LEN, MAX_NAME_LEN, MAX_SPOOLED_JOB_IDS, MAX_TOKEN_LEN, WireError, check_storable_json, check_text,
    truncate, validate_job_id, wire_error,
};
use crate::credential;
use crate::facts::HostFacts;

impl From<&HostFacts> for v1::HostFacts {
    /// The typed fields are shortened to [`MAX_FIELD_LEN`] so that an odd DMI or
    /// CPU string never gets the host refused; `facts_json` keeps them whole.
    fn from(facts: &HostFacts) -> Self {
        let text = |s: &Option<String>| truncate(s.clone().unwrap_or_default(), MAX_FIELD_LEN);
        let list = |l: &[String]| {
            l.iter()
                .take(MAX_LIST_LEN)
                .map(|s| truncate(s.clone(), MAX_FIELD_LEN))
                .collect()
        };
        v1::HostFacts {
            // Plain structs of strings and numbers always serialise.
            facts_json: serde_json::to_string(facts).unwrap_or_else(|_| "{}".to_string()),
            hostname: text(&facts.hostname),
            arch: truncate(facts.arch.clone(), MAX_FIELD_LEN),
            cpu_vendor: text(&facts.cpu.vendor),
            cpu_model_name: text(&facts.cpu.model_name),
            cpu_family: facts.cpu.family,
            cpu_model: facts.cpu.model,
            cpu_stepping: facts.cpu.stepping,
            kernel_release: text(&facts.kernel_release),
            hypervisor: facts.virtualization.hypervisor.unwrap_or(false),
            features_advertised: list(&facts.features.advertised),
            features_usable: list(&facts.features.usable),
            build_flavour: facts.build.flavour.to_string(),
            logical_cores: facts.cpu.logical_cores.unwrap_or(0),
        }
    }
}

/// Parses a `key=value` label as given to `--label`, and validates it.
pub fn parse_label(s: &str) -> Result<v1::Label, WireError> {
    let Some((key, value)) = s.split_once('=') else {
        return Err(wire_error("label", format!("{s:?} is not key=value")));
    };
    let label = v1::Label {
        key: key.to_string(),
        value: value.to_string(),
    };
    validate_label("label", &label)?;
    Ok(label)
}

/// A label key is 1 to [`MAX_LABEL_KEY_LEN`] of `[A-Za-z0-9_.-]`; its value at
/// most [`MAX_LABEL_VALUE_LEN`] bytes without control characters (may be empty).
pub fn validate_label(field: &str, label: &v1::Label) -> Result<(), WireError> {
    let key_field = format!("{field}.key");
    check_text(&key_field, &label.key, MAX_LABEL_KEY_LEN, false)?;
    if !label
        .key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    {
        return Err(wire_error(
            key_field,
            format!("{:?} has characters outside [A-Za-z0-9_.-]", label.key),
        ));
    }
    check_text(&format!("{field}.value"), &label.value, MAX_LABEL_VALUE_LEN, true)
}

/// Checks host facts: `facts_json` a JSON object of at most
/// [`MAX_FACTS_JSON_LEN`] bytes the database can store, typed strings and
/// lists bounded.
pub fn validate_facts(field: &str, facts: &v1::HostFacts) -> Result<(), WireError> {
    let json_field = format!("{field}.facts_json");
    if facts.facts_json.len() > MAX_FACTS_JSON_LEN {
        return Err(wire_error(
            json_field,
            format!(
                "{} bytes is too long; at most {MAX_FACTS_JSON_LEN}",
                facts.facts_json.len()
            ),
        ));
    }
    // A newer agent may add fields, so only the shape is checked, not the layout.
    match serde_json::from_str::<serde_json::Value>(&facts.facts_json) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => return Err(wire_error(json_field, "must be a JSON object")),
        Err(e) => return Err(wire_error(json_field, format!("not JSON: {e}"))),
    }
    // Stored as `jsonb`, which holds no `\u0000`.
    check_storable_json(&json_field, &facts.facts_json)?;
    for (name, value, allow_empty) in [
        ("hostname", &facts.hostname, true),
        ("arch", &facts.arch, false),
        ("cpu_vendor", &facts.cpu_vendor, true),
        ("cpu_model_name", &facts.cpu_model_name, true),
        ("kernel_release", &facts.kernel_release, true),
        ("build_flavour", &facts.build_flavour, false),
    ] {
        check_text(&format!("{field}.{name}"), value, MAX_FIELD_LEN, allow_empty)?;
    }
    for (name, list) in [
        ("features_advertised", &facts.features_advertised),
        ("features_usable", &facts.features_usable),
    ] {
        let list_field = format!("{field}.{name}");
        if list.len() > MAX_LIST_LEN {
            return Err(wire_error(
                list_field,
                format!("{} entries; at most {MAX_LIST_LEN}", list.len()),
            ));
        }
        for feature in list {
            check_text(&list_field, feature, MAX_FIELD_LEN, false)?;
        }
    }
    Ok(())
}

/// Checks everything in a `Hello` except `protocol_version` (a version the
/// coordinator does not speak is `failed_precondition`, not a malformed message)
/// and whether the token or credential is right. The token may be empty only
/// when a credential is given. Error messages never include either secret.
pub fn validate_hello(h: &v1::Hello) -> Result<(), WireError> {
    if h.enrollment_token.is_empty() && h.credential.is_empty() {
        return Err(wire_error(
            "hello.enrollment_token",
            "must not be empty without a host credential",
        ));
    }
    if h.credential.len() > MAX_CREDENTIAL_LEN || h.credential.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(wire_error(
            "hello.credential",
            format!("must be at most {MAX_CREDENTIAL_LEN} printable ASCII bytes"),
        ));
    }
    if !h.proposed_credential.is_empty() && !credential::is_well_formed(&h.proposed_credential) {
        return Err(wire_error(
            "hello.proposed_credential",
            format!(
                "must be {} lowercase hex digits ({} random bytes), or empty",
                credential::LEN,
                credential::BYTES
            ),
        ));
    }
    if h.enrollment_token.len() > MAX_TOKEN_LEN {
        return Err(wire_error(
            "hello.enrollment_token",
            format!("too long; at most {MAX_TOKEN_LEN} bytes"),
        ));
    }
    check_text("hello.name", &h.name, MAX_NAME_LEN, false)?;
    let facts = h.facts.as_ref().ok_or_else(|| wire_error("hello.facts", "missing"))?;
    validate_facts("hello.facts", facts)?;
    let caps = h
        .capabilities
        .as_ref()
        .ok_or_else(|| wire_error("hello.capabilities", "missing"))?;
    let mut paths = HashSet::new();
    for path in &caps.paths {
        if !["accelerated", "software"].contains(&path.as_str()) {
            return Err(wire_error(
                "hello.capabilities.paths",
                format!(
                    "unknown path {:?}; accepted: accelerated, software",
                    truncate(path.clone(), 64)
                ),
            ));
        }
        if !paths.insert(path) {
            return Err(wire_error("hello.capabilities.paths", format!("{path} listed twice")));
        }
    }
    if caps.max_threads == 0 {
        return Err(wire_error("hello.capabilities.max_threads", "must be at least 1"));
    }
    check_text(
        "hello.capabilities.agent_version",
        &caps.agent_version,
        MAX_FIELD_LEN,
        false,
    )?;
    if h.labels.len() > MAX_LABELS {
        return Err(wire_error(
            "hello.labels",
            format!("{} labels; at most {MAX_LABELS}", h.labels.len()),
        ));
    }
    let mut keys = HashSet::new();
    for (i, label) in h.labels.iter().enumerate() {
        let field = format!("hello.labels[{i}]");
        validate_label(&field, label)?;
        if !keys.insert(&label.key) {
            return Err(wire_error(
                format!("{field}.key"),
                format!("{:?} given twice", label.key),
            ));
        }
    }
    if !h.running_job_id.is_empty() {
        validate_job_id("hello.running_job_id", &h.running_job_id)?;
    }
    if !h.running_attempt_id.is_empty() {
        validate_job_id("hello.running_attempt_id", &h.running_attempt_id)?;
    }
    if h.spooled_job_ids.len() > MAX_SPOOLED_JOB_IDS {
        return Err(wire_error(
            "hello.spooled_job_ids",
            format!("{} ids; at most {MAX_SPOOLED_JOB_IDS}", h.spooled_job_ids.len()),
        ));
    }
    for (i, id) in h.spooled_job_ids.iter().enumerate() {
        validate_job_id(&format!("hello.spooled_job_ids[{i}]"), id)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::path::Flavour;

    fn hello() -> v1::Hello {
        v1::Hello {
            protocol_version: cipherfleet_proto::PROTOCOL_VERSION,
            enrollment_token: "s3cret-token".into(),
            facts: Some(v1::HostFacts::from(&facts())),
            capabilities: Some(v1::Capabilities {
                paths: vec!["accelerated".into()],
                max_threads: 2,
                agent_version: "0.1.0".into(),
            }),
            labels: vec![v1::Label {
                key: "rack".into(),
                value: "b7".into(),
            }],
            name: "host-a".into(),
            running_job_id: String::new(),
            spooled_job_ids: vec!["job-1".into()],
            credential: String::new(),
            running_attempt_id: String::new(),
            proposed_credential: String::new(),
        }
    }

    /// Facts with a long CPU model (shortened in the typed field, whole in the JSON).
    pub(crate) fn facts() -> HostFacts {
        let mut facts = HostFacts::unknown("aarch64", Flavour::Accelerated);
        facts.cpu.model_name = Some("m".repeat(MAX_FIELD_LEN + 10));
        facts.features.advertised = vec!["aes".into(), "pmull".into()];
        facts.features.usable = vec!["aes".into()];
        facts
    }

    #[test]
    fn facts_convert_and_validate() {
        let facts = facts();
        let wire = v1::HostFacts::from(&facts);
        assert_eq!(wire.arch, "aarch64");
        assert_eq!(wire.build_flavour, "accelerated");
        assert_eq!(wire.cpu_model_name.len(), MAX_FIELD_LEN);
        assert_eq!(wire.features_usable, ["aes"]);
        let back: HostFacts = serde_json::from_str(&wire.facts_json).unwrap();
        assert_eq!(back, facts);
        validate_facts("facts", &wire).unwrap();
        validate_hello(&hello()).unwrap();
        // A host with its credential needs no enrollment token.
        let with_credential = v1::Hello {
            enrollment_token: String::new(),
            credential: "ab".repeat(32),
            ..hello()
        };
        validate_hello(&with_credential).unwrap();
        let proposing = v1::Hello {
            proposed_credential: "0f".repeat(32),
            ..hello()
        };
        validate_hello(&proposing).unwrap();
    }

    #[test]
    fn labels_parse_from_key_equals_value() {
        let l = parse_label("rack=b7=x").unwrap();
        assert_eq!((l.key.as_str(), l.value.as_str()), ("rack", "b7=x"));
        assert_eq!(parse_label("class=").unwrap().value, "");
        for bad in ["rack", "=b7", "ra ck=b7", "rack=b\n7"] {
            assert!(parse_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_hellos_are_rejected_naming_the_field() {
        type Edit = fn(&mut v1::Hello);
        let cases: Vec<(Edit, &str)> = vec![
            (|h| h.enrollment_token.clear(), "hello.enrollment_token"),
            (|h| h.credential = "s3cret\n".into(), "hello.credential"),
            (
                |h| h.credential = "c".repeat(MAX_CREDENTIAL_LEN + 1),
                "hello.credential",
            ),
            (|h| h.proposed_credential = "ab".repeat(8), "hello.proposed_credential"),
            (|h| h.proposed_credential = "AB".repeat(32), "hello.proposed_credential"),
            (|h| h.running_attempt_id = "a\tb".into(), "hello.running_attempt_id"),
            (
                |h| h.enrollment_token = "t".repeat(MAX_TOKEN_LEN + 1),
                "hello.enrollment_token",
            ),
            (|h| h.name.clear(), "hello.name"),
            (|h| h.name = "n".repeat(MAX_NAME_LEN + 1), "hello.name"),
            (|h| h.name = "a\u{1b}[31m".into(), "hello.name"),
            (|h| h.facts = None, "hello.facts"),
            (
                |h| h.facts.as_mut().unwrap().facts_json = "[]".into(),
                "hello.facts.facts_json",
            ),
            (
                |h| h.facts.as_mut().unwrap().facts_json = " ".repeat(MAX_FACTS_JSON_LEN + 1),
                "hello.facts.facts_json",
            ),
            (
                |h| h.facts.as_mut().unwrap().facts_json = r#"{"kernel_release":"6.1\u0000"}"#.into(),
                "hello.facts.facts_json.kernel_release",
            ),
            (
                |h| h.facts.as_mut().unwrap().hostname = "a\0b".into(),
                "hello.facts.hostname",
            ),
            (|h| h.labels[0].value = "b\0seven".into(), "hello.labels[0].value"),
            (|h| h.facts.as_mut().unwrap().arch.clear(), "hello.facts.arch"),
            (
                |h| h.facts.as_mut().unwrap().cpu_model_name = "m".repeat(MAX_FIELD_LEN + 1),
                "hello.facts.cpu_model_name",
            ),
            (
                |h| h.facts.as_mut().unwrap().features_usable = vec!["aes".into(); MAX_LIST_LEN + 1],
                "hello.facts.features_usable",
            ),
            (|h| h.capabilities = None, "hello.capabilities"),
            (
                |h| h.capabilities.as_mut().unwrap().paths.push("quantum".into()),
                "hello.capabilities.paths",
            ),
            (
                |h| h.capabilities.as_mut().unwrap().paths.push("accelerated".into()),
                "hello.capabilities.paths",
            ),
            (
                |h| h.capabilities.as_mut().unwrap().max_threads = 0,
                "hello.capabilities.max_threads",
            ),
            (
                |h| h.capabilities.as_mut().unwrap().agent_version.clear(),
                "hello.capabilities.agent_version",
            ),
            (
                |h| {
                    h.labels = (0..=MAX_LABELS)
                        .map(|i| v1::Label {
                            key: format!("k{i}"),
                            value: String::new(),
                        })
                        .collect()
                },
                "hello.labels",
            ),
            (|h| h.labels[0].key = "rack/1".into(), "hello.labels[0].key"),
            (
                |h| h.labels[0].key = "k".repeat(MAX_LABEL_KEY_LEN + 1),
                "hello.labels[0].key",
            ),
            (
                |h| h.labels[0].value = "v".repeat(MAX_LABEL_VALUE_LEN + 1),
                "hello.labels[0].value",
            ),
            (|h| h.labels.push(h.labels[0].clone()), "hello.labels[1].key"),
            (|h| h.running_job_id = "a\tb".into(), "hello.running_job_id"),
            (|h| h.spooled_job_ids.push(String::new()), "hello.spooled_job_ids[1]"),
            (
                |h| h.spooled_job_ids = vec!["j".into(); MAX_SPOOLED_JOB_IDS + 1],
                "hello.spooled_job_ids",
            ),
        ];
        for (edit, field) in cases {
            let mut h = hello();
            edit(&mut h);
            let err = validate_hello(&h).unwrap_err();
            assert_eq!(err.field, field, "{err}");
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
    }
}
