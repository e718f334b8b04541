//! A batch's results inserted in one statement: each column an array,
//! `UNNEST`ed into rows.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::document::KEY_SEPARATOR;
use super::{Checked, NewResult};
use crate::store::Result;
use crate::store::points::ResultKey;

/// Inserts the rows of `inserts` (indices into `items`, each job once) in one
/// statement; returns each job's new result.
///
/// No `ON CONFLICT (job_id)`: a job's row, locked by the batch, is what keeps
/// its result once (a job is `done` exactly when it has had one, and only
/// this transaction makes it so), not the unique index on `job_id`. A
/// `results` partitioned by time cannot have that index (a partitioned
/// table's unique indexes hold its partition key), so the release that
/// partitions it needs the release before it, which runs beside it during a
/// rolling upgrade, to store results without it (docs/operations.md,
/// "Upgrading").
pub(super) async fn insert_rows(
    tx: &mut PgConnection,
    items: &[NewResult],
    inserts: &[(usize, &Checked)],
) -> Result<HashMap<Uuid, ResultKey>> {
    let mut c = Columns::default();
    for (i, checked) in inserts {
        c.push(items[*i].job_id, checked);
    }
    let rows: Vec<(i64, Uuid, DateTime<Utc>)> = sqlx::query_as(
        "INSERT INTO results (job_id, host_id, snapshot_id, algorithm, direction, size_bytes, \
             threads, concurrency, key_mode, path, nonce, provider, path_used, throughput_mb_s, ops_per_s, \
             latency_p50_ns, latency_p90_ns, latency_p99_ns, latency_p999_ns, latency_max_ns, \
             latency_method, batch_ops, cv, samples, cpu_user_seconds, cpu_sys_seconds, \
             cpu_utilization, key_setup_ns, elapsed_seconds, sample_throughputs, measurement, \
             host_from_snapshot, low_samples, cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, \
             allocs_per_op, figures_in_columns) \
         SELECT j.id, j.host_id, coalesce(r.snapshot_id, h.current_snapshot_id), j.algorithm, j.direction, j.size_bytes, \
             j.threads, j.concurrency, j.key_mode, j.path, j.nonce, j.provider, r.path_used, r.throughput_mb_s, r.ops_per_s, \
             r.p50, r.p90, r.p99, r.p999, r.max, r.latency_method, r.batch_ops, r.cv, r.samples, \
             r.cpu_user, r.cpu_sys, r.cpu_utilization, r.key_setup_ns, r.elapsed_seconds, \
             ($27::double precision[])[r.samples_from:r.samples_to], \
             r.measurement::jsonb, string_to_array(r.from_snapshot, E'\\x1f'), r.low_samples, r.cipher_state_bytes, r.peak_rss_bytes, r.heap_bytes_per_op, \
             r.allocs_per_op, r.figures_in_columns \
         FROM UNNEST($1::uuid[], $2::text[], $3::double precision[], $4::double precision[], \
                 $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], \
                 $11::bigint[], $12::double precision[], $13::integer[], $14::double precision[], \
                 $15::double precision[], $16::double precision[], $17::double precision[], \
                 $18::double precision[], $19::integer[], $20::text[], $21::boolean[], $22::bigint[], \
                 $23::bigint[], $24::double precision[], $25::double precision[], $26::integer[], \
                 $28::bigint[], $29::text[], $30::integer[]) \
             AS r(job_id, path_used, throughput_mb_s, ops_per_s, p50, p90, p99, p999, max, \
                  latency_method, batch_ops, cv, samples, cpu_user, cpu_sys, cpu_utilization, \
                  key_setup_ns, elapsed_seconds, samples_from, measurement, low_samples, \
                  cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op, samples_to, \
                  snapshot_id, from_snapshot, figures_in_columns) \
         JOIN jobs j ON j.id = r.job_id JOIN hosts h ON h.id = j.host_id \
         RETURNING id, job_id, created_at",
    )
    .bind(c.job_id)
    .bind(c.path_used)
    .bind(c.throughput_mb_s)
    .bind(c.ops_per_s)
    .bind(c.p50)
    .bind(c.p90)
    .bind(c.p99)
    .bind(c.p999)
    .bind(c.max)
    .bind(c.latency_method)
    .bind(c.batch_ops)
    .bind(c.cv)
    .bind(c.samples)
    .bind(c.cpu_user)
    .bind(c.cpu_sys)
    .bind(c.cpu_utilization)
    .bind(c.key_setup_ns)
    .bind(c.elapsed_seconds)
    .bind(c.samples_from)
    .bind(c.measurement)
    .bind(c.low_samples)
    .bind(c.cipher_state_bytes)
    .bind(c.peak_rss_bytes)
    .bind(c.heap_bytes_per_op)
    .bind(c.allocs_per_op)
    .bind(c.samples_to)
    .bind(c.sample_values)
    .bind(c.snapshot_id)
    .bind(c.from_snapshot)
    .bind(c.figures_in_columns)
    .fetch_all(tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, job, created_at)| (job, ResultKey { id, created_at }))
        .collect())
}

