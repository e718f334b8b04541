-- Jobs were queued: every coordinator LISTENs on this channel and dispatches
-- to its idle hosts that have work, so a campaign created through one reaches
-- hosts connected to another at once (a periodic poll is the safety net). One
-- notification per statement, delivered at commit; PostgreSQL folds repeats
-- within a transaction.
CREATE OR REPLACE FUNCTION cipherfleet_notify_jobs_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cipherfleet_jobs_queued', '');
    RETURN NULL;
END
$$;
