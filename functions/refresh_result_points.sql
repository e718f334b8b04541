-- Rebuilds the latest result of every point from results: the built-in
-- provider's in result_points, every other provider's in provider_points
-- (migrations/0036). What a bulk load such as the report benchmark calls
-- after inserting results directly.
CREATE OR REPLACE FUNCTION refresh_result_points() RETURNS void LANGUAGE sql AS $$
    TRUNCATE result_points;
    INSERT INTO result_points (host_id, algorithm, direction, size_bytes, threads, concurrency,
        key_mode, path, nonce, result_id, measured_at, path_used, throughput_mb_s, ops_per_s,
        latency_p99_ns, cv, samples, low_samples, cipher_state_bytes, peak_rss_bytes,
        heap_bytes_per_op, allocs_per_op, snapshot_id, backends, result_count)
    SELECT DISTINCT ON (host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode,
            path, nonce)
        host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, nonce,
        id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples,
        low_samples, cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op,
        snapshot_id, NULLIF(measurement->'backends', 'null'::jsonb),
        count(*) OVER (PARTITION BY host_id, algorithm, direction, size_bytes, threads,
                       coalesce(concurrency, 0), key_mode, path, nonce)
    FROM results
    WHERE provider = 'rustcrypto'
    ORDER BY host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, nonce,
        created_at DESC, id DESC;
    TRUNCATE provider_points;
    INSERT INTO provider_points (host_id, provider, algorithm, direction, size_bytes, threads, concurrency,
        key_mode, path, nonce, result_id, measured_at, path_used, throughput_mb_s, ops_per_s,
        latency_p99_ns, cv, samples, low_samples, snapshot_id, implementation, result_count)
    SELECT DISTINCT ON (host_id, provider, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0),
            key_mode, path, nonce)
        host_id, provider, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path,
        nonce, id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples, low_samples,
        snapshot_id, NULLIF(measurement->'implementation', 'null'::jsonb),
        count(*) OVER (PARTITION BY host_id, provider, algorithm, direction, size_bytes, threads,
                       coalesce(concurrency, 0), key_mode, path, nonce)
    FROM results
    WHERE provider <> 'rustcrypto'
    ORDER BY host_id, provider, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode,
        path, nonce, created_at DESC, id DESC;
$$;
