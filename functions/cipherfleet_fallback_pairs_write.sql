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
