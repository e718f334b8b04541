-- As in 0031, and p_spooled: the jobs whose outcome the agent has spooled.
-- When the agent runs no job, a running job of the host among them stays
-- running with a fresh deadline (under the host's claim lock, as an adoption),
-- and only the others are re-queued.
CREATE OR REPLACE FUNCTION cipherfleet_start_session(
    p_host bigint, p_coordinator uuid, p_generation bigint, p_coordinator_name text,
    p_ttl_seconds double precision, p_welcomed boolean, p_peer text, p_agent_version text,
    p_running_job uuid, p_running_attempt uuid, p_spooled uuid[], p_max_attempts integer,
    p_lost_error text,
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
        IF EXISTS (SELECT 1 FROM jobs WHERE host_id = p_host AND status = 'running'
                   AND id = ANY (p_spooled)) THEN
            PERFORM cipherfleet_lock_hosts(ARRAY[p_host]);
            UPDATE jobs SET deadline = now() + time_limit_seconds * interval '1 second'
            WHERE host_id = p_host AND status = 'running' AND id = ANY (p_spooled);
        END IF;
        SELECT coalesce(array_agg(r.job_id) FILTER (WHERE r.status = 'queued'), '{}'),
               coalesce(array_agg(r.job_id) FILTER (WHERE r.status = 'failed'), '{}'),
               coalesce(array_agg(DISTINCT r.campaign_id) FILTER (WHERE r.status = 'failed'), '{}')
        INTO requeued, failed, failed_campaigns
        FROM cipherfleet_requeue_lost(p_host, p_max_attempts, p_lost_error, p_spooled) r;
    END IF;
    queued_work := EXISTS (
        SELECT 1 FROM jobs q JOIN campaigns c ON c.id = q.campaign_id
        WHERE q.host_id = p_host AND q.status = 'queued' AND c.status = 'running');
END $$;
