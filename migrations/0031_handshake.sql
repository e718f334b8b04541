-- A hello's writes in one round trip (issue 12, scale). Once a host is
-- admitted (its credential checked), its session starts with one call of
-- cipherfleet_start_session: the host's lease, its session row, and the job
-- its agent still runs adopted (or what it no longer runs re-queued). Each
-- step is a function of its own, which the coordinator also calls alone. Each
-- statement of a PL/pgSQL function takes a fresh snapshot, so an adoption,
-- after waiting for the host's claim lock, sees what a claim that held it
-- left running, as a transaction of separate statements did. A reconnect
-- herd of known hosts whose facts did not change then costs two round trips
-- a hello (this call and the lookup before it) instead of about fifteen, and
-- none of its statements fires the triggers on jobs for nothing.

-- The claim lock of each host until the end of the transaction, in key
-- order, so two callers locking overlapping hosts never wait on each other
-- crosswise: the class is "cfhl" in ASCII in PostgreSQL's two-key advisory
-- space, the key a host id's low 31 bits (see coordinator/src/db/advisory.rs).
CREATE FUNCTION cipherfleet_lock_hosts(hosts bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1667655788, k)
    FROM (SELECT DISTINCT (h & 2147483647)::integer AS k FROM unnest(hosts) AS h ORDER BY k) keys;
END $$;

-- Takes p_host's lease for session p_generation of coordinator p_coordinator
-- for p_ttl_seconds: when nobody holds it, when its lease expired (its
-- coordinator died), or when p_coordinator holds it from an earlier session.
-- False while another coordinator holds it live. p_welcomed: the session is
-- welcomed already (the host counts as online at once).
CREATE FUNCTION cipherfleet_acquire_lease(
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

-- Records a new connection of p_host's agent and returns its id. The host's
-- other open sessions end now: its lease allows one live session in the
-- cluster, so they are of a coordinator that died without closing them.
-- (PL/pgSQL rather than SQL here and below: its plans are kept per
-- connection, where a SQL function called from another is planned anew.)
CREATE FUNCTION cipherfleet_open_session(p_host bigint, p_snapshot bigint, p_peer text, p_agent_version text)
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

-- The agent of p_host reconnected still running attempt p_attempt of job
-- p_job: under the host's claim lock (claims of the host take turns with
-- this), any other job marked running on the host goes back to the queue (the
-- agent is not running it), and this one is running again with a fresh
-- deadline, no attempt counted. False if the job is not the host's, finished,
-- or was dispatched again since that attempt.
CREATE FUNCTION cipherfleet_adopt(p_host bigint, p_job uuid, p_attempt uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cipherfleet_lock_hosts(ARRAY[p_host]);
    -- Statement triggers on jobs fire for no rows too: no update when there is none.
    IF EXISTS (SELECT 1 FROM jobs WHERE host_id = p_host AND status = 'running' AND id <> p_job) THEN
        UPDATE jobs SET status = 'queued', assigned_at = NULL, started_at = NULL, deadline = NULL
        WHERE host_id = p_host AND status = 'running' AND id <> p_job;
    END IF;
    UPDATE jobs SET status = 'running', assigned_at = COALESCE(assigned_at, now()),
        deadline = now() + time_limit_seconds * interval '1 second'
    WHERE id = p_job AND host_id = p_host AND attempt_id = p_attempt AND status IN ('queued', 'running');
    RETURN FOUND;
END $$;

-- The agent of p_host went away (or came back running nothing): its running
-- job goes back to the queue with one more attempt counted, or fails once
-- p_max_attempts is reached, saying p_error. Returns what changed.
CREATE FUNCTION cipherfleet_requeue_lost(p_host bigint, p_max_attempts integer, p_error text)
RETURNS TABLE (job_id uuid, status text, campaign_id bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE jobs SET
        attempts = attempts + 1,
        status = CASE WHEN attempts + 1 >= p_max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN attempts + 1 >= p_max_attempts THEN p_error END,
        finished_at = CASE WHEN attempts + 1 >= p_max_attempts THEN now() END,
        assigned_at = CASE WHEN attempts + 1 >= p_max_attempts THEN assigned_at END,
        started_at = CASE WHEN attempts + 1 >= p_max_attempts THEN started_at END,
        deadline = CASE WHEN attempts + 1 >= p_max_attempts THEN deadline END
    WHERE host_id = p_host AND status = 'running'
    RETURNING id, status, campaign_id;
END $$;

-- Starts session p_generation of coordinator p_coordinator for p_host: takes
-- the host's lease (cipherfleet_acquire_lease; while another coordinator holds
-- it live, nothing else happens and session_id is NULL), opens its session
-- row with its current facts, then adopts the job its agent still runs
-- (p_running_job, p_running_attempt: cipherfleet_adopt) or, when it runs none,
-- re-queues what the host had running (cipherfleet_requeue_lost). Says
-- whether the host has a queued job of a running campaign.
CREATE FUNCTION cipherfleet_start_session(
    p_host bigint, p_coordinator uuid, p_generation bigint, p_coordinator_name text,
    p_ttl_seconds double precision, p_welcomed boolean, p_peer text, p_agent_version text,
    p_running_job uuid, p_running_attempt uuid, p_max_attempts integer, p_lost_error text,
    OUT session_id bigint, OUT adopted boolean, OUT requeued uuid[], OUT failed uuid[],
    OUT failed_campaigns bigint[], OUT queued_work boolean)
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT cipherfleet_acquire_lease(p_host, p_coordinator, p_generation, p_coordinator_name,
                                     p_ttl_seconds, p_welcomed) THEN
        RETURN;
    END IF;
    session_id := cipherfleet_open_session(
        p_host, (SELECT h.current_snapshot_id FROM hosts h WHERE h.id = p_host), p_peer, p_agent_version);
    adopted := false;
    requeued := '{}';
    failed := '{}';
    failed_campaigns := '{}';
    IF p_running_job IS NOT NULL THEN
        adopted := cipherfleet_adopt(p_host, p_running_job, p_running_attempt);
    ELSIF EXISTS (SELECT 1 FROM jobs WHERE host_id = p_host AND status = 'running') THEN
        SELECT coalesce(array_agg(r.job_id) FILTER (WHERE r.status = 'queued'), '{}'),
               coalesce(array_agg(r.job_id) FILTER (WHERE r.status = 'failed'), '{}'),
               coalesce(array_agg(DISTINCT r.campaign_id) FILTER (WHERE r.status = 'failed'), '{}')
        INTO requeued, failed, failed_campaigns
        FROM cipherfleet_requeue_lost(p_host, p_max_attempts, p_lost_error) r;
    END IF;
    queued_work := EXISTS (
        SELECT 1 FROM jobs q JOIN campaigns c ON c.id = q.campaign_id
        WHERE q.host_id = p_host AND q.status = 'queued' AND c.status = 'running');
END $$;
