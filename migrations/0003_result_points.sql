-- The report reads the latest result of every point on every host: the
-- compare matrix, the payload-size curves and the fallback page scan
-- hosts × points rows here instead of every result ever stored (1,000,000
-- results must still render in well under 300 ms). Kept up to date in the
-- same transaction as each result insert (src/db/points.rs).
CREATE TABLE result_points (
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    algorithm text NOT NULL,
    direction text NOT NULL,
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    -- 0 when the job set no concurrency: part of the key, where NULLs would never collide.
    concurrency integer NOT NULL,
    key_mode text NOT NULL,
    path text NOT NULL,
    -- The latest result of this point and its figures.
    result_id bigint NOT NULL REFERENCES results (id) ON DELETE CASCADE,
    measured_at timestamptz NOT NULL,
    path_used text NOT NULL,
    throughput_mb_s double precision NOT NULL,
    ops_per_s double precision NOT NULL,
    latency_p99_ns bigint NOT NULL,
    cv double precision,
    samples integer NOT NULL,
    -- How many results this point has had on this host.
    result_count integer NOT NULL CHECK (result_count > 0),
    PRIMARY KEY (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path)
);
-- A report view: one size / threads / direction / path across hosts and algorithms.
CREATE INDEX result_points_view ON result_points (size_bytes, threads, direction, path, algorithm);

-- Rebuilds result_points from results (this migration's backfill; also what a
-- bulk load such as the report benchmark calls after inserting results directly).
CREATE FUNCTION refresh_result_points() RETURNS void LANGUAGE sql AS $$
    TRUNCATE result_points;
    INSERT INTO result_points (host_id, algorithm, direction, size_bytes, threads, concurrency,
        key_mode, path, result_id, measured_at, path_used, throughput_mb_s, ops_per_s,
        latency_p99_ns, cv, samples, result_count)
    SELECT DISTINCT ON (host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path)
        host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path,
        id, created_at, path_used, throughput_mb_s, ops_per_s, latency_p99_ns, cv, samples,
        count(*) OVER (PARTITION BY host_id, algorithm, direction, size_bytes, threads,
                       coalesce(concurrency, 0), key_mode, path)
    FROM results
    ORDER BY host_id, algorithm, direction, size_bytes, threads, coalesce(concurrency, 0), key_mode, path,
        created_at DESC, id DESC;
$$;

SELECT refresh_result_points();
