-- refresh_result_points() starts with TRUNCATE, which no row trigger sees:
-- everything derived goes with it (the INSERT that follows rebuilds view_hosts).
CREATE OR REPLACE FUNCTION result_points_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE view_hosts, class_cells, class_cells_computed, class_cell_changes;
    RETURN NULL;
END $$;
