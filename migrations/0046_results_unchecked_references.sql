-- Storing a result no longer checks its host and snapshot through foreign
-- keys (issue 34, the cost of a result). Each check looked up and locked the
-- referenced row for every result stored: in a 1,000-agent campaign's batch
-- of 230 results, about 4 of the insert's 9 ms (docs/performance.md, "Ingest,
-- 1,000 agents"). Both are known before the insert: a result is stored only
-- for a job of its host, read under the job's row lock, and `jobs` keeps its
-- foreign key to `hosts`; its snapshot is the one the host's session read.
--
-- What the keys did on delete stays, in statement triggers: a deleted host's
-- results are deleted with it, and results tied to a deleted snapshot are
-- tied to none. A host deleted while a batch stores its results waits for the
-- batch, whose jobs' rows it deletes too (the cascade of `jobs`), and then
-- deletes what the batch stored.
--
-- Additive for one release: no statement relies on the keys, and a
-- coordinator of the release before, which knows no trigger here, leaves the
-- functions (functions/cipherfleet_results_hosts_deleted.sql and
-- cipherfleet_results_snapshots_deleted.sql, which replace these definitions
-- on start) alone.
CREATE OR REPLACE FUNCTION cipherfleet_results_hosts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM results r USING old_hosts o WHERE r.host_id = o.id;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION cipherfleet_results_snapshots_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE results r SET snapshot_id = NULL FROM old_snapshots o WHERE r.snapshot_id = o.id;
    RETURN NULL;
END $$;
CREATE TRIGGER hosts_results_deleted AFTER DELETE ON hosts REFERENCING OLD TABLE AS old_hosts
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_results_hosts_deleted();
CREATE TRIGGER host_fact_snapshots_results_unlinked AFTER DELETE ON host_fact_snapshots
    REFERENCING OLD TABLE AS old_snapshots
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_results_snapshots_deleted();
-- The keys by what they reference, whatever they were named: dropped on
-- `results`, which drops them on every partition.
DO $$
DECLARE
    k record;
BEGIN
    FOR k IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'results'::regclass AND contype = 'f'
               AND confrelid IN ('hosts'::regclass, 'host_fact_snapshots'::regclass)
    LOOP
        EXECUTE format('ALTER TABLE results DROP CONSTRAINT %I', k.conname);
    END LOOP;
END $$;
