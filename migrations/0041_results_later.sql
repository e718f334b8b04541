-- A default partition of `results_raw` (issue 34): a result whose week has
-- no partition is stored in `results_later` instead of refused. Weeks are made
-- four ahead by every coordinator of migration 0040 on, at start and every
-- hour; if only coordinators that make none run for longer (a rollback to
-- the release before 0040 past those weeks), their results wait here, and the
-- next coordinator that makes weeks moves them into theirs
-- (functions/cipherfleet_results_weeks.sql, changed with this migration;
-- docs/operations.md, "Retention"). Empty otherwise, so making a week, which
-- checks that the default holds none of its rows, reads nothing.
CREATE TABLE results_later PARTITION OF results_raw DEFAULT;
