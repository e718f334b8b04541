-- cipherfleet schema 2: findings — why a host runs (or measures) crypto in
-- software, derived by the coordinator after results and campaigns
-- (src/findings.rs) from the rules in src/analysis/.
--
-- A finding is open while it holds and resolved (resolved_at set) once it no
-- longer does; if it comes back, a new open row starts, so a host's rows are
-- its history of problems.

CREATE TABLE findings (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    -- DESIGN.md "Fallback reasons", in the spelling `check` and /metrics use.
    reason text NOT NULL CHECK (reason IN
        ('cpu-lacks', 'hypervisor-masks', 'os-disabled', 'software-build', 'slow-accelerated')),
    -- Which comparison found a slow-accelerated path; only that reason has one.
    kind text CHECK (kind IN ('near-software', 'below-peers', 'dropped-vs-history')),
    -- What the finding concerns, so one host can have several of one reason:
    -- an algorithm (slow-accelerated) or a feature group (aes, avx-state, build).
    subject text NOT NULL CHECK (subject <> ''),
    -- critical: acceleration the silicon has is lost; warning: the host runs
    -- or measures (some) crypto in software; info: worth knowing, no action.
    severity text NOT NULL CHECK (severity IN ('critical', 'warning', 'info')),
    status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    -- When the evidence first showed it (a snapshot's or a result's time).
    first_seen timestamptz NOT NULL DEFAULT now(),
    -- The last derivation that still found it.
    last_seen timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    -- The numbers behind it: medians, reference, ratio, z, counts; or the flags.
    evidence jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(evidence) = 'object'),
    -- The host's fact changes (kernel, flags gained/lost, agent version, build)
    -- from its last good state to the one the finding was seen on.
    fact_changes jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(fact_changes) = 'object'),
    -- One human sentence for `check` and the report.
    summary text NOT NULL,
    CHECK ((kind IS NOT NULL) = (reason = 'slow-accelerated')),
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL)),
    CHECK (last_seen >= first_seen)
);

-- At most one open finding per host, reason, kind and subject: the deriver
-- updates it while it holds. COALESCE because NULL kinds never collide.
CREATE UNIQUE INDEX findings_one_open
    ON findings (host_id, reason, COALESCE(kind, ''), subject) WHERE status = 'open';
-- A host's history, newest first.
CREATE INDEX findings_host ON findings (host_id, first_seen DESC);
