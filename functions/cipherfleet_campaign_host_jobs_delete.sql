-- A (campaign, host) left without jobs loses its row. Retention deleting an
-- ended campaign's old jobs (src/store/campaign_folds.rs) sets
-- `cipherfleet.keep_job_counts` for its transaction: the campaign keeps its
-- counts, which are then all that is left of those jobs.
CREATE OR REPLACE FUNCTION cipherfleet_campaign_host_jobs_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('cipherfleet.keep_job_counts', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM cipherfleet_campaign_host_jobs_add(array_agg(campaign_id), array_agg(host_id), array_agg(status), array_agg(n))
    FROM (SELECT campaign_id, host_id, status, -count(*) AS n FROM old_jobs GROUP BY 1, 2, 3) d;
    DELETE FROM campaign_host_jobs t USING (SELECT DISTINCT campaign_id, host_id FROM old_jobs) o
    WHERE t.campaign_id = o.campaign_id AND t.host_id = o.host_id
        AND t.queued = 0 AND t.running = 0 AND t.done = 0 AND t.failed = 0 AND t.cancelled = 0;
    RETURN NULL;
END $$;
