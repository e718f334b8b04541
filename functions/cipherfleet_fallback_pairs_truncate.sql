-- `refresh_result_points()` (a bulk load's rebuild) truncates: the lists and
-- their markers go with the rows.
CREATE OR REPLACE FUNCTION cipherfleet_fallback_pairs_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE fallback_pairs, fallback_views, fallback_pair_changes;
    RETURN NULL;
END $$;
