CREATE OR REPLACE FUNCTION webhook_finding_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (finding_id, event) VALUES (NEW.id, 'opened');
    RETURN NULL;
END $$;
