-- Drops `p_name`, a partition of `results_raw` (migrations/0040) that
-- retention has folded (src/store/rollups.rs, `fold_week`); refuses any
-- other table, naming it, and the default partition `results_later`
-- (migrations/0041), which holds results not folded yet. Dropping it locks
-- `results`, which the report's readers hold: it waits at most 10 s for that
-- (the setting lasts the call), rather than every insert queueing behind it;
-- the fold is then undone and tried at the next pass.
CREATE OR REPLACE FUNCTION cipherfleet_results_drop(p_name text) RETURNS void
LANGUAGE plpgsql SET lock_timeout = '10s' AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                   WHERE i.inhparent = 'results_raw'::regclass AND c.relname = p_name
                     AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT') THEN
        RAISE EXCEPTION '% is not a week''s partition of results_raw', p_name;
    END IF;
    EXECUTE format('DROP TABLE %I', p_name);
END $$;
