-- The report at 10,000 hosts (issue 12), two aids.
--
-- The fallback page's "at software speed" list:
-- its hosts are grouped from the rows whose accelerated request ran less than
-- the accelerated path (partial or software), or ran it under the
-- near-software ratio. This index ranges over both kinds at one point, with
-- the host and algorithm in it, so the grouping reads the index alone (the
-- page and the ratio order keep `fallback_pairs_by_ratio`).
CREATE INDEX fallback_pairs_by_path_used ON fallback_pairs
    (size_bytes, threads, direction, key_mode, accelerated_path_used, ratio) INCLUDE (host_id, algorithm);

-- When each change marker of the compare matrix's class cells was written:
-- the coordinator recomputes stale cells in the background once ingest has
-- paused (or the oldest change has waited long enough), so the first view
-- after a campaign reads stored cells instead of paying the recomputation.
ALTER TABLE class_cell_changes ADD COLUMN written_at timestamptz NOT NULL DEFAULT now();
