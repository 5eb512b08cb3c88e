-- Phases: a stage's work and its recovery point in one transaction.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- trends: the day's scored items of a dimension, all stored or none. p_items is an array of
-- {"key": idempotency_key, "payload": {...}}. Returns the trend ids in input order.
CREATE OR REPLACE FUNCTION mdame.record_trends(p_dimension_slug text, p_items jsonb, p_lock_token bigint)
 RETURNS bigint[]
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_item jsonb;
  v_ids bigint[] := ARRAY[]::bigint[];
BEGIN
  PERFORM mdame._require_json('items', p_items, 'array');
  PERFORM mdame._fence(v_dimension, p_lock_token);
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    IF (v_item -> 'payload' ->> 'dimension_id')::bigint IS DISTINCT FROM v_dimension THEN
      PERFORM mdame._invalid(format('trend %s belongs to another dimension than %s',
                                    left(v_item ->> 'key', 80), p_dimension_slug));
    END IF;
    v_ids := v_ids || mdame._upsert_work_unit('trend', v_item ->> 'key', v_item -> 'payload');
  END LOOP;
  RETURN v_ids;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_trends(p_dimension_slug text, p_items jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_trends(p_dimension_slug text, p_items jsonb, p_lock_token bigint) TO mdame_app;

-- The safety verdict of a topic or script decides its next state.
CREATE OR REPLACE FUNCTION mdame._verdict_state(p_verdict text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE p_verdict WHEN 'allow' THEN 'approved' ELSE 'rejected' END
$function$;
REVOKE ALL ON FUNCTION mdame._verdict_state(p_verdict text) FROM PUBLIC, mdame_app, mdame_admin;

-- topics: creates the topic of a trend (once) and, while it is a candidate, logs the safety
-- decision and approves or rejects it, together. p_decision: {"verdict", "rule", "reasons",
-- "classifier"}. Returns the topic id.
CREATE OR REPLACE FUNCTION mdame.decide_topic(p_idempotency_key text, p_payload jsonb, p_decision jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
  v_trend_key text;
BEGIN
  PERFORM mdame._require_json('decision', p_decision);
  PERFORM mdame._fence(mdame._payload_dimension('topic', p_payload), p_lock_token);
  v_id := mdame._upsert_work_unit('topic', p_idempotency_key, p_payload);
  IF mdame._lock_work_unit(mdame._work_kind('topic'), v_id) = 'candidate' THEN
    SELECT t.idempotency_key INTO v_trend_key
      FROM topics o JOIN trends t ON t.id = o.trend_id WHERE o.id = v_id;
    PERFORM mdame._log_decision('topic', coalesce(v_trend_key, p_idempotency_key),
                                (p_payload ->> 'dimension_id')::bigint, p_decision);
    PERFORM mdame._transition('topic', v_id, 'candidate',
                              mdame._verdict_state(p_decision ->> 'verdict'),
                              jsonb_build_object('safety_rule', p_decision ->> 'rule'));
  END IF;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.decide_topic(p_idempotency_key text, p_payload jsonb, p_decision jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.decide_topic(p_idempotency_key text, p_payload jsonb, p_decision jsonb, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._log_decision(p_subject_kind text, p_subject_key text, p_dimension_id bigint, p_decision jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
BEGIN
  RETURN mdame._log_safety_decision(
    p_subject_kind, p_subject_key, (SELECT slug FROM mdame.dimensions WHERE id = p_dimension_id),
    p_decision ->> 'verdict', p_decision ->> 'rule', coalesce(p_decision -> 'reasons', '[]'),
    p_decision ->> 'classifier');
END
$function$;
REVOKE ALL ON FUNCTION mdame._log_decision(p_subject_kind text, p_subject_key text, p_dimension_id bigint, p_decision jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- scripts: creates the topic's script (once) and, while drafted, logs its safety decision,
-- approves or rejects it, and marks the topic scripted, together. Returns the script id.
CREATE OR REPLACE FUNCTION mdame.record_script(p_idempotency_key text, p_payload jsonb, p_decision jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
  v_topic bigint := (p_payload ->> 'topic_id')::bigint;
BEGIN
  PERFORM mdame._require_json('decision', p_decision);
  PERFORM mdame._fence(mdame._payload_dimension('script', p_payload), p_lock_token);
  v_id := mdame._upsert_work_unit('script', p_idempotency_key, p_payload);
  IF mdame._lock_work_unit(mdame._work_kind('script'), v_id) = 'drafted' THEN
    PERFORM mdame._log_decision('script', p_idempotency_key,
                                (p_payload ->> 'dimension_id')::bigint, p_decision);
    PERFORM mdame._transition('script', v_id, 'drafted',
                              mdame._verdict_state(p_decision ->> 'verdict'),
                              jsonb_build_object('safety_rule', p_decision ->> 'rule'));
  END IF;
  IF mdame._lock_work_unit(mdame._work_kind('topic'), v_topic) = 'approved' THEN
    PERFORM mdame._transition('topic', v_topic, 'approved', 'scripted',
                              jsonb_build_object('script_id', v_id));
  END IF;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_script(p_idempotency_key text, p_payload jsonb, p_decision jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_script(p_idempotency_key text, p_payload jsonb, p_decision jsonb, p_lock_token bigint) TO mdame_app;

-- scene_plan: an approved script's scenes, each ready from the cache (the caller verified the
-- cached file) or queued with its GPU job, and the script planned, together. p_scenes: an array
-- of {"key", "payload", "cached": {"uri", "sha256"} | null, "job": {...job payload} }.
-- Returns the number of jobs enqueued.
CREATE OR REPLACE FUNCTION mdame.plan_scenes(p_script_id bigint, p_scenes jsonb, p_job_type text, p_max_attempts integer, p_partition_key text, p_lock_token bigint)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_scene jsonb;
  v_id bigint;
  v_queued integer := 0;
BEGIN
  PERFORM mdame._require_json('scenes', p_scenes, 'array');
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['approved']);
  IF jsonb_array_length(p_scenes) = 0 THEN
    PERFORM mdame._invalid(format('script %s: a plan needs at least one scene', p_script_id));
  END IF;
  FOR v_scene IN SELECT value FROM jsonb_array_elements(p_scenes) LOOP
    IF (v_scene -> 'payload' ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
      PERFORM mdame._invalid(format('scene %s belongs to another script than %s',
                                    left(v_scene ->> 'key', 80), p_script_id));
    END IF;
    v_id := mdame._upsert_work_unit('scene', v_scene ->> 'key', v_scene -> 'payload');
    CONTINUE WHEN mdame._lock_work_unit(mdame._work_kind('scene'), v_id) <> 'planned';
    IF jsonb_typeof(v_scene -> 'cached') = 'object' THEN
      PERFORM mdame._transition('scene', v_id, 'planned', 'ready',
        coalesce(v_scene -> 'cached' -> 'detail', '{}'::jsonb)
          || jsonb_build_object('uri', v_scene -> 'cached' ->> 'uri',
                                'sha256', v_scene -> 'cached' ->> 'sha256', 'cached', true));
    ELSE
      PERFORM mdame.enqueue_job(p_job_type, v_scene ->> 'key',
                                (v_scene -> 'job') || jsonb_build_object('scene_id', v_id),
                                p_max_attempts, 100, 0, p_partition_key);
      PERFORM mdame._transition('scene', v_id, 'planned', 'queued', '{}');
      v_queued := v_queued + 1;
    END IF;
  END LOOP;
  PERFORM mdame._transition('script', p_script_id, 'approved', 'planned',
                            jsonb_build_object('scenes', jsonb_array_length(p_scenes)));
  RETURN v_queued;
END
$function$;
REVOKE ALL ON FUNCTION mdame.plan_scenes(p_script_id bigint, p_scenes jsonb, p_job_type text, p_max_attempts integer, p_partition_key text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.plan_scenes(p_script_id bigint, p_scenes jsonb, p_job_type text, p_max_attempts integer, p_partition_key text, p_lock_token bigint) TO mdame_app;

-- A scene job's result: the clip enters the scene cache (a live entry of another writer wins),
-- the job's scene becomes ready with the entry in effect, and the job succeeds, together. The
-- job lease fences it (a reaped worker's late result is refused with MD004). Returns the entry
-- in effect; repeating it after a lost reply returns the same entry. The scene's result and the
-- job's also name the worker that made (or found) the clip. p_detail: what made it (engine,
-- relevance, source), kept with the cache entry; a cache hit's scene carries the entry's.
CREATE OR REPLACE FUNCTION mdame.complete_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_uri text, p_content_sha256 text, p_cache_hit boolean, p_ttl_seconds integer, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS TABLE(uri text, content_sha256 text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_job jobs;
  v_uri text;
  v_sha text;
  v_detail jsonb;
  v_scene_state text;
BEGIN
  PERFORM mdame._require_json('detail', p_detail);
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('lease_secret', p_lease_secret),
          mdame._require_not_null('cache_hit', p_cache_hit);
  SELECT * INTO v_job FROM jobs j WHERE j.id = p_job_id FOR UPDATE;
  IF v_job.state = 'succeeded' AND mdame._job_holder(v_job, p_worker_id, p_attempt, p_lease_secret) THEN
    RETURN QUERY SELECT v_job.result ->> 'uri', v_job.result ->> 'sha256';
    RETURN;
  ELSIF v_job.id IS NULL OR v_job.state <> 'running'
        OR NOT mdame._job_holder(v_job, p_worker_id, p_attempt, p_lease_secret) THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  SELECT e.uri, e.content_sha256, e.detail INTO v_uri, v_sha, v_detail
    FROM mdame.put_scene_cache(v_job.payload ->> 'scene_hash', p_uri, p_content_sha256,
                               p_ttl_seconds, p_detail) e;
  v_scene_state := mdame._lock_work_unit(mdame._work_kind('scene'),
                                         (v_job.payload ->> 'scene_id')::bigint);
  IF v_scene_state IN ('planned', 'queued') THEN
    PERFORM mdame._transition('scene', (v_job.payload ->> 'scene_id')::bigint, v_scene_state,
      'ready', v_detail || jsonb_build_object('uri', v_uri, 'sha256', v_sha,
                                              'cached', p_cache_hit, 'worker', p_worker_id));
  END IF;
  UPDATE jobs j
     SET state = 'succeeded', lease_expires_at = NULL, finished_at = now(), updated_at = now(),
         result = jsonb_build_object('uri', v_uri, 'sha256', v_sha,
                                     'cache_hit', p_cache_hit, 'worker', p_worker_id)
   WHERE j.id = p_job_id;
  RETURN QUERY SELECT v_uri, v_sha;
END
$function$;
REVOKE ALL ON FUNCTION mdame.complete_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_uri text, p_content_sha256 text, p_cache_hit boolean, p_ttl_seconds integer, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.complete_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_uri text, p_content_sha256 text, p_cache_hit boolean, p_ttl_seconds integer, p_detail jsonb) TO mdame_app;

-- No engine of the scene's chain made a picture that passed the relevance gate: the job fails
-- for good with the reasons (no attempt would change them), and the scene with it. finish_visuals
-- then rejects the script with those reasons. Fenced by the job's lease; repeating it is a no-op.
CREATE OR REPLACE FUNCTION mdame.reject_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_reasons jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_job jobs;
  v_scene bigint;
  v_state text;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('lease_secret', p_lease_secret),
          mdame._require_json('reasons', p_reasons, 'array');
  IF octet_length(p_reasons::text) > 16384 THEN
    PERFORM mdame._invalid('reasons are over 16 KB');
  END IF;
  SELECT * INTO v_job FROM jobs j WHERE j.id = p_job_id FOR UPDATE;
  IF v_job.state = 'failed' AND v_job.result ? 'no_picture'
     AND mdame._job_holder(v_job, p_worker_id, p_attempt, p_lease_secret) THEN
    RETURN;
  ELSIF v_job.id IS NULL OR v_job.state <> 'running'
        OR NOT mdame._job_holder(v_job, p_worker_id, p_attempt, p_lease_secret) THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  UPDATE jobs j
     SET state = 'failed', lease_expires_at = NULL, finished_at = now(), updated_at = now(),
         last_error = left('no picture passed the relevance gate: ' || p_reasons::text, 10000),
         result = jsonb_build_object('no_picture', true, 'reasons', p_reasons,
                                     'worker', p_worker_id)
   WHERE j.id = p_job_id;
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('job', p_job_id, 'failed', 'running', 'failed',
          jsonb_build_object('worker_id', p_worker_id, 'attempt', p_attempt,
                             'no_picture', true, 'reasons', p_reasons));
  v_scene := (v_job.payload ->> 'scene_id')::bigint;
  v_state := mdame._lock_work_unit(mdame._work_kind('scene'), v_scene);
  IF v_state IN ('planned', 'queued') THEN
    PERFORM mdame._transition('scene', v_scene, v_state, 'failed',
                              jsonb_build_object('no_picture', true, 'reasons', p_reasons));
  END IF;
END
$function$;
REVOKE ALL ON FUNCTION mdame.reject_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_reasons jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reject_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_reasons jsonb) TO mdame_app;

-- The scene must wait (a provider's rate limit or outage, a killed run's paid call still in
-- flight, the day's budget spent): the job goes back to the queue until p_until, and the attempt
-- is given back, since waiting is not failing. Fenced by the job's lease. Returns the job's
-- run_after.
CREATE OR REPLACE FUNCTION mdame.defer_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_until timestamp with time zone, p_reason text)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_after timestamptz;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('lease_secret', p_lease_secret),
          mdame._require_not_null('until', p_until),
          mdame._require_text('reason', p_reason, 2000);
  IF p_until > now() + interval '8 days' THEN
    PERFORM mdame._invalid(format('a scene waits at most 8 days, not until %s', p_until));
  END IF;
  UPDATE jobs
     SET state = 'queued', attempt = greatest(attempt - 1, 0), lease_owner = NULL,
         lease_secret_sha256 = NULL, lease_expires_at = NULL,
         run_after = greatest(p_until, now()), last_error = left(p_reason, 2000),
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
     AND lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret)
  RETURNING run_after INTO v_after;
  IF v_after IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('job', p_job_id, 'deferred',
          jsonb_build_object('worker_id', p_worker_id, 'attempt', p_attempt,
                             'until', v_after, 'reason', left(p_reason, 500)));
  RETURN v_after;
END
$function$;
REVOKE ALL ON FUNCTION mdame.defer_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_until timestamp with time zone, p_reason text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.defer_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint, p_until timestamp with time zone, p_reason text) TO mdame_app;

-- The script's visuals are ready once every scene is: the script moves on, fenced by the lock.
-- Each scene's job is found through job_keys.
CREATE OR REPLACE FUNCTION mdame.finish_visuals(p_script_id bigint, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dead bigint[];
  v_unpictured jsonb;
  v_waiting integer;
  v_scene bigint;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['planned']);
  SELECT array_agg(s.id ORDER BY s.id) FILTER (WHERE j.state IN ('dead', 'failed')
                                                 AND NOT coalesce(j.result ? 'no_picture', false)),
         jsonb_agg(jsonb_build_object('scene_id', s.id,
                                      'scene_index', s.payload -> 'scene_index',
                                      'reasons', j.result -> 'reasons') ORDER BY s.id)
           FILTER (WHERE j.state = 'failed' AND j.result ? 'no_picture'),
         count(*) FILTER (WHERE s.state <> 'ready')
    INTO v_dead, v_unpictured, v_waiting
    FROM scenes s
    LEFT JOIN job_keys k ON k.idempotency_key = mdame._scene_job_key(s)
    LEFT JOIN jobs j ON j.id = k.job_id
   WHERE s.script_id = p_script_id AND s.state <> 'ready';
  IF v_unpictured IS NOT NULL AND v_dead IS NULL THEN
    -- Never published with an unrelated picture: the script is rejected with the reasons
    -- (reject_scene_job failed each such scene already).
    PERFORM mdame._transition('script', p_script_id, 'planned', 'rejected',
      jsonb_build_object('reason', 'no picture passed the relevance gate',
                         'scenes_without_picture', v_unpictured));
    RETURN 'rejected';
  END IF;
  IF v_dead IS NOT NULL THEN
    FOREACH v_scene IN ARRAY v_dead LOOP
      PERFORM mdame._transition('scene', v_scene, mdame._lock_work_unit(mdame._work_kind('scene'), v_scene),
                                'failed', '{"reason": "job dead after max attempts"}');
    END LOOP;
    PERFORM mdame._transition('script', p_script_id, 'planned', 'failed',
                              jsonb_build_object('failed_scenes', to_jsonb(v_dead)));
    RETURN 'failed';
  ELSIF v_waiting = 0 THEN
    PERFORM mdame._transition('script', p_script_id, 'planned', 'visuals_ready', '{}');
    RETURN 'visuals_ready';
  END IF;
  RETURN 'planned';
END
$function$;
REVOKE ALL ON FUNCTION mdame.finish_visuals(p_script_id bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.finish_visuals(p_script_id bigint, p_lock_token bigint) TO mdame_app;

-- voice_tracks: the synthesized track (once) and the script voiced, together. Returns its id.
CREATE OR REPLACE FUNCTION mdame.record_voice(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['voice_queued']);
  IF (p_payload ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('voice track payload belongs to another script than %s', p_script_id));
  END IF;
  v_id := mdame._upsert_work_unit('voice_track', p_idempotency_key, p_payload);
  PERFORM mdame._transition('script', p_script_id, 'voice_queued', 'voiced',
                            jsonb_build_object('voice_track_id', v_id));
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_voice(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_voice(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_lock_token bigint) TO mdame_app;

-- renders: the render (once), its technical review bound to its SHA-256, its verdict, and the
-- script rendered (or failed with the problems), together. p_payload carries "sha256" and
-- "problems" (an array; empty means approved). Returns the script's new state.
CREATE OR REPLACE FUNCTION mdame.record_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_check_name text, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
  v_problems jsonb := p_payload -> 'problems';
  v_verdict text;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['render_queued']);
  PERFORM mdame._require_json('payload.problems', v_problems, 'array');
  IF (p_payload ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('render payload belongs to another script than %s', p_script_id));
  END IF;
  v_id := mdame._upsert_work_unit('render', p_idempotency_key, p_payload);
  v_verdict := CASE WHEN jsonb_array_length(v_problems) = 0 THEN 'approved' ELSE 'rejected' END;
  IF mdame._lock_work_unit(mdame._work_kind('render'), v_id) = 'rendered' THEN
    PERFORM mdame._record_review(v_id, p_payload ->> 'sha256', p_check_name, v_verdict,
                                 jsonb_build_object('problems', v_problems));
    PERFORM mdame._transition('render', v_id, 'rendered', v_verdict, '{}');
  END IF;
  IF v_verdict = 'approved' THEN
    PERFORM mdame._transition('script', p_script_id, 'render_queued', 'rendered',
                              jsonb_build_object('render_id', v_id));
    RETURN 'rendered';
  END IF;
  PERFORM mdame._transition('script', p_script_id, 'render_queued', 'failed',
                            jsonb_build_object('render_id', v_id, 'render_problems', v_problems));
  RETURN 'failed';
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_check_name text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_check_name text, p_lock_token bigint) TO mdame_app;

-- Gives up on a script that stalled too often (the recovery pass): its pending publications
-- fail and their quota reservations are released, together with the script. Nothing may be
-- out or in flight (the caller reconciled first); returns false when something is. The caller
-- states the state it decided on: a script that moved on meanwhile raises MD003 (re-read).
CREATE OR REPLACE FUNCTION mdame.fail_script(p_script_id bigint, p_from_state text, p_reason text, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_state text;
  v_pub publications;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id,
                                  ARRAY[mdame._require_text('from_state', p_from_state, 64)]);
  IF EXISTS (SELECT FROM publications p WHERE p.script_id = p_script_id
                AND (p.state IN ('uploading', 'published') OR EXISTS (
                     SELECT FROM provider_attempts a WHERE a.work_key = p.idempotency_key
                        AND a.status IN ('submitted', 'unknown')))) THEN
    RETURN false;
  END IF;
  FOR v_pub IN SELECT * FROM publications WHERE script_id = p_script_id AND state = 'pending' LOOP
    IF EXISTS (SELECT FROM quota_ledger WHERE quota_key = v_pub.idempotency_key
                  AND state = 'reserved') THEN
      PERFORM mdame.release_quota(v_pub.idempotency_key);
    END IF;
    PERFORM mdame._transition('publication', v_pub.id, 'pending', 'failed',
                              jsonb_build_object('reason', p_reason));
  END LOOP;
  PERFORM mdame._transition('script', p_script_id, v_state, 'failed',
                            jsonb_build_object('reason', p_reason));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.fail_script(p_script_id bigint, p_from_state text, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.fail_script(p_script_id bigint, p_from_state text, p_reason text, p_lock_token bigint) TO mdame_app;

-- The key of the job that makes a scene's clip now.
CREATE OR REPLACE FUNCTION mdame._scene_job_key(p_scene mdame.scenes)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT coalesce(p_scene.result ->> 'job_key', p_scene.idempotency_key)
$function$;
REVOKE ALL ON FUNCTION mdame._scene_job_key(p_scene mdame.scenes) FROM PUBLIC, mdame_app, mdame_admin;

-- p_scenes: an array of {"scene_id", "job": {...job payload}}. Returns the jobs enqueued.
CREATE OR REPLACE FUNCTION mdame.requeue_scenes(p_script_id bigint, p_scenes jsonb, p_reason text, p_job_type text, p_max_attempts integer, p_partition_key text, p_lock_token bigint)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_state text;
  v_item jsonb;
  v_scene scenes;
  v_key text;
  v_queued integer := 0;
BEGIN
  PERFORM mdame._require_json('scenes', p_scenes, 'array'),
          mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id,
               ARRAY['visuals_ready', 'voice_queued', 'voiced', 'render_queued']);
  IF jsonb_array_length(p_scenes) = 0 THEN
    PERFORM mdame._invalid(format('script %s: no scene to requeue', p_script_id));
  END IF;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_scenes) LOOP
    SELECT * INTO v_scene FROM scenes
     WHERE id = (v_item ->> 'scene_id')::bigint AND script_id = p_script_id FOR UPDATE;
    IF v_scene.id IS NULL THEN
      PERFORM mdame._invalid(format('scene %s is not a scene of script %s',
                                    mdame._clip(v_item ->> 'scene_id', 40), p_script_id));
    END IF;
    CONTINUE WHEN v_scene.state <> 'ready';
    PERFORM mdame.invalidate_scene_cache(v_scene.scene_hash, v_scene.result ->> 'uri', p_reason)
      WHERE v_scene.result ? 'uri';
    SELECT v_scene.idempotency_key || ':heal:' || (count(*) + 1) INTO v_key
      FROM events WHERE subject_kind = 'scene' AND subject_id = v_scene.id
       AND event = 'transition' AND from_state = 'ready' AND to_state = 'queued';
    PERFORM mdame.enqueue_job(p_job_type, v_key,
                              (v_item -> 'job') || jsonb_build_object('scene_id', v_scene.id),
                              p_max_attempts, 100, 0, p_partition_key);
    PERFORM mdame._transition('scene', v_scene.id, 'ready', 'queued',
                              jsonb_build_object('job_key', v_key, 'healing', left(p_reason, 500)));
    v_queued := v_queued + 1;
  END LOOP;
  IF v_queued > 0 THEN
    PERFORM mdame._transition('script', p_script_id, v_state, 'planned',
                              jsonb_build_object('healing', left(p_reason, 500)));
  END IF;
  RETURN v_queued;
END
$function$;
REVOKE ALL ON FUNCTION mdame.requeue_scenes(p_script_id bigint, p_scenes jsonb, p_reason text, p_job_type text, p_max_attempts integer, p_partition_key text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.requeue_scenes(p_script_id bigint, p_scenes jsonb, p_reason text, p_job_type text, p_max_attempts integer, p_partition_key text, p_lock_token bigint) TO mdame_app;

-- The caller names the damaged unit it found; it must be the script's and still in p_state.
CREATE OR REPLACE FUNCTION mdame._unit_of_script(p_kind text, p_id bigint, p_script_id bigint, p_state text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_kind work_kinds := mdame._work_kind(p_kind);
  v_script bigint;
BEGIN
  EXECUTE format('SELECT script_id FROM %I WHERE id = $1', v_kind.table_name)
     INTO v_script USING p_id;
  IF v_script IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('%s %s is not a %s of script %s', p_kind, p_id, p_kind,
                                  p_script_id));
  END IF;
  PERFORM mdame._require_state(p_kind, p_id, ARRAY[p_state]);
END
$function$;
REVOKE ALL ON FUNCTION mdame._unit_of_script(p_kind text, p_id bigint, p_script_id bigint, p_state text) FROM PUBLIC, mdame_app, mdame_admin;

-- From 'voice_queued' (a stage that finds the track it made earlier damaged) the script stays
-- there and is voiced anew in the same pass; from later states it goes back to 'visuals_ready'.
CREATE OR REPLACE FUNCTION mdame.requeue_voice(p_script_id bigint, p_voice_track_id bigint, p_reason text, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_state text;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id,
                                  ARRAY['voice_queued', 'voiced', 'render_queued']);
  PERFORM mdame._unit_of_script('voice_track', p_voice_track_id, p_script_id, 'ready');
  PERFORM mdame._transition('voice_track', p_voice_track_id, 'ready', 'failed',
                            jsonb_build_object('reason', left(p_reason, 500)));
  IF v_state = 'voice_queued' THEN
    RETURN v_state;
  END IF;
  PERFORM mdame._transition('script', p_script_id, v_state, 'visuals_ready',
                            jsonb_build_object('healing', left(p_reason, 500)));
  RETURN 'visuals_ready';
END
$function$;
REVOKE ALL ON FUNCTION mdame.requeue_voice(p_script_id bigint, p_voice_track_id bigint, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.requeue_voice(p_script_id bigint, p_voice_track_id bigint, p_reason text, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame.requeue_render(p_script_id bigint, p_render_id bigint, p_reason text, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_state text;
  v_publications bigint[];
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id, ARRAY['rendered', 'publishing']);
  SELECT array_agg(id ORDER BY id) INTO v_publications
    FROM publications WHERE script_id = p_script_id;
  IF v_publications IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: script %s has publications %s that name its render''s bytes; '
                       'a new render could differ, so it is not remade: restore the file or '
                       'fail the script', p_script_id, v_publications);
  END IF;
  PERFORM mdame._unit_of_script('render', p_render_id, p_script_id, 'approved');
  PERFORM mdame._transition('render', p_render_id, 'approved', 'failed',
                            jsonb_build_object('reason', left(p_reason, 500)));
  PERFORM mdame._transition('script', p_script_id, v_state, 'voiced',
                            jsonb_build_object('healing', left(p_reason, 500)));
  RETURN 'voiced';
END
$function$;
REVOKE ALL ON FUNCTION mdame.requeue_render(p_script_id bigint, p_render_id bigint, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.requeue_render(p_script_id bigint, p_render_id bigint, p_reason text, p_lock_token bigint) TO mdame_app;

-- renders: the render (once), each review ({"check_name", "problems": [...], "acceptance":
-- {...}}) bound to payload.sha256 and payload.request_sha256, the render approved or rejected,
-- and the script rendered or failed with every problem, together. Returns the script's state.
CREATE OR REPLACE FUNCTION mdame.record_reviewed_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_reviews jsonb, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
  v_review jsonb;
  v_problems jsonb := '[]';
  v_verdict text;
BEGIN
  PERFORM mdame._require_json('payload', p_payload),
          mdame._require_json('reviews', p_reviews, 'array');
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_sha256('payload.sha256', p_payload ->> 'sha256'),
          mdame._require_sha256('payload.request_sha256', p_payload ->> 'request_sha256');
  IF jsonb_array_length(p_reviews) = 0 THEN
    PERFORM mdame._invalid('a render needs at least one review');
  END IF;
  FOR v_review IN SELECT * FROM jsonb_array_elements(p_reviews) LOOP
    PERFORM mdame._require_json('review', v_review),
            mdame._require_match('review.check_name', v_review ->> 'check_name',
                                 '^[a-z][a-z0-9_.-]{0,62}$'),
            mdame._require_json('review.problems', v_review -> 'problems', 'array'),
            mdame._require_json('review.acceptance', v_review -> 'acceptance');
    v_problems := v_problems || (v_review -> 'problems');
  END LOOP;
  PERFORM mdame._require_state('script', p_script_id, ARRAY['render_queued']);
  IF (p_payload ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('render payload belongs to another script than %s', p_script_id));
  END IF;
  v_id := mdame._upsert_work_unit('render', p_idempotency_key, p_payload);
  v_verdict := CASE WHEN jsonb_array_length(v_problems) = 0 THEN 'approved' ELSE 'rejected' END;
  IF mdame._lock_work_unit(mdame._work_kind('render'), v_id) = 'rendered' THEN
    FOR v_review IN SELECT * FROM jsonb_array_elements(p_reviews) LOOP
      PERFORM mdame._record_bound_review(
        v_id, p_payload ->> 'sha256', v_review ->> 'check_name',
        CASE WHEN jsonb_array_length(v_review -> 'problems') = 0 THEN 'approved' ELSE 'rejected' END,
        jsonb_build_object('problems', v_review -> 'problems'),
        p_payload ->> 'request_sha256', v_review -> 'acceptance');
    END LOOP;
    PERFORM mdame._transition('render', v_id, 'rendered', v_verdict, '{}');
  END IF;
  IF v_verdict = 'approved' THEN
    PERFORM mdame._transition('script', p_script_id, 'render_queued', 'rendered',
                              jsonb_build_object('render_id', v_id));
    RETURN 'rendered';
  END IF;
  PERFORM mdame._transition('script', p_script_id, 'render_queued', 'failed',
                            jsonb_build_object('render_id', v_id, 'render_problems', v_problems));
  RETURN 'failed';
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_reviewed_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_reviews jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_reviewed_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb, p_reviews jsonb, p_lock_token bigint) TO mdame_app;
