-- Several coordinators on one PostgreSQL (issue 12). A host's session is
-- owned by one coordinator at a time through its lease: the coordinator that
-- holds a live lease (expires_at in the future) serves the host, and any other
-- refuses a second session of it. The owner renews its leases every heartbeat
-- interval, in one statement for all its hosts; a coordinator that dies stops
-- renewing, and its leases expire within a few heartbeats, after which the
-- host's next session takes its lease over.
CREATE TABLE host_leases (
    host_id bigint PRIMARY KEY REFERENCES hosts (id) ON DELETE CASCADE,
    -- The owning coordinator's id, drawn at its start.
    coordinator uuid NOT NULL,
    -- Which of the owner's sessions of the host (its in-memory generation):
    -- an ended session releases only its own lease, never its successor's.
    generation bigint NOT NULL,
    -- For people: the owner's hostname and pid.
    coordinator_name text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    -- The session was welcomed (its hello stored): the host is online. A lease is
    -- taken before the hello is stored, so that a second session changes nothing.
    welcomed boolean NOT NULL DEFAULT false,
    -- Set by an operator's command on another coordinator (credential reset,
    -- retirement): the owner ends the session at its next renewal, with this reason.
    revoked text
);
CREATE INDEX host_leases_coordinator ON host_leases (coordinator);

-- Jobs were queued: every coordinator LISTENs on this channel and dispatches
-- to its idle hosts that have work, so a campaign created through one reaches
-- hosts connected to another at once (a periodic poll is the safety net). One
-- notification per statement, delivered at commit; PostgreSQL folds repeats
-- within a transaction.
CREATE FUNCTION cipherfleet_notify_jobs_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cipherfleet_jobs_queued', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_queued_notify AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION cipherfleet_notify_jobs_queued();
