-- Deleted hosts take their results along, as the foreign key did before
-- migration 0046: `results` keeps `host_id` without one, so that storing a
-- result does not look up and lock its host's row.
CREATE OR REPLACE FUNCTION cipherfleet_results_hosts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM results r USING old_hosts o WHERE r.host_id = o.id;
    RETURN NULL;
END $$;
