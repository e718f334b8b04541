-- The providers' facts a daemon's Hello now carries (facts `providers`), typed
-- so the host page and the findings pass read columns, not the facts JSON:
-- the kernel's chosen crypto driver for each name the agent reports
-- (`providers.kernel.drivers`, core::provider::facts::KernelDriver) and the
-- host's OpenSSL build (`providers.openssl`, OpensslBuild). NULL: the agent
-- did not report them (older agents, no /proc/crypto, no usable `openssl`).
-- Nothing to fill: daemons before this sent no providers in their facts.
ALTER TABLE host_fact_snapshots
    ADD COLUMN kernel_drivers jsonb CHECK (jsonb_typeof(kernel_drivers) = 'array'),
    ADD COLUMN openssl_build jsonb CHECK (jsonb_typeof(openssl_build) = 'object');