/// Results as the column arrays of [`insert_rows`]' `UNNEST`.
#[derive(Default)]
struct Columns<'a> {
    job_id: Vec<Uuid>,
    path_used: Vec<&'a str>,
    throughput_mb_s: Vec<f64>,
    ops_per_s: Vec<f64>,
    p50: Vec<i64>,
    p90: Vec<i64>,
    p99: Vec<i64>,
    p999: Vec<i64>,
    max: Vec<i64>,
    latency_method: Vec<&'a str>,
    batch_ops: Vec<i64>,
    cv: Vec<Option<f64>>,
    samples: Vec<i32>,
    cpu_user: Vec<f64>,
    cpu_sys: Vec<f64>,
    cpu_utilization: Vec<f64>,
    key_setup_ns: Vec<f64>,
    elapsed_seconds: Vec<f64>,
    /// Every result's samples one after another, and each result's 1-based
    /// first and last index in them: arrays of arrays must be rectangular, and
    /// a slice per row costs PostgreSQL far less than converting a JSON array.
    sample_values: Vec<f64>,
    samples_from: Vec<i32>,
    samples_to: Vec<i32>,
    measurement: Vec<&'a str>,
    low_samples: Vec<bool>,
    cipher_state_bytes: Vec<Option<i64>>,
    peak_rss_bytes: Vec<Option<i64>>,
    heap_bytes_per_op: Vec<Option<f64>>,
    allocs_per_op: Vec<Option<f64>>,
    /// [`super::FromSnapshot`]: its snapshot, and its keys joined by [`KEY_SEPARATOR`].
    snapshot_id: Vec<Option<i64>>,
    from_snapshot: Vec<Option<String>>,
    figures_in_columns: Vec<i32>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, job_id: Uuid, r: &'a Checked) {
        let c = &r.columns;
        self.job_id.push(job_id);
        self.path_used.push(&c.path_used);
        self.throughput_mb_s.push(c.throughput_mb_s);
        self.ops_per_s.push(c.ops_per_s);
        self.p50.push(c.latency_p50_ns);
        self.p90.push(c.latency_p90_ns);
        self.p99.push(c.latency_p99_ns);
        self.p999.push(c.latency_p999_ns);
        self.max.push(c.latency_max_ns);
        self.latency_method.push(&c.latency_method);
        self.batch_ops.push(c.batch_ops);
        self.cv.push(c.cv);
        self.samples.push(c.samples);
        self.cpu_user.push(c.cpu_user_seconds);
        self.cpu_sys.push(c.cpu_sys_seconds);
        self.cpu_utilization.push(c.cpu_utilization);
        self.key_setup_ns.push(c.key_setup_ns);
        self.elapsed_seconds.push(c.elapsed_seconds);
        // An empty slice (from = to + 1) is the empty array.
        self.samples_from.push(index(self.sample_values.len() + 1));
        self.sample_values.extend_from_slice(&c.sample_throughputs);
        self.samples_to.push(index(self.sample_values.len()));
        self.measurement.push(&r.json);
        self.low_samples.push(c.low_samples);
        self.cipher_state_bytes.push(c.memory.cipher_state_bytes);
        self.peak_rss_bytes.push(c.memory.peak_rss_bytes);
        self.heap_bytes_per_op.push(c.memory.heap_bytes_per_op);
        self.allocs_per_op.push(c.memory.allocs_per_op);
        let from = r.from_snapshot.as_ref();
        self.snapshot_id.push(from.map(|f| f.snapshot_id));
        self.from_snapshot
            .push(from.map(|f| f.keys.join(KEY_SEPARATOR.encode_utf8(&mut [0; 4]))));
        self.figures_in_columns.push(r.figures_in_columns);
    }
}

/// A position in a batch's samples as PostgreSQL's array subscript: a batch
/// of [`crate::ingest::Config::batch`] results of at most `wire::MAX_SAMPLES`
/// (65,536) samples each stays far inside `integer`.
fn index(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
