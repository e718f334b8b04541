-- Job counts per (campaign, host) and status, kept by statement triggers on
-- `jobs`, so the report's campaign lists, the overview and the campaign page
-- read one row per host instead of counting a campaign's jobs (100,000 for
-- 10 jobs on each of 10,000 hosts) on every request.
--
-- Each trigger aggregates its statement's transition table, so a batch of
-- 512 job transitions is one upsert of at most 512 rows, written in key order
-- (concurrent statements lock the rows they share in the same order). No row
-- is the whole campaign's: results of one campaign on different hosts never
-- wait for each other here. No foreign keys: a cascade deleting a campaign's
-- jobs must not trip over the counts row it is about to remove.
CREATE TABLE campaign_host_jobs (
    campaign_id bigint NOT NULL,
    host_id bigint NOT NULL,
    queued bigint NOT NULL DEFAULT 0,
    running bigint NOT NULL DEFAULT 0,
    done bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    cancelled bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, host_id)
);

-- Adds signed job counts, one (campaign, host, status, n) per array index.
CREATE FUNCTION cipherfleet_campaign_host_jobs_add(campaigns bigint[], hosts bigint[], statuses text[], ns bigint[])
RETURNS void LANGUAGE sql AS $$
    INSERT INTO campaign_host_jobs AS t (campaign_id, host_id, queued, running, done, failed, cancelled)
    SELECT c, h,
        coalesce(sum(n) FILTER (WHERE s = 'queued'), 0), coalesce(sum(n) FILTER (WHERE s = 'running'), 0),
        coalesce(sum(n) FILTER (WHERE s = 'done'), 0), coalesce(sum(n) FILTER (WHERE s = 'failed'), 0),
        coalesce(sum(n) FILTER (WHERE s = 'cancelled'), 0)
    FROM unnest(campaigns, hosts, statuses, ns) AS d(c, h, s, n)
    GROUP BY c, h ORDER BY c, h
    ON CONFLICT (campaign_id, host_id) DO UPDATE SET
        queued = t.queued + EXCLUDED.queued, running = t.running + EXCLUDED.running,
        done = t.done + EXCLUDED.done, failed = t.failed + EXCLUDED.failed,
        cancelled = t.cancelled + EXCLUDED.cancelled;
$$;

CREATE FUNCTION cipherfleet_campaign_host_jobs_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_campaign_host_jobs_add(array_agg(campaign_id), array_agg(host_id), array_agg(status), array_agg(n))
    FROM (SELECT campaign_id, host_id, status, count(*) AS n FROM new_jobs GROUP BY 1, 2, 3) d;
    RETURN NULL;
END $$;

-- Only rows whose status (or, never in practice, campaign or host) changed count.
CREATE FUNCTION cipherfleet_campaign_host_jobs_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_campaign_host_jobs_add(array_agg(campaign_id), array_agg(host_id), array_agg(status), array_agg(n))
    FROM (
        WITH changed AS MATERIALIZED (
            SELECT o.campaign_id AS old_campaign, o.host_id AS old_host, o.status AS old_status,
                n.campaign_id, n.host_id, n.status
            FROM old_jobs o JOIN new_jobs n ON n.id = o.id
            WHERE (o.status, o.campaign_id, o.host_id) IS DISTINCT FROM (n.status, n.campaign_id, n.host_id))
        SELECT old_campaign AS campaign_id, old_host AS host_id, old_status AS status, -count(*) AS n
            FROM changed GROUP BY 1, 2, 3
        UNION ALL
        SELECT campaign_id, host_id, status, count(*) FROM changed GROUP BY 1, 2, 3) d;
    RETURN NULL;
END $$;

-- A (campaign, host) left without jobs loses its row.
CREATE FUNCTION cipherfleet_campaign_host_jobs_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_campaign_host_jobs_add(array_agg(campaign_id), array_agg(host_id), array_agg(status), array_agg(n))
    FROM (SELECT campaign_id, host_id, status, -count(*) AS n FROM old_jobs GROUP BY 1, 2, 3) d;
    DELETE FROM campaign_host_jobs t USING (SELECT DISTINCT campaign_id, host_id FROM old_jobs) o
    WHERE t.campaign_id = o.campaign_id AND t.host_id = o.host_id
        AND t.queued = 0 AND t.running = 0 AND t.done = 0 AND t.failed = 0 AND t.cancelled = 0;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_campaign_host_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_campaign_host_jobs_insert();
CREATE TRIGGER jobs_campaign_host_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_campaign_host_jobs_update();
CREATE TRIGGER jobs_campaign_host_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_campaign_host_jobs_delete();

-- The jobs stored so far.
INSERT INTO campaign_host_jobs (campaign_id, host_id, queued, running, done, failed, cancelled)
SELECT campaign_id, host_id,
    count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'running'),
    count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed'),
    count(*) FILTER (WHERE status = 'cancelled')
FROM jobs GROUP BY campaign_id, host_id;

