-- How each snapshot's agent binary was compiled (facts build.codegen): a new
-- LTO mode, codegen-unit count or set of compile-time target features changes
-- what the host measures, so a change is a fact change like a new kernel.
-- NULL / empty for agents that did not report it.
ALTER TABLE host_fact_snapshots
    -- One line, e.g. "release, opt-level 3, LTO fat, 1 codegen unit" (core::facts::Codegen::summary).
    ADD COLUMN build_codegen text,
    ADD COLUMN build_target_features text[] NOT NULL DEFAULT '{}';

-- Snapshots stored before this migration whose agents reported build.codegen:
-- filled as FactColumns::from_facts fills new ones (the summary's words are
-- Codegen::summary's; tests/db/migrations.rs checks the two agree), so the next
-- rebuild of such an agent reads "A → B", not "none → B".
UPDATE host_fact_snapshots SET
    build_codegen = format('%s, opt-level %s, LTO %s, %s codegen %s',
        facts #>> '{build,codegen,profile}', facts #>> '{build,codegen,opt_level}',
        facts #>> '{build,codegen,lto}', facts #>> '{build,codegen,codegen_units}',
        CASE WHEN facts #>> '{build,codegen,codegen_units}' = '1' THEN 'unit' ELSE 'units' END),
    build_target_features = ARRAY(
        SELECT f FROM jsonb_array_elements_text(facts #> '{build,codegen,target_features}') AS t (f)
        ORDER BY f COLLATE "C")
WHERE jsonb_typeof(facts #> '{build,codegen}') = 'object'
    AND jsonb_typeof(facts #> '{build,codegen,profile}') = 'string'
    AND jsonb_typeof(facts #> '{build,codegen,opt_level}') = 'string'
    AND jsonb_typeof(facts #> '{build,codegen,lto}') = 'string'
    AND jsonb_typeof(facts #> '{build,codegen,codegen_units}') = 'number'
    AND jsonb_typeof(facts #> '{build,codegen,target_features}') = 'array';

-- Memory and sample sufficiency of each result (schema cipherfleet.measurement/2),
-- typed so the host and modes pages read columns rather than the stored JSON.
-- NULL memory: the agent did not report it (before /2). Filled from the stored
-- measurement for results that have it; low_samples is false where absent, as
-- the schema's default says.
ALTER TABLE results
    ADD COLUMN low_samples boolean NOT NULL DEFAULT false,
    -- One keyed cipher instance: size_of plus the heap it owns.
    ADD COLUMN cipher_state_bytes bigint CHECK (cipher_state_bytes >= 0),
    -- The worker's peak resident set (ru_maxrss), buffers included.
    ADD COLUMN peak_rss_bytes bigint CHECK (peak_rss_bytes >= 0),
    -- Heap use per operation inside the measured loops (0 expected); NULL
    -- also where the worker did not count allocations.
    ADD COLUMN heap_bytes_per_op double precision CHECK (heap_bytes_per_op >= 0),
    ADD COLUMN allocs_per_op double precision CHECK (allocs_per_op >= 0);

UPDATE results SET
    low_samples = coalesce((measurement ->> 'low_samples')::boolean, false),
    cipher_state_bytes = (measurement #>> '{memory,cipher_state_bytes}')::bigint,
    peak_rss_bytes = (measurement #>> '{memory,peak_rss_bytes}')::bigint,
    heap_bytes_per_op = (measurement #>> '{memory,heap_bytes_per_op}')::double precision,
    allocs_per_op = (measurement #>> '{memory,allocs_per_op}')::double precision
WHERE measurement ? 'low_samples' OR jsonb_typeof(measurement -> 'memory') = 'object';

-- The latest result of each point carries the same figures (migrations/0003).
ALTER TABLE result_points
    ADD COLUMN low_samples boolean NOT NULL DEFAULT false,
    ADD COLUMN cipher_state_bytes bigint,
    ADD COLUMN peak_rss_bytes bigint,
    ADD COLUMN heap_bytes_per_op double precision,
    ADD COLUMN allocs_per_op double precision;

CREATE OR REPLACE FUNCTION refresh_result_points() RETURNS void LANGUAGE sql AS $$
    TRUNCATE result_points;
    INSERT INTO result_points (host_id, algorithm, direction, size_bytes, threads, concurrency,
        key_mode, path, result_id, measured_at, path_used, throughput_mb_s, ops_per_s,
        latency_p99_ns, cv, samples, low_samples, cipher_state_bytes, peak_rss_bytes,
        heap_bytes_per_op, allocs_per_op, result_count)
    SELECT DISTINCT ON (host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path)
        host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path,
        id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples,
        low_samples, cipher_state_bytes, peak_rss_bytes, heap_bytes_per_op, allocs_per_op,
        count(*) OVER (PARTITION BY host_id, algorithm, direction, size_bytes, threads,
                       coalesce(concurrency, 0), key_mode, path)
    FROM results
    ORDER BY host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path,
        created_at DESC, id DESC;
$$;

UPDATE result_points p SET
    low_samples = r.low_samples,
    cipher_state_bytes = r.cipher_state_bytes,
    peak_rss_bytes = r.peak_rss_bytes,
    heap_bytes_per_op = r.heap_bytes_per_op,
    allocs_per_op = r.allocs_per_op
FROM results r WHERE r.id = p.result_id;
