//! `Measurement` to `v1::Measurement`, and the checks a coordinator runs on one
//! before storing it: finite, non-negative figures, bounded strings, and a
//! `measurement_json` that parses and agrees with the typed fields and the job.

use std::collections::HashMap;

use cipherfleet_proto::v1;

use super::{MAX_FIELD_LEN, MAX_LIST_LEN, MAX_MEASUREMENT_JSON_LEN, MAX_SAMPLES, WireError, check_text, wire_error};
use crate::measurement::{ACCEPTED_SCHEMAS, Measurement, SCHEMA, Status};
use crate::path::PathUsed;
use crate::point::Point;
use crate::spec::JobSpec;

impl TryFrom<&Measurement> for v1::Measurement {
    type Error = WireError;

    /// Converts a successful measurement; a failed one travels as `JobFailed` instead.
    fn try_from(m: &Measurement) -> Result<Self, WireError> {
        let mut out = typed_fields(m)?;
        out.measurement_json = serde_json::to_string(m)
            .map_err(|e| wire_error("measurement.measurement_json", format!("cannot serialise: {e}")))?;
        if out.measurement_json.len() > MAX_MEASUREMENT_JSON_LEN {
            return Err(wire_error(
                "measurement.measurement_json",
                format!(
                    "{} bytes is too long; at most {MAX_MEASUREMENT_JSON_LEN}",
                    out.measurement_json.len()
                ),
            ));
        }
        Ok(out)
    }
}

/// Everything but `measurement_json`.
fn typed_fields(m: &Measurement) -> Result<v1::Measurement, WireError> {
    let (Status::Ok, Some(f), Some(path_used), Some(backends), Some(selftest_passed)) =
        (m.status, &m.figures, m.path_used, &m.backends, m.selftest_passed)
    else {
        return Err(wire_error(
            "measurement",
            "only a successful measurement (status ok, with figures) goes in a JobResult",
        ));
    };
    if !m.harness.is_engine() {
        return Err(wire_error(
            "measurement.harness",
            format!(
                "'{}' results are for comparing with `openssl speed` locally; the fleet stores the engine's shape only",
                m.harness
            ),
        ));
    }
    Ok(v1::Measurement {
        throughput_mb_s: f.throughput_mb_s,
        ops_per_s: f.ops_per_s,
        latency_p50_ns: f.latency_ns.p50,
        latency_p90_ns: f.latency_ns.p90,
        latency_p99_ns: f.latency_ns.p99,
        latency_p999_ns: f.latency_ns.p999,
        latency_max_ns: f.latency_ns.max,
        latency_method: f.latency_method.to_string(),
        batch_ops: f.batch_ops,
        cv: f.cv,
        samples: f.samples,
        cpu_utilization: f.cpu_utilization,
        key_setup_ns: f.key_setup_ns,
        elapsed_seconds: f.elapsed_seconds,
        operations: f.operations,
        bytes_processed: f.bytes_processed,
        path_used: path_used_to_wire(path_used) as i32,
        sample_throughputs_mb_s: f.sample_throughputs_mb_s.clone(),
        selftest_passed,
        backends: [
            ("aes", Some(&backends.aes)),
            ("ghash", Some(&backends.ghash)),
            ("chacha20", Some(&backends.chacha20)),
            ("poly1305", backends.poly1305.as_ref()),
            ("sha256", Some(&backends.sha256)),
        ]
        .into_iter()
        .filter_map(|(primitive, backend)| Some((primitive.to_string(), backend?.clone())))
        .collect::<HashMap<_, _>>(),
        measurement_json: String::new(),
    })
}

fn path_used_to_wire(path: PathUsed) -> v1::PathUsed {
    match path {
        PathUsed::Accelerated => v1::PathUsed::Accelerated,
        PathUsed::Partial => v1::PathUsed::Partial,
        PathUsed::Software => v1::PathUsed::Software,
    }
}

