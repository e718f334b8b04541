-- Findings: one opened, resolved, deleted while open, or moved. A refresh of
-- open findings (the findings pass's batched `UPDATE … SET last_seen`)
-- changes none of these and counts nothing.
CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_findings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(DISTINCT host_id))
    FROM new_findings WHERE status = 'open';
    RETURN NULL;
END $$;
