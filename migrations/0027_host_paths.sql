-- The paths each host's agent can run (`Capabilities.paths` of its latest
-- hello: 'accelerated', and 'software' only when its software-build sibling is
-- installed), and the campaign points a host skipped for lack of one.
--
-- NULL: the host has not said hello since this migration; it is given every
-- path, as before, until it does.
ALTER TABLE hosts ADD COLUMN paths text[]
    CHECK (paths <@ ARRAY['accelerated', 'software']::text[]);

-- Points of a campaign not measured on a host because its agent lacks their
-- path: counted here instead of queued as jobs that would fail at once. Left
-- out when the campaign was created (the host had said which paths it has),
-- or taken out of the queue at the host's next hello (it had not, or it lost
-- the path since). Not jobs: a campaign whose other jobs ended is finished.
CREATE TABLE campaign_skips (
    campaign_id bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    path text NOT NULL CHECK (path IN ('accelerated', 'software')),
    points bigint NOT NULL CHECK (points > 0),
    PRIMARY KEY (campaign_id, host_id, path)
);
-- Deleting a host cascades here.
CREATE INDEX campaign_skips_host ON campaign_skips (host_id);
