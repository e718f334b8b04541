-- Two reasons from the providers' facts (migrations/0034,
-- src/analysis/providers.rs): `kernel-crypto-generic` — the kernel's chosen
-- driver for an AES name runs in software although the CPU has the
-- instructions (subject `kernel-aes`); `openssl-masked` — an OpenSSL
-- capability variable in the agent's environment masks acceleration
-- (subject `openssl`). Neither has a kind.
ALTER TABLE findings DROP CONSTRAINT findings_reason_check;
ALTER TABLE findings ADD CONSTRAINT findings_reason_check CHECK (reason IN
    ('cpu-lacks', 'hypervisor-masks', 'os-disabled', 'software-build', 'slow-accelerated',
     'unexplained-fallback', 'kernel-crypto-generic', 'openssl-masked'));
