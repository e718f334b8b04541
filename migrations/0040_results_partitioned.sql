-- `results` partitioned by time (issue 34; docs/operations.md, "Retention"):
-- a UTC week a partition, so a week past `--keep-raw`, once folded, is
-- dropped whole and its space goes back to the file system, instead of its
-- rows deleted one by one and `VACUUM` left to reuse their room.
--
--   results                 LIST (kept)
--     results_kept          the latest result of a point whose week was
--                           folded: the report's latest-point tables name it
--     results_raw           RANGE (created_at)
--       results_before      everything stored before this migration's week ended
--       results_YYYYMMDD    a UTC week from that Monday (functions/cipherfleet_results_weeks.sql)
--
-- Not additive for a coordinator that stores results with `ON CONFLICT
-- (job_id)`: a partitioned table's unique keys hold its partition key, so
-- the unique key on `job_id` goes (1f1c7fd's release on stores without it;
-- the job's locked row keeps a result once). The latest-point tables'
-- references to `results (id)` go for the same reason; retention keeps them
-- true (a result they name moves to `results_kept`, never away).
--
-- The present table becomes `results_before` in place: its primary key is
-- rebuilt as (id, kept, created_at), and checked against its bound, under
-- this migration's lock (its time: deploy/bench-partition-migration.sh, docs/performance.md);
-- its other indexes become the partitioned ones' without a rebuild.
ALTER TABLE result_points DROP CONSTRAINT result_points_result_id_fkey;
ALTER TABLE provider_points DROP CONSTRAINT provider_points_result_id_fkey;
-- Nor does a result reference its job any more: the insert takes its job's
-- row (locked) to store it, and a job is deleted only once its result is
-- folded away (src/store/rollups.rs), so the cascade never had work; but it
-- searched every partition for each job deleted, which made a week's fold
-- several times slower (docs/performance.md, "A year of history").
ALTER TABLE results DROP CONSTRAINT results_job_id_fkey;

ALTER TABLE results RENAME TO results_before;
ALTER INDEX results_series RENAME TO results_before_series;
ALTER INDEX results_created RENAME TO results_before_created;
ALTER TABLE results_before ADD COLUMN kept boolean NOT NULL DEFAULT false;

-- Ids go on from the identity's (PostgreSQL 15 has no identity on a partition).
CREATE SEQUENCE results_id AS bigint;
SELECT setval('results_id', coalesce((SELECT max(id) FROM results_before), 0) + 1, false);
ALTER TABLE results_before ALTER COLUMN id DROP IDENTITY;
ALTER TABLE results_before DROP CONSTRAINT results_pkey;
ALTER TABLE results_before ADD CONSTRAINT results_before_pkey PRIMARY KEY (id, kept, created_at);
ALTER TABLE results_before DROP CONSTRAINT results_job_id_key;
CREATE INDEX results_before_job ON results_before (job_id);

CREATE TABLE results (LIKE results_before INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)
    PARTITION BY LIST (kept);
ALTER SEQUENCE results_id OWNED BY results.id;
ALTER TABLE results ALTER COLUMN id SET DEFAULT nextval('results_id');
ALTER TABLE results ADD PRIMARY KEY (id, kept, created_at);
ALTER TABLE results ADD FOREIGN KEY (host_id) REFERENCES hosts (id) ON DELETE CASCADE;
ALTER TABLE results ADD FOREIGN KEY (snapshot_id) REFERENCES host_fact_snapshots (id) ON DELETE SET NULL;
-- A job's result (the cascade from `jobs`, retention's deletes of jobs).
CREATE INDEX results_job ON results (job_id);
CREATE INDEX results_created ON results (created_at);
CREATE INDEX results_series ON results
    (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, created_at DESC, id DESC)
    INCLUDE (path_used, throughput_mb_s, snapshot_id, provider);

CREATE TABLE results_kept PARTITION OF results FOR VALUES IN (true);
CREATE TABLE results_raw PARTITION OF results FOR VALUES IN (false) PARTITION BY RANGE (created_at);
DO $$
DECLARE
    bound timestamptz := date_trunc('week', now(), 'UTC') + interval '1 week';
BEGIN
    -- Checked first, so the attach need not scan it again.
    EXECUTE format('ALTER TABLE results_before ADD CONSTRAINT results_before_bound CHECK (NOT kept AND created_at < %L)', bound);
    EXECUTE format('ALTER TABLE results_raw ATTACH PARTITION results_before FOR VALUES FROM (MINVALUE) TO (%L)', bound);
END $$;
