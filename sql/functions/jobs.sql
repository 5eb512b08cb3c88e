-- Jobs: the leased queue and its reads.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Enqueues a job once per idempotency key (with its partition key, part of what must be equal
-- for the same key to return the existing job). The key is taken first (ON CONFLICT waits for a
-- concurrent enqueue of the same key to commit), then the job row is written with the id the
-- key already names.
CREATE OR REPLACE FUNCTION mdame.enqueue_job(p_job_type text, p_idempotency_key text, p_payload jsonb, p_max_attempts integer DEFAULT 3, p_priority integer DEFAULT 100, p_delay_seconds integer DEFAULT 0, p_partition_key text DEFAULT NULL::text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
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
  INSERT INTO job_keys (idempotency_key, job_id)
  VALUES (p_idempotency_key, nextval(pg_get_serial_sequence('mdame.jobs', 'id')))
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING job_id INTO v_id;
  IF v_id IS NOT NULL THEN
    INSERT INTO jobs (id, job_type, idempotency_key, payload, max_attempts, priority, run_after,
                      partition_key)
    VALUES (v_id, p_job_type, p_idempotency_key, p_payload, p_max_attempts, p_priority,
            now() + p_delay_seconds * interval '1 second', p_partition_key);
    RETURN v_id;
  END IF;
  SELECT j.* INTO v_job FROM job_keys k JOIN jobs j ON j.id = k.job_id
   WHERE k.idempotency_key = p_idempotency_key;
  IF (v_job.job_type, v_job.payload, v_job.partition_key)
     IS DISTINCT FROM (p_job_type, p_payload, p_partition_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: job %L already exists (id %s) with a different type or payload, '
                       'or for another partition', p_idempotency_key, v_job.id);
  END IF;
  RETURN v_job.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.enqueue_job(p_job_type text, p_idempotency_key text, p_payload jsonb, p_max_attempts integer, p_priority integer, p_delay_seconds integer, p_partition_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.enqueue_job(p_job_type text, p_idempotency_key text, p_payload jsonb, p_max_attempts integer, p_priority integer, p_delay_seconds integer, p_partition_key text) TO mdame_admin;

-- The claimed job with the lease's secret: its worker's proof in heartbeat_job, complete_job and
-- fail_job (the worker id and attempt are no secret: the app role reads them).
CREATE OR REPLACE FUNCTION mdame.claim_job(p_job_type text, p_worker_id text, p_lease_seconds integer, p_partition_key text DEFAULT NULL::text)
 RETURNS TABLE(job_id bigint, job_type text, idempotency_key text, payload jsonb, attempt integer, max_attempts integer, lease_expires_at timestamp with time zone, lease_secret bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_secret bigint := mdame._new_secret();
BEGIN
  -- The checks inline; the helper runs only to raise its message.
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
           lease_secret_sha256 = mdame._lock_secret_sha256(v_secret),
           lease_expires_at = now() + p_lease_seconds * interval '1 second', updated_at = now()
     WHERE j.id = (SELECT q.id FROM jobs q
                    WHERE q.state = 'queued' AND q.job_type = p_job_type AND q.run_after <= now()
                    ORDER BY q.priority, q.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.job_type, j.idempotency_key, j.payload, j.attempt, j.max_attempts,
              j.lease_expires_at, v_secret;
  ELSE
    IF p_partition_key = '' OR length(p_partition_key) > 200 THEN
      PERFORM mdame._require_text('partition_key', p_partition_key, 200);
    END IF;
    RETURN QUERY
    UPDATE jobs j
       SET state = 'running', attempt = j.attempt + 1, lease_owner = p_worker_id,
           lease_secret_sha256 = mdame._lock_secret_sha256(v_secret),
           lease_expires_at = now() + p_lease_seconds * interval '1 second', updated_at = now()
     WHERE j.id = (SELECT q.id FROM jobs q
                    WHERE q.state = 'queued' AND q.job_type = p_job_type
                      AND q.partition_key = p_partition_key AND q.run_after <= now()
                    ORDER BY q.priority, q.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.job_type, j.idempotency_key, j.payload, j.attempt, j.max_attempts,
              j.lease_expires_at, v_secret;
  END IF;
END
$function$;
REVOKE ALL ON FUNCTION mdame.claim_job(p_job_type text, p_worker_id text, p_lease_seconds integer, p_partition_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.claim_job(p_job_type text, p_worker_id text, p_lease_seconds integer, p_partition_key text) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._job_lease_lost(p_job_id bigint, p_worker_id text, p_attempt integer)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
  v_job mdame.jobs;
BEGIN
  SELECT * INTO v_job FROM mdame.jobs WHERE id = p_job_id;
  IF v_job.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: job %s does not exist', p_job_id);
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: job %s lease lost: worker %s attempt %s does not hold it '
                     '(state %s, lease owner %s, attempt %s)', p_job_id, mdame._clip(p_worker_id),
                     p_attempt, v_job.state, mdame._clip(v_job.lease_owner), v_job.attempt);
END
$function$;
REVOKE ALL ON FUNCTION mdame._job_lease_lost(p_job_id bigint, p_worker_id text, p_attempt integer) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_lease_args(p_job_id bigint, p_worker_id text, p_attempt integer)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  PERFORM mdame._require_not_null('job_id', p_job_id), mdame._require_text('worker_id', p_worker_id, 200),
          mdame._require_range('attempt', p_attempt, 1, 100);
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_lease_args(p_job_id bigint, p_worker_id text, p_attempt integer) FROM PUBLIC, mdame_app, mdame_admin;

-- Whether the job's lease (or its success) is (p_worker_id, p_attempt)'s and p_lease_secret is
-- the secret its claim handed out.
CREATE OR REPLACE FUNCTION mdame._job_holder(p_job mdame.jobs, p_worker_id text, p_attempt integer, p_lease_secret bigint)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT coalesce(p_job.lease_owner = p_worker_id AND p_job.attempt = p_attempt
                  AND p_job.lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret), false)
$function$;
REVOKE ALL ON FUNCTION mdame._job_holder(p_job mdame.jobs, p_worker_id text, p_attempt integer, p_lease_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- Extends the lease of a running job held by (worker, attempt, the claim's secret); returns the
-- new expiry. Accepted after expiry as long as the reaper has not requeued the job.
CREATE OR REPLACE FUNCTION mdame.heartbeat_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_lease_seconds integer DEFAULT 60)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_lease interval := mdame._seconds('lease_seconds', p_lease_seconds);
  v_expires timestamptz;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('lease_secret', p_lease_secret);
  UPDATE jobs SET lease_expires_at = now() + v_lease, updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
     AND lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret)
  RETURNING lease_expires_at INTO v_expires;
  IF v_expires IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  RETURN v_expires;
END
$function$;
REVOKE ALL ON FUNCTION mdame.heartbeat_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_lease_seconds integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.heartbeat_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_lease_seconds integer) TO mdame_app;

-- Marks the job succeeded. true: done now; false: this worker and attempt had
-- already completed it (a retry after a lost reply). A lost lease raises MD004.
CREATE OR REPLACE FUNCTION mdame.complete_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_result jsonb DEFAULT '{}'::jsonb)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  -- The checks inline; the helpers run only to raise their message.
  IF p_job_id IS NULL OR p_worker_id IS NULL OR p_worker_id = '' OR length(p_worker_id) > 200
     OR p_attempt IS NULL OR p_attempt NOT BETWEEN 1 AND 100 THEN
    PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt);
  END IF;
  IF p_lease_secret IS NULL THEN
    PERFORM mdame._require_not_null('lease_secret', p_lease_secret);
  END IF;
  IF p_result IS NULL OR jsonb_typeof(p_result) <> 'object'
     OR (p_result <> '{}' AND octet_length(p_result::text) > 262144) THEN
    PERFORM mdame._require_json('result', p_result);
  END IF;
  UPDATE jobs
     SET state = 'succeeded', result = p_result, lease_expires_at = NULL, finished_at = now(),
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
     AND lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret);
  IF FOUND THEN
    RETURN true;
  END IF;
  IF EXISTS (SELECT FROM jobs WHERE id = p_job_id AND state = 'succeeded'
                AND lease_owner = p_worker_id AND attempt = p_attempt
                AND lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret)) THEN
    RETURN false;
  END IF;
  PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  RETURN false;  -- not reached
