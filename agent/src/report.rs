//! Output of `bench`: an `openssl speed`-like table, JSON lines, or CSV.
//!
//! JSON and CSV rows are written as each point finishes, so a long run that
//! is interrupted keeps what it measured; the table needs every point and is
//! printed at the end.

use std::collections::BTreeMap;
use std::io::{self, Write};

use cipherfleet_core::facts::HostFacts;
use cipherfleet_core::measurement::{
    Figures, Harness, LatencyMethod, Measurement, Memory, P999_MIN_LATENCY_SAMPLES, Status,
};
use cipherfleet_core::path::{Path, PathUsed};
use cipherfleet_core::spec::{LOW_SAMPLES, format_size};
use cipherfleet_core::text::printable;

/// Output format of `bench` and `probe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// CSV header; one column per scalar field of the measurement schema. Columns
/// added later go at the end, so older readers keep their positions.
pub const CSV_HEADER: &str = "algorithm,direction,size_bytes,threads,concurrency,key_mode,path_requested,path_used,status,throughput_mb_s,ops_per_s,p50_ns,p90_ns,p99_ns,p999_ns,max_ns,latency_method,batch_ops,cv,samples,cpu_utilization,key_setup_ns,error,low_samples,sample_kind,latency_samples,throughput_batch_ops,all_running_bytes,all_running_seconds,objects,arrival_rate_per_s,cipher_state_bytes,peak_rss_bytes,heap_bytes_per_op,allocs_per_op,nonce,provider,path_basis";

/// Writes one measurement as a JSON line.
pub fn write_json_line(m: &Measurement, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, m)?;
    writeln!(out)?;
    out.flush()
}

