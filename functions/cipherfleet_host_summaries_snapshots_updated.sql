-- A snapshot is written once; a later migration filling a new column in is
-- the only update, and counts for the hosts whose current snapshot it is.
CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_snapshots_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(h.id))
    FROM hosts h JOIN new_snapshots s ON s.id = h.current_snapshot_id;
    RETURN NULL;
END $$;
