-- New hosts (a hello's upsert inserts one; a bulk load many): one statement.
CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_hosts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(id)) FROM new_hosts;
    RETURN NULL;
END $$;
