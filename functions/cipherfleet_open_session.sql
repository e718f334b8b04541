-- Records a new connection of p_host's agent and returns its id. The host's
-- other open sessions end now: its lease allows one live session in the
-- cluster, so they are of a coordinator that died without closing them.
-- (PL/pgSQL rather than SQL here and below: its plans are kept per
-- connection, where a SQL function called from another is planned anew.)
CREATE OR REPLACE FUNCTION cipherfleet_open_session(p_host bigint, p_snapshot bigint, p_peer text, p_agent_version text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    opened bigint;
BEGIN
    UPDATE agent_sessions SET disconnected_at = greatest(now(), connected_at)
    WHERE host_id = p_host AND disconnected_at IS NULL;
    INSERT INTO agent_sessions (host_id, snapshot_id, peer_address, agent_version)
    VALUES (p_host, p_snapshot, p_peer, p_agent_version)
    RETURNING id INTO opened;
    RETURN opened;
END $$;
