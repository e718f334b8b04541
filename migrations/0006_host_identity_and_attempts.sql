-- Per-host identity and job attempts (issue 10).
--
-- A host is who holds its credential, not whoever claims its name: the shared
-- enrollment token only admits a host that has no credential yet, which is
-- then issued a random secret. Only its SHA-256 is kept here. Hosts enrolled
-- before this migration have none: the first agent that presents the
-- enrollment token under such a name claims it (the coordinator logs it).
ALTER TABLE hosts
    ADD COLUMN credential_hash bytea CHECK (length(credential_hash) = 32),
    ADD COLUMN credential_issued_at timestamptz,
    -- Set by `hosts retire`: never selected again, its Hello refused, its history kept.
    ADD COLUMN retired_at timestamptz,
    ADD CHECK ((credential_hash IS NULL) = (credential_issued_at IS NULL));

-- Every dispatch of a job is an attempt with its own id, sent in `RunJob`;
-- only an outcome naming the current attempt counts. Jobs running across
-- this migration get an id no agent knows: their outcome is ignored and the
-- sweep retries them at their deadline.
ALTER TABLE jobs ADD COLUMN attempt_id uuid;
UPDATE jobs SET attempt_id = gen_random_uuid() WHERE status = 'running';
ALTER TABLE jobs ADD CONSTRAINT jobs_running_has_attempt CHECK (status <> 'running' OR attempt_id IS NOT NULL);
