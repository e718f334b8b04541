CREATE OR REPLACE FUNCTION webhook_finding_resolved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (finding_id, event) VALUES (NEW.id, 'resolved');
    RETURN NULL;
END $$;
