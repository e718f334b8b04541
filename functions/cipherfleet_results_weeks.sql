-- The partitions of `results_raw` (migrations/0040) for every UTC week from
-- the newest one there to the week `p_weeks_ahead` weeks after now, made
-- where missing; returns how many it made. Every coordinator calls it at
-- start and every hour (`store::partitions`), so a result always has a week
-- to go to. Results stored while no coordinator made weeks wait in the
-- default partition, `results_later` (migrations/0041); their weeks are made
-- too, and they move into them, since a week cannot be made while the
-- default holds rows of it. Under a transaction-scoped advisory lock, so
-- coordinators starting together make each week once. Making a week locks
-- `results_raw`, which the report's readers hold: it waits at most 10 s for
-- that (the setting lasts the call), rather than every insert queueing
-- behind it; the week is then made at the next call, an hour later.
CREATE OR REPLACE FUNCTION cipherfleet_results_weeks(p_weeks_ahead integer) RETURNS integer
LANGUAGE plpgsql SET lock_timeout = '10s' AS $$
DECLARE
    last timestamptz;
    made integer := 0;
    week timestamptz;
    week_end timestamptz;
    waiting boolean;
    until timestamptz := date_trunc('week', now(), 'UTC') + (p_weeks_ahead + 1) * interval '1 week';
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('cipherfleet_results_weeks'));
    -- The newest partition's upper bound: the end of what results_raw takes
    -- but for its default.
    SELECT max((regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz)
      INTO last
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'results_raw'::regclass;
    week := coalesce(last, date_trunc('week', now(), 'UTC'));
    -- greatest() passes over the NULL of an empty default.
    until := greatest(until, (SELECT date_trunc('week', max(created_at), 'UTC') + interval '1 week' FROM results_later));
    WHILE week < until LOOP
        week_end := week + interval '1 week';
        waiting := EXISTS (SELECT 1 FROM results_later WHERE created_at >= week AND created_at < week_end);
        IF waiting THEN
            IF to_regclass('pg_temp.cipherfleet_results_moving') IS NULL THEN
                CREATE TEMP TABLE cipherfleet_results_moving (LIKE results_raw) ON COMMIT DROP;
            END IF;
            WITH moved AS (DELETE FROM results_later WHERE created_at >= week AND created_at < week_end RETURNING *)
                INSERT INTO cipherfleet_results_moving SELECT * FROM moved;
        END IF;
        EXECUTE format('CREATE TABLE %I PARTITION OF results_raw FOR VALUES FROM (%L) TO (%L)',
            'results_' || to_char(week AT TIME ZONE 'UTC', 'YYYYMMDD'), week, week_end);
        IF waiting THEN
            INSERT INTO results_raw SELECT * FROM cipherfleet_results_moving;
            TRUNCATE cipherfleet_results_moving;
        END IF;
        made := made + 1;
        week := week_end;
    END LOOP;
    RETURN made;
END $$;
