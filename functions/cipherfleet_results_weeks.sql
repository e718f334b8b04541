-- The partitions of `results_raw` (migrations/0040) for every UTC week from
-- the newest one there to the week `p_weeks_ahead` weeks after now, made
-- where missing; returns how many it made. Every coordinator calls it at
-- start and every hour (`store::partitions`), so a result always has a week
-- to go to: there is no default partition, whose rows would stop a week's
-- partition from being made. Under a transaction-scoped advisory lock, so
-- coordinators starting together make each week once.
CREATE OR REPLACE FUNCTION cipherfleet_results_weeks(p_weeks_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    last timestamptz;
    made integer := 0;
    week timestamptz;
    until timestamptz := date_trunc('week', now(), 'UTC') + (p_weeks_ahead + 1) * interval '1 week';
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('cipherfleet_results_weeks'));
    -- The newest partition's upper bound: the end of what results_raw takes.
    SELECT max((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz)
      INTO last
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'results_raw'::regclass;
    week := coalesce(last, date_trunc('week', now(), 'UTC'));
    WHILE week < until LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF results_raw FOR VALUES FROM (%L) TO (%L)',
            'results_' || to_char(week AT TIME ZONE 'UTC', 'YYYYMMDD'), week, week + interval '1 week');
        made := made + 1;
        week := week + interval '1 week';
    END LOOP;
    RETURN made;
END $$;
