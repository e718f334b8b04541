-- How each snapshot's agent binary was compiled (facts build.codegen): a new
-- LTO mode, codegen-unit count or set of compile-time target features changes
-- what the host measures, so a change is a fact change like a new kernel.
-- NULL / empty for agents that did not report it.
ALTER TABLE host_fact_snapshots
    -- One line, e.g. "release, opt-level 3, LTO fat, 1 codegen unit" (core::facts::Codegen::summary).
    ADD COLUMN build_codegen text,
    ADD COLUMN build_target_features text[] NOT NULL DEFAULT '{}';