END
$function$;
REVOKE ALL ON FUNCTION mdame.complete_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_result jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.complete_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_result jsonb) TO mdame_app;

-- Records a failed attempt. Retryable with attempts left: back to queued after the delay;
-- retryable without attempts left: dead; not retryable: failed. Returns the new state.
CREATE OR REPLACE FUNCTION mdame.fail_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_error text, p_retryable boolean, p_retry_delay_seconds integer DEFAULT 0)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_state text;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('lease_secret', p_lease_secret),
          mdame._require_text('error', p_error, 100000), mdame._require_not_null('retryable', p_retryable),
          mdame._require_range('retry_delay_seconds', p_retry_delay_seconds, 0, 31622400);
  UPDATE jobs
     SET state = CASE WHEN NOT p_retryable THEN 'failed'
                      WHEN attempt >= max_attempts THEN 'dead'
                      ELSE 'queued' END,
         lease_owner = CASE WHEN p_retryable AND attempt < max_attempts THEN NULL ELSE lease_owner END,
         lease_secret_sha256 = NULL,
         lease_expires_at = NULL,
         run_after = now() + p_retry_delay_seconds * interval '1 second',
         last_error = left(p_error, 10000),
         finished_at = CASE WHEN p_retryable AND attempt < max_attempts THEN NULL ELSE now() END,
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
     AND lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret)
  RETURNING state INTO v_state;
  IF v_state IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  IF v_state <> 'queued' THEN
    INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
    VALUES ('job', p_job_id, 'failed', 'running', v_state,
            jsonb_build_object('worker_id', p_worker_id, 'attempt', p_attempt,
                               'error', left(p_error, 2000)));
  END IF;
  RETURN v_state;
