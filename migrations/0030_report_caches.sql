-- The report at 10,000 hosts (issue 12): the fallback page's list of hosts
-- at software speed, kept per point, and when the compare matrix's class
-- cells were computed.
--
-- The list groups every row of a point that the rule finds at software speed
-- (80,000 rows at 10,000 hosts when 4,000 lack AES: 200–330 ms a request),
-- so it is stored per point with the count of the point's rows, and read
-- back while nothing changed. Stored in the database, not in a coordinator's
-- memory, so coordinators sharing it keep one list, and a change marker is
-- removed only once that list has seen its transaction.
--
-- The rule is the coordinator's (analysis/software_speed.rs): it writes the
-- list, with `cases` naming the hosts' CPUs and the rule's cases on each that
-- it was judged with; a list judged with other cases is not read.
CREATE TABLE fallback_views (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    key_mode text NOT NULL,
    cases text NOT NULL,
    -- The snapshot the list was computed in: changes it does not see are stale.
    as_of pg_snapshot NOT NULL,
    computed_at timestamptz NOT NULL,
    -- The point's rows in `fallback_pairs`, every host.
    pairs bigint NOT NULL,
    -- The hosts with a row at software speed, in the page's order.
    slow_hosts bigint[] NOT NULL,
    PRIMARY KEY (size_bytes, threads, direction, key_mode)
);

-- A transaction changed rows of `fallback_pairs` at a point. Written by the
-- triggers that write those rows, whether or not a list of the point is
-- stored: a marker only for points with a list would miss a transaction that
-- wrote before the point's first list committed and committed after it was
-- computed. Only inserted, never updated, so ingest batches take no lock on
-- each other here; a batch adds one row per point it touched (a handful).
-- The coordinator deletes the markers every list of their point has seen
-- (db/fallback_views.rs), and those of points with no list.
CREATE TABLE fallback_pair_changes (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    key_mode text NOT NULL,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    written_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fallback_pair_changes_point ON fallback_pair_changes (size_bytes, threads, direction, key_mode);

-- The triggers of 0019, each now also marking the points whose rows it wrote.
CREATE OR REPLACE FUNCTION cipherfleet_fallback_pairs_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fallback_pairs AS t (size_bytes, threads, direction, key_mode, host_id, algorithm,
        accelerated_result_id, accelerated_path_used, accelerated_mb_s, accelerated_cv)
    SELECT size_bytes, threads, direction, key_mode, host_id, algorithm, result_id, path_used, throughput_mb_s, cv
    FROM new_points WHERE path = 'accelerated' AND concurrency = 0 AND nonce = 'counter'
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (size_bytes, threads, direction, key_mode, host_id, algorithm) DO UPDATE SET
        accelerated_result_id = EXCLUDED.accelerated_result_id, accelerated_path_used = EXCLUDED.accelerated_path_used,
        accelerated_mb_s = EXCLUDED.accelerated_mb_s, accelerated_cv = EXCLUDED.accelerated_cv;
    INSERT INTO fallback_pairs AS t (size_bytes, threads, direction, key_mode, host_id, algorithm,
        software_result_id, software_mb_s, software_cv)
    SELECT size_bytes, threads, direction, key_mode, host_id, algorithm, result_id, throughput_mb_s, cv
    FROM new_points WHERE path = 'software' AND concurrency = 0 AND nonce = 'counter'
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (size_bytes, threads, direction, key_mode, host_id, algorithm) DO UPDATE SET
        software_result_id = EXCLUDED.software_result_id, software_mb_s = EXCLUDED.software_mb_s,
        software_cv = EXCLUDED.software_cv;
    INSERT INTO fallback_pair_changes (size_bytes, threads, direction, key_mode)
    SELECT DISTINCT size_bytes, threads, direction, key_mode FROM new_points
    WHERE path IN ('accelerated', 'software') AND concurrency = 0 AND nonce = 'counter';
    RETURN NULL;
END $$;

-- Deleting a host deletes both paths of each of its pairs in one statement:
-- an `UPDATE … FROM` joining a row twice updates it once, so 0019's function
-- cleared one side and left the pair (counted by the page, its host gone).
-- The sides each pair loses are gathered first.
CREATE OR REPLACE FUNCTION cipherfleet_fallback_pairs_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        SELECT size_bytes, threads, direction, key_mode, host_id, algorithm,
            bool_or(path = 'accelerated') AS accelerated, bool_or(path = 'software') AS software
        FROM old_points WHERE concurrency = 0 AND nonce = 'counter'
        GROUP BY size_bytes, threads, direction, key_mode, host_id, algorithm)
    UPDATE fallback_pairs t SET
        accelerated_result_id = CASE WHEN g.accelerated THEN NULL ELSE t.accelerated_result_id END,
        accelerated_path_used = CASE WHEN g.accelerated THEN NULL ELSE t.accelerated_path_used END,
        accelerated_mb_s = CASE WHEN g.accelerated THEN NULL ELSE t.accelerated_mb_s END,
        accelerated_cv = CASE WHEN g.accelerated THEN NULL ELSE t.accelerated_cv END,
        software_result_id = CASE WHEN g.software THEN NULL ELSE t.software_result_id END,
        software_mb_s = CASE WHEN g.software THEN NULL ELSE t.software_mb_s END,
        software_cv = CASE WHEN g.software THEN NULL ELSE t.software_cv END
    FROM gone g
    WHERE (t.size_bytes, t.threads, t.direction, t.key_mode, t.host_id, t.algorithm)
        = (g.size_bytes, g.threads, g.direction, g.key_mode, g.host_id, g.algorithm);
    DELETE FROM fallback_pairs t USING old_points o
    WHERE (t.size_bytes, t.threads, t.direction, t.key_mode, t.host_id, t.algorithm)
            = (o.size_bytes, o.threads, o.direction, o.key_mode, o.host_id, o.algorithm)
        AND t.accelerated_result_id IS NULL AND t.software_result_id IS NULL;
    INSERT INTO fallback_pair_changes (size_bytes, threads, direction, key_mode)
    SELECT DISTINCT size_bytes, threads, direction, key_mode FROM old_points
    WHERE path IN ('accelerated', 'software') AND concurrency = 0 AND nonce = 'counter';
    RETURN NULL;
END $$;

-- Pairs a deleted host left behind that way.
DELETE FROM fallback_pairs p WHERE NOT EXISTS (SELECT 1 FROM hosts h WHERE h.id = p.host_id);

-- `refresh_result_points()` (a bulk load's rebuild) truncates: the lists and
-- their markers go with the rows.
CREATE OR REPLACE FUNCTION cipherfleet_fallback_pairs_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE fallback_pairs, fallback_views, fallback_pair_changes;
    RETURN NULL;
END $$;

-- When the compare matrix's class cells of a point were computed: a view
-- that reads them while newer results wait to be folded in says as of when.
ALTER TABLE class_cells_computed ADD COLUMN computed_at timestamptz NOT NULL DEFAULT now();
