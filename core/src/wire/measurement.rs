//! `Measurement` on the wire, and the checks a coordinator runs on one before
//! storing it. A `v1::Measurement` is the measurement's JSON object alone
//! (`measurement_json`): the coordinator parses it once into [`Measurement`]
//! and checks the parsed value, so there is no second copy to agree with.
//! Every error names the offending field inside the object:
//! `measurement.measurement_json.throughput_mb_s`.

use cipherfleet_proto::v1;

use super::{MAX_FIELD_LEN, MAX_MEASUREMENT_JSON_LEN, MAX_SAMPLES, WireError, check_text, wire_error};
use crate::measurement::{ACCEPTED_SCHEMAS, Figures, Measurement, SCHEMA, Status};
use crate::path::Backends;
use crate::point::Point;
use crate::spec::JobSpec;

/// The protocol field every measurement error is about; a field inside the
/// object is appended to it as a path.
const FIELD: &str = "measurement.measurement_json";

/// [`FIELD`]`.name`, a field of the measurement's object, as a `&'static str`
/// (no allocation on the path of a valid measurement).
macro_rules! field {
    ($name:literal) => {
        concat!("measurement.measurement_json.", $name)
    };
}

/// [`FIELD`]`.path`, for a path known only at run time.
fn field(path: &str) -> String {
    format!("{FIELD}.{path}")
}

impl TryFrom<&Measurement> for v1::Measurement {
    type Error = WireError;

    /// Converts a successful measurement; a failed one travels as `JobFailed` instead.
    fn try_from(m: &Measurement) -> Result<Self, WireError> {
        successful(m)?;
        let measurement_json =
            serde_json::to_string(m).map_err(|e| wire_error(FIELD, format!("cannot serialise: {e}")))?;
        check_length(&measurement_json)?;
        Ok(v1::Measurement { measurement_json })
    }
}

/// Checks a measurement an agent sent: `measurement_json` a successful
/// measurement of an [accepted schema](ACCEPTED_SCHEMAS), every figure finite,
/// non-negative and within what a machine can do ([`super::plausible`]), one
/// throughput per sample, backend names bounded.
pub fn validate_measurement(m: &v1::Measurement) -> Result<(), WireError> {
    checked_measurement(m).map(drop)
}

/// [`validate_measurement`], returning the measurement `measurement_json`
/// holds: a receiver that needs it parses the text once, not again.
pub fn checked_measurement(m: &v1::Measurement) -> Result<Measurement, WireError> {
    let parsed = parse_json(&m.measurement_json)?;
    check(&parsed, &m.measurement_json)?;
    Ok(parsed)
}

/// Checks that the measurement is of `spec`: algorithm, direction, size,
/// threads, concurrency, key mode, nonce, requested path and seconds all match.
pub fn check_measurement_matches(spec: &JobSpec, m: &v1::Measurement) -> Result<(), WireError> {
    check_spec_matches(spec, &parse_json(&m.measurement_json)?.spec())
}

/// [`check_measurement_matches`] for a measurement parsed already: `got` is
/// the job it says it measured ([`Measurement::spec`]): the job's point
/// exactly, and its seconds.
pub fn check_spec_matches(spec: &JobSpec, got: &JobSpec) -> Result<(), WireError> {
    let mismatch = |what: &str, got: String, want: String| {
        Err(wire_error(
            field(what),
            format!("{got} does not match the job's {want}"),
        ))
    };
    if got.point != spec.point {
        let (what, got, want) = point_difference(&got.point, &spec.point);
        return mismatch(&what, got, want);
    }
    if !close(got.seconds, spec.seconds) {
        return mismatch("seconds_requested", got.seconds.to_string(), spec.seconds.to_string());
    }
    Ok(())
}

