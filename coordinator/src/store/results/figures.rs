//! A measurement's figures stored once: the members of the document that
//! `results`' typed columns hold (throughput, latency percentiles, CPU,
//! every sample's throughput, memory…) are left out of the stored
//! `measurement` when the columns give them back exactly, and put back when a
//! result is read ([`super::stored`]). Bit `i` of `results.figures_in_columns`
//! (migration 0042) says member `MEMBERS[i]` was left out, so a document that
//! lacked a member, or sent it in another form (an integer where the column
//! holds a float, a figure past `bigint`), reads back as it was sent.

use cipherfleet_core::measurement::Figures;
use cipherfleet_core::path::PathUsed;
use serde_json::{Map, Value, json};

use crate::domain::memory::{StoredMemory, bigint};
use crate::store::raw::{RawObject, same};

/// The members [`FigureColumns`] gives back, in bit order. Stored rows name
/// them by position: append only, never reorder.
const MEMBERS: [&str; 16] = [
    "path_used",
    "throughput_mb_s",
    "ops_per_s",
    "latency_ns",
    "latency_method",
    "batch_ops",
    "cv",
    "samples",
    "cpu_user_seconds",
    "cpu_sys_seconds",
    "cpu_utilization",
    "key_setup_ns",
    "elapsed_seconds",
    "sample_throughputs_mb_s",
    "low_samples",
    "memory",
];

/// A result's figure columns as stored: what ingest writes
/// ([`FigureColumns::of`]) and what a read gets back, so the same
/// [`FigureColumns::member`] builds a member on both sides.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FigureColumns {
    pub path_used: String,
    pub throughput_mb_s: f64,
    pub ops_per_s: f64,
    pub latency_p50_ns: i64,
    pub latency_p90_ns: i64,
    pub latency_p99_ns: i64,
    pub latency_p999_ns: i64,
    pub latency_max_ns: i64,
    pub latency_method: String,
    pub batch_ops: i64,
    pub cv: Option<f64>,
    pub samples: i32,
    pub cpu_user_seconds: f64,
    pub cpu_sys_seconds: f64,
    pub cpu_utilization: f64,
    pub key_setup_ns: f64,
    pub elapsed_seconds: f64,
    pub sample_throughputs: Vec<f64>,
    pub low_samples: bool,
    #[sqlx(flatten)]
    pub memory: StoredMemory,
}

impl FigureColumns {
    /// The columns ingest stores for a measurement with these figures.
    pub fn of(path_used: PathUsed, f: Figures) -> Self {
        FigureColumns {
            path_used: path_used.as_str().to_owned(),
            throughput_mb_s: f.throughput_mb_s,
            ops_per_s: f.ops_per_s,
            latency_p50_ns: bigint(f.latency_ns.p50),
            latency_p90_ns: bigint(f.latency_ns.p90),
            latency_p99_ns: bigint(f.latency_ns.p99),
            latency_p999_ns: bigint(f.latency_ns.p999),
            latency_max_ns: bigint(f.latency_ns.max),
            latency_method: f.latency_method.as_str().to_owned(),
            batch_ops: bigint(f.batch_ops),
            cv: f.cv,
            samples: i32::try_from(f.samples).unwrap_or(i32::MAX),
            cpu_user_seconds: f.cpu_user_seconds,
            cpu_sys_seconds: f.cpu_sys_seconds,
            cpu_utilization: f.cpu_utilization,
            key_setup_ns: f.key_setup_ns,
            elapsed_seconds: f.elapsed_seconds,
            sample_throughputs: f.sample_throughputs_mb_s,
            low_samples: f.low_samples,
            memory: StoredMemory::from(f.memory.as_ref()),
        }
    }

    /// Member `MEMBERS[bit]` as the columns give it back.
    fn member(&self, bit: usize) -> Value {
        match bit {
            0 => json!(self.path_used),
            1 => json!(self.throughput_mb_s),
            2 => json!(self.ops_per_s),
            3 => json!({
                "p50": self.latency_p50_ns,
                "p90": self.latency_p90_ns,
                "p99": self.latency_p99_ns,
                "p999": self.latency_p999_ns,
                "max": self.latency_max_ns,
            }),
            4 => json!(self.latency_method),
            5 => json!(self.batch_ops),
            6 => json!(self.cv),
            7 => json!(self.samples),
            8 => json!(self.cpu_user_seconds),
            9 => json!(self.cpu_sys_seconds),
            10 => json!(self.cpu_utilization),
            11 => json!(self.key_setup_ns),
            12 => json!(self.elapsed_seconds),
            13 => json!(self.sample_throughputs),
            14 => json!(self.low_samples),
            // The object as the agent writes it; null when it sent none.
            15 => match self.memory {
                StoredMemory {
                    cipher_state_bytes: Some(cipher_state_bytes),
                    peak_rss_bytes: Some(peak_rss_bytes),
                    heap_bytes_per_op,
                    allocs_per_op,
                } => json!({
                    "cipher_state_bytes": cipher_state_bytes,
                    "peak_rss_bytes": peak_rss_bytes,
                    "heap_bytes_per_op": heap_bytes_per_op,
                    "allocs_per_op": allocs_per_op,
                }),
                _ => Value::Null,
            },
            _ => unreachable!("a member of MEMBERS"),
        }
    }
}

