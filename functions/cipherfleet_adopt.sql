-- The agent of p_host reconnected still running attempt p_attempt of job
-- p_job: under the host's claim lock (claims of the host take turns with
-- this), any other job marked running on the host goes back to the queue (the
-- agent is not running it), and this one is running again with a fresh
-- deadline, no attempt counted. False if the job is not the host's, finished,
-- or was dispatched again since that attempt.
CREATE OR REPLACE FUNCTION cipherfleet_adopt(p_host bigint, p_job uuid, p_attempt uuid) RETURNS boolean
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
