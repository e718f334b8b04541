-- cipherfleet schema 9: watching without a person — schedules that start
-- campaigns, verification campaigns after a host's facts change, and the
-- webhook outbox of findings opening and resolving (src/watch/).

-- A suite on the hosts a selector picks, started every period.
CREATE TABLE schedules (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    suite text NOT NULL,
    -- The host selector, as campaigns store it.
    selector jsonb NOT NULL DEFAULT '{}',
    every_seconds bigint NOT NULL CHECK (every_seconds > 0),
    -- `--at HH:MM`: due times are this minute of the UTC day plus whole periods.
    at_minute integer CHECK (at_minute >= 0 AND at_minute < 1440),
    -- Each firing waits a random part of this after its due time.
    jitter_seconds bigint NOT NULL DEFAULT 0 CHECK (jitter_seconds >= 0 AND jitter_seconds < every_seconds),
    -- What a due firing does while the schedule's previous campaign still runs:
    -- skip that period, or delay the firing until the campaign ends.
    if_running text NOT NULL DEFAULT 'skip' CHECK (if_running IN ('skip', 'delay')),
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The next due time, and when it fires (due plus its jitter).
    due_at timestamptz NOT NULL,
    fire_at timestamptz NOT NULL CHECK (fire_at >= due_at),
    last_campaign_id bigint REFERENCES campaigns (id) ON DELETE SET NULL,
    last_fired_at timestamptz,
    -- What the last due time did, in words ("started campaign 12", "skipped: …").
    last_outcome text,
    runs bigint NOT NULL DEFAULT 0,
    skips bigint NOT NULL DEFAULT 0
);
CREATE INDEX schedules_fire_at ON schedules (fire_at);

-- Which schedule started a campaign, if any.
ALTER TABLE campaigns ADD COLUMN schedule_id bigint REFERENCES schedules (id) ON DELETE SET NULL;
CREATE INDEX campaigns_schedule ON campaigns (schedule_id) WHERE schedule_id IS NOT NULL;

-- The last verification campaign queued for each host: the per-host rate limit.
CREATE TABLE host_verifications (
    host_id bigint PRIMARY KEY REFERENCES hosts (id) ON DELETE CASCADE,
    queued_at timestamptz NOT NULL DEFAULT now(),
    campaign_id bigint REFERENCES campaigns (id) ON DELETE SET NULL,
    -- The fact changes that asked for it (`{"new_host": true}` for a first hello).
    changes jsonb NOT NULL DEFAULT '{}'
);

-- Findings opening and resolving, waiting for the webhook. Rows are written
-- by the triggers below, in the transaction that opened or resolved the
-- finding, so no transition is lost whichever code path made it.
CREATE TABLE webhook_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    finding_id bigint NOT NULL REFERENCES findings (id) ON DELETE CASCADE,
    event text NOT NULL CHECK (event IN ('opened', 'resolved')),
    created_at timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 0,
    -- Due for (another) attempt; a claimed delivery pushes it out by a lease.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    last_error text
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at) WHERE delivered_at IS NULL;

CREATE FUNCTION webhook_finding_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (finding_id, event) VALUES (NEW.id, 'opened');
    RETURN NULL;
END $$;

CREATE FUNCTION webhook_finding_resolved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (finding_id, event) VALUES (NEW.id, 'resolved');
    RETURN NULL;
END $$;

-- ON CONFLICT DO UPDATE (a refresh) fires UPDATE triggers, not INSERT ones:
-- only a finding that is new opens.
CREATE TRIGGER findings_opened AFTER INSERT ON findings
    FOR EACH ROW WHEN (NEW.status = 'open') EXECUTE FUNCTION webhook_finding_opened();
CREATE TRIGGER findings_resolved AFTER UPDATE OF status ON findings
    FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'resolved')
    EXECUTE FUNCTION webhook_finding_resolved();