fn path_used_from_wire(field: &str, value: i32) -> Result<PathUsed, WireError> {
    match v1::PathUsed::try_from(value) {
        Ok(v1::PathUsed::Accelerated) => Ok(PathUsed::Accelerated),
        Ok(v1::PathUsed::Partial) => Ok(PathUsed::Partial),
        Ok(v1::PathUsed::Software) => Ok(PathUsed::Software),
        Ok(v1::PathUsed::Unspecified) => Err(wire_error(field, "unspecified")),
        Err(_) => Err(wire_error(field, format!("unknown value {value}"))),
    }
}

/// Checks a measurement an agent sent: every number finite and non-negative,
/// at least one sample, strings bounded, and `measurement_json` a successful
/// measurement of an [accepted schema](ACCEPTED_SCHEMAS) whose figures are the
/// typed ones.
pub fn validate_measurement(m: &v1::Measurement) -> Result<(), WireError> {
    checked_measurement(m).map(drop)
}

/// [`validate_measurement`], returning the measurement `measurement_json`
/// holds: a receiver that needs it parses the text once, not again.
pub fn checked_measurement(m: &v1::Measurement) -> Result<Measurement, WireError> {
    let mut floats = vec![
        ("measurement.throughput_mb_s", m.throughput_mb_s),
        ("measurement.ops_per_s", m.ops_per_s),
        ("measurement.cpu_utilization", m.cpu_utilization),
        ("measurement.key_setup_ns", m.key_setup_ns),
        ("measurement.elapsed_seconds", m.elapsed_seconds),
    ];
    if let Some(cv) = m.cv {
        floats.push(("measurement.cv", cv));
    }
    for (field, value) in floats {
        check_figure(field, value)?;
    }
    if m.samples == 0 {
        return Err(wire_error("measurement.samples", "must be at least 1"));
    }
    if m.sample_throughputs_mb_s.len() > MAX_SAMPLES || m.sample_throughputs_mb_s.len() != m.samples as usize {
        return Err(wire_error(
            "measurement.sample_throughputs_mb_s",
            format!(
                "{} values for {} samples; one per sample, at most {MAX_SAMPLES}",
                m.sample_throughputs_mb_s.len(),
                m.samples
            ),
        ));
    }
    for value in &m.sample_throughputs_mb_s {
        check_figure("measurement.sample_throughputs_mb_s", *value)?;
    }
    if !["per-op", "batch-mean", "per-object"].contains(&m.latency_method.as_str()) {
        return Err(wire_error(
            "measurement.latency_method",
            format!(
                "unknown method {:?}; accepted: per-op, batch-mean, per-object",
                super::truncate(m.latency_method.clone(), 64)
            ),
        ));
    }
    path_used_from_wire("measurement.path_used", m.path_used)?;
    if m.backends.len() > MAX_LIST_LEN {
        return Err(wire_error(
            "measurement.backends",
            format!("{} entries; at most {MAX_LIST_LEN}", m.backends.len()),
        ));
    }
    for (primitive, backend) in &m.backends {
        check_text("measurement.backends", primitive, MAX_FIELD_LEN, false)?;
        check_text("measurement.backends", backend, MAX_FIELD_LEN, false)?;
    }
    let parsed = parse_json(m)?;
    let expected = typed_fields(&parsed).map_err(|e| wire_error("measurement.measurement_json", e.message))?;
    agrees(&expected, m)?;
    check_json_only_figures(&parsed)?;
    Ok(parsed)
}