END
$function$;
REVOKE ALL ON FUNCTION mdame.fail_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_error text, p_retryable boolean, p_retry_delay_seconds integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.fail_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_error text, p_retryable boolean, p_retry_delay_seconds integer) TO mdame_app;

-- The operator's requeue of a job whose worker is known dead (the liveness sweep found its
-- process gone): by (worker, attempt), which the app role reads, so it is not the app's. Back to
-- the queue now (dead once no attempt is left) rather than after its lease. Returns the new
-- state, or NULL when that worker's attempt no longer holds it.
CREATE OR REPLACE FUNCTION mdame.requeue_dead_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_error text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_state text;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_text('error', p_error, 2000);
  UPDATE jobs
     SET state = CASE WHEN attempt >= max_attempts THEN 'dead' ELSE 'queued' END,
         lease_owner = CASE WHEN attempt >= max_attempts THEN lease_owner END,
         lease_secret_sha256 = NULL, lease_expires_at = NULL, run_after = now(),
         last_error = p_error,
         finished_at = CASE WHEN attempt >= max_attempts THEN now() END,
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
  RETURNING state INTO v_state;
  IF v_state IS NOT NULL THEN
    INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
    VALUES ('job', p_job_id, 'worker_dead', 'running', v_state,
            jsonb_build_object('worker_id', p_worker_id, 'attempt', p_attempt, 'error', p_error));
  END IF;
  RETURN v_state;
END
$function$;
REVOKE ALL ON FUNCTION mdame.requeue_dead_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_error text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.requeue_dead_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_error text) TO mdame_admin;

