-- An ingest batch counts its jobs' changes itself (issue 34, the cost of a
-- result): a host's finished job and its next one claimed change its row of
-- `campaign_host_jobs` once, not once in each statement's trigger. A
-- transaction that sets `cipherfleet.jobs_counted` to `on` (transaction-local)
-- applies its changes through `cipherfleet_campaign_host_jobs_add`, and the
-- update trigger leaves them alone; every other transaction is counted by the
-- trigger as before. Additive for one release: a coordinator of the release
-- before never sets it.
--
-- Changed with it: functions/cipherfleet_campaign_host_jobs_update.sql (this
-- definition, replaced on start by that file).
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
