-- Retention folds jobs too (issue 34). Without it `jobs` kept a row of about
-- 500 bytes for every result folded away. A day's fold now deletes the jobs
-- of the results it folds (of ended campaigns), and an ended campaign past
-- `--keep-raw` loses its other jobs without a raw result (failed, cancelled,
-- and done ones folded before this migration) once, marked here; only the
-- jobs of results kept raw (the latest of their point) stay. A campaign keeps
-- its counts in `campaign_host_jobs`, one row per host until it ended before
-- `--keep-daily`, then one row for all its hosts (host_id 0, `hosts` saying
-- how many), marked in `counts_folded_at`: what is left of a campaign then is
-- its row and that one.
--
-- Changes functions/cipherfleet_campaign_host_jobs_delete.sql: a delete in a
-- transaction that set `cipherfleet.keep_job_counts` leaves the counts as
-- they are. Additive: a coordinator of the previous release never sets it (its
-- deletes count as before) and never reads the new columns (its campaign
-- pages count a folded campaign's hosts as one).
ALTER TABLE campaigns ADD COLUMN jobs_folded_at timestamptz;
-- The campaigns whose jobs are not folded yet, by when they ended: the pass
-- finds the next one without reading those done.
CREATE INDEX campaigns_jobs_to_fold ON campaigns (finished_at, id) WHERE jobs_folded_at IS NULL;
ALTER TABLE campaign_host_jobs ADD COLUMN hosts integer NOT NULL DEFAULT 1;
ALTER TABLE campaigns ADD COLUMN counts_folded_at timestamptz;
CREATE INDEX campaigns_counts_to_fold ON campaigns (finished_at, id) WHERE counts_folded_at IS NULL;