/// Figures that travel only inside `measurement_json` (no typed field):
/// finite and non-negative, and no part larger than its whole.
fn check_json_only_figures(m: &Measurement) -> Result<(), WireError> {
    const FIELD: &str = "measurement.measurement_json";
    let Some(f) = &m.figures else {
        return Ok(());
    };
    check_figure(&format!("{FIELD}.all_running_seconds"), f.all_running_seconds)?;
    let parts = [
        ("all_running_bytes", f.all_running_bytes, f.bytes_processed),
        ("objects", f.objects.unwrap_or(0), f.operations),
    ];
    for (field, part, whole) in parts {
        if part > whole {
            return Err(wire_error(
                format!("{FIELD}.{field}"),
                format!("{part} is more than the {whole} of the whole run"),
            ));
        }
    }
    if let Some(rate) = f.arrival_rate_per_s
        && (m.concurrency.is_none() || !rate.is_finite() || rate <= 0.0)
    {
        return Err(wire_error(
            format!("{FIELD}.arrival_rate_per_s"),
            format!("{rate} is not a positive rate of an object-storage point"),
        ));
    }
    if let Some(mem) = &f.memory {
        for (field, value) in [
            ("heap_bytes_per_op", mem.heap_bytes_per_op),
            ("allocs_per_op", mem.allocs_per_op),
        ] {
            if let Some(v) = value {
                check_figure(&format!("{FIELD}.memory.{field}"), v)?;
            }
        }
    }
    Ok(())
}

/// Checks that the measurement is of `spec`: algorithm, direction, size,
/// threads, concurrency, key mode, nonce, requested path and seconds all match.
pub fn check_measurement_matches(spec: &JobSpec, m: &v1::Measurement) -> Result<(), WireError> {
    check_spec_matches(spec, &parse_json(m)?.spec())
}

