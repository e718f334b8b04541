-- Changed labels or current snapshot. A row trigger with a column list: a
-- statement trigger with transition tables cannot have one, and would fire on
-- every heartbeat flush (`UPDATE hosts SET last_seen`, up to every host at
-- once), which this one never does. Hellos change one host per statement.
CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_host_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(ARRAY[NEW.id]);
    RETURN NULL;
END $$;
