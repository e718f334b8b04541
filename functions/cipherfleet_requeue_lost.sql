-- The agent of p_host went away (or came back running nothing): its running
-- jobs, but those in p_keep, go back to the queue with one more attempt
-- counted, or fail once p_max_attempts is reached, saying p_error. Returns
-- what changed.
CREATE OR REPLACE FUNCTION cipherfleet_requeue_lost(
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
