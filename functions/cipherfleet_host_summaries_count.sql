-- Counts a change of each host in `ids` that still exists (a host deleted in
-- the same statement, whose findings cascade, has no summary left to count
-- on). In key order, so concurrent writers lock shared rows in one order.
CREATE OR REPLACE FUNCTION cipherfleet_host_summaries_count(ids bigint[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO host_summaries AS t (host_id)
    SELECT h.id FROM hosts h WHERE h.id = ANY(ids) ORDER BY h.id
    ON CONFLICT (host_id) DO UPDATE SET changes = t.changes + 1;
$$;
