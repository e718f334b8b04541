-- Where each encryption's nonce came from: `counter` (every job and result
-- before this migration) or `random` (the field-level scenario's cost of a
-- nonce from the OS per message). Part of the point (cipherfleet_core::Point),
-- so it is part of every copy of the point's columns and of result_points' key:
-- a point measured both ways keeps a latest result for each.
ALTER TABLE jobs
    ADD COLUMN nonce text NOT NULL DEFAULT 'counter' CHECK (nonce IN ('counter', 'random'));
ALTER TABLE results
    ADD COLUMN nonce text NOT NULL DEFAULT 'counter' CHECK (nonce IN ('counter', 'random'));
ALTER TABLE result_points
    ADD COLUMN nonce text NOT NULL DEFAULT 'counter';
ALTER TABLE result_points DROP CONSTRAINT result_points_pkey;
ALTER TABLE result_points
    ADD PRIMARY KEY (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce);

CREATE OR REPLACE FUNCTION refresh_result_points() RETURNS void LANGUAGE sql AS $$
    TRUNCATE result_points;
    INSERT INTO result_points (host_id, algorithm, direction, size_bytes, threads, concurrency,
        key_mode, path, nonce, result_id, measured_at, path_used, throughput_mb_s, ops_per_s,
        latency_p99_ns, cv, samples, low_samples, cipher_state_bytes, peak_rss_bytes,
        heap_bytes_per_op, allocs_per_op, result_count)
    SELECT DISTINCT ON (host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode,
            path, nonce)
        host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, nonce,
        id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples,
        low_samples, cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op,
        count(*) OVER (PARTITION BY host_id, algorithm, direction, size_bytes, threads,
                       coalesce(concurrency, 0), key_mode, path, nonce)
    FROM results
    ORDER BY host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, nonce,
        created_at DESC, id DESC;
$$;
