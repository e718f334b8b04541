-- Only rows whose status (or, never in practice, campaign or host) changed count.
-- A transaction that sets `cipherfleet.jobs_counted` counts its own changes
-- (an ingest batch's finishes and claims, one upsert per host:
-- `store::jobs::Counts`), and this trigger leaves them to it.
CREATE OR REPLACE FUNCTION cipherfleet_campaign_host_jobs_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('cipherfleet.jobs_counted', true) = 'on' THEN
        RETURN NULL;
    END IF;
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
