-- The claim lock of each host until the end of the transaction, in key
-- order, so two callers locking overlapping hosts never wait on each other
-- crosswise: the class is "cfhl" in ASCII in PostgreSQL's two-key advisory
-- space, the key a host id's low 31 bits (see coordinator/src/db/advisory.rs).
CREATE OR REPLACE FUNCTION cipherfleet_lock_hosts(hosts bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1667655788, k)
    FROM (SELECT DISTINCT (h & 2147483647)::integer AS k FROM unnest(hosts) AS h ORDER BY k) keys;
END $$;
