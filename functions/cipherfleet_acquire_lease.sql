-- Takes p_host's lease for session p_generation of coordinator p_coordinator
-- for p_ttl_seconds: when nobody holds it, when its lease expired (its
-- coordinator died), or when p_coordinator holds it from an earlier session.
-- False while another coordinator holds it live. p_welcomed: the session is
-- welcomed already (the host counts as online at once).
CREATE OR REPLACE FUNCTION cipherfleet_acquire_lease(
    p_host bigint, p_coordinator uuid, p_generation bigint, p_coordinator_name text,
    p_ttl_seconds double precision, p_welcomed boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO host_leases AS l (host_id, coordinator, generation, coordinator_name, expires_at, welcomed)
    VALUES (p_host, p_coordinator, p_generation, p_coordinator_name,
            now() + p_ttl_seconds * interval '1 second', p_welcomed)
    ON CONFLICT (host_id) DO UPDATE SET coordinator = EXCLUDED.coordinator,
        generation = EXCLUDED.generation, coordinator_name = EXCLUDED.coordinator_name,
        acquired_at = now(), expires_at = EXCLUDED.expires_at, revoked = NULL, welcomed = EXCLUDED.welcomed
    WHERE l.expires_at <= now() OR l.coordinator = EXCLUDED.coordinator;
    RETURN FOUND;
END $$;
