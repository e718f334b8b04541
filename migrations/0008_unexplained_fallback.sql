-- cipherfleet schema 8: the `unexplained-fallback` reason — an accelerated
-- request whose worker ran a primitive in software although the host's facts
-- give it the hardware path (src/analysis/unexplained.rs). Its subject is
-- the primitive (aes, ghash, chacha20, sha256); it has no kind.
ALTER TABLE findings DROP CONSTRAINT findings_reason_check;
ALTER TABLE findings ADD CONSTRAINT findings_reason_check CHECK (reason IN
    ('cpu-lacks', 'hypervisor-masks', 'os-disabled', 'software-build', 'slow-accelerated',
     'unexplained-fallback'));
