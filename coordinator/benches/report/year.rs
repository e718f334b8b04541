//! History mode's data ([`crate::history`]): hosts of the report's machine
//! classes ([`fleet::create`], facts included) and, for every hour of the
//! days asked for, a finished `quick` campaign on each of them — its jobs and
//! one result per point, spread over the hour's first seconds. Each result
//! carries a measurement document of the agent's shape (host facts, backends,
//! figures, every sample), built from the core types once per class and point
//! and stored as ingest stores it ([`Checked::stored_once`]): without the host
//! facts its snapshot holds (the hosts' snapshots hold the class's whole
//! facts) and without the figures its columns hold, which get their own
//! numbers per result. Loaded in SQL, one transaction per 24 hours.

use std::time::Instant;

use chrono::{DateTime, Utc};
use cipherfleet_coordinator::store::points::PointColumns;
use cipherfleet_coordinator::store::results::Checked;
use cipherfleet_coordinator::store::snapshots::CurrentFacts;
use cipherfleet_core::algorithm::Cipher;
use cipherfleet_core::facts::{Codegen, HostFacts, Noise, Os};
use cipherfleet_core::measurement::{
    Figures, Harness, Latency, LatencyMethod, Measurement, Memory, SampleKind, WorkerReport,
};
use cipherfleet_core::path::{Backends, Flavour, PathUsed};
use cipherfleet_core::spec::{Execution, JobSpec, Suite};
use sqlx::{Executor, PgPool};

use crate::fleet::{self, CLASSES};

/// The logical cores of every simulated host (the facts say 32); `quick` does not depend on it.
const CORES: u32 = 32;
/// Throughput samples per result: a `quick` point measures 0.5 s in windows
/// of 1/60 s, as the agent's own measurement of such a point has.
const SAMPLES: i32 = 29;
/// Relative speed of each class of [`CLASSES`], as the report's fleet has them.
const CLASS_SPEED: [f64; 5] = [1.0, 1.3, 0.8, 0.9, 1.0];

/// How much to generate.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub hosts: i64,
    pub days: i64,
}

/// The `quick` suite's points, as a campaign expands it on a host.
pub fn quick_points() -> Vec<JobSpec> {
    Suite::Quick.expand(CORES)
}

/// Loads `scale` of history ending at the hour before `end`: hosts, then one
/// campaign per hour, oldest first. Prints its progress every 30 days.
pub async fn generate(pool: &PgPool, scale: Scale, end: DateTime<Utc>) {
    fleet::create(pool, scale.hosts).await;
    whole_facts(pool).await;
    let points = quick_points();
    templates(pool, &points).await;
    let hours = scale.days * 24;
    let start = end - chrono::Duration::hours(hours);
    weeks_since(pool, start).await;
    let started = Instant::now();
    for day in 0..scale.days {
        load_day(pool, start, day, scale.days, points.len() as i64).await;
        if (day + 1) % 30 == 0 || day + 1 == scale.days {
            let results: i64 = sqlx::query_scalar("SELECT count(*) FROM results")
                .fetch_one(pool)
                .await
                .unwrap();
            println!(
                "  generated {} of {} days: {results} results, {:.0} s",
                day + 1,
                scale.days,
                started.elapsed().as_secs_f64()
            );
        }
    }
    sqlx::query("DROP TABLE bench_history_templates")
        .execute(pool)
        .await
        .expect("dropping the templates");
}

/// Lays out `results` as a coordinator running since `start` on this schema
/// would have it (migrations/0040): a week partition for every UTC week from
/// `start`'s, and no `results_before` (a fresh database's is empty), so a
/// retention pass folds the history week by week and drops the partitions.
async fn weeks_since(pool: &PgPool, start: DateTime<Utc>) {
    let mut conn = pool.acquire().await.expect("a connection");
    sqlx::query("SELECT set_config('cipherfleet.bench_start', $1, false)")
        .bind(start.to_rfc3339())
        .execute(&mut *conn)
        .await
        .unwrap();
    conn.execute(
        "DO $$ \
         DECLARE week timestamptz; first timestamptz; \
         BEGIN \
             ALTER TABLE results_raw DETACH PARTITION results_before; \
             DROP TABLE results_before; \
             SELECT min((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz) \
               INTO first FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
              WHERE i.inhparent = 'results_raw'::regclass; \
             week := date_trunc('week', current_setting('cipherfleet.bench_start')::timestamptz, 'UTC'); \
             WHILE week < first LOOP \
                 EXECUTE format('CREATE TABLE %I PARTITION OF results_raw FOR VALUES FROM (%L) TO (%L)', \
                     'results_' || to_char(week AT TIME ZONE 'UTC', 'YYYYMMDD'), week, week + interval '1 week'); \
                 week := week + interval '1 week'; \
             END LOOP; \
         END $$",
    )
    .await
    .expect("laying out the week partitions");
}

