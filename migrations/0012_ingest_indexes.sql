-- Batched ingest and dispatch without scans (issue 12).
--
-- The next-job lookup (`claim_next_for_host`): a host's queued jobs in queue
-- order (oldest campaign first, then matrix order), so the claim reads the
-- first entry instead of every queued job of the host and sorting them. Only
-- queued jobs are in it: it stays as small as the queue however many jobs
-- have run.
CREATE INDEX jobs_queued_per_host ON jobs (host_id, campaign_id, position) WHERE status = 'queued';

-- The completion check (`close_if_complete`), run after every transaction that
-- ends jobs: does the campaign still have a queued or running job? Without it
-- the check reads every job of the campaign, done ones included.
CREATE INDEX jobs_active_per_campaign ON jobs (campaign_id) WHERE status IN ('queued', 'running');