/// Writes one measurement as a CSV row (RFC 4180 quoting where needed).
/// `p999_ns` is empty where too few latency values support it.
pub fn write_csv_row(m: &Measurement, out: &mut dyn Write) -> io::Result<()> {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let f = m.figures.as_ref();
    let mem = f.and_then(|f| f.memory.as_ref());
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
        opt(f.filter(|f| f.p999_supported()).map(|f| f.latency_ns.p999.to_string())),
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
        opt(f.map(|f| f.low_samples.to_string())),
        opt(f.map(|f| f.sample_kind.to_string())),
        opt(f.map(|f| f.latency_samples.to_string())),
        opt(f.map(|f| f.throughput_batch_ops.to_string())),
        opt(f.map(|f| f.all_running_bytes.to_string())),
        opt(f.map(|f| format!("{:.6}", f.all_running_seconds))),
        opt(f.and_then(|f| f.objects).map(|n| n.to_string())),
        opt(f.and_then(|f| f.arrival_rate_per_s).map(|r| r.to_string())),
        opt(mem.map(|m| m.cipher_state_bytes.to_string())),
        opt(mem.map(|m| m.peak_rss_bytes.to_string())),
        opt(mem.and_then(|m| m.heap_bytes_per_op).map(|v| v.to_string())),
        opt(mem.and_then(|m| m.allocs_per_op).map(|v| v.to_string())),
        m.nonce.as_str().to_string(),
        m.provider.as_str().to_string(),
        m.path_basis.as_str().to_string(),
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
/// columns per payload size; each row shows MB/s, P99 latency (and P99.9
/// where enough latency values support it) and CV, with a compact memory
/// column: cipher state, worker peak RSS, heap allocations per operation.
pub fn write_table(results: &[Measurement], host: &HostFacts, out: &mut dyn Write) -> io::Result<()> {
    let hostname = host.hostname.as_deref().unwrap_or("unknown host");
    writeln!(
        out,
        "cipherfleet-agent {} on {} ({}, {})",
        env!("CARGO_PKG_VERSION"),
        printable(hostname),
        host.arch,
        printable(host.cpu.model_name.as_deref().unwrap_or("unknown CPU"))
    )?;
    let ok_figures = || {
        results
            .iter()
            .filter(|m| m.status == Status::Ok)
            .filter_map(|m| m.figures.as_ref())
    };
    writeln!(
        out,
        "MB/s = 10^6 bytes of plaintext per second (median of samples; * = fewer than {LOW_SAMPLES} samples); p99 = 99th-percentile latency per operation; cv = spread of the samples"
    )?;
    if ok_figures().any(|f| f.latency_method == LatencyMethod::BatchMean) {
        writeln!(
            out,
            "batch mean (b) = each latency value is the mean of a batch of about 10 µs of operations: single-operation outliers are averaged away"
        )?;
    }
    writeln!(
        out,
        "p99.9 only where at least {P999_MIN_LATENCY_SAMPLES} latency values support it; memory = keyed cipher state (size_of + heap), worker peak RSS, heap allocations per operation while measuring"
    )?;
    if results.iter().any(|m| m.harness == Harness::OpensslCompat) {
        writeln!(
            out,
            "harness: openssl-compat, shaped as `openssl speed -evp`/`-aead` does (in place, one key; GCM/CCM/OCB re-keyed per message with 13 B AAD; other modes one stream): not comparable with the engine's own figures"
        )?;
    }
    // Providers side by side: a column of their own when any but the crates ran.
    let show_provider = results.iter().any(|m| !m.provider.is_rustcrypto());
    if show_provider {
        writeln!(
            out,
            "provider: rustcrypto = the crates built in; ring = built in; openssl = the host's `openssl speed`; kernel = the kernel crypto API through AF_ALG"
        )?;
    }
    if results.iter().any(|m| !m.path_basis.is_detected()) {
        writeln!(
            out,
            "path (ring, openssl, kernel) is inferred from what their dispatchers read (CPU features, OpenSSL's capability vector, the kernel's chosen driver), not reported by them"
        )?;
    }
    if results.iter().any(|m| m.harness == Harness::OpensslSpeed) {
        writeln!(
            out,
            "openssl: `openssl speed -elapsed -evp`, its own shape (GCM re-keyed per message with -aead, other modes one stream); each sample one run, p99 the slowest run's mean per operation"
        )?;
    }
    let mut sizes: Vec<u64> = results.iter().map(|m| m.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut rows: BTreeMap<RowKey, BTreeMap<u64, &Measurement>> = BTreeMap::new();
    for (i, m) in results.iter().enumerate() {
        let mut label = String::new();
        if show_provider {
            label.push_str(&format!("{:<10} ", m.provider.as_str()));
        }
        label.push_str(&format!(
            "{:<24} {:<7} {:<11} {:>3} {:<13}",
            m.algorithm.name(),
            m.direction.as_str(),
            m.path_used.map_or(m.path_requested.as_str(), |p| p.as_str()),
            m.threads,
            m.key_mode.as_str()
        ));
        if let Some(c) = m.concurrency {
            label.push_str(&format!(" c={c}"));
        }
        if !m.nonce.is_counter() {
            label.push_str(&format!(" nonce={}", m.nonce));
        }
        let key = rows
            .keys()
            .find(|k| k.label == label)
            .cloned()
            .unwrap_or(RowKey { order: i, label });
        rows.entry(key).or_default().insert(m.size_bytes, m);
    }
    let width = 12;
    const MEMORY: usize = 14;
    let mut head = String::new();
    if show_provider {
        head.push_str(&format!("{:<10} ", "provider"));
    }
    head.push_str(&format!(
        "{:<24} {:<7} {:<11} {:>3} {:<13}",
        "algorithm", "dir", "path", "thr", "key"
    ));
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
    writeln!(out, " | {:<MEMORY$}", "memory")?;
    writeln!(
        out,
        "{}",
        "-".repeat(head.len() + 2 + width * sizes.len() + 3 + MEMORY + 8)
    )?;
    for (key, cells) in &rows {
        let line = |f: &dyn Fn(&Measurement) -> String| -> String {
            sizes
                .iter()
                .map(|s| format!("{:>width$}", cells.get(s).map(|m| f(m)).unwrap_or_default()))
                .collect()
        };
        let figures: Vec<&Figures> = cells.values().filter_map(|m| ok(m)).collect();
        let memory: Vec<&Memory> = figures.iter().filter_map(|f| f.memory.as_ref()).collect();
        let state = memory
            .iter()
            .map(|m| m.cipher_state_bytes)
            .max()
            .map_or("-".into(), |b| format!("state {}", human_bytes(b)));
        let rss = memory
            .iter()
            .map(|m| m.peak_rss_bytes)
            .max()
            .map_or("-".into(), |b| format!("rss {}", human_bytes(b)));
        let allocs = memory
            .iter()
            .filter_map(|m| m.allocs_per_op)
            .reduce(f64::max)
            .map_or("-".into(), |a| format!("{} alloc/op", trim_number(a)));
        let pad = " ".repeat(key.label.len().max(head.len()));
        let batch_means = figures
            .iter()
            .filter(|f| f.latency_method == LatencyMethod::BatchMean)
            .count();
        let p99_label = match batch_means {
            0 => "p99 µs",
            n if n == figures.len() => "p99 µs (batch mean)",
            _ => "p99 µs (b = batch mean)",
        };
        let mark = batch_means > 0 && batch_means < figures.len();
        writeln!(
            out,
            "{} |{} | {state:<MEMORY$} MB/s",
            key.label,
            line(&|m| fig(m, |f| format!(
                "{:.2}{}",
                f.throughput_mb_s,
                if f.low_samples { "*" } else { "" }
            )))
        )?;
        writeln!(
            out,
            "{pad} |{} | {rss:<MEMORY$} {p99_label}",
            line(&|m| fig(m, |f| format!(
                "{:.3}{}",
                f.latency_ns.p99 as f64 / 1e3,
                if mark && f.latency_method == LatencyMethod::BatchMean {
                    "b"
                } else {
                    ""
                }
            )))
        )?;
        if figures.iter().any(|f| f.p999_supported()) {
            writeln!(
                out,
                "{pad} |{} | {:<MEMORY$} p99.9 µs",
                line(&|m| fig(m, |f| if f.p999_supported() {
                    format!("{:.3}", f.latency_ns.p999 as f64 / 1e3)
                } else {
                    "-".into()
                })),
                ""
            )?;
        }
        writeln!(
            out,
            "{pad} |{} | {allocs:<MEMORY$} cv",
            line(&|m| fig(m, |f| f.cv.map(|c| format!("{:.1}%", c * 100.0)).unwrap_or("-".into())))
        )?;
    }
    let label = |m: &Measurement| {
        if show_provider {
            format!("{} {}", m.provider, m.spec().label())
        } else {
            m.spec().label()
        }
    };
    let low: Vec<String> = results
        .iter()
        .filter(|m| ok(m).is_some_and(|f| f.low_samples))
        .map(label)
        .collect();
    if !low.is_empty() {
        writeln!(
            out,
            "\n* fewer than {LOW_SAMPLES} samples even after extending the run (low_samples): {}",
            low.join("; ")
        )?;
    }
    let failures: Vec<&Measurement> = results.iter().filter(|m| m.status == Status::Failed).collect();
    if !failures.is_empty() {
        writeln!(out, "\n{} point(s) failed:", failures.len())?;
        for m in failures {
            writeln!(out, "  {}: {}", label(m), m.error.as_deref().unwrap_or("unknown error"))?;
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
        let names: std::collections::BTreeSet<String> = results
            .iter()
            .filter(|m| m.path_requested == Path::Accelerated && m.path_used == Some(used))
            .map(|m| {
                if show_provider {
                    format!("{} {}", m.provider, m.algorithm.name())
                } else {
                    m.algorithm.name().to_string()
                }
            })
            .collect();
        if !names.is_empty() {
            let list = names.into_iter().collect::<Vec<_>>().join(", ");
            writeln!(out, "\nnote: {lead}: {list} ({tail})")?;
        }
    }
    Ok(())
}

/// The figures of a successful measurement.
fn ok(m: &Measurement) -> Option<&Figures> {
    m.figures.as_ref().filter(|_| m.status == Status::Ok)
}

fn fig(m: &Measurement, f: impl Fn(&Figures) -> String) -> String {
    ok(m).map_or_else(|| "failed".to_string(), f)
}

/// Bytes in B, KiB, MiB or GiB, three significant figures at most.
fn human_bytes(b: u64) -> String {
    let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match units.iter().find(|(_, size)| b >= *size) {
        Some((unit, size)) => {
            let v = b as f64 / *size as f64;
            if v >= 100.0 {
                format!("{v:.0} {unit}")
            } else {
                format!("{v:.1} {unit}")
            }
        }
        None => format!("{b} B"),
    }
}

/// A per-operation count: `0`, or up to three decimals.
fn trim_number(v: f64) -> String {
    if v == 0.0 { "0".into() } else { format!("{v:.3}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_in_binary_units() {
        for (b, want) in [
            (0, "0 B"),
            (480, "480 B"),
            (1536, "1.5 KiB"),
            (6_400_000, "6.1 MiB"),
            (300 << 20, "300 MiB"),
            (3 << 30, "3.0 GiB"),
        ] {
            assert_eq!(human_bytes(b), want);
        }
        assert_eq!(trim_number(0.0), "0");
        assert_eq!(trim_number(0.25), "0.250");
    }
}