-- Returns expired leases to the queue, or to dead once max_attempts is used up (of one job type,
-- or of all when NULL). Returns how many jobs it moved. Rows a worker is finishing right now are
-- skipped, not waited for.
CREATE OR REPLACE FUNCTION mdame.reap_expired_jobs(p_job_type text DEFAULT NULL::text)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_count integer;
BEGIN
  IF p_job_type IS NOT NULL THEN
    PERFORM mdame._require_text('job_type', p_job_type, 63);
  END IF;
  WITH expired AS (
    SELECT id, lease_owner, attempt FROM jobs
     WHERE state = 'running' AND lease_expires_at < now()
       AND (p_job_type IS NULL OR job_type = p_job_type)
     FOR UPDATE SKIP LOCKED
  ), moved AS (
    UPDATE jobs j
       SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'queued' END,
           lease_owner = CASE WHEN j.attempt >= j.max_attempts THEN j.lease_owner END,
           lease_secret_sha256 = NULL,
           lease_expires_at = NULL,
           last_error = format('lease expired (worker %s, attempt %s)', e.lease_owner, e.attempt),
           finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
           updated_at = now()
      FROM expired e
     WHERE j.id = e.id
    RETURNING j.id, j.state, e.lease_owner, e.attempt
  ), logged AS (
    INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
    SELECT 'job', id, 'lease_expired', 'running', state,
           jsonb_build_object('worker_id', lease_owner, 'attempt', attempt)
      FROM moved
    RETURNING 1
  )
  SELECT count(*) INTO v_count FROM logged;
  RETURN v_count;
