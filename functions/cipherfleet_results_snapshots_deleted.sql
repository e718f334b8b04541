-- Results tied to deleted snapshots are tied to none, as the foreign key's
-- `ON DELETE SET NULL` did before migration 0046 (see
-- cipherfleet_results_hosts_deleted).
CREATE OR REPLACE FUNCTION cipherfleet_results_snapshots_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE results r SET snapshot_id = NULL FROM old_snapshots o WHERE r.snapshot_id = o.id;
    RETURN NULL;
END $$;
