-- Storage that stays bounded under continuous watching (docs/operations.md,
-- "Retention"): raw results older than `serve --keep-raw` (90 days unless
-- told) fold into one summary per point and UTC day, and daily summaries
-- older than `--keep-daily` (two years unless told) into one per month
-- (src/store/rollups.rs). The latest result of every point stays raw
-- whatever its age: it is what the report's latest-point tables name.
--
-- Additive: a coordinator of the previous release neither reads nor writes
-- this table, and folds nothing.
CREATE TABLE result_rollups (
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    algorithm text NOT NULL,
    direction text NOT NULL,
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    -- 0 when the job set no concurrency, as in result_points.
    concurrency integer NOT NULL,
    key_mode text NOT NULL,
    path text NOT NULL,
    nonce text NOT NULL,
    provider text NOT NULL,
    resolution text NOT NULL CHECK (resolution IN ('day', 'month')),
    -- The UTC day or month the summary covers, at its start.
    period_start timestamptz NOT NULL,
    results integer NOT NULL CHECK (results > 0),
    -- Throughput (MB/s) over the period's results. A month's median, p10 and
    -- p90 are the results-weighted means of its days' (the days' results are
    -- gone by then); min and max are exact.
    median_mb_s double precision NOT NULL,
    p10_mb_s double precision NOT NULL,
    p90_mb_s double precision NOT NULL,
    min_mb_s double precision NOT NULL,
    max_mb_s double precision NOT NULL,
    -- The path mix: how many of the results ran each path.
    accelerated integer NOT NULL,
    partial integer NOT NULL,
    software integer NOT NULL,
    PRIMARY KEY (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, provider,
                 resolution, period_start)
);
-- The next month to fold: the oldest daily summary.
CREATE INDEX result_rollups_days ON result_rollups (period_start) WHERE resolution = 'day';