END
$function$;
REVOKE ALL ON FUNCTION mdame.reap_expired_jobs(p_job_type text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reap_expired_jobs(p_job_type text) TO mdame_app;

-- outcome:
--   claimed     this worker holds the job now (attempt + 1, lease set); a running job whose
--               lease had expired is taken over (a lease_expired event names the old holder)
--   held        another worker holds this job's live lease (holder, wait_seconds: its rest)
--   scene_busy  another running job of the same scene_hash holds a live lease (its holder, the
--               rest of its lease); generate nothing, claim again later: the cache will have it
--   not_due     queued, but its retry delay has not run out (wait_seconds until it has)
--   succeeded   done already (result: its uri, sha256, cache_hit, worker)
--   failed, dead  finished for good: no attempt left (an expired lease on the last attempt is
--               marked dead here, as reap_expired_jobs would)
-- A missing job raises MD006, a job without a scene_hash MD001: those are bugs, not races.
CREATE OR REPLACE FUNCTION mdame.claim_scene_job(p_job_key text, p_worker_id text, p_lease_seconds integer)
 RETURNS TABLE(outcome text, job_id bigint, job_type text, payload jsonb, result jsonb, attempt integer, max_attempts integer, lease_expires_at timestamp with time zone, holder text, wait_seconds double precision, lease_secret bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_lease interval := mdame._seconds('lease_seconds', p_lease_seconds);
  v_id bigint;
  v_hash text;
  v_job jobs;
  v_other jobs;
  v_old_owner text;
  v_secret bigint := mdame._new_secret();
BEGIN
  PERFORM mdame._require_text('job_key', p_job_key, 512),
          mdame._require_text('worker_id', p_worker_id, 200);
  SELECT j.id, j.payload ->> 'scene_hash' INTO v_id, v_hash
    FROM job_keys k JOIN jobs j ON j.id = k.job_id WHERE k.idempotency_key = p_job_key;
  IF v_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: job %L does not exist', left(p_job_key, 200));
  END IF;
  IF v_hash IS NULL OR v_hash = '' THEN
    PERFORM mdame._invalid(format('job %L is not a scene job: its payload has no scene_hash',
                                  left(p_job_key, 200)));
  END IF;
  -- One claim of a scene_hash at a time (the lock is taken before the row's, by every claim).
  PERFORM pg_advisory_xact_lock(hashtextextended('mdame.scene_hash:' || v_hash, 0));
  SELECT * INTO v_job FROM jobs j WHERE j.id = v_id FOR UPDATE;

  IF v_job.state IN ('succeeded', 'failed', 'dead') THEN
    RETURN QUERY SELECT v_job.state, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, NULL::timestamptz, v_job.lease_owner, 0::float8, NULL::bigint;
    RETURN;
  END IF;
  IF v_job.state = 'running' AND v_job.lease_expires_at > now() THEN
    RETURN QUERY SELECT 'held'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, v_job.lease_expires_at, v_job.lease_owner,
                        extract(epoch FROM v_job.lease_expires_at - now())::float8, NULL::bigint;
    RETURN;
  END IF;
  IF v_job.state = 'running' THEN
    -- Its holder died (or stalled past its lease): the attempt is over, as the reaper says.
    v_old_owner := v_job.lease_owner;
    UPDATE jobs j
       SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'queued' END,
           lease_owner = CASE WHEN j.attempt >= j.max_attempts THEN j.lease_owner END,
           lease_secret_sha256 = NULL,
           lease_expires_at = NULL,
           last_error = format('lease expired (worker %s, attempt %s)', j.lease_owner, j.attempt),
           finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
           updated_at = now()
     WHERE j.id = v_id
    RETURNING * INTO v_job;
    INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
    VALUES ('job', v_id, 'lease_expired', 'running', v_job.state,
            jsonb_build_object('worker_id', v_old_owner, 'attempt', v_job.attempt,
                               'taken_over_by', p_worker_id));
    IF v_job.state = 'dead' THEN
      RETURN QUERY SELECT 'dead'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                          v_job.max_attempts, NULL::timestamptz, v_job.lease_owner, 0::float8, NULL::bigint;
      RETURN;
    END IF;
  END IF;
  -- Queued from here on.
  IF v_job.run_after > now() THEN
    RETURN QUERY SELECT 'not_due'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, NULL::timestamptz, NULL::text,
                        extract(epoch FROM v_job.run_after - now())::float8, NULL::bigint;
    RETURN;
  END IF;
  SELECT * INTO v_other FROM jobs o
   WHERE o.state = 'running' AND o.lease_expires_at > now() AND o.id <> v_id
     AND o.payload ->> 'scene_hash' = v_hash
   ORDER BY o.lease_expires_at DESC LIMIT 1;
  IF v_other.id IS NOT NULL THEN
    RETURN QUERY SELECT 'scene_busy'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, v_other.lease_expires_at, v_other.lease_owner,
                        extract(epoch FROM v_other.lease_expires_at - now())::float8, NULL::bigint;
    RETURN;
  END IF;
  UPDATE jobs j
     SET state = 'running', attempt = j.attempt + 1, lease_owner = p_worker_id,
         lease_secret_sha256 = mdame._lock_secret_sha256(v_secret),
         lease_expires_at = now() + v_lease, updated_at = now()
   WHERE j.id = v_id
  RETURNING * INTO v_job;
  RETURN QUERY SELECT 'claimed'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                      v_job.max_attempts, v_job.lease_expires_at, p_worker_id, 0::float8, v_secret;
END
$function$;
REVOKE ALL ON FUNCTION mdame.claim_scene_job(p_job_key text, p_worker_id text, p_lease_seconds integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.claim_scene_job(p_job_key text, p_worker_id text, p_lease_seconds integer) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._job_started()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  NEW.started_at := now();
  RETURN NEW;
END
$function$;
REVOKE ALL ON FUNCTION mdame._job_started() FROM PUBLIC, mdame_app, mdame_admin;
CREATE OR REPLACE TRIGGER jobs_started_at BEFORE UPDATE OF state ON mdame.jobs FOR EACH ROW WHEN (((new.state = 'running'::text) AND (old.state IS DISTINCT FROM 'running'::text))) EXECUTE FUNCTION mdame._job_started();
