-- The comparison matrix (/compare) at 10,000 hosts and 1,000,000 results
-- (issue 12) reads summaries of `result_points` instead of every host ×
-- algorithm point of a view (270,000 rows at that size). A view slice is one
-- payload size, thread count, direction and path of the plain benchmark: one
-- static key, counter nonces, no object-storage concurrency.
-- Maintained by the trigger at the end (src/db/view_summaries.rs reads them).

-- Which algorithms each host has a latest point of, per view slice: the
-- matrix's host rows (count and page, by name) and its class rows' host
-- counts without reading the points.
CREATE TABLE view_hosts (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    path text NOT NULL,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    algorithms text[] NOT NULL,
    PRIMARY KEY (size_bytes, threads, direction, path, host_id)
);

-- Machine-class cells: per point of a slice and class row (the class key, and
-- whether the row holds emulated or simulated hosts), the figures of the
-- hosts' latest results. Medians do not combine, so a point's cells are
-- recomputed when read after a change (class_cell_changes), and the spread of
-- every row's values (min/max) colours the host rows too.
CREATE TABLE class_cells (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    path text NOT NULL,
    algorithm text NOT NULL,
    class_row text NOT NULL,
    hosts integer NOT NULL,
    median_mb_s double precision NOT NULL,
    median_p99_ns double precision NOT NULL,
    -- Across the hosts (two or more); the one host's sample CV otherwise.
    cv double precision,
    fell_back integer NOT NULL,
    partial integer NOT NULL,
    min_mb_s double precision NOT NULL,
    max_mb_s double precision NOT NULL,
    min_p99_ns bigint NOT NULL,
    max_p99_ns bigint NOT NULL,
    PRIMARY KEY (size_bytes, threads, direction, path, algorithm, class_row)
);

-- When a point's cells were computed: with which assignment of hosts to
-- class rows (a fingerprint the reader checks) and as of which snapshot.
CREATE TABLE class_cells_computed (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    path text NOT NULL,
    algorithm text NOT NULL,
    grouping text NOT NULL,
    as_of pg_snapshot NOT NULL,
    PRIMARY KEY (size_bytes, threads, direction, path, algorithm)
);

-- A transaction changed latest points of a computed point: its cells are
-- stale unless the transaction is visible in their `as_of` snapshot. Only
-- inserted (never updated), so ingest batches take no lock on each other
-- here; a recompute deletes the markers it accounted for.
CREATE TABLE class_cell_changes (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    path text NOT NULL,
    algorithm text NOT NULL,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX class_cell_changes_point ON class_cell_changes (size_bytes, threads, direction, path, algorithm);

-- Per statement on result_points (an ingest batch is one): new points join
-- view_hosts, removed ones leave it, and every computed point touched gets a
-- change marker.
CREATE FUNCTION result_points_summaries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO view_hosts AS v (size_bytes, threads, direction, path, host_id, algorithms)
        SELECT size_bytes, threads, direction, path, host_id, array_agg(DISTINCT algorithm ORDER BY algorithm)
        FROM changed
        WHERE concurrency = 0 AND key_mode = 'static' AND nonce = 'counter'
        GROUP BY size_bytes, threads, direction, path, host_id
        ON CONFLICT (size_bytes, threads, direction, path, host_id) DO UPDATE
            SET algorithms = (SELECT array_agg(DISTINCT a ORDER BY a) FROM unnest(v.algorithms || EXCLUDED.algorithms) a)
            WHERE NOT v.algorithms @> EXCLUDED.algorithms;
    ELSIF TG_OP = 'DELETE' THEN
        WITH slices AS (
            SELECT DISTINCT size_bytes, threads, direction, path, host_id FROM changed
            WHERE concurrency = 0 AND key_mode = 'static' AND nonce = 'counter'
        ), now_stored AS (
            SELECT s.*, (SELECT array_agg(DISTINCT p.algorithm ORDER BY p.algorithm) FROM result_points p
                         WHERE p.host_id = s.host_id AND p.size_bytes = s.size_bytes AND p.threads = s.threads
                           AND p.direction = s.direction AND p.path = s.path AND p.concurrency = 0
                           AND p.key_mode = 'static' AND p.nonce = 'counter') AS algorithms
            FROM slices s
        ), emptied AS (
            DELETE FROM view_hosts v USING now_stored n
            WHERE n.algorithms IS NULL AND (v.size_bytes, v.threads, v.direction, v.path, v.host_id)
                = (n.size_bytes, n.threads, n.direction, n.path, n.host_id)
        )
        UPDATE view_hosts v SET algorithms = n.algorithms FROM now_stored n
        WHERE n.algorithms IS NOT NULL AND (v.size_bytes, v.threads, v.direction, v.path, v.host_id)
            = (n.size_bytes, n.threads, n.direction, n.path, n.host_id);
    END IF;
    INSERT INTO class_cell_changes (size_bytes, threads, direction, path, algorithm)
    SELECT DISTINCT c.size_bytes, c.threads, c.direction, c.path, c.algorithm
    FROM changed c
    WHERE c.concurrency = 0 AND c.key_mode = 'static' AND c.nonce = 'counter'
      AND EXISTS (SELECT 1 FROM class_cells_computed k
                  WHERE (k.size_bytes, k.threads, k.direction, k.path, k.algorithm)
                      = (c.size_bytes, c.threads, c.direction, c.path, c.algorithm));
    RETURN NULL;
END $$;

CREATE TRIGGER result_points_inserted AFTER INSERT ON result_points
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION result_points_summaries();
CREATE TRIGGER result_points_updated AFTER UPDATE ON result_points
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION result_points_summaries();
CREATE TRIGGER result_points_deleted AFTER DELETE ON result_points
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION result_points_summaries();

-- refresh_result_points() starts with TRUNCATE, which no row trigger sees:
-- everything derived goes with it (the INSERT that follows rebuilds view_hosts).
CREATE FUNCTION result_points_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE view_hosts, class_cells, class_cells_computed, class_cell_changes;
    RETURN NULL;
END $$;
CREATE TRIGGER result_points_truncated AFTER TRUNCATE ON result_points
    FOR EACH STATEMENT EXECUTE FUNCTION result_points_truncated();

INSERT INTO view_hosts (size_bytes, threads, direction, path, host_id, algorithms)
SELECT size_bytes, threads, direction, path, host_id, array_agg(algorithm ORDER BY algorithm)
FROM result_points
WHERE concurrency = 0 AND key_mode = 'static' AND nonce = 'counter'
GROUP BY size_bytes, threads, direction, path, host_id;
