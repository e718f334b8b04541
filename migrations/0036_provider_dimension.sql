-- The provider a point is measured on (cipherfleet_core::provider::Provider):
-- `rustcrypto` (every job and result before this migration, the built-in
-- crates), `ring`, `openssl` (the host's `openssl speed`) or `kernel` (the
-- kernel crypto API through AF_ALG). Part of the point, like the nonce
-- (migration 0015), so jobs and results carry it.
--
-- Additive for one release (store::schema, a rolling upgrade): the latest
-- result of every point keeps its home and its key in `result_points`, which
-- now holds the built-in provider's results only, the ones every plain page
-- and the findings read; the other providers' latest results live in
-- `provider_points`, keyed by provider too, which the providers page reads
-- beside `result_points`. A coordinator of the previous release upserts
-- `result_points` on the key it knows and never sees a provider job.
ALTER TABLE jobs
    ADD COLUMN provider text NOT NULL DEFAULT 'rustcrypto'
        CHECK (provider IN ('rustcrypto', 'ring', 'openssl', 'kernel'));
ALTER TABLE results
    ADD COLUMN provider text NOT NULL DEFAULT 'rustcrypto'
        CHECK (provider IN ('rustcrypto', 'ring', 'openssl', 'kernel'));

CREATE TABLE provider_points (
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    provider text NOT NULL CHECK (provider IN ('ring', 'openssl', 'kernel')),
    algorithm text NOT NULL,
    direction text NOT NULL,
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    -- 0 when the job set no concurrency, as in result_points.
    concurrency integer NOT NULL,
    key_mode text NOT NULL,
    path text NOT NULL,
    nonce text NOT NULL,
    result_id bigint NOT NULL REFERENCES results (id) ON DELETE CASCADE,
    measured_at timestamptz NOT NULL,
    path_used text NOT NULL,
    throughput_mb_s double precision NOT NULL,
    ops_per_s double precision NOT NULL,
    latency_p99_ns bigint NOT NULL,
    cv double precision,
    samples integer NOT NULL,
    low_samples boolean NOT NULL DEFAULT false,
    snapshot_id bigint,
    -- What the worker reported under `measurement.implementation` (the driver,
    -- the library, the command); NULL when it did not.
    implementation jsonb,
    result_count integer NOT NULL CHECK (result_count > 0),
    PRIMARY KEY (host_id, provider, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce)
);
-- The providers page: one size / threads / direction across hosts, providers and algorithms.
CREATE INDEX provider_points_view ON provider_points (size_bytes, threads, direction, algorithm);

-- The findings pass and the host page read a host's series from this index
-- alone (migration 0020); they read the built-in provider's series, so the
-- index carries the provider too. The previous release's queries, which do
-- not name it, are served as before.
DROP INDEX results_series;
CREATE INDEX results_series ON results
    (host_id, algorithm, direction, size_bytes, threads, concurrency, key_mode, path, nonce, created_at DESC, id DESC)
    INCLUDE (path_used, throughput_mb_s, snapshot_id, provider);

-- Points a campaign skips on a host whose agent lacks their provider (no
-- `openssl` binary, no AF_ALG, an agent before providers), with the agent's
-- reason; beside campaign_skips, which counts the points of a missing path.
CREATE TABLE campaign_provider_skips (
    campaign_id bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    provider text NOT NULL CHECK (provider IN ('ring', 'openssl', 'kernel')),
    points bigint NOT NULL CHECK (points > 0),
    -- Why, as the agent said it (untrusted text) or as the coordinator knows it.
    reason text NOT NULL,
    PRIMARY KEY (campaign_id, host_id, provider)
);

-- `openssl-no-acceleration` (src/analysis/providers.rs): the host's OpenSSL
-- measures its accelerated path no faster than its own masked software path,
-- on a CPU with AES (subject `openssl-aes`). No kind.
ALTER TABLE findings DROP CONSTRAINT findings_reason_check;
ALTER TABLE findings ADD CONSTRAINT findings_reason_check CHECK (reason IN
    ('cpu-lacks', 'hypervisor-masks', 'os-disabled', 'software-build', 'slow-accelerated',
     'unexplained-fallback', 'kernel-crypto-generic', 'openssl-masked', 'openssl-no-acceleration'));