/// Gives every host's snapshot its class's whole facts ([`facts`], its own
/// hostname), as an agent's hello stores them: the report bench's fleet keeps
/// only the hostname there, and a result's document leaves out what its
/// snapshot holds.
async fn whole_facts(pool: &PgPool) {
    for class in 0..CLASSES.len() {
        sqlx::query(
            "UPDATE host_fact_snapshots s SET facts = $1 || jsonb_build_object('hostname', h.name) \
             FROM hosts h WHERE h.id = s.host_id AND h.id % $2 = $3",
        )
        .bind(serde_json::to_value(facts(class)).expect("facts serialise"))
        .bind(CLASSES.len() as i64)
        .bind(class as i64)
        .execute(pool)
        .await
        .expect("storing the hosts' facts");
    }
}

/// Measurement `m` as ingest stores it on a host of class `class`: the
/// document without what the host's snapshot and the result's columns hold,
/// the host keys it left out and the flags of the figures it left out. The
/// hostname is each host's own in its snapshot, so it is left out too; the
/// load (`noise`) differs from the hello's, so it stays.
fn stored_form(m: &Measurement, path_used: PathUsed, class: usize) -> (serde_json::Value, Vec<String>, i32) {
    let Ok(serde_json::Value::Object(mut snapshot)) = serde_json::to_value(facts(class)) else {
        unreachable!("facts are an object")
    };
    snapshot.remove("noise");
    let checked = Checked::new(
        None,
        path_used,
        m.figures.clone().expect("a successful measurement"),
        serde_json::to_string(m).expect("a measurement serialises"),
    )
    .stored_once(Some(&CurrentFacts::new(0, snapshot)));
    let keys = checked.from_snapshot.map(|f| f.keys).unwrap_or_default();
    let doc = serde_json::from_str(&checked.json).expect("stored JSON parses");
    (doc, keys, checked.figures_in_columns)
}

/// Facts of class `class` of [`CLASSES`] as its agent's probe reports them
/// (the measurement's `host`), before the hostname is set per host.
fn facts(class: usize) -> HostFacts {
    let (arch, vendor, model, features, build) = CLASSES[class];
    let flavour = if build == "software" {
        Flavour::Software
    } else {
        Flavour::Accelerated
    };
    let x86 = arch == "x86_64";
    let mut f = HostFacts::unknown(arch, flavour);
    f.hostname = Some("sim-00000".into());
    f.kernel_release = Some("6.1.0-18-amd64".into());
    f.os = Os {
        pretty_name: Some("Debian GNU/Linux 12 (bookworm)".into()),
        name: Some("Debian GNU/Linux".into()),
        id: Some("debian".into()),
        version_id: Some("12".into()),
    };
    f.memory_total_bytes = Some(128 << 30);
    f.cpu.vendor = Some(vendor.into());
    f.cpu.model_name = Some(model.into());
    f.cpu.family = x86.then_some(6);
    f.cpu.model = Some(85);
    f.cpu.stepping = Some(4);
    f.cpu.logical_cores = Some(CORES);
    f.cpu.available_parallelism = Some(CORES);
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    f.features.source = Some(if x86 { "cpuid" } else { "hwcap" }.into());
    f.features.checked = names(if x86 {
        &[
            "aes",
            "pclmulqdq",
            "ssse3",
            "avx",
            "avx2",
            "vaes",
            "vpclmulqdq",
            "avx512f",
            "sha",
        ]
    } else {
        &["aes", "pmull", "sha2", "neon"]
    });
    f.features.advertised = names(features);
    f.features.usable = names(features);
    if x86 {
        f.features.osxsave = Some(true);
        f.features.xcr0 = Some("0xe7".into());
    } else {
        f.features.hwcap = Some("0x8ff".into());
        f.features.hwcap2 = Some("0x0".into());
    }
    f.virtualization.hypervisor = Some(class == 3);
    if class == 3 {
        f.virtualization.kind = Some("kvm".into());
        f.virtualization.vendor_signature = Some("KVMKVMKVM".into());
    }
    f.virtualization.cpuinfo_foreign = Some(false);
    f.crypto.backends = backends(class);
    f.crypto.aes_hardware_accelerated = f.aes_usable() && flavour == Flavour::Accelerated;
    f.build.profile = "release".into();
    f.build.target = format!("{arch}-linux-musl");
    f.build.crates = [
        ("aead", "0.6.1"),
        ("aes", "0.9.4"),
        ("aes-gcm", "0.11.1"),
        ("cbc", "0.2.1"),
        ("ccm", "0.6.1"),
        ("chacha20", "0.10.2"),
        ("chacha20poly1305", "0.11.0"),
        ("cipher", "0.5.2"),
        ("cpufeatures", "0.3.1"),
        ("ctr", "0.10.1"),
        ("des", "0.9.0"),
        ("ecb", "0.2.1"),
        ("ghash", "0.6.0"),
        ("hkdf", "0.13.0"),
        ("hmac", "0.13.0"),
        ("ocb3", "0.2.0"),
        ("poly1305", "0.9.1"),
        ("polyval", "0.7.3"),
        ("ring", "0.17.14"),
        ("sha2", "0.11.1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    f.build.codegen = Some(Codegen {
        profile: "release".into(),
        opt_level: "3".into(),
        lto: "thin".into(),
        codegen_units: 1,
        target_features: names(&["crt-static", "fxsr", "sse", "sse2"]),
    });
    f.noise = Noise {
        cpufreq_governor: Some("performance".into()),
        cpufreq_driver: Some(if x86 { "intel_pstate" } else { "cppc_cpufreq" }.into()),
        boost: Some(true),
        smt_active: Some(x86),
        load_average: Some([0.1, 0.2, 0.2]),
        clocksource: Some(if x86 { "tsc" } else { "arch_sys_counter" }.into()),
        clock_read_ns: Some(20.0),
    };
    f
}

