CREATE OR REPLACE FUNCTION cipherfleet_campaign_host_jobs_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_campaign_host_jobs_add(array_agg(campaign_id), array_agg(host_id), array_agg(status), array_agg(n))
    FROM (SELECT campaign_id, host_id, status, count(*) AS n FROM new_jobs GROUP BY 1, 2, 3) d;
    RETURN NULL;
END $$;