/// Where two different points differ, for the error: the first field, named
/// as the measurement's JSON names it, and both values. Read off the points'
/// JSON, so that the fields of a point are listed in `Point` alone.
fn point_difference(got: &Point, want: &Point) -> (String, String, String) {
    let fields = |p: &Point| match serde_json::to_value(p) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    let text = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "nothing".into(),
    };
    let (got_fields, want_fields) = (fields(got), fields(want));
    got_fields
        .iter()
        .find(|(key, value)| want_fields.get(*key) != Some(*value))
        .map(|(key, value)| {
            // The measurement names the path asked for `path_requested` (beside `path_used`).
            let what = if key == "path" { "path_requested" } else { key.as_str() };
            (what.to_string(), text(Some(value)), text(want_fields.get(key)))
        })
        .unwrap_or_else(|| ("point".into(), format!("{got:?}"), format!("{want:?}")))
}

/// What a successful engine measurement has: its figures, the path that ran,
/// its backends and its self-tests (all absent on failure).
fn successful(m: &Measurement) -> Result<(&Figures, &Backends), WireError> {
    if m.status != Status::Ok {
        return Err(wire_error(
            field!("status"),
            format!("'{}': only a successful measurement goes in a JobResult", m.status),
        ));
    }
    // The engine's shape, or the host's own `openssl speed` for the openssl
    // provider (which has no other); `openssl-compat` is a local comparison.
    let stored = match m.provider {
        crate::provider::Provider::Openssl => m.harness == crate::measurement::Harness::OpensslSpeed,
        _ => m.harness.is_engine(),
    };
    if !stored {
        return Err(wire_error(
            field!("harness"),
            format!(
                "'{}' results on the {} provider are for comparing with `openssl speed` locally; the fleet \
                 stores the engine's shape, and `openssl speed`'s for the openssl provider",
                m.harness, m.provider
            ),
        ));
    }
    let missing = |what: &'static str| wire_error(what, "missing from a successful measurement");
    m.path_used.ok_or_else(|| missing(field!("path_used")))?;
    m.selftest_passed.ok_or_else(|| missing(field!("selftest_passed")))?;
    let backends = m.backends.as_ref().ok_or_else(|| missing(field!("backends")))?;
    let figures = m
        .figures
        .as_ref()
        .ok_or_else(|| wire_error(FIELD, "a successful measurement has its figures"))?;
    Ok((figures, backends))
}

/// The checks on a parsed measurement; `json` is its text, read again only
/// to say why its figures did not parse.
fn check(m: &Measurement, json: &str) -> Result<(), WireError> {
    if m.status == Status::Ok && m.figures.is_none() {
        // Figures are flattened into the object, and a flattened `Option`
        // that fails to parse reads as `None`: parse them alone for the reason.
        return Err(explain::<Figures>(json));
    }
    let (f, backends) = successful(m)?;
    check_figures(f)?;
    super::plausible::check(m, f)?;
    for (name, backend) in [
        (field!("backends.aes"), Some(&backends.aes)),
        (field!("backends.ghash"), Some(&backends.ghash)),
        (field!("backends.chacha20"), Some(&backends.chacha20)),
        (field!("backends.poly1305"), backends.poly1305.as_ref()),
        (field!("backends.sha256"), Some(&backends.sha256)),
    ] {
        if let Some(backend) = backend {
            check_text(name, backend, MAX_FIELD_LEN, false)?;
        }
    }
    check_parts(m, f)
}

