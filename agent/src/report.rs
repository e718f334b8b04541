//! Output of `bench`: an `openssl speed`-like table, JSON lines, or CSV.
//!
//! JSON and CSV rows are written as each point finishes, so a long run that
//! is interrupted keeps what it measured; the table needs every point and is
//! printed at the end.

use std::collections::BTreeMap;
use std::io::{self, Write};

use cipherfleet_core::facts::HostFacts;
use cipherfleet_core::measurement::{Measurement, Status};
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::format_size;

/// Output format of `bench` and `probe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// CSV header; one column per scalar field of the measurement schema.
pub const CSV_HEADER: &str = "algorithm,direction,size_bytes,threads,concurrency,key_mode,path_requested,path_used,status,throughput_mb_s,ops_per_s,p50_ns,p90_ns,p99_ns,p999_ns,max_ns,latency_method,batch_ops,cv,samples,cpu_utilization,key_setup_ns,error";

/// Writes one measurement as a JSON line.
pub fn write_json_line(m: &Measurement, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, m)?;
    writeln!(out)?;
    out.flush()
}

/// Writes one measurement as a CSV row (RFC 4180 quoting where needed).
pub fn write_csv_row(m: &Measurement, out: &mut dyn Write) -> io::Result<()> {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let f = m.figures.as_ref();
    let cells = [
        m.algorithm.name().to_string(),
        m.direction.as_str().to_string(),
        m.size_bytes.to_string(),
        m.threads.to_string(),
        opt(m.concurrency.map(|c| c.to_string())),
        m.key_mode.as_str().to_string(),
        m.path_requested.as_str().to_string(),
        opt(m.path_used.map(|p| p.as_str().to_string())),
        if m.status == Status::Ok { "ok" } else { "failed" }.to_string(),
        opt(f.map(|f| format!("{:.3}", f.throughput_mb_s))),
        opt(f.map(|f| format!("{:.1}", f.ops_per_s))),
        opt(f.map(|f| f.latency_ns.p50.to_string())),
        opt(f.map(|f| f.latency_ns.p90.to_string())),
        opt(f.map(|f| f.latency_ns.p99.to_string())),
        opt(f.map(|f| f.latency_ns.p999.to_string())),
        opt(f.map(|f| f.latency_ns.max.to_string())),
        opt(f.map(|f| {
            serde_json::to_value(f.latency_method)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        })),
        opt(f.map(|f| f.batch_ops.to_string())),
        opt(f.and_then(|f| f.cv).map(|cv| format!("{cv:.4}"))),
        opt(f.map(|f| f.samples.to_string())),
        opt(f.map(|f| format!("{:.3}", f.cpu_utilization))),
        opt(f.map(|f| format!("{:.1}", f.key_setup_ns))),
        opt(m.error.clone()),
    ];
    let line: Vec<String> = cells.iter().map(|c| csv_escape(c)).collect();
    writeln!(out, "{}", line.join(","))?;
    out.flush()
}

fn csv_escape(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Rows of the table: everything but the size, which makes the columns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct RowKey {
    order: usize,
    label: String,
}

/// Writes the grouped table: rows per algorithm/direction/path/threads/key mode,
/// columns per payload size; each row shows MB/s, then P99 latency and CV.
pub fn write_table(results: &[Measurement], host: &HostFacts, out: &mut dyn Write) -> io::Result<()> {
    let hostname = host.hostname.as_deref().unwrap_or("unknown host");
    writeln!(
        out,
        "cipherfleet-agent {} on {} ({}, {})",
        env!("CARGO_PKG_VERSION"),
        hostname.escape_debug(),
        host.arch,
        host.cpu.model_name.as_deref().unwrap_or("unknown CPU").escape_debug()
    )?;
    writeln!(
        out,
        "MB/s = 10^6 bytes of plaintext per second (median of samples); p99 = 99th-percentile latency per operation; cv = spread of the samples"
    )?;
    let mut sizes: Vec<u64> = results.iter().map(|m| m.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut rows: BTreeMap<RowKey, BTreeMap<u64, &Measurement>> = BTreeMap::new();
    for (i, m) in results.iter().enumerate() {
        let mut label = format!(
            "{:<24} {:<7} {:<11} {:>3} {:<13}",
            m.algorithm.name(),
            m.direction.as_str(),
            m.path_used.map_or(m.path_requested.as_str(), |p| p.as_str()),
            m.threads,
            m.key_mode.as_str()
        );
        if let Some(c) = m.concurrency {
            label.push_str(&format!(" c={c}"));
        }
        let key = rows
            .keys()
            .find(|k| k.label == label)
            .cloned()
            .unwrap_or(RowKey { order: i, label });
        rows.entry(key).or_default().insert(m.size_bytes, m);
    }
    let width = 12;
    let head = format!(
        "{:<24} {:<7} {:<11} {:>3} {:<13}",
        "algorithm", "dir", "path", "thr", "key"
    );
    write!(out, "{head} |")?;
    for s in &sizes {
        let size = format_size(*s);
        let size = if size.ends_with("iB") {
            size
        } else {
            format!("{size} B")
        };
        write!(out, "{size:>width$}")?;
    }
    writeln!(out)?;
    writeln!(out, "{}", "-".repeat(head.len() + 2 + width * sizes.len() + 8))?;
    let pad = " ".repeat(head.len());
    for (key, cells) in &rows {
        let line = |f: &dyn Fn(&Measurement) -> String| -> String {
            sizes
                .iter()
                .map(|s| format!("{:>width$}", cells.get(s).map(|m| f(m)).unwrap_or_default()))
                .collect()
        };
        writeln!(
            out,
            "{} |{}  MB/s",
            key.label,
            line(&|m| fig(m, |f| format!("{:.2}", f.throughput_mb_s)))
        )?;
        writeln!(
            out,
            "{pad} |{}  p99 µs",
            line(&|m| fig(m, |f| format!("{:.3}", f.latency_ns.p99 as f64 / 1e3)))
        )?;
        writeln!(
            out,
            "{pad} |{}  cv",
            line(&|m| fig(m, |f| f.cv.map(|c| format!("{:.1}%", c * 100.0)).unwrap_or("-".into())))
        )?;
    }
    let failures: Vec<&Measurement> = results.iter().filter(|m| m.status == Status::Failed).collect();
    if !failures.is_empty() {
        writeln!(out, "\n{} point(s) failed:", failures.len())?;
        for m in failures {
            writeln!(
                out,
                "  {}: {}",
                m.spec().label(),
                m.error.as_deref().unwrap_or("unknown error")
            )?;
        }
    }
    // What an accelerated request ran instead, by what ran.
    for (used, lead, tail) in [
        (
            PathUsed::Software,
            "no hardware path on this host for",
            "ran in software",
        ),
        (
            PathUsed::Partial,
            "only part in hardware on this host for",
            "some primitives ran in software",
        ),
    ] {
        let names: std::collections::BTreeSet<&str> = results
            .iter()
            .filter(|m| m.path_requested == Path::Accelerated && m.path_used == Some(used))
            .map(|m| m.algorithm.name())
            .collect();
        if !names.is_empty() {
            let list = names.into_iter().collect::<Vec<_>>().join(", ");
            writeln!(out, "\nnote: {lead}: {list} ({tail})")?;
        }
    }
    Ok(())
}

fn fig(m: &Measurement, f: impl Fn(&cipherfleet_core::measurement::Figures) -> String) -> String {
    match (&m.figures, m.status) {
        (Some(figures), Status::Ok) => f(figures),
        _ => "failed".to_string(),
    }
}