/// Leaves out of `doc` each member of [`MEMBERS`] that `columns` gives back
/// equal; the bits of those left out.
pub fn leave_out(doc: &mut RawObject<'_>, columns: &FigureColumns) -> i32 {
    let mut bits = 0;
    for (bit, name) in MEMBERS.iter().enumerate() {
        if doc.get(*name).is_some_and(|v| same(v, &columns.member(bit))) {
            doc.remove(*name);
            bits |= 1 << bit;
        }
    }
    bits
}

/// Puts back into `doc` the members whose bits `bits` holds.
pub fn put_back(doc: &mut Map<String, Value>, columns: &FigureColumns, bits: i32) {
    for (bit, name) in MEMBERS.iter().enumerate() {
        if bits & (1 << bit) != 0 {
            doc.insert((*name).to_owned(), columns.member(bit));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cipherfleet_core::measurement::{Latency, LatencyMethod, Memory};

    /// [`leave_out`] of `doc` as the agent's text.
    fn leave_out(doc: &mut Map<String, Value>, columns: &FigureColumns) -> i32 {
        let text = serde_json::to_string(doc).unwrap();
        let mut raw: RawObject = serde_json::from_str(&text).unwrap();
        let bits = super::leave_out(&mut raw, columns);
        *doc = serde_json::from_str(&super::super::document::write_object(
            raw.iter().map(|(k, v)| (*k, v.get())),
        ))
        .unwrap();
        bits
    }

    fn figures() -> Figures {
        serde_json::from_value(json!({
            "throughput_mb_s": 146.39413121024631, "ops_per_s": 9149633.2,
            "latency_ns": {"p50": 110, "p90": 114, "p99": 126, "p999": 175, "max": 877},
            "latency_method": "batch-mean", "batch_ops": 10, "cv": 0.0222, "samples": 3,
            "sample_seconds": 0.01, "warmup_seconds": 0.125, "elapsed_seconds": 0.51,
            "operations": 4574816, "bytes_processed": 73197056, "cpu_user_seconds": 0.49,
            "cpu_sys_seconds": 0.005, "cpu_utilization": 0.98, "key_setup_ns": 20.0,
            "sample_throughputs_mb_s": [147.1728846040502, 142.5, 146.0],
            "memory": {"cipher_state_bytes": 496, "peak_rss_bytes": 4194336,
                       "heap_bytes_per_op": 0.0, "allocs_per_op": null},
        }))
        .unwrap()
    }

    fn doc(f: &Figures) -> Map<String, Value> {
        let mut d = serde_json::to_value(f).unwrap().as_object().unwrap().clone();
        d.insert("path_used".into(), json!("accelerated"));
        d.insert("backends".into(), json!({"aes": "aes-ni"}));
        d
    }

    #[test]
    fn the_figures_the_columns_hold_are_left_out_and_put_back_as_sent() {
        let f = figures();
        let columns = FigureColumns::of(PathUsed::Accelerated, f.clone());
        let sent = doc(&f);
        let mut stored = sent.clone();
        let bits = leave_out(&mut stored, &columns);
        assert_eq!(bits, (1 << MEMBERS.len()) - 1, "every member");
        let kept: Vec<&str> = stored.keys().map(String::as_str).collect();
        for name in ["backends", "operations", "sample_seconds", "bytes_processed"] {
            assert!(kept.contains(&name), "{name} stays: {kept:?}");
        }
        for name in [
            "throughput_mb_s",
            "latency_ns",
            "sample_throughputs_mb_s",
            "memory",
            "cv",
        ] {
            assert!(!kept.contains(&name), "{name} is left out");
        }
        put_back(&mut stored, &columns, bits);
        assert_eq!(stored, sent);
    }

    #[test]
    fn a_member_sent_otherwise_or_not_at_all_stays_as_it_was() {
        let mut f = figures();
        f.memory = None;
        f.cv = None;
        f.latency_ns = Latency {
            p50: u64::MAX,
            ..f.latency_ns
        };
        f.latency_method = LatencyMethod::PerOp;
        let columns = FigureColumns::of(PathUsed::Software, f.clone());
        let mut sent = doc(&f);
        sent.insert("key_setup_ns".into(), json!(20)); // an integer; the column is a float
        sent.remove("low_samples"); // an older agent's
        let mut stored = sent.clone();
        let bits = leave_out(&mut stored, &columns);
        for name in ["key_setup_ns", "latency_ns", "path_used"] {
            assert!(stored.contains_key(name), "{name} stays");
        }
        assert!(
            !stored.contains_key("memory") && !stored.contains_key("cv"),
            "nulls the columns hold"
        );
        assert_ne!(bits & (1 << 15), 0, "memory's null");
        put_back(&mut stored, &columns, bits);
        assert_eq!(stored, sent);

        // Memory absent, not null: nothing to put back.
        let mut sent = doc(&f);
        sent.remove("memory");
        let mut stored = sent.clone();
        let bits = leave_out(&mut stored, &columns);
        assert_eq!(bits & (1 << 15), 0);
        put_back(&mut stored, &columns, bits);
        assert_eq!(stored, sent);

        // Memory known: its object, not a null, is left out.
        f.memory = Some(Memory {
            cipher_state_bytes: 1,
            peak_rss_bytes: 2,
            heap_bytes_per_op: None,
            allocs_per_op: Some(0.5),
        });
        let columns = FigureColumns::of(PathUsed::Software, f.clone());
        let mut stored = doc(&f);
        stored.insert("memory".into(), Value::Null);
        assert_eq!(leave_out(&mut stored, &columns) & (1 << 15), 0);
        let mut stored = doc(&f);
        assert_ne!(leave_out(&mut stored, &columns) & (1 << 15), 0);
    }
}
