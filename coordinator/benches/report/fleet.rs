//! The simulated fleet and its results, loaded in bulk with `INSERT … SELECT
//! generate_series` (each result with its campaign and job row, as the schema
//! requires): 10,000 hosts labelled `simulated` in five machine classes, each
//! with a facts snapshot, and up to 1,000,000 results.

use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{Executor, PgPool, Postgres};

/// Simulated hosts, spread over [`CLASSES`].
pub const HOSTS: i64 = 10_000;
/// Points each host measures per round: the first 50 of the matrix order
/// below (16 KiB, 1 thread, encrypt: 27 algorithms accelerated, 23 in
/// software), so 1,000,000 results are two rounds of every point on every
/// host — each series has a history, as the findings pass needs.
pub const POINTS_PER_HOST: i64 = 50;
/// Points of one campaign: a campaign is 10 jobs on each of the 10,000 hosts
/// (100,000 jobs), the campaign of issue 12's ingest target.
pub const POINTS_PER_CAMPAIGN: i64 = 10;
/// Every this many hosts one measures its accelerated path at a third of its
/// class's speed: `below-peers` findings for the findings pass to find.
pub const SLOW_EVERY: i64 = 97;

/// Machine classes: arch, vendor, model, usable features, build flavour.
/// Host `id` is in class `id % 5`; the results' SQL scales their speed per class.
pub const CLASSES: [(&str, &str, &str, &[&str], &str); 5] = [
    (
        "x86_64",
        "GenuineIntel",
        "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
        &["aes", "pclmulqdq", "avx", "avx2", "avx512f"],
        "accelerated",
    ),
    (
        "x86_64",
        "AuthenticAMD",
        "AMD EPYC 7543 32-Core Processor",
        &["aes", "pclmulqdq", "avx", "avx2", "vaes", "vpclmulqdq"],
        "accelerated",
    ),
    (
        "aarch64",
        "ARM",
        "Neoverse-N1",
        &["aes", "pmull", "sha2"],
        "accelerated",
    ),
    // A hypervisor masking AES-NI: the accelerated path runs in software.
    (
        "x86_64",
        "GenuineIntel",
        "Intel Xeon Processor (Cascadelake)",
        &["avx", "avx2"],
        "accelerated",
    ),
    (
        "x86_64",
        "GenuineIntel",
        "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
        &["aes", "pclmulqdq", "avx", "avx2", "avx512f"],
        "software",
    ),
];

pub const CLASS_COUNT: usize = CLASSES.len();

/// `hosts` hosts labelled `simulated` (the report's [`HOSTS`]), each with a
/// facts snapshot of its class.
pub async fn create(pool: &PgPool, hosts: i64) {
    sqlx::query(
        "INSERT INTO hosts (name, labels) \
         SELECT format('sim-%s', lpad(i::text, 5, '0')), \
                jsonb_build_object('simulated', 'report-bench', 'rack', format('r%s', i % 10)) \
         FROM generate_series(1, $1) i",
    )
    .bind(hosts)
    .execute(pool)
    .await
    .expect("creating hosts");
    for (i, (arch, vendor, model, features, build)) in CLASSES.iter().enumerate() {
        sqlx::query(
            "INSERT INTO host_fact_snapshots (host_id, facts_hash, facts, arch, cpu_vendor, cpu_model_name, \
                 logical_cores, memory_total_bytes, os_name, kernel_release, hypervisor_present, \
                 features_advertised, features_usable, build_flavour, agent_version) \
             SELECT h.id, sha256(convert_to(h.name, 'UTF8')), jsonb_build_object('hostname', h.name), \
                 $2, $3, $4, 32, 137438953472, 'Linux', '6.1.0-18-amd64', $1 = 3, $5, $5, $6, '0.1.0' \
             FROM hosts h WHERE h.id % $7 = $1",
        )
        .bind(i as i64)
        .bind(arch)
        .bind(vendor)
        .bind(model)
        .bind(features.to_vec())
        .bind(build)
        .bind(CLASSES.len() as i64)
        .execute(pool)
        .await
        .expect("creating facts snapshots");
    }
    sqlx::query("UPDATE hosts h SET current_snapshot_id = s.id FROM host_fact_snapshots s WHERE s.host_id = h.id")
        .execute(pool)
        .await
        .expect("linking snapshots");
}

