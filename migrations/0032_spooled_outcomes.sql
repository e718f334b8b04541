-- A reconnecting agent's spooled outcomes keep their jobs (issue 12, scale).
-- The Hello lists the jobs whose outcome sits in the agent's spool, to be
-- re-sent right after Welcome, and the protocol says they are not dispatched
-- again meanwhile. cipherfleet_start_session re-queued every running job of a
-- host whose agent ran none, those included; another path (the wake-up that
-- hands queued jobs to idle hosts) could then dispatch such a job anew before
-- its outcome arrived, which was then ignored as an earlier attempt's, and
-- the job ran twice (after a failover at 10,000 hosts, one job of each moved
-- host when ingest was busy). Now those jobs stay running, with a fresh
-- deadline: their outcome ends them, or the deadline sweep re-queues them if
-- it never comes.

DROP FUNCTION cipherfleet_start_session(
    bigint, uuid, bigint, text, double precision, boolean, text, text, uuid, uuid, integer, text);
DROP FUNCTION cipherfleet_requeue_lost(bigint, integer, text);

-- The agent of p_host went away (or came back running nothing): its running
-- jobs, but those in p_keep, go back to the queue with one more attempt
-- counted, or fail once p_max_attempts is reached, saying p_error. Returns
-- what changed.
CREATE FUNCTION cipherfleet_requeue_lost(
    p_host bigint, p_max_attempts integer, p_error text, p_keep uuid[] DEFAULT '{}')
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
    WHERE host_id = p_host AND status = 'running' AND id <> ALL (p_keep)
    RETURNING id, status, campaign_id;
END $$;

-- As in 0031, and p_spooled: the jobs whose outcome the agent has spooled.
-- When the agent runs no job, a running job of the host among them stays
-- running with a fresh deadline (under the host's claim lock, as an adoption),
-- and only the others are re-queued.
CREATE FUNCTION cipherfleet_start_session(
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
