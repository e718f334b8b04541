-- The findings pass reads the latest results of every series (one point and
-- path on one host) of a chunk of hosts (`db::series::latest_points`). This
-- index holds them in series order, newest first, with every column the pass
-- reads: the chunk is an index-only range per host, in the order the window
-- needs, rather than a heap page per result (a host's results are spread over
-- the whole table, since every host reports at once).
CREATE INDEX results_series ON results
    (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, created_at DESC, id DESC)
    INCLUDE (path_used, throughput_mb_s, snapshot_id);
