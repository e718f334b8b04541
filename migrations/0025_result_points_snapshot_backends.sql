-- The findings pass (`db::series::latest_accelerated`) reads the latest result
-- of every accelerated point of a chunk of hosts, with the facts snapshot it
-- ran on and the backends its worker reported. Both were read by joining each
-- `result_points` row back into `results` (a heap page of the large table per
-- point, 135,000 of them at 1,000,000 results); kept here, copied by the same
-- upsert that copies the figures (src/db/points.rs), the read is one table.
-- `snapshot_id` has no foreign key of its own: a snapshot is deleted only
-- with its host, whose points go with it (a key would cost every upsert a
-- lookup, and every snapshot deleted a scan of this table).
ALTER TABLE result_points
    ADD COLUMN snapshot_id bigint,
    -- What the worker reported under `measurement.backends`; NULL when it did not.
    ADD COLUMN backends jsonb;

UPDATE result_points p SET snapshot_id = r.snapshot_id, backends = NULLIF(r.measurement->'backends', 'null'::jsonb)
FROM results r WHERE r.id = p.result_id;

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
    ORDER BY host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path, nonce,
        created_at DESC, id DESC;
$$;

-- `results_series` (0020) leads with the host and holds every column of
-- `results_point`'s in an order that serves the same lookups (a host's
-- results, a host's series at one size), so the older index only cost every
-- ingested result one more index entry.
DROP INDEX results_point;