/// Every figure finite and non-negative, at least one sample, one throughput per sample.
fn check_figures(f: &Figures) -> Result<(), WireError> {
    let memory = f.memory.as_ref();
    let figures = [
        (field!("throughput_mb_s"), Some(f.throughput_mb_s)),
        (field!("ops_per_s"), Some(f.ops_per_s)),
        (field!("cpu_utilization"), Some(f.cpu_utilization)),
        (field!("key_setup_ns"), Some(f.key_setup_ns)),
        (field!("elapsed_seconds"), Some(f.elapsed_seconds)),
        (field!("all_running_seconds"), Some(f.all_running_seconds)),
        (field!("sample_seconds"), Some(f.sample_seconds)),
        (field!("warmup_seconds"), Some(f.warmup_seconds)),
        (field!("cpu_user_seconds"), Some(f.cpu_user_seconds)),
        (field!("cpu_sys_seconds"), Some(f.cpu_sys_seconds)),
        (field!("cv"), f.cv),
        (
            field!("memory.heap_bytes_per_op"),
            memory.and_then(|m| m.heap_bytes_per_op),
        ),
        (field!("memory.allocs_per_op"), memory.and_then(|m| m.allocs_per_op)),
    ];
    for (name, value) in figures {
        if let Some(value) = value.filter(|v| !is_figure(*v)) {
            return Err(not_a_figure(name.into(), value));
        }
    }
    if f.samples == 0 {
        return Err(wire_error(field!("samples"), "must be at least 1"));
    }
    let values = &f.sample_throughputs_mb_s;
    if values.len() > MAX_SAMPLES || values.len() != f.samples as usize {
        return Err(wire_error(
            field!("sample_throughputs_mb_s"),
            format!(
                "{} values for {} samples; one per sample, at most {MAX_SAMPLES}",
                values.len(),
                f.samples
            ),
        ));
    }
    if let Some((i, value)) = values.iter().enumerate().find(|(_, v)| !is_figure(**v)) {
        return Err(not_a_figure(field(&format!("sample_throughputs_mb_s[{i}]")), *value));
    }
    Ok(())
}

/// No part larger than its whole, and an arrival rate only where objects arrive.
fn check_parts(m: &Measurement, f: &Figures) -> Result<(), WireError> {
    let parts = [
        (field!("all_running_bytes"), f.all_running_bytes, f.bytes_processed),
        (field!("objects"), f.objects.unwrap_or(0), f.operations),
    ];
    for (name, part, whole) in parts {
        if part > whole {
            return Err(wire_error(
                name,
                format!("{part} is more than the {whole} of the whole run"),
            ));
        }
    }
    if let Some(rate) = f.arrival_rate_per_s
        && (m.concurrency.is_none() || !rate.is_finite() || rate <= 0.0)
    {
        return Err(wire_error(
            field!("arrival_rate_per_s"),
            format!("{rate} is not a positive rate of an object-storage point"),
        ));
    }
    Ok(())
}

/// What a figure must be: a finite, non-negative number.
fn is_figure(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

fn not_a_figure(field: String, value: f64) -> WireError {
    wire_error(field, format!("{value} is not a finite, non-negative number"))
}

fn check_length(json: &str) -> Result<(), WireError> {
    if json.len() > MAX_MEASUREMENT_JSON_LEN {
        return Err(wire_error(
            FIELD,
            format!("{} bytes is too long; at most {MAX_MEASUREMENT_JSON_LEN}", json.len()),
        ));
    }
    Ok(())
}

fn parse_json(json: &str) -> Result<Measurement, WireError> {
    if json.is_empty() {
        return Err(wire_error(FIELD, "must not be empty"));
    }
    check_length(json)?;
    let parsed: Measurement = serde_json::from_str(json).map_err(|_| explain::<Measurement>(json))?;
    // Stored whole as `jsonb`, which holds no `\u0000`, whatever fields it has.
    super::check_storable_json(FIELD, json)?;
    if !ACCEPTED_SCHEMAS.contains(&parsed.schema.as_str()) {
        return Err(wire_error(
            field!("schema"),
            format!(
                "{:?} is not one of {}",
                super::truncate(parsed.schema, 64),
                ACCEPTED_SCHEMAS.join(", ")
            ),
        ));
    }
    Ok(parsed)
}

/// Why `json` is not a `T`, naming the field where parsing stopped. Parsing
/// with the path tracked costs more, so it is done only once parsing failed.
fn explain<T: serde::de::DeserializeOwned>(json: &str) -> WireError {
    use serde_path_to_error::Segment;
    let mut de = serde_json::Deserializer::from_str(json);
    let e = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(e) => e,
        // What follows the object is all that is wrong.
        Ok(_) => {
            let why = de.end().err().map(|e| format!(": {e}")).unwrap_or_default();
            return wire_error(FIELD, format!("not a {SCHEMA} object{why}"));
        }
    };
    // The path as far as it is known (a key that did not parse is not).
    let mut at = FIELD.to_string();
    for segment in e.path().iter() {
        match segment {
            Segment::Seq { index } => at.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                at.push('.');
                at.push_str(key);
            }
            Segment::Unknown => break,
        }
    }
    wire_error(at, format!("not a {SCHEMA} object: {}", e.into_inner()))
}

