CREATE OR REPLACE FUNCTION cipherfleet_notify_campaign_cancelled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cipherfleet_campaign_cancelled', NEW.id::text);
    RETURN NULL;
END
$$;
