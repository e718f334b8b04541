-- Several coordinators on one PostgreSQL (issue 12), continued.

-- A campaign cancel reaches every coordinator: each one tells its own agents to
-- stop their running jobs of the campaign, with the operator's reason. The
-- trigger notifies at commit; each coordinator also polls (a notification
-- missed while its listening connection was re-established).
ALTER TABLE campaigns ADD COLUMN cancel_reason text;
CREATE FUNCTION cipherfleet_notify_campaign_cancelled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cipherfleet_campaign_cancelled', NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER campaign_cancelled_notify AFTER UPDATE OF status ON campaigns
    FOR EACH ROW WHEN (NEW.status = 'cancelled' AND OLD.status <> 'cancelled')
    EXECUTE FUNCTION cipherfleet_notify_campaign_cancelled();

-- The coordinators that hold (or held) leases, as processes: a coordinator
-- starting on the same machine, in the same PID namespace and as the same user
-- as one whose process no longer runs (the PID is gone, or now belongs to a
-- process started at another time) knows that one is dead, and ends its leases
-- at once instead of letting its agents wait for them to expire. A row is
-- kept fresh at every lease renewal; one not seen for an hour is forgotten.
CREATE TABLE coordinators (
    -- host_leases.coordinator of its leases.
    id uuid PRIMARY KEY,
    -- For people: hostname/pid.
    name text NOT NULL,
    -- /proc/sys/kernel/random/boot_id, the inode of /proc/self/ns/pid and the
    -- effective uid: where its PID means the same process. NULL: unknown, never
    -- judged dead.
    boot_id uuid,
    pid_namespace bigint,
    uid bigint,
    pid integer NOT NULL,
    -- The process's start time in clock ticks after boot (/proc/PID/stat):
    -- with the PID, one process of that boot.
    pid_start bigint,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX coordinators_machine ON coordinators (boot_id, pid_namespace, uid);