/// Floats compare with a relative tolerance: JSON text need not round-trip to the last bit.
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::measurement::{Harness, Latency, LatencyMethod, Memory, SampleKind, WorkerReport};
    use crate::path::{Flavour, Path, PathUsed};
    use crate::spec::{Direction, KeyMode, Nonce};

    pub(crate) fn spec() -> JobSpec {
        Point {
            algorithm: "aes-128-gcm".parse().unwrap(),
            direction: Direction::Encrypt,
            size_bytes: 1024,
            threads: 1,
            concurrency: None,
            key_mode: KeyMode::Static,
            path: Path::Accelerated,
            nonce: Nonce::Counter,
            provider: crate::provider::Provider::RustCrypto,
        }
        .spec(0.05)
    }

    /// A plausible successful measurement of [`spec`], with figures that do not round-trip trivially.
    pub(crate) fn measurement() -> Measurement {
        let report = WorkerReport {
            path_used: PathUsed::Accelerated,
            backends: Backends {
                aes: "aes-ni".into(),
                ghash: "clmul".into(),
                chacha20: "avx2".into(),
                poly1305: Some("avx2".into()),
                sha256: "soft".into(),
            },
            build_flavour: Flavour::Accelerated,
            selftest_passed: 4,
            harness: Default::default(),
            figures: Figures {
                throughput_mb_s: 1_234.567_890_123,
                ops_per_s: 1_205_632.7,
                latency_ns: Latency {
                    p50: 810,
                    p90: 830,
                    p99: 1_100,
                    p999: 2_300,
                    max: 15_000,
                },
                latency_method: LatencyMethod::BatchMean,
                batch_ops: 12,
                latency_samples: 5_000,
                throughput_batch_ops: 1_200,
                cv: Some(0.013_7),
                samples: 3,
                sample_kind: SampleKind::Window,
                low_samples: true,
                sample_seconds: 0.005,
                warmup_seconds: 0.05,
                elapsed_seconds: 0.051_2,
                operations: 61_000,
                bytes_processed: 61_000 * 1024,
                all_running_bytes: 60_000 * 1024,
                all_running_seconds: 0.05,
                objects: None,
                arrival_rate_per_s: None,
                cpu_user_seconds: 0.05,
                cpu_sys_seconds: 0.0,
                cpu_utilization: 0.98,
                key_setup_ns: 95.25,
                sample_throughputs_mb_s: vec![1_200.1, 1_234.567_890_123, 1_250.3],
                memory: Some(Memory {
                    cipher_state_bytes: 496,
                    peak_rss_bytes: 6 << 20,
                    heap_bytes_per_op: Some(0.0),
                    allocs_per_op: Some(0.0),
                }),
            },
        };
        Measurement::ok(&spec(), report, Some(crate::wire::hello::tests::facts()))
    }

    /// `m` as it travels: its object alone.
    fn wire_of(m: &Measurement) -> v1::Measurement {
        v1::Measurement {
            measurement_json: serde_json::to_string(m).unwrap(),
        }
    }

    #[test]
    fn a_measurement_converts_and_validates() {
        let m = measurement();
        let wire = v1::Measurement::try_from(&m).unwrap();
        let back = checked_measurement(&wire).unwrap();
        assert_eq!(back, m, "the JSON carries everything, host facts included");
        let f = back.figures.as_ref().unwrap();
        assert_eq!(f.samples, 3);
        assert_eq!(f.latency_method, LatencyMethod::BatchMean);
        assert_eq!(back.backends.as_ref().unwrap().poly1305.as_deref(), Some("avx2"));
        assert_eq!(back.path_used, Some(PathUsed::Accelerated));
        validate_measurement(&wire).unwrap();
        check_measurement_matches(&spec(), &wire).unwrap();
    }

    #[test]
    fn a_record_from_before_the_added_fields_still_reads() {
        let mut json: serde_json::Value = serde_json::to_value(measurement()).unwrap();
        let obj = json.as_object_mut().unwrap();
        for added in [
            "latency_samples",
            "throughput_batch_ops",
            "sample_kind",
            "low_samples",
            "all_running_bytes",
            "all_running_seconds",
            "objects",
            "arrival_rate_per_s",
            "memory",
        ] {
            assert!(obj.remove(added).is_some(), "{added}");
        }
        let old: Measurement = serde_json::from_value(json.clone()).unwrap();
        let f = old.figures.expect("figures still parse");
        assert_eq!(
            (f.sample_kind, f.low_samples, f.memory),
            (SampleKind::Window, false, None)
        );
        let wire = v1::Measurement {
            measurement_json: json.to_string(),
        };
        validate_measurement(&wire).unwrap();
    }

    #[test]
    fn an_openssl_compat_measurement_never_reaches_the_fleet() {
        let compat = Measurement {
            harness: Harness::OpensslCompat,
            ..measurement()
        };
        assert_eq!(
            v1::Measurement::try_from(&compat).unwrap_err().field,
            "measurement.measurement_json.harness"
        );
        // Nor when an agent sends one anyway.
        let wire = wire_of(&compat);
        assert!(wire.measurement_json.contains("openssl-compat"));
        assert_eq!(
            validate_measurement(&wire).unwrap_err().field,
            "measurement.measurement_json.harness"
        );
        let engine_json = serde_json::to_string(&measurement()).unwrap();
        assert!(
            !engine_json.contains("harness"),
            "the engine's shape leaves the field out"
        );
    }

    #[test]
    fn a_partial_path_travels_as_partial() {
        let mut m = measurement();
        m.path_used = Some(PathUsed::Partial);
        let wire = v1::Measurement::try_from(&m).unwrap();
        assert!(wire.measurement_json.contains("\"path_used\":\"partial\""));
        assert_eq!(checked_measurement(&wire).unwrap().path_used, Some(PathUsed::Partial));
    }

    /// What an agent before schema `/2` sends: `/1`, and no Poly1305 backend.
    /// The coordinator still stores it.
    #[test]
    fn a_measurement_of_an_older_agent_is_still_accepted() {
        let mut m = measurement();
        m.schema = "cipherfleet.measurement/1".into();
        m.backends.as_mut().unwrap().poly1305 = None;
        m.host.as_mut().unwrap().crypto.backends.poly1305 = None;
        m.path_used = Some(PathUsed::Software);
        let wire = v1::Measurement::try_from(&m).unwrap();
        assert!(!wire.measurement_json.contains("poly1305"));
        assert_eq!(checked_measurement(&wire).unwrap(), m);
        check_measurement_matches(&spec(), &wire).unwrap();
    }

    #[test]
    fn a_failed_measurement_is_not_a_result() {
        let failed = Measurement::failed(&spec(), "worker killed by signal 9".into(), None);
        let err = v1::Measurement::try_from(&failed).unwrap_err();
        assert_eq!(err.field, "measurement.measurement_json.status", "{err}");
        let err = validate_measurement(&wire_of(&failed)).unwrap_err();
        assert_eq!(err.field, "measurement.measurement_json.status", "{err}");
    }

    /// Measurements edited before they are serialised, as a faulty agent
    /// could send them. NaN and infinities serialise as `null`, which is no number.
    #[test]
    fn bad_measurements_are_rejected_naming_the_field() {
        type Edit = fn(&mut Measurement);
        fn figures(m: &mut Measurement) -> &mut Figures {
            m.figures.as_mut().unwrap()
        }
        let cases: Vec<(Edit, &str)> = vec![
            (|m| figures(m).throughput_mb_s = -1.0, "throughput_mb_s"),
            (|m| figures(m).ops_per_s = f64::NAN, "ops_per_s"),
            (|m| figures(m).cpu_utilization = f64::INFINITY, "cpu_utilization"),
            (|m| figures(m).key_setup_ns = -0.5, "key_setup_ns"),
            (|m| figures(m).elapsed_seconds = -1.0, "elapsed_seconds"),
            (|m| figures(m).cv = Some(-0.5), "cv"),
            (|m| figures(m).samples = 0, "samples"),
            (
                |m| figures(m).sample_throughputs_mb_s.push(1.0),
                "sample_throughputs_mb_s",
            ),
            (
                |m| figures(m).sample_throughputs_mb_s[1] = -2.0,
                "sample_throughputs_mb_s[1]",
            ),
            (
                |m| figures(m).sample_throughputs_mb_s[1] = f64::NAN,
                "sample_throughputs_mb_s[1]",
            ),
            (|m| m.path_used = None, "path_used"),
            (|m| m.selftest_passed = None, "selftest_passed"),
            (|m| m.backends = None, "backends"),
            (|m| m.status = Status::Failed, "status"),
            (|m| m.backends.as_mut().unwrap().aes = String::new(), "backends.aes"),
            (
                |m| m.backends.as_mut().unwrap().ghash = "x".repeat(300),
                "backends.ghash",
            ),
            (
                |m| m.backends.as_mut().unwrap().poly1305 = Some("avx2\n".into()),
                "backends.poly1305",
            ),
            (
                |m| figures(m).memory.as_mut().unwrap().allocs_per_op = Some(-1.0),
                "memory.allocs_per_op",
            ),
            (
                |m| figures(m).memory.as_mut().unwrap().heap_bytes_per_op = Some(-3.0),
                "memory.heap_bytes_per_op",
            ),
            (|m| figures(m).all_running_seconds = -1.0, "all_running_seconds"),
            (|m| figures(m).sample_seconds = -0.005, "sample_seconds"),
            (|m| figures(m).warmup_seconds = -1.0, "warmup_seconds"),
            (|m| figures(m).cpu_user_seconds = -0.1, "cpu_user_seconds"),
            (|m| figures(m).cpu_sys_seconds = -0.1, "cpu_sys_seconds"),
            (|m| figures(m).throughput_mb_s = 1e300, "throughput_mb_s"),
            (|m| figures(m).latency_ns.p99 = u64::MAX, "latency_ns.p99"),
            (|m| figures(m).bytes_processed = u64::MAX, "bytes_processed"),
            (|m| figures(m).all_running_bytes = 99_999_999_999, "all_running_bytes"),
            (|m| figures(m).objects = Some(61_001), "objects"),
            (|m| figures(m).arrival_rate_per_s = Some(100.0), "arrival_rate_per_s"),
            (|m| m.schema = "other/9".into(), "schema"),
        ];
        for (edit, field) in cases {
            let mut m = measurement();
            edit(&mut m);
            let err = validate_measurement(&wire_of(&m)).unwrap_err();
            assert_eq!(err.field, format!("measurement.measurement_json.{field}"), "{err}");
        }
    }

    /// Text no agent would write: each refusal still names where it went wrong.
    #[test]
    fn bad_measurement_text_is_rejected_naming_the_field() {
        let good = serde_json::to_string(&measurement()).unwrap();
        let edited = |from: &str, to: &str| {
            assert!(good.contains(from), "{from}");
            good.replace(from, to)
        };
        let cases: Vec<(String, &str, &str)> = vec![
            (String::new(), "", "must not be empty"),
            ("{not json".into(), "", "not a cipherfleet.measurement/2 object"),
            (format!("{good} {{}}"), "", "trailing characters"),
            (" ".repeat(MAX_MEASUREMENT_JSON_LEN + 1), "", "too long"),
            (
                edited("\"latency_method\":\"batch-mean\"", "\"latency_method\":\"guess\""),
                ".latency_method",
                "unknown latency method 'guess'; accepted: per-op, batch-mean, per-object",
            ),
            (
                edited("\"path_used\":\"accelerated\"", "\"path_used\":\"fast\""),
                ".path_used",
                "unknown path used 'fast'",
            ),
            (edited("\"p99\":1100", "\"p99\":-1"), ".latency_ns.p99", "invalid value"),
            (
                edited("\"status\":\"ok\"", "\"status\":\"fine\""),
                ".status",
                "unknown status 'fine'",
            ),
            (edited("\"samples\":3,", ""), "", "missing field `samples`"),
            (
                edited("\"aes\":\"aes-ni\"", "\"aes\":\"aes-ni\\u0000\""),
                ".backends.aes",
                "\\u0000",
            ),
            (
                edited("\"schema\":", "\"extra\":\"\\u0000\",\"schema\":"),
                ".extra",
                "cannot store",
            ),
        ];
        for (json, field, words) in cases {
            let wire = v1::Measurement { measurement_json: json };
            let err = validate_measurement(&wire).unwrap_err();
            assert_eq!(err.field, format!("measurement.measurement_json{field}"), "{err}");
            assert!(err.message.contains(words), "{err}");
        }
    }

    /// The checks of a parsed value, also where JSON cannot carry the value.
    #[test]
    fn figures_no_json_can_carry_are_rejected_too() {
        let json = serde_json::to_string(&measurement()).unwrap();
        type Edit = fn(&mut Figures);
        let cases: Vec<(Edit, &str)> = vec![
            (|f| f.ops_per_s = f64::NAN, "ops_per_s"),
            (|f| f.throughput_mb_s = f64::INFINITY, "throughput_mb_s"),
            (|f| f.cv = Some(f64::NEG_INFINITY), "cv"),
            (|f| f.warmup_seconds = f64::NAN, "warmup_seconds"),
            (|f| f.cpu_sys_seconds = f64::INFINITY, "cpu_sys_seconds"),
            (
                |f| {
                    f.samples = MAX_SAMPLES as u32 + 1;
                    f.sample_throughputs_mb_s = vec![1.0; MAX_SAMPLES + 1];
                },
                "sample_throughputs_mb_s",
            ),
        ];
        for (edit, field) in cases {
            let mut m = measurement();
            edit(m.figures.as_mut().unwrap());
            let err = check(&m, &json).unwrap_err();
            assert_eq!(err.field, format!("measurement.measurement_json.{field}"), "{err}");
        }
    }

    #[test]
    fn a_measurement_of_another_point_does_not_match_the_job() {
        let wire = v1::Measurement::try_from(&measurement()).unwrap();
        let with = |edit: fn(&mut Point)| {
            let mut s = spec();
            edit(&mut s.point);
            s
        };
        let cases: Vec<(JobSpec, &str)> = vec![
            (with(|p| p.algorithm = "aes-256-gcm".parse().unwrap()), "algorithm"),
            (with(|p| p.direction = Direction::Decrypt), "direction"),
            (with(|p| p.size_bytes = 16), "size_bytes"),
            (with(|p| p.threads = 2), "threads"),
            (with(|p| p.concurrency = Some(1)), "concurrency"),
            (with(|p| p.key_mode = KeyMode::PerOp), "key_mode"),
            (with(|p| p.nonce = Nonce::Random), "nonce"),
            (with(|p| p.path = Path::Software), "path_requested"),
            (JobSpec { seconds: 1.0, ..spec() }, "seconds_requested"),
        ];
        for (other, what) in cases {
            let err = check_measurement_matches(&other, &wire).unwrap_err();
            assert_eq!(err.field, format!("measurement.measurement_json.{what}"), "{err}");
        }
        let err = check_measurement_matches(&with(|p| p.threads = 2), &wire).unwrap_err();
        assert_eq!(err.message, "1 does not match the job's 2");
    }
}
