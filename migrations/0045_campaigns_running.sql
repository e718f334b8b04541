-- The running campaigns, by id (issue 34, the cost of a result). A claim
-- reads them once, as an array its hosts' queues are filtered by
-- (`store::jobs::claims::claim_locked`); without an index it read every
-- campaign ever run, and schedules run one an hour or more for ever (with
-- 20,000 finished campaigns, 1.8 ms a claim of a batch, against 0.01 ms:
-- docs/performance.md, "Coordinator queries and sessions").
--
-- Built under the table's lock, over campaigns only: a few milliseconds.
-- Additive for one release: no statement names the index.
CREATE INDEX campaigns_running ON campaigns (id) WHERE status = 'running';
