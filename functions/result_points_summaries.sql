-- Per statement on result_points (an ingest batch is one): new points join
-- view_hosts, removed ones leave it, and every computed point touched gets a
-- change marker.
CREATE OR REPLACE FUNCTION result_points_summaries() RETURNS trigger LANGUAGE plpgsql AS $$
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
