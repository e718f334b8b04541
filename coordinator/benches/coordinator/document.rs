//! What a session does with each result's document before it is queued for
//! the database, timed on the real agent's measurement: the typed parse and
//! checks (`wire::checked_measurement`), then storing it once
//! (`Checked::stored_once`: without the host facts the host's snapshot holds
//! and the figures the columns hold). CPU a result, in the session. Beside
//! the parse, two of its parts on the same text: reading it while building
//! nothing (what any parse of it costs at least) and building only the host
//! facts, which the session checks and drops. Beside storing it once, the
//! host facts compared with the snapshot's as their text is read
//! (`store::raw::same`) and through parsed trees, as before 2026-12-07.

use std::hint::black_box;
use std::time::Instant;

use cipherfleet_coordinator::domain::facts::NormalisedFacts;
use cipherfleet_coordinator::store::raw::{RawObject, same};
use cipherfleet_coordinator::store::results::Checked;
use cipherfleet_coordinator::store::snapshots::CurrentFacts;
use cipherfleet_core::facts::HostFacts;
use cipherfleet_core::measurement::Measurement;
use cipherfleet_core::wire;
use cipherfleet_proto::v1;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// The measurement's host facts, and nothing else of it.
#[derive(Deserialize)]
struct HostOnly {
    host: Option<HostFacts>,
}

/// Documents per timing; the median of [`ROUNDS`] is printed.
const DOCUMENTS: u32 = 20_000;
const ROUNDS: usize = 5;

pub fn document(template: &Measurement) {
    let sent = v1::Measurement::try_from(template).expect("the template converts");
    let host =
        serde_json::to_value(template.host.as_ref().expect("the template has host facts")).expect("facts serialise");
    // The snapshot as the agent's hello stores it.
    let serde_json::Value::Object(facts) = NormalisedFacts::new(&host).facts else {
        panic!("normalised facts are an object")
    };
    let snapshot = CurrentFacts::new(1, facts);
    // The session's work before storing: the typed parse and checks of the
    // message, then the document text it carries.
    let checked_from = |json: &str| {
        let m = wire::checked_measurement(black_box(&sent)).expect("the template is valid");
        let figures = m.figures.expect("a successful measurement");
        Checked::new(None, m.path_used.expect("ok"), figures, json.to_owned())
    };
    let checked = || checked_from(&sent.measurement_json);
    let stored = checked().stored_once(Some(&snapshot));
    let left = stored.from_snapshot.as_ref().map_or(0, |f| f.keys.len());
    // The same document as agents before 2026-12-06 wrote it, their feature
    // lists in the probe's order rather than sorted (here: reversed), which
    // the snapshot's text does not match: only those bytes differ.
    let features = &template.host.as_ref().expect("host facts").features;
    let mut older_json = sent.measurement_json.clone();
    for (name, list) in [
        ("checked", &features.checked),
        ("advertised", &features.advertised),
        ("usable", &features.usable),
    ] {
        let mut sorted: Vec<&String> = list.iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let written = format!("\"{name}\":{}", serde_json::to_string(&sorted).expect("names"));
        sorted.reverse();
        let probe_order = format!("\"{name}\":{}", serde_json::to_string(&sorted).expect("names"));
        older_json = older_json.replacen(&written, &probe_order, 1);
    }
    let older = || checked_from(&older_json);
    let older_stored = older().stored_once(Some(&snapshot));
    // The median of ROUNDS rounds of DOCUMENTS, in ns a document.
    let median = |mut rounds: Vec<f64>| {
        rounds.sort_by(f64::total_cmp);
        rounds[ROUNDS / 2]
    };
    // `f` run DOCUMENTS times, timed.
    let time_each = |f: &dyn Fn()| {
        median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..DOCUMENTS {
                        f();
                    }
                    t.elapsed().as_nanos() as f64 / f64::from(DOCUMENTS)
                })
                .collect(),
        )
    };
    let parse = time_each(&|| drop(black_box(checked())));
    // Of the parse: reading the text without building anything (the floor of
    // any parse of it), and building the host facts alone, which the session
    // checks and then drops.
    let json = sent.measurement_json.as_str();
    let scan = time_each(&|| {
        serde_json::from_str::<IgnoredAny>(black_box(json)).expect("JSON");
    });
    let host_facts = time_each(&|| {
        drop(black_box(
            serde_json::from_str::<HostOnly>(black_box(json)).map(|h| h.host),
        ))
    });
    // Stores parsed documents once, timed alone.
    let time_store = |make: &dyn Fn() -> Checked| {
        median(
            (0..ROUNDS)
                .map(|_| {
                    let parsed: Vec<Checked> = (0..DOCUMENTS).map(|_| make()).collect();
                    let t = Instant::now();
                    for c in parsed {
                        drop(black_box(c.stored_once(Some(&snapshot))));
                    }
                    t.elapsed().as_nanos() as f64 / f64::from(DOCUMENTS)
                })
                .collect(),
        )
    };
    let store = time_store(&checked);
    let older_store = time_store(&older);
    // Comparing the older document's host facts with the snapshot's, as
    // storing it once does: read as text (`store::raw::same`), and parsed
    // into trees as before 2026-12-07.
    let older_doc: RawObject = serde_json::from_str(&older_json).expect("an object");
    let older_host: RawObject = serde_json::from_str(older_doc["host"].get()).expect("an object");
    let pairs: Vec<_> = older_host
        .iter()
        .filter_map(|(k, raw)| snapshot.facts.get(*k).map(|fact| (*raw, fact)))
        .collect();
    let by_text = time_each(&|| {
        for (raw, fact) in &pairs {
            black_box(same(black_box(raw), fact));
        }
    });
    let by_tree = time_each(&|| {
        for (raw, fact) in &pairs {
            black_box(serde_json::from_str::<serde_json::Value>(black_box(raw).get()).is_ok_and(|v| v == **fact));
        }
    });
    println!(
        "document: the agent's {} B ({} host facts) stored as {} B: {left} facts and figures {:#06x} left out",
        sent.measurement_json.len(),
        host.as_object().map_or(0, |h| h.len()),
        stored.json.len(),
        stored.figures_in_columns,
    );
    println!(
        "document: {parse:.0} ns a result to parse and check, {store:.0} ns to store it once (medians of {ROUNDS} × {DOCUMENTS})"
    );
    println!(
        "document: of the parse, {scan:.0} ns to read the text building nothing; {host_facts:.0} ns to read it building only the host facts"
    );
    println!(
        "document: written as before 2026-12-06 (feature lists in probe order): stored as {} B, {} facts left out, {older_store:.0} ns to store it once",
        older_stored.json.len(),
        older_stored.from_snapshot.as_ref().map_or(0, |f| f.keys.len()),
    );
    println!(
        "document: comparing its {} host facts with the snapshot's: {by_text:.0} ns read as text, {by_tree:.0} ns parsed into trees",
        pairs.len(),
    );
}
