-- 0013: a generation lease per scene, claimed by the scene's own Dagster step.
--
-- scene_clips fans out one step per scene (issue 10): the executor (in-process, multiprocess,
-- Celery, k8s) is the transport now, not a queue that workers pull. A scene step claims ITS OWN
-- scene's job by key; the jobs row stays the scene's attempt ledger and lease (attempt,
-- max_attempts, the lease the step's keeper renews, complete_scene_job fenced by it).
--
-- claim_scene_job is not fenced by the dimension's pipeline lock: scene steps run in parallel
-- on other processes and hosts, none of which holds that lock (the planning and collecting steps
-- do). The job lease is the fence, as it was for the pull worker: complete_scene_job and
-- fail_job refuse a holder whose lease was taken over (MD004).
--
-- Two hosts never generate the same scene_hash at once: a claim is refused while another
-- running job with the same scene_hash holds a live lease. Claims of one scene_hash are
-- serialized by a transaction-scoped advisory lock on it, so two concurrent claims cannot both
-- see "nobody holds it". The refused step waits and claims again; by then the holder's clip is
-- in the scene cache and the second step ends as a cache hit.
--
-- complete_scene_job also records who made the clip (the lease owner, `<host>:[<name>:]<pid>`)
-- in the scene's result and the job's result.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

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
CREATE FUNCTION mdame.claim_scene_job(p_job_key text, p_worker_id text, p_lease_seconds integer)
RETURNS TABLE (outcome text, job_id bigint, job_type text, payload jsonb, result jsonb,
               attempt integer, max_attempts integer, lease_expires_at timestamptz,
               holder text, wait_seconds double precision)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_lease interval := mdame._seconds('lease_seconds', p_lease_seconds);
  v_id bigint;
  v_hash text;
  v_job jobs;
  v_other jobs;
  v_old_owner text;
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
                        v_job.max_attempts, NULL::timestamptz, v_job.lease_owner, 0::float8;
    RETURN;
  END IF;
  IF v_job.state = 'running' AND v_job.lease_expires_at > now() THEN
    RETURN QUERY SELECT 'held'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, v_job.lease_expires_at, v_job.lease_owner,
                        extract(epoch FROM v_job.lease_expires_at - now())::float8;
    RETURN;
  END IF;
  IF v_job.state = 'running' THEN
    -- Its holder died (or stalled past its lease): the attempt is over, as the reaper says.
    v_old_owner := v_job.lease_owner;
    UPDATE jobs j
       SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'queued' END,
           lease_owner = CASE WHEN j.attempt >= j.max_attempts THEN j.lease_owner END,
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
                          v_job.max_attempts, NULL::timestamptz, v_job.lease_owner, 0::float8;
      RETURN;
    END IF;
  END IF;
  -- Queued from here on.
  IF v_job.run_after > now() THEN
    RETURN QUERY SELECT 'not_due'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, NULL::timestamptz, NULL::text,
                        extract(epoch FROM v_job.run_after - now())::float8;
    RETURN;
  END IF;
  SELECT * INTO v_other FROM jobs o
   WHERE o.state = 'running' AND o.lease_expires_at > now() AND o.id <> v_id
     AND o.payload ->> 'scene_hash' = v_hash
   ORDER BY o.lease_expires_at DESC LIMIT 1;
  IF v_other.id IS NOT NULL THEN
    RETURN QUERY SELECT 'scene_busy'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                        v_job.max_attempts, v_other.lease_expires_at, v_other.lease_owner,
                        extract(epoch FROM v_other.lease_expires_at - now())::float8;
    RETURN;
  END IF;
  UPDATE jobs j
     SET state = 'running', attempt = j.attempt + 1, lease_owner = p_worker_id,
         lease_expires_at = now() + v_lease, updated_at = now()
   WHERE j.id = v_id
  RETURNING * INTO v_job;
  RETURN QUERY SELECT 'claimed'::text, v_job.id, v_job.job_type, v_job.payload, v_job.result, v_job.attempt,
                      v_job.max_attempts, v_job.lease_expires_at, p_worker_id, 0::float8;
END
$$;

-- Same contract as 0005's complete_scene_job; the scene's result and the job's also name the
-- worker that made (or found) the clip.
CREATE OR REPLACE FUNCTION mdame.complete_scene_job(p_job_id bigint, p_worker_id text,
                                                    p_attempt integer, p_uri text,
                                                    p_content_sha256 text, p_cache_hit boolean,
                                                    p_ttl_seconds integer)
RETURNS TABLE (uri text, content_sha256 text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_job jobs;
  v_uri text;
  v_sha text;
  v_scene_state text;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('cache_hit', p_cache_hit);
  SELECT * INTO v_job FROM jobs j WHERE j.id = p_job_id FOR UPDATE;
  IF v_job.state = 'succeeded' AND v_job.lease_owner = p_worker_id AND v_job.attempt = p_attempt THEN
    RETURN QUERY SELECT v_job.result ->> 'uri', v_job.result ->> 'sha256';
    RETURN;
  ELSIF v_job.id IS NULL OR v_job.state <> 'running' OR v_job.lease_owner <> p_worker_id
        OR v_job.attempt <> p_attempt THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  SELECT e.uri, e.content_sha256 INTO v_uri, v_sha
    FROM mdame.put_scene_cache(v_job.payload ->> 'scene_hash', p_uri, p_content_sha256, p_ttl_seconds) e;
  v_scene_state := mdame._lock_work_unit(mdame._work_kind('scene'),
                                         (v_job.payload ->> 'scene_id')::bigint);
  IF v_scene_state IN ('planned', 'queued') THEN
    PERFORM mdame._transition('scene', (v_job.payload ->> 'scene_id')::bigint, v_scene_state,
      'ready', jsonb_build_object('uri', v_uri, 'sha256', v_sha,
                                  'cached', p_cache_hit, 'worker', p_worker_id));
  END IF;
  UPDATE jobs j
     SET state = 'succeeded', lease_expires_at = NULL, finished_at = now(), updated_at = now(),
         result = jsonb_build_object('uri', v_uri, 'sha256', v_sha,
                                     'cache_hit', p_cache_hit, 'worker', p_worker_id)
   WHERE j.id = p_job_id;
  RETURN QUERY SELECT v_uri, v_sha;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.claim_scene_job(text, text, integer),
  mdame.complete_scene_job(bigint, text, integer, text, text, boolean, integer)
TO mdame_app;
