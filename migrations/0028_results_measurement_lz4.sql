-- Ingest at 10,000 hosts (issue 12): every result keeps the measurement its
-- agent sent (about 4 KB of JSON text, host facts and samples included), past
-- the size PostgreSQL compresses a row's values at. With the default pglz
-- that compression alone was about 5 % of the database's CPU per stored
-- result; lz4 does the same work several times faster, for a little more
-- space. Only new values are compressed with it; older ones stay readable as
-- they are. A server built without lz4 support keeps pglz.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE results ALTER COLUMN measurement SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE 'results.measurement keeps the default compression: %', SQLERRM;
END $$;
