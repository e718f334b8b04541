CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_findings_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(DISTINCT h))
    FROM old_findings o JOIN new_findings n ON n.id = o.id
        CROSS JOIN LATERAL (VALUES (o.host_id), (n.host_id)) AS x(h)
    WHERE (o.status, o.reason, o.subject, o.host_id) IS DISTINCT FROM (n.status, n.reason, n.subject, n.host_id);
    RETURN NULL;
END $$;
