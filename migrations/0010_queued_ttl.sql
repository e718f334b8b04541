-- Bounds (issue 10): a campaign's queued jobs have a time to live. A job
-- still queued that long after it was created (its host is gone, or never
-- came back) fails with the reason, so a campaign cannot wait for ever.
-- Campaigns created before keep a day, the default of new ones.
ALTER TABLE campaigns ADD COLUMN queued_ttl_seconds double precision NOT NULL DEFAULT 86400
    CHECK (queued_ttl_seconds > 0);