/// Result `n` (0-based) is of host `n % HOSTS` and point `n / HOSTS` of its
/// round (`n / (HOSTS × POINTS_PER_HOST)`), so every dataset reaches every
/// host; campaign `n / (HOSTS × POINTS_PER_CAMPAIGN)` holds it at position
/// `n % (HOSTS × POINTS_PER_CAMPAIGN)`. A point is numbered in the order of
/// the whole matrix — algorithm fastest, then path, direction, size (16 KiB
/// first), then 2, 4 and 8 threads at 16 KiB — of which each host measures
/// the first [`POINTS_PER_HOST`]. `$1..$2` are the results, `$3` the results
/// of a round, `$4` the hosts, `$5` the results of a campaign.
macro_rules! point_sql {
    () => {
        "\
    WITH n AS (SELECT g AS n, g % $3 AS k, g / $3 AS round FROM generate_series($1::bigint, $2::bigint - 1) g), \
    p AS (SELECT n, round, k % $4 AS host_index, k / $4 AS point, n / $5 AS campaign, n % $5 AS position FROM n), \
    d AS (SELECT n, round, host_index, campaign, position, point, \
            CASE WHEN point < 1080 THEN point % 27 ELSE (point - 1080) % 27 END AS alg, \
            CASE WHEN point < 1080 THEN (ARRAY[16384, 1024, 16, 64, 256, 8192, 11, 18, 1048576, 10485760])[(point / 108) % 10 + 1] \
                 ELSE 16384 END AS size_bytes, \
            CASE WHEN point < 1080 THEN 1 ELSE (ARRAY[2, 4, 8])[((point - 1080) / 108) % 3 + 1] END AS threads, \
            CASE WHEN point < 1080 THEN (point / 54) % 2 ELSE ((point - 1080) / 54) % 2 END AS dir, \
            CASE WHEN point < 1080 THEN (point / 27) % 2 ELSE ((point - 1080) / 27) % 2 END AS soft \
          FROM p) \
    SELECT d.n, d.round, d.campaign, d.position, h.id AS host_id, h.current_snapshot_id, \
        (ARRAY['aes-128-ecb','aes-192-ecb','aes-256-ecb','aes-128-cbc','aes-192-cbc','aes-256-cbc','aes-128-ctr', \
               'aes-192-ctr','aes-256-ctr','aes-128-gcm','aes-192-gcm','aes-256-gcm','aes-128-ccm','aes-192-ccm', \
               'aes-256-ccm','aes-128-ocb','aes-192-ocb','aes-256-ocb','aes-128-cbc-hmac-sha256', \
               'aes-256-cbc-hmac-sha256','chacha20','chacha20-poly1305','xchacha20-poly1305','des-ecb','des-cbc', \
               'des-ede3-ecb','des-ede3-cbc'])[d.alg + 1] AS algorithm, \
        d.alg, d.size_bytes, d.threads, \
        CASE d.dir WHEN 0 THEN 'encrypt' ELSE 'decrypt' END AS direction, \
        CASE d.soft WHEN 0 THEN 'accelerated' ELSE 'software' END AS path, \
        h.id % 5 AS class \
    FROM d JOIN hosts h ON h.name = format('sim-%s', lpad((d.host_index + 1)::text, 5, '0'))"
    };
}

/// Results in one round of the matrix, and in one campaign.
const PER_ROUND: i64 = HOSTS * POINTS_PER_HOST;
const PER_CAMPAIGN: i64 = HOSTS * POINTS_PER_CAMPAIGN;

