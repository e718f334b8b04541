-- Measurement schema cipherfleet.measurement/2: a point can run some
-- primitives in hardware and some in software (AES-GCM with GHASH in
-- software, CBC-HMAC without SHA-256 instructions). `results.path_used`
-- accepts `partial`; `result_points.path_used` copies it and never had a check.
ALTER TABLE results DROP CONSTRAINT results_path_used_check;
ALTER TABLE results ADD CONSTRAINT results_path_used_check
    CHECK (path_used IN ('accelerated', 'partial', 'software'));

-- The agent's sign of a user-mode emulator: /proc/cpuinfo describes another
-- CPU than the one it runs on. Typed, so every page marks such a host as
-- emulated without reading the facts JSON. Snapshots taken before agents
-- reported it read NULL (unknown), as their facts have no such field.
ALTER TABLE host_fact_snapshots ADD COLUMN cpuinfo_foreign boolean;
UPDATE host_fact_snapshots SET cpuinfo_foreign = (facts #>> '{virtualization,cpuinfo_foreign}')::boolean
    WHERE facts #>> '{virtualization,cpuinfo_foreign}' IN ('true', 'false');
