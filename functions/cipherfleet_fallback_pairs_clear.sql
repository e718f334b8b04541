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