/// The backends the crates pick on class `class`: the best of its
/// architecture, but none for AES where the hypervisor masks AES-NI (class
/// 3), and all software in the software build (class 4).
fn backends(class: usize) -> Backends {
    let (arch, _, _, features, build) = CLASSES[class];
    if build == "software" {
        return Backends::soft();
    }
    let best = Backends::best_on(arch);
    if features.contains(&"aes") {
        best
    } else {
        Backends {
            aes: "soft".into(),
            ghash: "soft".into(),
            ..best
        }
    }
}

/// A typical throughput (MB/s) of `spec` on a path: a per-cipher rate at
/// 16 KiB, lower for small payloads (fixed costs per call).
fn typical_mb_s(spec: &JobSpec, path: PathUsed) -> f64 {
    let software = path != PathUsed::Accelerated;
    let base = match spec.point.algorithm.cipher {
        Cipher::Des | Cipher::TripleDes => 30.0,
        Cipher::ChaCha20 if software => 450.0,
        Cipher::ChaCha20 => 1500.0,
        _ if software => 300.0,
        _ => 4000.0,
    };
    let size = spec.point.size_bytes as f64;
    base * size / (size + 64.0)
}

/// The measurement of `spec` on class `class` at its typical figures: the
/// template every result of that class and point is made from.
fn template(spec: &JobSpec, class: usize) -> (Measurement, PathUsed, f64) {
    let backends = backends(class);
    let path_used = backends.path_for(spec.point.algorithm, spec.point.key_mode);
    let mb_s = typical_mb_s(spec, path_used) * CLASS_SPEED[class];
    let ops = mb_s * 1e6 / spec.point.size_bytes as f64;
    let ns = (1e9 / ops).max(1.0) as u64;
    let report = WorkerReport {
        path_used,
        backends,
        build_flavour: facts(class).build.flavour,
        selftest_passed: 4,
        figures: Figures {
            throughput_mb_s: mb_s,
            ops_per_s: ops,
            latency_ns: Latency {
                p50: ns,
                p90: ns + ns / 30,
                p99: ns + ns / 10,
                p999: ns * 3,
                max: ns * 3,
            },
            latency_method: if ns < 1000 {
                LatencyMethod::BatchMean
            } else {
                LatencyMethod::PerOp
            },
            batch_ops: if ns < 1000 { 64 } else { 1 },
            latency_samples: 1000,
            throughput_batch_ops: 4096,
            cv: Some(0.01),
            samples: SAMPLES as u32,
            sample_kind: SampleKind::Window,
            low_samples: false,
            sample_seconds: 1.0 / 60.0,
            warmup_seconds: 0.1,
            elapsed_seconds: 0.5,
            operations: (ops * 0.5) as u64,
            bytes_processed: (mb_s * 0.5e6) as u64,
            all_running_bytes: (mb_s * 0.5e6) as u64,
            all_running_seconds: 0.5,
            objects: None,
            arrival_rate_per_s: None,
            cpu_user_seconds: 0.49,
            cpu_sys_seconds: 0.0,
            cpu_utilization: 0.99,
            key_setup_ns: 85.0,
            sample_throughputs_mb_s: vec![mb_s; SAMPLES as usize],
            memory: Some(Memory {
                cipher_state_bytes: 496,
                peak_rss_bytes: 4_546_560,
                heap_bytes_per_op: Some(0.0),
                allocs_per_op: Some(0.0),
            }),
        },
        harness: Harness::Engine,
    };
    (Measurement::ok(spec, report, Some(facts(class))), path_used, mb_s)
}