/// `sql` over [`point_sql!`]'s results `from..to`: its `$1`–`$5` bound.
fn over_points(sql: &'static str, from: i64, to: i64) -> Query<'static, Postgres, PgArguments> {
    sqlx::query(sql)
        .bind(from)
        .bind(to)
        .bind(PER_ROUND)
        .bind(HOSTS)
        .bind(PER_CAMPAIGN)
}

/// Loads results `from..to` with their campaigns and jobs, in one transaction.
pub async fn load_results(pool: &PgPool, from: i64, to: i64) {
    let mut tx = pool.begin().await.expect("transaction");
    // The pool's statement timeout guards the coordinator, not a bulk load of minutes.
    tx.execute("SET LOCAL synchronous_commit = off; SET LOCAL statement_timeout = 0")
        .await
        .unwrap();
    // Finished campaigns, an hour apart.
    let campaigns = (to - 1) / PER_CAMPAIGN + 1;
    sqlx::query(
        "INSERT INTO campaigns (name, suite, matrix, started_by, status, created_at, finished_at) \
         SELECT format('report-bench %s', c), 'full', '{}', 'bench-report', 'finished', \
                timestamptz '2026-01-01 00:00Z' + c * interval '1 hour', \
                timestamptz '2026-01-01 00:50Z' + c * interval '1 hour' \
         FROM generate_series((SELECT count(*) FROM campaigns WHERE started_by = 'bench-report'), $1 - 1) c",
    )
    .bind(campaigns)
    .execute(&mut *tx)
    .await
    .expect("creating campaigns");
    let jobs = concat!(
        "INSERT INTO jobs (campaign_id, host_id, position, spec, algorithm, direction, size_bytes, threads, \
             key_mode, path, time_limit_seconds, status, created_at, assigned_at, started_at, finished_at) \
         SELECT c.id, x.host_id, x.position::int, '{}', x.algorithm, x.direction, x.size_bytes, x.threads, \
             'static', x.path, 60, 'done', c.created_at, c.created_at, c.created_at, c.created_at \
         FROM (",
        point_sql!(),
        ") x JOIN campaigns c ON c.name = format('report-bench %s', x.campaign)"
    );
    over_points(jobs, from, to)
        .execute(&mut *tx)
        .await
        .expect("creating jobs");
    // Throughput: a per-algorithm base, scaled by payload size (fixed costs
    // weigh on small payloads), class, threads and path, with ±10 % noise.
    // AES on the class without usable AES, and DES everywhere, runs in
    // software; every SLOW_EVERY-th host's accelerated path is slow.
    let results = concat!(
        "INSERT INTO results (job_id, host_id, snapshot_id, created_at, algorithm, direction, size_bytes, threads, \
             concurrency, key_mode, path, path_used, throughput_mb_s, ops_per_s, latency_p50_ns, latency_p90_ns, \
             latency_p99_ns, latency_p999_ns, latency_max_ns, latency_method, batch_ops, cv, samples, \
             cpu_user_seconds, cpu_sys_seconds, cpu_utilization, key_setup_ns, elapsed_seconds, measurement) \
         SELECT j.id, x.host_id, x.current_snapshot_id, c.created_at + x.position * interval '1 ms', x.algorithm, \
             x.direction, x.size_bytes, x.threads, NULL, 'static', x.path, m.path_used, m.mb_s, \
             m.mb_s * 1e6 / x.size_bytes, m.ns, m.ns * 1.1, m.ns * 1.4, m.ns * 2, m.ns * 3, 'per-op', 1, \
             0.005 + random() * 0.04, 20, 1, 0.01, 0.99, 300, 1, '{}' \
         FROM (",
        point_sql!(),
        ") x \
         JOIN campaigns c ON c.name = format('report-bench %s', x.campaign) \
         JOIN jobs j ON j.campaign_id = c.id AND j.position = x.position::int \
         CROSS JOIN LATERAL (SELECT \
             CASE WHEN x.path = 'software' OR x.alg >= 23 OR x.class IN (3, 4) AND x.alg < 20 \
                  THEN 'software' ELSE 'accelerated' END AS path_used) u \
         CROSS JOIN LATERAL (SELECT u.path_used, \
             (CASE WHEN x.alg >= 23 THEN 60 WHEN x.alg >= 20 THEN 1500 ELSE 4000 END) \
               * (CASE WHEN u.path_used = 'software' AND x.alg < 23 THEN 0.08 ELSE 1 END) \
               * (CASE WHEN x.path = 'accelerated' AND x.host_id % $6 = 0 THEN 0.3 ELSE 1 END) \
               * x.size_bytes / (x.size_bytes + 64.0) * (ARRAY[1.0, 1.3, 0.8, 0.9, 1.0])[x.class + 1] \
               * x.threads * (0.9 + random() * 0.2) AS mb_s) m0 \
         CROSS JOIN LATERAL (SELECT m0.path_used, m0.mb_s, \
             greatest(1, (x.size_bytes / m0.mb_s * 1e3)::bigint) AS ns) m"
    );
    over_points(results, from, to)
        .bind(SLOW_EVERY)
        .execute(&mut *tx)
        .await
        .expect("loading results");
    tx.commit().await.expect("committing the bulk load");
}
