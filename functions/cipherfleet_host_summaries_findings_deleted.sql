CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_findings_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(DISTINCT host_id))
    FROM old_findings WHERE status = 'open';
    RETURN NULL;
END $$;
