-- 0004: partition-scoped jobs, and a claim/complete pair closer to a bare SKIP LOCKED queue.
--
-- A scene_clips run works only on its own partition's scenes: a job carries the partition key it
-- was enqueued for, and claim_job filters by it (NULL: any partition, for standalone workers).
--
-- claim_job and complete_job are the queue's hot path (two calls per job). They keep every check
-- of 0002, with the same messages, but test the arguments inline and call the shared helpers
-- only to raise once a check has failed: a nested plpgsql call per argument was a large part of
-- each call's cost. The claim is one statement, as in a bare SKIP LOCKED queue.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

ALTER TABLE jobs
  ADD COLUMN partition_key text CHECK (partition_key IS NULL OR length(partition_key) BETWEEN 1 AND 200);

-- A partition's claim walks only that partition's queued rows (claims of any partition keep
-- using jobs_queued_idx).
CREATE INDEX jobs_queued_partition_idx ON jobs (job_type, partition_key, priority, id)
  WHERE state = 'queued';

-- Same contract as 0002's enqueue_job, plus the partition key (stored, and part of what must be
-- equal for the same idempotency key to return the existing job).
DROP FUNCTION mdame.enqueue_job(text, text, jsonb, integer, integer, integer);
CREATE FUNCTION mdame.enqueue_job(p_job_type text, p_idempotency_key text, p_payload jsonb,
                            p_max_attempts integer DEFAULT 3, p_priority integer DEFAULT 100,
                            p_delay_seconds integer DEFAULT 0, p_partition_key text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_job jobs;
BEGIN
  PERFORM mdame._require_match('job_type', p_job_type, '^[a-z][a-z0-9_.-]{0,62}$'),
          mdame._require_text('idempotency_key', p_idempotency_key),
          mdame._require_json('payload', p_payload),
          mdame._require_range('max_attempts', p_max_attempts, 1, 100),
          mdame._require_range('priority', p_priority, -1000000, 1000000),
          mdame._require_range('delay_seconds', p_delay_seconds, 0, 31622400);
  IF p_partition_key IS NOT NULL THEN
    PERFORM mdame._require_text('partition_key', p_partition_key, 200);
  END IF;
  INSERT INTO jobs (job_type, idempotency_key, payload, max_attempts, priority, run_after,
                    partition_key)
  VALUES (p_job_type, p_idempotency_key, p_payload, p_max_attempts, p_priority,
          now() + p_delay_seconds * interval '1 second', p_partition_key)
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING * INTO v_job;
  IF v_job.id IS NOT NULL THEN
    RETURN v_job.id;
  END IF;
  SELECT * INTO v_job FROM jobs WHERE idempotency_key = p_idempotency_key;
  IF (v_job.job_type, v_job.payload, v_job.partition_key)
     IS DISTINCT FROM (p_job_type, p_payload, p_partition_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: job %L already exists (id %s) with a different type or payload, '
                       'or for another partition', p_idempotency_key, v_job.id);
  END IF;
  RETURN v_job.id;
END
$$;

-- Claims the next runnable job of a type (of one partition, or of any when p_partition_key is
-- NULL) under a lease: attempt + 1, lease owner and expiry set. One row, or none when nothing is
-- runnable. SKIP LOCKED lets concurrent workers pass each other.
DROP FUNCTION mdame.claim_job(text, text, integer);
CREATE FUNCTION mdame.claim_job(p_job_type text, p_worker_id text, p_lease_seconds integer,
                          p_partition_key text DEFAULT NULL)
RETURNS TABLE (job_id bigint, job_type text, idempotency_key text, payload jsonb,
               attempt integer, max_attempts integer, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
BEGIN
  -- 0002's checks inline; the helper runs only to raise its message.
  IF p_job_type IS NULL OR p_job_type = '' OR length(p_job_type) > 63 THEN
    PERFORM mdame._require_text('job_type', p_job_type, 63);
  END IF;
  IF p_worker_id IS NULL OR p_worker_id = '' OR length(p_worker_id) > 200 THEN
    PERFORM mdame._require_text('worker_id', p_worker_id, 200);
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds NOT BETWEEN 1 AND 31622400 THEN
    PERFORM mdame._seconds('lease_seconds', p_lease_seconds);
  END IF;
  IF p_partition_key IS NULL THEN
    RETURN QUERY
    UPDATE jobs j
       SET state = 'running', attempt = j.attempt + 1, lease_owner = p_worker_id,
           lease_expires_at = now() + p_lease_seconds * interval '1 second', updated_at = now()
     WHERE j.id = (SELECT q.id FROM jobs q
                    WHERE q.state = 'queued' AND q.job_type = p_job_type AND q.run_after <= now()
                    ORDER BY q.priority, q.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.job_type, j.idempotency_key, j.payload, j.attempt, j.max_attempts,
              j.lease_expires_at;
  ELSE
    IF p_partition_key = '' OR length(p_partition_key) > 200 THEN
      PERFORM mdame._require_text('partition_key', p_partition_key, 200);
    END IF;
    RETURN QUERY
    UPDATE jobs j
       SET state = 'running', attempt = j.attempt + 1, lease_owner = p_worker_id,
           lease_expires_at = now() + p_lease_seconds * interval '1 second', updated_at = now()
     WHERE j.id = (SELECT q.id FROM jobs q
                    WHERE q.state = 'queued' AND q.job_type = p_job_type
                      AND q.partition_key = p_partition_key AND q.run_after <= now()
                    ORDER BY q.priority, q.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.job_type, j.idempotency_key, j.payload, j.attempt, j.max_attempts,
              j.lease_expires_at;
  END IF;
END
$$;

-- Same contract as 0002's complete_job. true: done now; false: this worker and attempt had
-- already completed it (a retry after a lost reply). A lost lease raises MD004.
CREATE OR REPLACE FUNCTION mdame.complete_job(p_job_id bigint, p_worker_id text,
                                        p_attempt integer, p_result jsonb DEFAULT '{}')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  -- 0002's checks inline; the helpers run only to raise their message.
  IF p_job_id IS NULL OR p_worker_id IS NULL OR p_worker_id = '' OR length(p_worker_id) > 200
     OR p_attempt IS NULL OR p_attempt NOT BETWEEN 1 AND 100 THEN
    PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt);
  END IF;
  IF p_result IS NULL OR jsonb_typeof(p_result) <> 'object'
     OR (p_result <> '{}' AND octet_length(p_result::text) > 262144) THEN
    PERFORM mdame._require_json('result', p_result);
  END IF;
  UPDATE jobs
     SET state = 'succeeded', result = p_result, lease_expires_at = NULL, finished_at = now(),
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt;
  IF FOUND THEN
    RETURN true;
  END IF;
  IF EXISTS (SELECT FROM jobs WHERE id = p_job_id AND state = 'succeeded'
                AND lease_owner = p_worker_id AND attempt = p_attempt) THEN
    RETURN false;
  END IF;
  PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  RETURN false;  -- not reached
END
$$;

-- EXECUTE for the app role only (default privileges would grant it too; say it here).
REVOKE ALL ON FUNCTION mdame.enqueue_job(text, text, jsonb, integer, integer, integer, text),
                       mdame.claim_job(text, text, integer, text),
                       mdame.complete_job(bigint, text, integer, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.enqueue_job(text, text, jsonb, integer, integer, integer, text),
                          mdame.claim_job(text, text, integer, text),
                          mdame.complete_job(bigint, text, integer, jsonb) TO mdame_app;
