-- Adds signed job counts, one (campaign, host, status, n) per array index.
CREATE OR REPLACE FUNCTION cipherfleet_campaign_host_jobs_add(campaigns bigint[], hosts bigint[], statuses text[], ns bigint[])
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