-- The fallback page's rows: per point without algorithm and path (payload
-- size, threads, direction, key handling), host and algorithm, the latest
-- accelerated-path and software-path results side by side, with their ratio
-- stored and indexed, so a page of the worst ratios is an index range with a
-- LIMIT instead of a join of every host's two paths (500,000 `result_points`
-- rows at 10,000 hosts) on every request. Only points without concurrency and
-- with counter nonces, as the page shows. Kept by statement triggers on
-- `result_points`: each side is written only from its own `result_points`
-- row, so two results of one host and algorithm committed at once (one per
-- path) never overwrite each other's side with what they read before.
CREATE TABLE fallback_pairs (
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    direction text NOT NULL,
    key_mode text NOT NULL,
    host_id bigint NOT NULL,
    algorithm text NOT NULL,
    accelerated_result_id bigint,
    accelerated_path_used text,
    accelerated_mb_s double precision,
    accelerated_cv double precision,
    software_result_id bigint,
    software_mb_s double precision,
    software_cv double precision,
    -- `analysis::software_speed::ratio`: both measured and software above zero.
    ratio double precision GENERATED ALWAYS AS
        (CASE WHEN software_mb_s > 0 THEN accelerated_mb_s / software_mb_s END) STORED,
    PRIMARY KEY (size_bytes, threads, direction, key_mode, host_id, algorithm)
);
-- The page's order: worst ratio first, unmeasured ratios last.
CREATE INDEX fallback_pairs_by_ratio ON fallback_pairs (size_bytes, threads, direction, key_mode, ratio);

-- Inserted or updated points (the same function serves both triggers: each
-- names its new rows `new_points`) write their side of their pair.
CREATE FUNCTION cipherfleet_fallback_pairs_write() RETURNS trigger LANGUAGE plpgsql AS $$
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
    RETURN NULL;
END $$;

-- Deleted points (a host or result deleted) clear their side; a pair with
-- neither side left goes.
CREATE FUNCTION cipherfleet_fallback_pairs_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fallback_pairs t SET
        accelerated_result_id = CASE WHEN o.path = 'accelerated' THEN NULL ELSE t.accelerated_result_id END,
        accelerated_path_used = CASE WHEN o.path = 'accelerated' THEN NULL ELSE t.accelerated_path_used END,
        accelerated_mb_s = CASE WHEN o.path = 'accelerated' THEN NULL ELSE t.accelerated_mb_s END,
        accelerated_cv = CASE WHEN o.path = 'accelerated' THEN NULL ELSE t.accelerated_cv END,
        software_result_id = CASE WHEN o.path = 'software' THEN NULL ELSE t.software_result_id END,
        software_mb_s = CASE WHEN o.path = 'software' THEN NULL ELSE t.software_mb_s END,
        software_cv = CASE WHEN o.path = 'software' THEN NULL ELSE t.software_cv END
    FROM old_points o
    WHERE o.concurrency = 0 AND o.nonce = 'counter'
        AND (t.size_bytes, t.threads, t.direction, t.key_mode, t.host_id, t.algorithm)
            = (o.size_bytes, o.threads, o.direction, o.key_mode, o.host_id, o.algorithm);
    DELETE FROM fallback_pairs t USING old_points o
    WHERE (t.size_bytes, t.threads, t.direction, t.key_mode, t.host_id, t.algorithm)
            = (o.size_bytes, o.threads, o.direction, o.key_mode, o.host_id, o.algorithm)
        AND t.accelerated_result_id IS NULL AND t.software_result_id IS NULL;
    RETURN NULL;
END $$;

CREATE FUNCTION cipherfleet_fallback_pairs_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE fallback_pairs;
    RETURN NULL;
END $$;

CREATE TRIGGER result_points_fallback_insert AFTER INSERT ON result_points
    REFERENCING NEW TABLE AS new_points
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_fallback_pairs_write();
CREATE TRIGGER result_points_fallback_update AFTER UPDATE ON result_points
    REFERENCING NEW TABLE AS new_points
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_fallback_pairs_write();
CREATE TRIGGER result_points_fallback_delete AFTER DELETE ON result_points
    REFERENCING OLD TABLE AS old_points
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_fallback_pairs_clear();
-- `refresh_result_points()` (a bulk load's rebuild) truncates, then inserts.
CREATE TRIGGER result_points_fallback_truncate AFTER TRUNCATE ON result_points
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_fallback_pairs_truncate();

-- The points stored so far.
INSERT INTO fallback_pairs (size_bytes, threads, direction, key_mode, host_id, algorithm,
    accelerated_result_id, accelerated_path_used, accelerated_mb_s, accelerated_cv,
    software_result_id, software_mb_s, software_cv)
SELECT size_bytes, threads, direction, key_mode, host_id, algorithm,
    max(result_id) FILTER (WHERE path = 'accelerated'), max(path_used) FILTER (WHERE path = 'accelerated'),
    max(throughput_mb_s) FILTER (WHERE path = 'accelerated'), max(cv) FILTER (WHERE path = 'accelerated'),
    max(result_id) FILTER (WHERE path = 'software'), max(throughput_mb_s) FILTER (WHERE path = 'software'),
    max(cv) FILTER (WHERE path = 'software')
FROM result_points WHERE concurrency = 0 AND nonce = 'counter' AND path IN ('accelerated', 'software')
GROUP BY size_bytes, threads, direction, key_mode, host_id, algorithm;
