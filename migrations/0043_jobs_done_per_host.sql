-- `jobs_status_host` (status, host_id), from 0001, gives way to an index of
-- done jobs by host (issue 34, the cost of a result). Lookups of queued and
-- running jobs go through the partial indexes of 0001 and 0012 (a host's
-- queue, its one running job, a campaign's active jobs), and finished jobs
-- are read by campaign, but for one: a verification's points, a host's done
-- jobs (`store::verifications::previous_points`), which this index keeps.
-- The index of every status took an entry at each job's insert, claim and
-- finish; this one takes one, at the finish: about 260 bytes less WAL a job
-- (docs/performance.md, "Ingest, 1,000 agents").
--
-- Built under the table's lock: about 0.4 s per million jobs here, so an
-- upgrade holds ingest back that long (docs/operations.md, "Upgrading").
-- Additive for one release: no statement names either index.
CREATE INDEX jobs_done_per_host ON jobs (host_id) WHERE status = 'done';
DROP INDEX jobs_status_host;