/// [`check_measurement_matches`] for a measurement parsed already: `got` is
/// the job it says it measured ([`Measurement::spec`]): the job's point
/// exactly, and its seconds.
pub fn check_spec_matches(spec: &JobSpec, got: &JobSpec) -> Result<(), WireError> {
    let mismatch = |what: &str, got: String, want: String| {
        Err(wire_error(
            format!("measurement.measurement_json.{what}"),
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

fn check_figure(field: &str, value: f64) -> Result<(), WireError> {
    if !value.is_finite() || value < 0.0 {
        return Err(wire_error(
            field,
            format!("{value} is not a finite, non-negative number"),
        ));
    }
    Ok(())
}

fn parse_json(m: &v1::Measurement) -> Result<Measurement, WireError> {
    const FIELD: &str = "measurement.measurement_json";
    if m.measurement_json.is_empty() {
        return Err(wire_error(FIELD, "must not be empty"));
    }
    if m.measurement_json.len() > MAX_MEASUREMENT_JSON_LEN {
        return Err(wire_error(
            FIELD,
            format!(
                "{} bytes is too long; at most {MAX_MEASUREMENT_JSON_LEN}",
                m.measurement_json.len()
            ),
        ));
    }
    let parsed: Measurement = serde_json::from_str(&m.measurement_json)
        .map_err(|e| wire_error(FIELD, format!("not a {SCHEMA} object: {e}")))?;
    if !ACCEPTED_SCHEMAS.contains(&parsed.schema.as_str()) {
        return Err(wire_error(
            format!("{FIELD}.schema"),
            format!(
                "{:?} is not one of {}",
                super::truncate(parsed.schema, 64),
                ACCEPTED_SCHEMAS.join(", ")
            ),
        ));
    }
    Ok(parsed)
}

/// Floats compare with a relative tolerance: JSON text need not round-trip to the last bit.
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The typed fields say what the stored JSON says.
fn agrees(expected: &v1::Measurement, got: &v1::Measurement) -> Result<(), WireError> {
    let disagree = |field: &str| {
        Err(wire_error(
            format!("measurement.{field}"),
            "disagrees with measurement_json",
        ))
    };
    let floats = [
        ("throughput_mb_s", expected.throughput_mb_s, got.throughput_mb_s),
        ("ops_per_s", expected.ops_per_s, got.ops_per_s),
        ("cpu_utilization", expected.cpu_utilization, got.cpu_utilization),
        ("key_setup_ns", expected.key_setup_ns, got.key_setup_ns),
        ("elapsed_seconds", expected.elapsed_seconds, got.elapsed_seconds),
    ];
    for (field, want, have) in floats {
        if !close(want, have) {
            return disagree(field);
        }
    }
    let integers = [
        ("latency_p50_ns", expected.latency_p50_ns, got.latency_p50_ns),
        ("latency_p90_ns", expected.latency_p90_ns, got.latency_p90_ns),
        ("latency_p99_ns", expected.latency_p99_ns, got.latency_p99_ns),
        ("latency_p999_ns", expected.latency_p999_ns, got.latency_p999_ns),
        ("latency_max_ns", expected.latency_max_ns, got.latency_max_ns),
        ("batch_ops", expected.batch_ops, got.batch_ops),
        ("operations", expected.operations, got.operations),
        ("bytes_processed", expected.bytes_processed, got.bytes_processed),
        ("samples", expected.samples.into(), got.samples.into()),
        (
            "selftest_passed",
            expected.selftest_passed.into(),
            got.selftest_passed.into(),
        ),
    ];
    for (field, want, have) in integers {
        if want != have {
            return disagree(field);
        }
    }
    let cv_agrees = match (expected.cv, got.cv) {
        (Some(a), Some(b)) => close(a, b),
        (None, None) => true,
        _ => false,
    };
    if !cv_agrees {
        return disagree("cv");
    }
    if expected.latency_method != got.latency_method {
        return disagree("latency_method");
    }
    if expected.path_used != got.path_used {
        return disagree("path_used");
    }
    if expected.backends != got.backends {
        return disagree("backends");
    }
    let samples_agree = expected.sample_throughputs_mb_s.len() == got.sample_throughputs_mb_s.len()
        && expected
            .sample_throughputs_mb_s
            .iter()
            .zip(&got.sample_throughputs_mb_s)
            .all(|(a, b)| close(*a, *b));
    if !samples_agree {
        return disagree("sample_throughputs_mb_s");
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::measurement::{Figures, Latency, LatencyMethod, Memory, SampleKind, WorkerReport};
    use crate::path::{Backends, Flavour, Path, PathUsed};
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

    #[test]
    fn a_measurement_converts_and_validates() {
        let m = measurement();
        let wire = v1::Measurement::try_from(&m).unwrap();
        assert_eq!(wire.samples, 3);
        assert_eq!(wire.latency_method, "batch-mean");
        assert_eq!(wire.backends.len(), 5);
        assert_eq!(wire.path_used, v1::PathUsed::Accelerated as i32);
        let back: Measurement = serde_json::from_str(&wire.measurement_json).unwrap();
        assert_eq!(back, m, "the JSON carries everything, host facts included");
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
        let old: Measurement = serde_json::from_value(json).unwrap();
        let f = old.figures.expect("figures still parse");
        assert_eq!(
            (f.sample_kind, f.low_samples, f.memory),
            (SampleKind::Window, false, None)
        );
    }

    #[test]
    fn an_openssl_compat_measurement_never_reaches_the_fleet() {
        let compat = Measurement {
            harness: crate::measurement::Harness::OpensslCompat,
            ..measurement()
        };
        assert_eq!(
            v1::Measurement::try_from(&compat).unwrap_err().field,
            "measurement.harness"
        );
        // Nor when only the JSON says so.
        let mut wire = v1::Measurement::try_from(&measurement()).unwrap();
        wire.measurement_json = serde_json::to_string(&compat).unwrap();
        assert!(validate_measurement(&wire).is_err());
        assert!(!wire.measurement_json.is_empty());
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
        assert_eq!(wire.path_used, v1::PathUsed::Partial as i32);
        validate_measurement(&wire).unwrap();
    }

    /// What an agent before schema `/2` sends: `/1`, `Path`'s numbers in
    /// `path_used`, and no Poly1305 backend. The coordinator still stores it.
    #[test]
    fn a_measurement_of_an_older_agent_is_still_accepted() {
        let mut m = measurement();
        m.schema = "cipherfleet.measurement/1".into();
        m.backends.as_mut().unwrap().poly1305 = None;
        m.host.as_mut().unwrap().crypto.backends.poly1305 = None;
        m.path_used = Some(PathUsed::Software);
        let wire = v1::Measurement::try_from(&m).unwrap();
        assert!(!wire.measurement_json.contains("poly1305"));
        assert_eq!(wire.backends.len(), 4);
        assert_eq!(wire.path_used, v1::Path::Software as i32, "the numbers agree");
        validate_measurement(&wire).unwrap();
        check_measurement_matches(&spec(), &wire).unwrap();
    }

    #[test]
    fn a_failed_measurement_is_not_a_result() {
        let failed = Measurement::failed(&spec(), "worker killed by signal 9".into(), None);
        assert_eq!(v1::Measurement::try_from(&failed).unwrap_err().field, "measurement");
    }

    #[test]
    fn bad_measurements_are_rejected_naming_the_field() {
        let good = v1::Measurement::try_from(&measurement()).unwrap();
        type Edit = fn(&mut v1::Measurement);
        let cases: Vec<(Edit, &str)> = vec![
            (|m| m.throughput_mb_s = -1.0, "measurement.throughput_mb_s"),
            (|m| m.ops_per_s = f64::NAN, "measurement.ops_per_s"),
            (|m| m.cpu_utilization = f64::INFINITY, "measurement.cpu_utilization"),
            (|m| m.cv = Some(-0.5), "measurement.cv"),
            (|m| m.samples = 0, "measurement.samples"),
            (
                |m| m.sample_throughputs_mb_s.push(1.0),
                "measurement.sample_throughputs_mb_s",
            ),
            (
                |m| m.sample_throughputs_mb_s[1] = f64::NAN,
                "measurement.sample_throughputs_mb_s",
            ),
            (|m| m.latency_method = "guess".into(), "measurement.latency_method"),
            (|m| m.path_used = 0, "measurement.path_used"),
            (|m| m.path_used = 4, "measurement.path_used"),
            (|m| m.path_used = v1::PathUsed::Partial as i32, "measurement.path_used"),
            (
                |m| {
                    m.backends.insert("aes".into(), String::new());
                },
                "measurement.backends",
            ),
            (
                |m| {
                    m.backends.insert("x".repeat(300), "soft".into());
                },
                "measurement.backends",
            ),
            (|m| m.measurement_json.clear(), "measurement.measurement_json"),
            (
                |m| m.measurement_json = "{not json".into(),
                "measurement.measurement_json",
            ),
            (
                |m| m.measurement_json = " ".repeat(MAX_MEASUREMENT_JSON_LEN + 1),
                "measurement.measurement_json",
            ),
            (
                |m| m.measurement_json = m.measurement_json.replace(SCHEMA, "other/9"),
                "measurement.measurement_json.schema",
            ),
            (|m| m.throughput_mb_s *= 2.0, "measurement.throughput_mb_s"),
            (|m| m.latency_p99_ns += 1, "measurement.latency_p99_ns"),
            (|m| m.operations = 1, "measurement.operations"),
            (|m| m.cv = None, "measurement.cv"),
            (
                |m| {
                    m.measurement_json = m
                        .measurement_json
                        .replace("\"allocs_per_op\":0.0", "\"allocs_per_op\":-1.0")
                },
                "measurement.measurement_json.memory.allocs_per_op",
            ),
            (
                |m| {
                    m.measurement_json = m
                        .measurement_json
                        .replace("\"all_running_bytes\":61440000", "\"all_running_bytes\":99999999999")
                },
                "measurement.measurement_json.all_running_bytes",
            ),
            (
                |m| {
                    m.measurement_json = m
                        .measurement_json
                        .replace("\"arrival_rate_per_s\":null", "\"arrival_rate_per_s\":100.0")
                },
                "measurement.measurement_json.arrival_rate_per_s",
            ),
        ];
        for (edit, field) in cases {
            let mut m = good.clone();
            edit(&mut m);
            let err = validate_measurement(&m).unwrap_err();
            assert_eq!(err.field, field, "{err}");
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