/// One row per class and point: the point's columns, the job's spec as the
/// coordinator stores it, the measurement template, its path and throughput.
async fn templates(pool: &PgPool, points: &[JobSpec]) {
    pool.execute(
        "CREATE TABLE bench_history_templates (class int, point int, spec jsonb, algorithm text, \
         direction text, size_bytes bigint, threads int, concurrency int, key_mode text, path text, nonce text, \
         provider text, time_limit float8, doc jsonb, path_used text, mb_s float8, latency_method text, \
         batch_ops bigint, from_snapshot text[], in_columns int, PRIMARY KEY (class, point))",
    )
    .await
    .expect("creating the templates");
    for class in 0..CLASSES.len() {
        let cols = PointColumns::new(points.iter().map(|s| s.point));
        let mut specs = Vec::new();
        let mut docs = Vec::new();
        let mut paths = Vec::new();
        let mut rates = Vec::new();
        let mut limits = Vec::new();
        let (mut methods, mut batch_ops, mut keys, mut bits) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for spec in points {
            let (m, path_used, mb_s) = template(spec, class);
            let (doc, from_snapshot, in_columns) = stored_form(&m, path_used, class);
            let figures = m.figures.as_ref().expect("a successful measurement");
            methods.push(figures.latency_method.as_str());
            batch_ops.push(figures.batch_ops as i64);
            // A text[] bound from Rust must be rectangular: the keys are the same for every point of a class.
            keys.push(from_snapshot.join("\u{1f}"));
            bits.push(in_columns);
            specs.push(serde_json::to_value(spec).expect("a spec serialises"));
            docs.push(doc);
            paths.push(path_used.to_string());
            rates.push(mb_s);
            limits.push(spec.time_limit(Execution::Native).as_secs_f64());
        }
        sqlx::query(
            "INSERT INTO bench_history_templates \
             SELECT $1, n - 1, spec, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, \
                 provider, time_limit, doc, path_used, mb_s, latency_method, batch_ops, \
                 string_to_array(from_snapshot, E'\\x1f'), in_columns \
             FROM UNNEST($2::jsonb[], $3::text[], $4::text[], $5::bigint[], $6::int[], \
                 $7::int[], $8::text[], $9::text[], $10::text[], $11::text[], $12::float8[], $13::jsonb[], \
                 $14::text[], $15::float8[], $16::text[], $17::bigint[], $18::text[], $19::int[]) \
                 WITH ORDINALITY AS t(spec, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, \
                 nonce, provider, time_limit, doc, path_used, mb_s, latency_method, batch_ops, from_snapshot, \
                 in_columns, n)",
        )
        .bind(class as i32)
        .bind(specs)
        .bind(cols.algorithm)
        .bind(cols.direction)
        .bind(cols.size_bytes)
        .bind(cols.threads)
        .bind(cols.concurrency)
        .bind(cols.key_mode)
        .bind(cols.path)
        .bind(cols.nonce)
        .bind(cols.provider)
        .bind(limits)
        .bind(docs)
        .bind(paths)
        .bind(rates)
        .bind(methods)
        .bind(batch_ops)
        .bind(keys)
        .bind(bits)
        .execute(pool)
        .await
        .expect("storing the templates");
    }
}

/// The campaigns of day `$2` after `$1`, and every simulated host with its
/// position among them (a macro, so the statements stay literals).
macro_rules! today {
    () => {
        "WITH c AS (SELECT id, created_at FROM campaigns WHERE started_by = 'bench-history' \
             AND created_at >= $1 + $2 * interval '1 day' AND created_at < $1 + ($2 + 1) * interval '1 day'), \
         h AS (SELECT id, current_snapshot_id, name, row_number() OVER (ORDER BY id) - 1 AS n FROM hosts) "
    };
}

