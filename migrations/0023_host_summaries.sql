-- What the hosts list, the overview and its configurations table show of each
-- host beside its facts — its acceleration status, and whether it is emulated
-- or simulated — stored per host, so those pages count, group, filter and page
-- 10,000 hosts in SQL instead of loading every host with its facts and open
-- findings into the coordinator on every request.
--
-- The verdicts are the coordinator's rules (analysis/acceleration.rs,
-- analysis/marks.rs), written by it, not restated here: the triggers below
-- only count the changes of what a verdict is judged by (`changes`), and the
-- coordinator judges again the hosts whose `summarised` lags behind before it
-- reads them (db/host_summaries.rs). Each trigger writes in the same
-- transaction as the change it counts, so a reader that sees a change sees
-- its count too.
--
-- What a verdict is judged by: the host's labels and current snapshot, and
-- the findings open on it. No trigger on results, result_points or jobs: an
-- ingest batch pays nothing here. A hello pays one row trigger when it
-- changes labels or facts; a findings pass one statement trigger per write.
CREATE TABLE host_summaries (
    host_id bigint PRIMARY KEY REFERENCES hosts (id) ON DELETE CASCADE,
    -- Counted up by the triggers on every change of the host's inputs.
    changes bigint NOT NULL DEFAULT 1,
    -- The `changes` the verdicts below were judged at; NULL before the first.
    summarised bigint,
    acceleration text CHECK (acceleration IN ('accelerated', 'partial', 'software', 'unknown')),
    emulated boolean,
    simulated boolean
);
-- The hosts to judge again: none, in the steady state.
CREATE INDEX host_summaries_stale ON host_summaries (host_id) WHERE summarised IS DISTINCT FROM changes;

-- Counts a change of each host in `ids` that still exists (a host deleted in
-- the same statement, whose findings cascade, has no summary left to count
-- on). In key order, so concurrent writers lock shared rows in one order.
CREATE FUNCTION cipherfleet_host_summaries_count(ids bigint[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO host_summaries AS t (host_id)
    SELECT h.id FROM hosts h WHERE h.id = ANY(ids) ORDER BY h.id
    ON CONFLICT (host_id) DO UPDATE SET changes = t.changes + 1;
$$;

-- New hosts (a hello's upsert inserts one; a bulk load many): one statement.
CREATE FUNCTION cipherfleet_host_summaries_hosts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(id)) FROM new_hosts;
    RETURN NULL;
END $$;
CREATE TRIGGER hosts_summary_insert AFTER INSERT ON hosts
    REFERENCING NEW TABLE AS new_hosts
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_host_summaries_hosts_inserted();

-- Changed labels or current snapshot. A row trigger with a column list: a
-- statement trigger with transition tables cannot have one, and would fire on
-- every heartbeat flush (`UPDATE hosts SET last_seen`, up to every host at
-- once), which this one never does. Hellos change one host per statement.
CREATE FUNCTION cipherfleet_host_summaries_host_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(ARRAY[NEW.id]);
    RETURN NULL;
END $$;
CREATE TRIGGER hosts_summary_update AFTER UPDATE OF labels, current_snapshot_id ON hosts
    FOR EACH ROW WHEN (OLD.labels IS DISTINCT FROM NEW.labels
        OR OLD.current_snapshot_id IS DISTINCT FROM NEW.current_snapshot_id)
    EXECUTE FUNCTION cipherfleet_host_summaries_host_updated();

-- A snapshot is written once; a later migration filling a new column in is
-- the only update, and counts for the hosts whose current snapshot it is.
CREATE FUNCTION cipherfleet_host_summaries_snapshots_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(h.id))
    FROM hosts h JOIN new_snapshots s ON s.id = h.current_snapshot_id;
    RETURN NULL;
END $$;
CREATE TRIGGER host_fact_snapshots_summary_update AFTER UPDATE ON host_fact_snapshots
    REFERENCING NEW TABLE AS new_snapshots
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_host_summaries_snapshots_updated();

-- Findings: one opened, resolved, deleted while open, or moved. A refresh of
-- open findings (the findings pass's batched `UPDATE … SET last_seen`)
-- changes none of these and counts nothing.
CREATE FUNCTION cipherfleet_host_summaries_findings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(DISTINCT host_id))
    FROM new_findings WHERE status = 'open';
    RETURN NULL;
END $$;
CREATE FUNCTION cipherfleet_host_summaries_findings_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(DISTINCT h))
    FROM old_findings o JOIN new_findings n ON n.id = o.id
        CROSS JOIN LATERAL (VALUES (o.host_id), (n.host_id)) AS x(h)
    WHERE (o.status, o.reason, o.subject, o.host_id) IS DISTINCT FROM (n.status, n.reason, n.subject, n.host_id);
    RETURN NULL;
END $$;
CREATE FUNCTION cipherfleet_host_summaries_findings_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_host_summaries_count(array_agg(DISTINCT host_id))
    FROM old_findings WHERE status = 'open';
    RETURN NULL;
END $$;
CREATE TRIGGER findings_summary_insert AFTER INSERT ON findings
    REFERENCING NEW TABLE AS new_findings
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_host_summaries_findings_inserted();
CREATE TRIGGER findings_summary_update AFTER UPDATE ON findings
    REFERENCING OLD TABLE AS old_findings NEW TABLE AS new_findings
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_host_summaries_findings_updated();
CREATE TRIGGER findings_summary_delete AFTER DELETE ON findings
    REFERENCING OLD TABLE AS old_findings
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_host_summaries_findings_deleted();

-- The hosts stored so far, to be judged on the first read.
INSERT INTO host_summaries (host_id) SELECT id FROM hosts ORDER BY id;