/// Day `day` after `start`: 24 finished campaigns an hour apart, each with a
/// job and a result of every point on every host, in one transaction, of `days`.
/// Throughput varies ±5 % per result and steps up 3 % half-way through
/// (an upgrade), so the history has something to show.
async fn load_day(pool: &PgPool, start: DateTime<Utc>, day: i64, days: i64, points: i64) {
    let mut tx = pool.begin().await.expect("transaction");
    tx.execute("SET LOCAL synchronous_commit = off; SET LOCAL statement_timeout = 0")
        .await
        .unwrap();
    let matrix = serde_json::to_value(Suite::Quick.matrices(CORES)).expect("a matrix serialises");
    sqlx::query(
        "INSERT INTO campaigns (name, suite, matrix, started_by, status, created_at, finished_at) \
         SELECT format('history %s', c), 'quick', $3, 'bench-history', 'finished', \
             $1 + c * interval '1 hour', $1 + c * interval '1 hour' + interval '1 minute' \
         FROM generate_series($2 * 24, $2 * 24 + 23) c",
    )
    .bind(start)
    .bind(day)
    .bind(matrix)
    .execute(&mut *tx)
    .await
    .expect("creating campaigns");
    sqlx::query(concat!(
        today!(),
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, \
             threads, concurrency, key_mode, path, nonce, provider, time_limit_seconds, status, created_at, \
             assigned_at, started_at, finished_at) \
         SELECT c.id, h.id, (h.n * $3 + t.point)::int, t.spec, t.algorithm, t.direction, t.size_bytes, t.threads, \
             t.concurrency, t.key_mode, t.path, t.nonce, t.provider, t.time_limit, 'done', c.created_at, \
             c.created_at + t.point * interval '1 s', c.created_at + t.point * interval '1 s', \
             c.created_at + (t.point + 1) * interval '1 s' \
         FROM c CROSS JOIN h JOIN bench_history_templates t ON t.class = h.id % 5"
    ))
    .bind(start)
    .bind(day)
    .bind(points)
    .execute(&mut *tx)
    .await
    .expect("creating jobs");
    sqlx::query(concat!(
        today!(),
        "INSERT INTO results (job_id, host_id, snapshot_id, created_at, algorithm, direction, size_bytes, \
             threads, concurrency, key_mode, path, nonce, provider, path_used, throughput_mb_s, ops_per_s, \
             latency_p50_ns, latency_p90_ns, latency_p99_ns, latency_p999_ns, latency_max_ns, latency_method, \
             batch_ops, cv, samples, cpu_user_seconds, cpu_sys_seconds, cpu_utilization, key_setup_ns, \
             elapsed_seconds, sample_throughputs, measurement, low_samples, cipher_state_bytes, peak_rss_bytes, \
             heap_bytes_per_op, allocs_per_op, host_from_snapshot, figures_in_columns) \
         SELECT j.id, h.id, h.current_snapshot_id, j.finished_at, t.algorithm, t.direction, t.size_bytes, \
             t.threads, t.concurrency, t.key_mode, t.path, t.nonce, t.provider, t.path_used, m.mb_s, \
             m.mb_s * 1e6 / t.size_bytes, m.ns, m.ns * 1.03, m.ns * 1.1, m.ns * 3, m.ns * 3, \
             t.latency_method, t.batch_ops, s.cv, $5, 0.49, 0.0, \
             0.98 + random() * 0.02, 80 + random() * 10, 0.5, s.samples, \
             t.doc || jsonb_build_object('operations', round(m.mb_s * 0.5e6 / t.size_bytes), \
                 'bytes_processed', round(m.mb_s * 0.5e6), 'all_running_bytes', round(m.mb_s * 0.5e6)), \
             false, 496, 4546560, 0.0, 0.0, t.from_snapshot, t.in_columns \
         FROM c CROSS JOIN h JOIN bench_history_templates t ON t.class = h.id % 5 \
         JOIN jobs j ON j.campaign_id = c.id AND j.position = h.n * $3 + t.point \
         CROSS JOIN LATERAL (SELECT t.mb_s * (0.95 + random() * 0.1) \
             * CASE WHEN c.created_at >= $1 + $4 * interval '12 hours' THEN 1.03 ELSE 1 END AS mb_s) m0 \
         CROSS JOIN LATERAL (SELECT m0.mb_s, greatest(1, round(t.size_bytes / m0.mb_s * 1e3))::bigint AS ns) m \
         CROSS JOIN LATERAL (SELECT ARRAY(SELECT m.mb_s * (0.97 + random() * 0.06) FROM generate_series(1, $5)) \
             AS samples, 0.005 + random() * 0.02 AS cv) s"
    ))
    .bind(start)
    .bind(day)
    .bind(points)
    .bind(days)
    .bind(SAMPLES)
    .execute(&mut *tx)
    .await
    .expect("loading results");
    tx.commit().await.expect("committing the day");
}
